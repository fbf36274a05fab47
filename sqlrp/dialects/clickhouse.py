"""ClickHouse (in-process through chdb, or a server through clickhouse-connect).

Limits are server settings; sqlrp respects their defaults, from
https://clickhouse.com/docs/operations/settings/settings:

- ``max_query_size`` 262,144 bytes: the longest query the parser reads.
- ``max_ast_elements`` 50,000: nodes of a query's syntax tree (``max_ast_depth`` 1,000).
- columns: no fixed limit.
- ``query_plan_max_optimizations_to_apply`` 10,000: optimisations applied to one query's plan; a
  query that needs more fails (``TOO_MANY_QUERY_PLAN_OPTIMIZATIONS``).  The documentation calls it
  an expert setting for debugging that "may change ... or be removed", so sqlrp does not raise it:
  it emits shapes within it.  Each ``UNION ALL`` branch costs about 4 (chdb 4.4: 2,499 one-row
  branches run, 2,500 fail), and sqlglot renders ``VALUES`` as one branch per row, so a matrix
  inlined as ``VALUES`` failed from about 2,500 non-zeros (a 189 x 500 long table to k = 64 at
  s = 3 has 10,667).  The inlined matrix is therefore three literal arrays under ``ARRAY JOIN``
  (one plan step at any size; a literal array is one AST element), and a statement with more
  ``UNION ALL`` branches than the limit allows is refused before it runs (``compiler.limits``).

Arrays are 1-based (``arr[1]``).  There are no transactions (``CREATE TABLE ... AS`` is one
statement: a failure leaves no table; sqlrp materialises under a staging name and renames), every
``CREATE TABLE`` needs an ENGINE, ``ARRAY_AGG(x ORDER BY y)`` is rejected, and ``VALUES`` with
named columns is rendered by sqlglot as ``SELECT ... UNION ALL``.

Behaviours the rest of sqlrp relies on, measured on chdb 4.4 (ClickHouse 26.9):

- ``CAST(x AS Float64)`` of a NULL fails ("Cannot convert NULL to a non-nullable type"); sqlglot
  renders ``CAST(x AS DOUBLE)`` as ``CAST(x AS Nullable(Float64))``, which keeps NULLs.
- Float sums overflow to ``inf`` (``1e308 + 1e308``) like DuckDB's; integer arithmetic wraps silently
  (``4294967296 * 4294967296 = 0``); integer literals are the smallest type that holds them
  (``1`` is UInt8, ``-1`` Int8).
- ``nan = nan`` is false (IEEE comparison): NaN is found with ``isNaN(x)``.
- ``arr[i]`` outside the array gives 0, not NULL; aggregates of no rows give 0, not NULL; a LEFT
  JOIN fills rows without a match with the column defaults (0, '') unless ``join_use_nulls = 1``.

The end of this module is the SQL text :mod:`sqlrp.backends.clickhouse` writes and reads outside the
compiler: :func:`literal`, :func:`quote`, and ClickHouse's type names (:func:`sql_type`, :func:`column_type`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse

from ..core.lazy import pd
from ..core.nodes import ident
from .base import SqlrpDialect, extend


def _function(name: str):  # noqa: ANN202 - a sqlglot Generator transform
    return lambda self, e: self.func(name, e.this, e.expression)


_BASE = extend(ClickHouse, depth=200)  # max_ast_depth 1,000


class _Generator(_BASE.Generator):  # type: ignore[name-defined,misc]
    # ClickHouse has no bit operators (``5 & 3``, ``5 ^ 3`` and ``13 >> 2`` are syntax errors in
    # ClickHouse 26.9), which sqlglot renders: its functions instead
    TRANSFORMS = {
        **_BASE.Generator.TRANSFORMS,
        exp.BitwiseAnd: _function("bitAnd"),
        exp.BitwiseOr: _function("bitOr"),
        exp.BitwiseXor: _function("bitXor"),
        exp.BitwiseLeftShift: _function("bitShiftLeft"),
        exp.BitwiseRightShift: _function("bitShiftRight"),
    }


SqlrpClickHouseBits = type("SqlrpClickHouseBits", (_BASE,), {"Generator": _Generator})


class ClickHouseDialect(SqlrpDialect):
    name = "clickhouse"
    cos_function = "cos"  # ClickHouse "Mathematical functions": cos(x), Float64
    aliases = ("chdb",)
    sqlglot = SqlrpClickHouseBits
    max_statement_bytes = 262_144
    max_ast_nodes = 50_000
    max_expression_depth = 1000
    max_plan_optimizations = 10_000  # query_plan_max_optimizations_to_apply (module docstring)
    matrix_array_join = True
    filter_clause = False
    ordered_array_agg = False
    nan_propagating_sums = True
    # EXISTS with an outer reference is experimental (allow_experimental_correlated_subqueries)
    correlated_subqueries = False
    transactional = False
    executes = True
    # ---- what varies between engines (dialects/portable.py), stated with its source ----
    # "indexes in an array begin from one" (arrayElement, https://clickhouse.com/docs/sql-reference/functions/array-functions)
    array_base = 1
    # 1.6e-16 is a Float64 ("Numeric literals", https://clickhouse.com/docs/sql-reference/syntax; toTypeName, chdb 4.4)
    exponent_literals = True
    # UNNEST pairing: none (select_unnest False: ARRAY JOIN of several arrays pairs them, but the wide
    # table is not unnested here); no fence (the base's)

    # no uniqueness and no NOT NULL clause: a column is nullable by its type (Nullable(T)), and the
    # sorting key (ORDER BY) is the other engines' primary key; sqlrp.registry.store checks names before it writes
    registry_constraints = False

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        # JSON text as String; only a column that may be NULL is Nullable (a NULL into any other is an error)
        kind = exp.DataType.build("TEXT" if name == "JSON" else name)
        kind.set("nullable", null)
        return kind

    def registry_create(self, create: exp.Create, key: tuple[exp.Identifier, ...]) -> str:
        # every CREATE TABLE needs an ENGINE; MergeTree sorted by the key
        order = key[0] if len(key) == 1 else exp.Tuple(expressions=list(key)) if key else exp.Anonymous(this="tuple")
        create.set(
            "properties",
            exp.Properties(
                expressions=[
                    exp.EngineProperty(this=exp.Var(this="MergeTree")),
                    exp.Order(expressions=[exp.Ordered(this=order)]),
                ]
            ),
        )
        return self.render(create, pretty=True)

    def popcount(self, word: exp.Expression) -> exp.Expression:
        # bitCount(Int64) counts the 64 bits of the two's complement (bitCount(toInt64(-1)) = 64;
        # https://clickhouse.com/docs/sql-reference/functions/bit-functions); it returns UInt8, cast so
        # that sums over words cannot wrap
        count = exp.Anonymous(this="bitCount", expressions=[word])
        return exp.Anonymous(this="toInt32", expressions=[count])

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        # cityHash64(v1, v2, ...) -> UInt64, arrays hashed whole; sum() of UInt64 wraps modulo 2^64,
        # the same way for the table and for the index rows, so the fingerprints still compare
        return exp.Anonymous(this="cityHash64", expressions=values)

    def is_nan(self, value: exp.Expression) -> exp.Expression:
        # IEEE comparison: nan = nan is false in ClickHouse; isNaN is the test
        return exp.Anonymous(this="isNaN", expressions=[value])

    def rename(self, old: exp.Table, new: exp.Table) -> str:
        # ClickHouse renames with RENAME TABLE a TO b (no ALTER TABLE ... RENAME TO)
        return f"RENAME TABLE {self.render(old)} TO {self.render(new)}"

    def table_properties(self) -> exp.Properties | None:
        # CREATE TABLE ... AS needs an engine; MergeTree with no sorting key keeps every row
        return exp.Properties(
            expressions=[
                exp.EngineProperty(this=exp.to_identifier("MergeTree")),
                exp.Order(expressions=[exp.Ordered(this=exp.Anonymous(this="tuple"))]),
            ]
        )


# ----------------------------------------------------------------------------------------------
# the SQL text the backend writes and reads outside the compiler: literals, identifiers, type names

_WRAPPERS = ("nullable", "lowcardinality")  # type names around a type: Nullable(Float64)
_CALL = re.compile(r"^\s*(?P<name>\w+)\s*\((?P<args>.*)\)\s*$", re.DOTALL)

#: number types as ClickHouse names them (lower case; ``Double`` and ``Float`` are its aliases) -> the
#: spelling :func:`sqlrp.backends.base.is_numeric_type` reads (DuckDB's); decimals with their arguments apart
NUMBER_TYPES = {
    "float64": "double",
    "double": "double",
    "float32": "float",
    "float": "float",
    "bfloat16": "float",
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "integer",
    "int64": "bigint",
    "int128": "hugeint",
    "int256": "hugeint",
    "uint8": "utinyint",
    "uint16": "usmallint",
    "uint32": "uinteger",
    "uint64": "ubigint",
    "uint128": "uhugeint",
    "uint256": "uhugeint",
    "decimal": "decimal",
    "decimal32": "decimal",
    "decimal64": "decimal",
    "decimal128": "decimal",
    "decimal256": "decimal",
}

#: the column type that holds each Arrow type a DataFrame column is loaded as, by Arrow's name
#: (:func:`sqlrp.backends.arrow.arrow_column`)
COLUMN_TYPES = {
    "double": "Float64",
    "int64": "Int64",
    "uint64": "UInt64",
    "bool": "Bool",
    "timestamp[us]": "DateTime64(6)",
    "string": "String",
    "list<item: double>": "Array(Float64)",
}


def literal(value: Any) -> str:
    """``value`` as a ClickHouse literal: NULL, a number (``nan``, ``inf``, ``-inf`` included), or a
    string quoted and escaped by sqlglot.  Other types go through ``sqlglot.exp.convert``."""
    if value is None or value is pd.NA:
        return "NULL"
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and np.isnan(value):
            return "nan"
        if isinstance(value, int):
            text = str(value)
        elif np.isinf(value):
            text = "inf" if value > 0 else "-inf"
        else:
            text = repr(value)  # the shortest text that reads back as the same double
        # a negative number gets a space in front: "x -?" must not become the comment "x --1"
        return f" {text}" if text.startswith("-") else text
    return exp.convert(value).sql("clickhouse")


def quote(name: str) -> str:
    """``name`` as a quoted ClickHouse identifier (sqlrp's own quoting, :func:`sqlrp.core.nodes.ident`)."""
    return ident(name).sql("clickhouse")


def type_call(type_name: str) -> tuple[str, str]:
    """``(name, arguments)`` of a type name ``Name(args)`` (``Decimal(10, 2)``, ``Array(Int64)``), or
    ``(type_name, "")`` for one without arguments."""
    m = _CALL.match(type_name)
    if not m:
        return type_name.strip(), ""
    return m["name"], m["args"].strip()


def bare_type(type_name: str) -> str:
    """``type_name`` without the ``Nullable(...)`` and ``LowCardinality(...)`` around it."""
    name, args = type_call(type_name)
    while name.lower() in _WRAPPERS and args:
        type_name = args
        name, args = type_call(type_name)
    return type_name.strip()


def sql_type(clickhouse_type: str) -> str:
    """A scalar ClickHouse type in the spelling :func:`~sqlrp.backends.base.is_numeric_type` reads:
    ``Nullable(Float64)`` -> ``double``, ``Int64`` -> ``bigint``, ``Decimal(10, 2)`` -> ``decimal(10, 2)``.
    Types that are not numbers keep their ClickHouse name (``String``, ``Bool``, ``DateTime``)."""
    bare = bare_type(clickhouse_type)
    name, args = type_call(bare)
    mapped = NUMBER_TYPES.get(name.lower())
    if mapped is None:
        return bare
    if mapped == "decimal" and args and name.lower() == "decimal":
        return f"decimal({args})"
    return mapped


def element_type(clickhouse_type: str) -> str | None:
    """:func:`sql_type` of the element of an ``Array(T)`` (``Nullable`` or not); None for a type that
    is not an array."""
    outer, inner = type_call(bare_type(clickhouse_type))
    return sql_type(inner) if outer.lower() == "array" and inner else None


def column_type(arrow_type: str, nullable: bool) -> str:
    """The ClickHouse type of a column that holds the Arrow type named ``arrow_type``
    (:data:`COLUMN_TYPES`), ``Nullable(...)`` if it holds a NULL."""
    name = COLUMN_TYPES[arrow_type]
    return f"Nullable({name})" if nullable else name
