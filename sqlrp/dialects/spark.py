"""Spark SQL (local mode, a standalone cluster, or Spark Connect).

- Arrays are 0-based under ``x[i]`` (sqlglot converts literal subscripts) but ``ARRAY_POSITION``
  and ``element_at`` are 1-based, and ANSI mode (the default since Spark 4.0) raises
  ``INVALID_ARRAY_INDEX`` on an index out of range: the ``lookup`` strategy, which mixed the two,
  is refused here (long tables use ``join``).
- Whole-stage code generation gives up on a plan whose generated method exceeds
  ``spark.sql.codegen.hugeMethodLimit`` (65,535 bytes of bytecode; Spark's ``SQLConf``) and the
  plan then runs without it.  sqlrp's projections always exceed it, so every projection sqlrp runs
  raises the limit for its session (:meth:`SparkDialect.local_settings`), and a statement rendered by
  ``sqlrp compile --dialect spark`` runs fastest after the same ``SET``.  Deep nested selects (the
  ``pairs`` plans) cost Spark far more than DuckDB (``../shared/DESIGN.md`` 4b), so ``auto`` never
  chooses them here; ``s = 3`` as one statement exhausts the default 1 GB driver heap (the JVM dies),
  hence the staged blocks below.  Outputs are written as Parquet without compression or dictionaries
  (:meth:`SparkDialect.table_properties`).  The measurements (``bench/engines.py --engines spark``,
  ``bench/spark_probe.py``) are in ``docs/benchmarks.md``, "Spark: code generation, Parquet, s = 3".
- No transactions: ``CREATE TABLE ... AS`` is one job (a failed job leaves no table).
- Table names: only letters, digits and ``_`` (``[INVALID_SCHEMA_OR_RELATION_NAME] `out 1` is not a
  valid name for tables/schemas``, Spark 4.3, session catalog); columns may hold anything quoted.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from ..core.layout import Source
from .base import SqlrpDialect, extend

HUGE_METHOD_LIMIT = 8_000_000  # bytes of bytecode: above any projection sqlrp compiles (d = 784, k = 200, s = 1)


class SparkDialect(SqlrpDialect):
    name = "spark"
    cos_function = "COS"  # Spark SQL built-in functions: cos(expr)
    aliases = ("sparksql", "spark2", "databricks")
    # a left-deep sum of 784 terms (s = 1, d = 784) overflows the parser's stack (java.lang.
    # StackOverflowError, Spark 4.3 local, default 1 MB thread stacks): groups of at most 100 terms
    sqlglot = extend(Spark, depth=100)
    max_expression_depth = 100
    # ---- what varies between engines (dialects/portable.py), stated with its source ----
    # x[i] is 0-based ("array[index]", https://spark.apache.org/docs/latest/api/sql/index.html#_2) while
    # element_at and array_position are 1-based (the module docstring)
    array_base = 0
    # 1.6e-16 is a DOUBLE unless spark.sql.legacy.exponentLiteralAsDecimal.enabled ("Literals", Spark SQL reference)
    exponent_literals = True
    # UNNEST pairing: none (select_unnest False: explode() of two arrays in one select is refused by Spark);
    # no fence (the base's)
    ordered_array_agg = False
    transactional = False
    # names resolve ignoring case unless spark.sql.caseSensitive=true (default false; Spark's SQLConf)
    quoted_case_fold = "unicode"
    executes = True
    table_name_pattern = r"[A-Za-z0-9_]+"
    # code generation for one larger statement exhausts the default 1 GB driver heap
    # (java.lang.OutOfMemoryError, s = 3 inline, 554 KB, with the raised hugeMethodLimit): linear
    # projections are split into staged blocks no larger than the s = sqrt(d) statement (93 KB), which
    # compiles and runs in it (bench/engines.py --engines spark)
    split_statement_bytes = 120_000

    # file-source (parquet) tables refuse PRIMARY KEY ("does not support CONSTRAINT") and accept NOT NULL
    # only to drop it (Spark 4.3); column defaults work (Spark 3.4+)
    registry_constraints = False

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        return exp.DataType.build("TEXT" if name == "JSON" else name)  # JSON text: a STRING

    def registry_create(self, create: exp.Create, key: tuple[exp.Identifier, ...]) -> str:
        create.set("properties", exp.Properties(expressions=[exp.FileFormatProperty(this=exp.Var(this="parquet"))]))
        return self.render(create, pretty=True)

    def table_properties(self) -> exp.Properties | None:
        # Parquet without compression or dictionary encoding: a projection's outputs are
        # incompressible doubles that never repeat, so the writer's default (snappy, and a dictionary
        # tried per column until it outgrows the page, then dropped) is pure cost (measured:
        # docs/benchmarks.md, "Spark: code generation, Parquet, s = 3").  The table stays Parquet,
        # readable by every engine; the options are Parquet's own (parquet-hadoop
        # ParquetOutputFormat.ENABLE_DICTIONARY) and Spark's (ParquetOptions "compression").
        options = [("compression", "none"), ("parquet.enable.dictionary", "false")]
        return exp.Properties(
            expressions=[
                exp.FileFormatProperty(this=exp.Var(this="PARQUET")),
                exp.OptionsProperty(
                    expressions=[
                        exp.Property(this=exp.Literal.string(key), value=exp.Literal.string(value))
                        for key, value in options
                    ]
                ),
            ]
        )

    def popcount(self, word: exp.Expression) -> exp.Expression:
        # bit_count(bigint) counts the set bits of the 64-bit two's complement (bit_count(-1) = 64,
        # bit_count(-2^63) = 1, measured on Spark 4.3) and returns INT: a sum over words stays INT
        return exp.Anonymous(this="BIT_COUNT", expressions=[word])

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        # xxhash64(v1, v2, ...) -> BIGINT (arrays hashed whole).  Under ANSI mode (Spark 4's default)
        # a BIGINT sum that overflows raises ARITHMETIC_OVERFLOW, and a table's hash sum would after a
        # few rows: the hash is a DECIMAL(20, 0), whose sum is a DECIMAL(30, 0) (exact to 10^11 rows)
        hashed = exp.Anonymous(this="XXHASH64", expressions=values)
        return exp.Cast(this=hashed, to=exp.DataType.build("DECIMAL(20, 0)"))

    def local_settings(self, source: Source) -> list[str]:
        # keep whole-stage code generation for the projection's huge expressions (module docstring)
        return [f"SET spark.sql.codegen.hugeMethodLimit = {HUGE_METHOD_LIMIT}"]
