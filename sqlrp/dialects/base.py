"""What every sqlrp dialect shares: sqlglot's own dialect, the ``SignedSum`` renderer, and the
engine's **profile** -- the limits and features the compiler must respect there.

A dialect file holds only its differences from this base: rendering rules (array access,
detoasting, types, ``CREATE TABLE`` properties) and limits, each with its source in a comment.
The compiler asks the profile before it emits SQL; :meth:`SqlrpDialect.check_statement` refuses a
statement the engine would reject (or silently mis-read), naming the engine and the limit, before
it runs.  ``None`` means "no limit we know of".
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ..core.errors import EngineLimit, InvalidParameter, refuse_nul
from ..core.nodes import SignedSum, gc_paused, signed_sum_sql
from .portable import rewrite

if TYPE_CHECKING:
    from ..core.layout import Source

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def extend(base: type[Dialect], depth: int | None = None) -> type[Dialect]:
    """A subclass of the sqlglot dialect ``base`` that can render :class:`SignedSum`; ``depth``
    caps the nesting of one sum's additions (engines with an expression-depth limit)."""

    def render(self, expression: SignedSum) -> str:  # noqa: ANN001 - sqlglot Generator method
        return signed_sum_sql(self, expression, depth)

    class Generator(base.Generator):  # type: ignore[name-defined,misc]
        TRANSFORMS = {**base.Generator.TRANSFORMS, SignedSum: render}

    return type(f"Sqlrp{base.__name__}", (base,), {"Generator": Generator})


#: every dialect class by its name, and every alias by the name it stands for: filled as the classes
#: are made (:meth:`SqlrpDialect.__init_subclass__`), read by :func:`sqlrp.dialects.get_dialect`
DIALECTS: dict[str, type[SqlrpDialect]] = {}
ALIASES: dict[str, str] = {}


class SqlrpDialect:
    """Rendering rules and limits for one SQL engine."""

    name = "generic"
    aliases: tuple[str, ...] = ()  # other names of the engine (``--dialect pg``; SQLAlchemy's ``postgresql``)
    sqlglot: type[Dialect]

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A class that sets its own ``name`` is the dialect of that name (and of its ``aliases``)."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            DIALECTS[cls.name] = cls
            ALIASES.update(dict.fromkeys(cls.__dict__.get("aliases", ()), cls.name))

    # ---- limits (each dialect file cites its source) ----
    max_columns: int | None = None  # most columns one select may produce
    max_statement_bytes: int | None = None  # longest statement the engine accepts
    max_ast_nodes: int | None = None  # most expression nodes in one statement (ClickHouse max_ast_elements)
    max_expression_depth: int | None = None  # deepest expression tree (SQLite: 1,000)
    # most query-plan optimisations one statement may need (ClickHouse: about 4 per UNION ALL branch)
    max_plan_optimizations: int | None = None
    table_name_pattern: str | None = None  # what a table name may be (Spark: letters, digits, _)
    split_statement_bytes: int | None = None  # not a limit: larger linear projections run better split
    # longest identifier the engine keeps whole; longer ones are truncated (PostgreSQL) or refused
    max_identifier_bytes: int | None = None

    # ---- features ----
    arrays = True  # array columns and ARRAY[...] constructors exist (array layout, array output)
    array_base = 1  # the first element of an array is x[array_base] (sqlglot converts literal indices)
    filter_clause = True  # ``SUM(x) FILTER (WHERE ...)``; else ``SUM(CASE WHEN ... THEN x END)``
    ordered_array_agg = True  # ``ARRAY_AGG(x ORDER BY y)`` and ``ARRAY_POSITION`` (the ``lookup`` strategy)
    values_column_names = True  # ``(VALUES ...) AS t(a, b, c)`` keeps the names (SQLite drops them)
    matrix_array_join = False  # an inlined matrix is three literal arrays under ARRAY JOIN (ClickHouse)
    identifier_case: str | None = None  # "upper": unquoted names are stored upper-cased (Snowflake)
    # how two *quoted* names are matched: None exactly (PostgreSQL, ClickHouse); "ascii": A-Z match a-z
    # and nothing else does (DuckDB, SQLite); "unicode": any case (Spark's spark.sql.caseSensitive=false)
    quoted_case_fold: str | None = None
    nested_plans = False  # deep nested selects are cheap: ``auto`` may choose ``pairs`` (measured per engine)
    # two UNNESTs of equal length in one select list run in lockstep: a wide table can be read as a long
    # one (the join / lookup strategies on wide tables, compiler.long._unnested)
    select_unnest = False
    # a 4-byte float type that CAST(x AS FLOAT) rounds to (float32 outputs): set, and tested, for DuckDB and
    # PostgreSQL; refused elsewhere (SQLite and Snowflake store 8 bytes; Spark and ClickHouse untested)
    float32 = False
    # CAST(x AS FLOAT) raises an underflow error for a double that rounds to 0 (PostgreSQL), where
    # NumPy's float32 is 0: such outputs are read as 0 first (compiler.select._float32_flushed)
    float32_underflow_errors = False
    # ``min_by(arg, val, n)``: the ``n`` args of smallest val, one aggregate (exact k-NN by brute force
    # keeps K rows per query instead of ranking every pair with a window)
    min_by_n = False
    wide_as_long = False  # ``auto`` unnests small wide tables (strategies.prefers_long; measured per engine)
    list_lambdas = False  # list_transform / list_select / list_sum: the ``list_transform`` strategy (DuckDB)
    star_exclude = False  # ``SELECT * EXCLUDE (...)`` exists: nested selects pass columns on by ``*``
    parallel_insert = True  # ``INSERT INTO ... SELECT`` gets the parallel plan ``CREATE TABLE AS`` gets
    nan_propagating_sums = False  # DOUBLE sums overflow to infinity rather than raise (PostgreSQL raises)
    # a DOUBLE column can hold NaN; where it cannot (MySQL, MariaDB, SQL Server) there is none to test for
    # (CAST('NaN' AS DOUBLE) is 0 there, or an error), and a NaN is refused before it is written
    holds_nan = True
    correlated_subqueries = True  # ``NOT EXISTS (SELECT ... WHERE inner.k = outer.k)`` (incremental top-ups)
    transactional = True  # DDL and DML inside one transaction commit or roll back together
    # bits of a stored code word of a search index: 64 (BIGINT) everywhere, more where the engine has
    # a wider integer that AND and its bit count take (fewer columns joined and ANDed per pair)
    code_word_bits = 64
    executes = False  # sqlrp has a backend that runs this dialect (tested against the NumPy reference)
    # a number literal with an exponent (1.6e-16) is read as a number; else every literal is written as a
    # plain decimal (one PostgreSQL-compatible engine refuses exponents: dialects/portable.py)
    exponent_literals = False
    # ``(VALUES ...) AS t(a, b)`` is a relation here: the long layout may inline its matrix.  Only read
    # where the engine is not executed (:attr:`portable_core`): Daft has no VALUES (DESIGN.md 4d)
    values_relation = False

    @property
    def portable_core(self) -> bool:
        """sqlrp does not execute this engine: only constructs whose meaning does not vary between
        engines are rendered (:mod:`sqlrp.dialects.portable`), the rest is refused."""
        return not self.executes

    # ---- the registry's tables (sqlrp/registry/schema.py renders its one definition through these) ----
    registry_constraints = True  # PRIMARY KEY and NOT NULL are written (Spark's and ClickHouse's tables have none)

    @property
    def keeps_registry(self) -> bool:
        """sqlrp creates its registry of stored projections here: on the engines it runs and tests
        (:attr:`executes`); elsewhere storing a projection is refused, naming what to do instead."""
        return self.executes

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        """The column type of the registry's type ``name`` (a sqlglot type name: TEXT, JSON, INT,
        BIGINT, SMALLINT, DOUBLE, BOOLEAN, TIMESTAMP) here; ``null``: the column may hold NULL."""
        return exp.DataType.build(name)

    def registry_create(self, create: exp.Create, key: tuple[exp.Identifier, ...]) -> str:
        """The ``CREATE TABLE`` statement of a registry table keyed by ``key`` (its properties: an
        ENGINE, a file format ...)."""
        return self.render(create, pretty=True)

    def array_source(self, column: exp.Expression) -> exp.Expression:
        """An expression of the array column that is cheap to subscript ``d`` times per row."""
        return column

    def needs_materialised_array(self) -> bool:
        """True if the array must be computed in a sub-query the planner may not flatten."""
        return False

    def fence(self, select: exp.Select) -> exp.Select:
        """``select`` as a sub-query the planner computes once per row instead of inlining its
        expressions into the outer query (PostgreSQL pulls sub-queries up; an OFFSET stops it, see
        ``dialects/postgres.py``).  A fence must not change the rows, nor forbid a parallel plan."""
        return select

    def code_word_type(self, bits: int) -> tuple[exp.DataType, int]:
        """``(SQL type, bits)`` of a search index's ``bits``-bit code word: a signed integer, two's
        complement (``BIGINT`` for 64, ``INT128`` for 128)."""
        names = {64: "BIGINT", 128: "INT128"}
        if bits not in names:
            raise self.refuse(f"sqlrp knows no {bits}-bit integer for code words on this engine")
        return exp.DataType.build(names[bits]), bits

    def popcount(self, word: exp.Expression) -> exp.Expression:
        """The number of set bits of a BIGINT (two's complement, all 64 bits), as an INTEGER: the
        search's code arithmetic (:mod:`sqlrp.search.ivf`).  Each engine spells it its own way; one without a
        known spelling refuses."""
        raise self.refuse("sqlrp knows no bit count of a BIGINT for this engine (search codes)")

    def popcount_sum(self, words: list[exp.Expression]) -> exp.Expression:
        """``sum_w popcount(word_w)`` as an INTEGER (the sum of :meth:`popcount`)."""
        total = self.popcount(words[0])
        for word in words[1:]:
            total = exp.Add(this=total, expression=self.popcount(word))
        return exp.Paren(this=total)

    def vector(self, features: list[exp.Expression]) -> exp.Expression | None:
        """The features of a row as one fixed-size array the engine measures distances on natively
        (:meth:`vector_distance`), or None where sums over the columns are the way."""
        return None

    def whole_vector(self, array: exp.Expression, d: int) -> exp.Expression | None:
        """An array column of ``d`` numbers as one :meth:`vector`, in one cast, or None where its
        elements are read one by one (:meth:`vector` of the elements)."""
        return None

    def vector_distance(self, a: exp.Expression, b: exp.Expression) -> exp.Expression:
        """The Euclidean distance of two :meth:`vector` values."""
        raise self.refuse("no native vector distance")

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        """A 64-bit hash of one row's values, summed over a table as its fingerprint (an index
        notices that its table changed, :mod:`sqlrp.search.index`)."""
        raise self.refuse("sqlrp knows no row hash for this engine (an index's fingerprint)")

    def lookup_indexes(self, table: exp.Table, columns: list[str]) -> list[str]:
        """Statements that let a search look ``table``'s rows up by ``columns`` rather than scan
        them (:mod:`sqlrp.search.index`): none where hash joins over a columnar scan are the plan anyway (DuckDB)."""
        return []

    def local_settings(self, source: Source) -> list[str]:
        """Statements that tune the planner for one projection of ``source``, run inside the
        projection's transaction (``SET LOCAL``: they end with it).  None by default."""
        return []

    #: the engine's name of the cosine of a DOUBLE (the output function ``cos``, :mod:`sqlrp.methods.rff`);
    #: ``None``: it has none, and a projection with it is refused
    cos_function: str | None = "COS"

    def function(self, name: str, value: exp.Expression) -> exp.Expression:
        """The elementwise output function ``name`` (:data:`sqlrp.core.ir.FUNCTIONS`) of the DOUBLE ``value``:
        ``cos`` by the engine's own name (:attr:`cos_function`), ``sign`` as a ``CASE`` (-1, 0, 1 as
        NumPy's ``sign``; engines' own ``sign`` differ on a zero and in type)."""
        if name == "cos":
            if self.cos_function is None:
                raise self.refuse("this engine has no cosine function (random Fourier features need cos)")
            return exp.Anonymous(this=self.cos_function, expressions=[value])
        if name == "sign":
            one = exp.Literal.number("1.0")
            return exp.Case(
                ifs=[
                    exp.If(this=exp.GT(this=value, expression=exp.Literal.number(0)), true=one),
                    exp.If(
                        this=exp.LT(this=value.copy(), expression=exp.Literal.number(0)), true=exp.Neg(this=one.copy())
                    ),
                ],
                default=exp.Literal.number("0.0"),
            )
        raise InvalidParameter(f"unknown output function {name!r}")

    def is_nan(self, value: exp.Expression) -> exp.Expression:
        """True where the DOUBLE ``value`` is NaN.  DuckDB, PostgreSQL and Spark order NaN as one
        value, equal to itself, so ``value = 'NaN'`` finds it; an engine without NaN
        (:attr:`holds_nan`) has none: false."""
        if not self.holds_nan:
            return exp.false()
        return exp.EQ(this=value, expression=exp.Cast(this=exp.Literal.string("NaN"), to=exp.DataType.build("DOUBLE")))

    def is_infinite(self, value: exp.Expression) -> exp.Expression:
        """True where the DOUBLE ``value`` is +/-infinity: larger in magnitude than the largest
        finite double, which every engine can say without its own spelling of infinity."""
        largest = exp.Cast(this=exp.Literal.number("1.7976931348623157e308"), to=exp.DataType.build("DOUBLE"))
        return exp.GT(this=exp.Abs(this=value), expression=largest)

    def not_finite(self, value: exp.Expression) -> exp.Expression:
        """True where the DOUBLE ``value`` is NaN or +/-infinity (the input check, the output check)."""
        if not self.holds_nan:
            return self.is_infinite(value)
        return exp.Or(this=self.is_nan(value), expression=self.is_infinite(value.copy()))

    def raise_in_query(self, message: exp.Expression) -> exp.Expression | None:
        """A boolean expression that stops the statement with an error whose text holds ``message`` (a
        string that depends on the row, so that no planner folds it into a constant and raises it
        before any row is read), put in the arm of a ``CASE`` taken only for a bad row: the input
        and output checks then ride along the projection's own pass (:mod:`sqlrp.compiler.guard`).
        ``None``: the engine cannot raise from inside a query; sqlrp checks with separate scans."""
        return None

    def not_a_number(self, value: exp.Expression) -> exp.Expression | None:
        """True where a value of a numeric column is not a number (only where typing is loose)."""
        return None

    def table_properties(self) -> exp.Properties | None:
        """Properties every ``CREATE TABLE ... AS`` needs here (ClickHouse: an ENGINE)."""
        return None

    def rename(self, old: exp.Table, new: exp.Table) -> str:
        """The statement renaming table ``old`` to ``new`` (same schema)."""
        return self.render(exp.Alter(this=old, kind="TABLE", actions=[exp.AlterRename(this=exp.Table(this=new.this))]))

    def fold(self, name: str) -> str:
        """``name`` as the engine stores an unquoted identifier written that way: Snowflake (and
        Oracle, DB2) upper-case unquoted names, so a table created as ``digits`` is ``DIGITS``.
        Only names that could have been written unquoted (letters, digits, ``_``; not starting with
        a digit) and are all lower case are folded; any other name is taken as it is."""
        if self.identifier_case == "upper" and _plain_lower(name):
            return name.upper()
        return name

    def identifier_key(self, name: str) -> str:
        """``name`` as the engine compares quoted identifiers: two names with one key are one object
        (``"Out"`` is the table ``"out"`` on DuckDB, two tables on PostgreSQL)."""
        if self.quoted_case_fold == "ascii":
            return name.translate(_ASCII_LOWER)
        if self.quoted_case_fold == "unicode":
            return name.lower()
        return name

    def same_identifier(self, a: str, b: str) -> bool:
        """True if the engine takes the quoted names ``a`` and ``b`` for the same object."""
        return self.identifier_key(a) == self.identifier_key(b)

    def max_columns_exceeded_by(self, source: Source) -> bool:
        """True if the input's own features already exceed the column limit (nothing splits that)."""
        return self.max_columns is not None and len(source.columns) + 2 > self.max_columns

    def check_table_name(self, name: str) -> None:
        """Refuse, before any work, a table name this engine cannot hold even quoted."""
        import re

        if self.table_name_pattern is not None and not re.fullmatch(self.table_name_pattern, name):
            raise self.refuse(f"{name!r} cannot name a table here (allowed: {self.table_name_pattern})")

    def check_identifier(self, name: str, role: str = "name") -> str:
        """``name`` if the engine keeps it whole, else :class:`EngineLimit`.  PostgreSQL silently
        truncates an identifier to 63 bytes, so two long names sharing their first 63 bytes would be
        one table (a ``--replace`` would overwrite the other's data) or one column."""
        refuse_nul(name, role)
        limit = self.max_identifier_bytes
        if limit is not None and len(name.encode()) > limit:
            raise self.refuse(
                f"the {role} {name[:40]!r}... is {len(name.encode())} bytes; the engine keeps only the first {limit} "
                f"bytes of an identifier, so it could name another object: use a shorter {role}"
            )
        return name

    def check_identifiers(self, statement: exp.Expression) -> None:
        """Every identifier of ``statement`` within :attr:`max_identifier_bytes` (see
        :meth:`check_identifier`)."""
        if self.max_identifier_bytes is None:
            return
        for node in statement.find_all(exp.Identifier):
            self.check_identifier(node.name, "identifier")

    def refuse(self, reason: str) -> EngineLimit:
        """The error for SQL this engine would reject or mis-read."""
        return EngineLimit(f"{self.name}: {reason}")

    def check_statement(self, sql: str, columns: int | None = None, nodes: int | None = None) -> str:
        """``sql`` if it is within this engine's limits, else :class:`EngineLimit` naming the limit.
        ``columns``: most columns of one select in it; ``nodes``: its expression nodes."""
        size = len(sql.encode())
        if self.max_statement_bytes is not None and size > self.max_statement_bytes:
            raise self.refuse(
                f"the statement is {size:,} bytes; the engine accepts at most {self.max_statement_bytes:,} "
                "(use --matrix=TABLE with the matrix loaded there, a smaller k, or the inline strategy)"
            )
        if self.max_columns is not None and columns is not None and columns > self.max_columns:
            raise self.refuse(f"a select would have {columns:,} columns; the engine allows {self.max_columns:,}")
        if self.max_ast_nodes is not None and nodes is not None and nodes > self.max_ast_nodes:
            raise self.refuse(
                f"the statement has about {nodes:,} expression nodes; the engine allows {self.max_ast_nodes:,}"
            )
        return sql

    @gc_paused
    def render(self, expression: exp.Expression, pretty: bool = False) -> str:
        if self.portable_core or not self.exponent_literals:  # plain decimals [, DOUBLE zeros, CASE for IF]
            expression = rewrite(expression, spellings=self.portable_core)
        return expression.sql(dialect=self.sqlglot, pretty=pretty, copy=False)


def _plain_lower(name: str) -> bool:
    import re

    return bool(re.fullmatch(r"[a-z_][a-z0-9_$]*", name))
