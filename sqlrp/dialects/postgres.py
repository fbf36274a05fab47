"""PostgreSQL.  The difference that matters: ``float8[]`` values wider than ~2 kB are TOASTed and
every ``x[i]`` subscript on a TOASTed value detoasts the whole array (``../shared/DESIGN.md`` §4:
784 subscripts per row did not finish in 5 minutes on 50,000 rows).  The compiler therefore detoasts
once per row, in a fenced sub-query the planner cannot flatten back into the subscripts
(``array_cat`` with an empty array returns its input detoasted), and reads each element once into a
second fenced relation.

The fence is ``LIMIT ALL``, not the usual ``OFFSET 0``.  Any LIMIT or OFFSET keeps a sub-query from
being pulled up (``is_simple_subquery``, ``prepjointree.c``), but a parallel plan over a sub-query
needs it to be no limit at all (``set_rel_consider_parallel``, ``allpaths.c``, asks ``limit_needed``:
a constant NULL LIMIT or a constant zero OFFSET), and the literal ``0`` is an int4 the parser casts to
int8 by a function call, which ``limit_needed`` does not count as a constant.  ``LIMIT ALL`` is parsed
as a NULL int8 constant ("LIMIT ALL is the same as omitting the LIMIT clause", "7.6. LIMIT and
OFFSET"): no Limit node, parallel plans allowed.  Under ``OFFSET 0`` the Gather can only sit below the
sub-queries, so the workers merely read the table and the leader computes every row.  Until issue 32
the fence was ``OFFSET CAST('0' AS BIGINT)`` (an int8 constant zero, the same plan), which Tableau
Hyper, Daft and Polars refuse ("OFFSET requires an integer argument"); ``LIMIT ALL`` runs on all three,
so the SQL of ``--dialect postgres`` also runs on PostgreSQL-like engines; ``tests/engines/test_postgres_fence.py``
checks that the plans are the same (the sub-queries stay, the Gather on top).

PostgreSQL also sizes a parallel scan by the table's main heap (``min_parallel_table_scan_size``,
8 MB), and an array table's heap holds only TOAST pointers, so the array layout got no workers at
all.  :meth:`PostgresDialect.local_settings` therefore sets ``min_parallel_table_scan_size = 0`` with
``SET LOCAL``, inside the projection's transaction (``api.project``) and nowhere else; the planner
still weighs the costs, and ``max_parallel_workers_per_gather`` still caps the workers.  The mailman
partial sums and the kernel methods' linear sums use the same fence.  Workers run ``CREATE TABLE AS``
and plain queries only: PostgreSQL 15 plans ``INSERT INTO ... SELECT`` and cursors (``chunk_rows``)
serially.  ``parallel_insert = False`` therefore has ``api`` insert (``progress`` batches after the
first, ``incremental``) by ``CREATE TEMPORARY TABLE AS`` -- parallel -- and then ``INSERT ... SELECT``
from it.  The measurements behind each of these choices (``python -m bench.probes pg-array``,
``pg-fence``, ``pg-insert``; ``bench/run.py --only postgres``) are in ``docs/benchmarks.md``,
"PostgreSQL: the fence and parallel plans".
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from ..core.layout import Source
from .base import SqlrpDialect, extend

BIGINT = exp.DataType.build("BIGINT")
# a transaction-level advisory lock on a name (``Backend.lock``): released by the commit or the
# rollback, and by the server when the client dies
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"


class PostgresDialect(SqlrpDialect):
    name = "postgres"
    cos_function = "COS"  # PostgreSQL "Mathematical Functions", Table 9.7: cos(double precision)
    aliases = ("postgresql", "pg")
    parallel_insert = False  # PostgreSQL 15 plans INSERT ... SELECT serially: stage through a temp table
    # ---- what varies between engines (dialects/portable.py), stated with its source ----
    # "By default PostgreSQL uses a one-based numbering convention for arrays" ("8.15.3. Accessing Arrays")
    array_base = 1
    # 1.925e-3 is a numeric constant ("4.1.2.6. Numeric Constants"), cast to double precision where used
    exponent_literals = True
    # the fence is LIMIT ALL (module docstring): OFFSET CAST('0' AS BIGINT), the same plan here, is refused
    # by Hyper, Daft and Polars (a literal OFFSET only, DESIGN.md 4d); LIMIT ALL runs on all three
    sqlglot = extend(Postgres)
    # a table holds at most 1,600 columns, a select list 1,664 (MaxTupleAttributeNumber /
    # MaxHeapAttributeNumber, src/include/access/htup_details.h; "Appendix K. PostgreSQL Limits")
    max_columns = 1600
    # identifiers longer than NAMEDATALEN - 1 = 63 bytes are truncated, not refused ("4.1.1. Identifiers
    # and Key Words": "longer names can be written in commands, but they will be truncated")
    max_identifier_bytes = 63
    nested_plans = True  # pairs measured faster than inline here too (bench/run.py --only postgres)
    # set-returning functions in one select list run in lockstep since PostgreSQL 10 ("9.25. Set
    # Returning Functions"; release notes of 10): the wide table unnested, when forced
    select_unnest = True
    float32 = True  # FLOAT renders as REAL, 4 bytes ("8.1.4. Floating-Point Types")
    float32_underflow_errors = True  # CAST(1e-300 AS REAL): "value out of range: underflow"
    executes = True

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        # JSON as JSONB: stored parsed, compared and indexed as values ("8.14. JSON Types")
        return exp.DataType.build("JSONB" if name == "JSON" else name, dialect="postgres")

    def raise_in_query(self, message: exp.Expression) -> exp.Expression | None:
        # a checked cast: CAST('<message>' AS BOOLEAN) fails with 'invalid input syntax for type boolean:
        # "<message>"', and the cast is built in and parallel safe (a plpgsql function would need CREATE
        # rights, and one in pg_temp forbids parallel plans).  The text depends on the row: a constant
        # one would be folded and raised at planning time even in a CASE arm no row takes ("4.2.14.
        # Expression Evaluation Rules")
        return exp.Cast(this=message, to=exp.DataType.build("BOOLEAN"))

    def popcount(self, word: exp.Expression) -> exp.Expression:
        # bit_count() takes bit strings (PostgreSQL 14+, "9.6. Bit String Functions and Operators"), so
        # the word is cast to bit(64) first (two's complement, all 64 bits)
        bits = exp.cast(word, exp.DataType.build("BIT(64)", dialect="postgres"))
        return exp.cast(exp.Anonymous(this="BIT_COUNT", expressions=[bits]), exp.DataType.build("INT"))

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        # hash_record_extended(record, seed) -> bigint, each field hashed by its type's own hash
        # (PostgreSQL 14+, "9.27. System Information Functions" / src/backend/utils/adt/rowtypes.c)
        row = exp.Anonymous(this="ROW", expressions=values)
        return exp.Anonymous(this="hash_record_extended", expressions=[row, exp.Literal.number(0)])

    def lookup_indexes(self, table: exp.Table, columns: list[str]) -> list[str]:
        # a B-tree for the probed lists' rows, and ANALYZE so that the planner knows the new table's size
        names = ", ".join(self.render(exp.to_identifier(c, quoted=True)) for c in columns)
        return [f"CREATE INDEX ON {self.render(table)} ({names})", f"ANALYZE {self.render(table)}"]

    def array_source(self, column: exp.Expression) -> exp.Expression:
        empty = exp.cast(exp.Array(expressions=[]), exp.DataType.build("DOUBLE[]", dialect="postgres"))
        return exp.Anonymous(this="array_cat", expressions=[column, empty])

    def needs_materialised_array(self) -> bool:
        return True

    def fence(self, select: exp.Select) -> exp.Select:
        # a NULL int8 constant: fences like OFFSET 0 without forbidding parallel plans (module docstring)
        return select.limit(exp.var("ALL"), copy=False)

    def local_settings(self, source: Source) -> list[str]:
        # the array table's heap holds only TOAST pointers: without this, no parallel workers (module docstring)
        return ["SET LOCAL min_parallel_table_scan_size = 0"] if source.layout == "array" else []
