"""Apache DataFusion (the ``datafusion`` Python package: an in-memory ``SessionContext``).

sqlglot has no DataFusion dialect.  DataFusion's SQL is PostgreSQL's in spelling ("DataFusion aims to
be compatible with PostgreSQL": https://datafusion.apache.org/user-guide/sql/index.html), so
statements are rendered by sqlglot's PostgreSQL dialect, with the differences below.  Measured on
datafusion 55.0.0 (Python), each with its source:

- **Arrays** are Arrow lists, 1-based: ``x[1]`` and ``array_element(x, 1)`` read the first element,
  ``make_array(...)`` and ``ARRAY[...]`` build one, ``array_agg(x ORDER BY y)`` and
  ``array_position`` exist (https://datafusion.apache.org/user-guide/sql/scalar_functions.html,
  "Array Functions").  An ``x[i]`` whose array is a *literal* list of integers and whose index is a
  column fails to plan: ``array_element`` is planned for the literal's ``List(Int64)`` and then
  refuses the ``Float64`` elements it is coerced to ("Internal error: Function 'array_element'
  failed to match any signature ... coercion", datafusion 55).  sqlrp's long layout, rendered as for
  PostgreSQL, read the stored matrix that way (``COALESCE(_ss[ARRAY_POSITION(_vv, j)], 0)`` over
  aggregated arrays is fine; the inlined matrix's literal arrays are not), while the wide layout was
  exact.  Every literal array is therefore rendered with each element cast to its own type
  (``make_array(CAST(1 AS DOUBLE), ...)``): the list is typed when it is planned, and the subscript
  has nothing left to coerce (:meth:`DataFusionDialect.render`; ``tests/test_engine_datafusion.py``
  runs the long layout with every strategy).
- **No transactions**: ``BEGIN`` is "Unsupported SQL statement" (``transactional = False``: sqlrp
  builds outputs under a staging name and swaps them in, and the registry deletes what a failed
  save wrote).
- **No ALTER TABLE**: the backend renames a table through the ``SessionContext``'s catalogue and adds
  a registry column by rebuilding the table (``sqlrp/backends/datafusion.py``).
- **Tables are in memory** (``CREATE TABLE``: a ``MemTable``).  ``INSERT``, ``DELETE`` and ``UPDATE``
  run on them (DataFusion 51+, https://datafusion.apache.org/user-guide/sql/dml.html); ``NOT NULL``
  is enforced, ``PRIMARY KEY`` is accepted and not enforced (the registry checks names before it
  writes), ``DEFAULT`` works.  So sqlrp keeps its registry here, for the life of the session.
- **Identifiers**: unquoted names are folded to lower case, quoted names match exactly ("Out" and
  "out" are two tables; https://datafusion.apache.org/user-guide/sql/identifiers.html... the
  ``enable_ident_normalization`` setting).  sqlrp quotes every name.
- **Types**: ``DOUBLE PRECISION`` / ``DOUBLE`` are Float64, ``REAL`` / ``FLOAT`` are Float32
  (https://datafusion.apache.org/user-guide/sql/data_types.html): float32 outputs are exact.
  ``JSON`` does not exist (the registry stores JSON as text).
- **NaN**: ``CAST('NaN' AS DOUBLE) = CAST('NaN' AS DOUBLE)`` is true (Arrow's total order), as in
  PostgreSQL; ``1e308 + 1e308`` is ``inf`` (no overflow error, unlike PostgreSQL).
- **Functions PostgreSQL has and DataFusion lacks**: ``bit_count`` (no bit count of an integer:
  search indexes are refused, :meth:`SqlrpDialect.popcount`), ``hash_record_extended`` (no row
  hash), ``current_schema()``.  ``EXISTS`` with an outer reference works in ``WHERE`` (decorrelated to
  an anti-join), not in a select list.
- **Limits**: no documented cap on columns or statement size (the SQL parser's recursion limit is 50
  nested levels by default, ``datafusion.sql_parser.recursion_limit``,
  https://datafusion.apache.org/user-guide/configs.html; sums are rendered as nested groups of at most
  100 terms, so that a 784-term sum stays 8 levels deep).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from .base import SqlrpDialect, extend

DEPTH = 100  # terms per group of a sum: nested groups stay far below the parser's recursion limit

_BASE = extend(Postgres, depth=DEPTH)


def _array(self, expression: exp.Array) -> str:  # noqa: ANN001 - a sqlglot Generator transform
    """``make_array(...)``: DataFusion's own name for an array constructor (PostgreSQL's ``ARRAY[...]``
    is accepted too, and planned as the same function)."""
    return self.func("make_array", *expression.expressions)


class _Generator(_BASE.Generator):  # type: ignore[name-defined,misc]
    TRANSFORMS = {**_BASE.Generator.TRANSFORMS, exp.Array: _array}

    def bracket_offset_expressions(self, expression: exp.Bracket, index_offset: int | None = None) -> list:
        # array_element takes an Int64 index, and ARRAY_POSITION returns a UInt64 it does not coerce
        # (module docstring): a computed index is cast to BIGINT
        indices = super().bracket_offset_expressions(expression, index_offset)
        return [i if i.is_int else exp.Cast(this=i, to=exp.DataType.build("BIGINT")) for i in indices]


SqlrpDataFusion = type("SqlrpDataFusion", (_BASE,), {"Generator": _Generator})


class DataFusionDialect(SqlrpDialect):
    name = "datafusion"
    aliases = ("apache-datafusion", "arrow-datafusion")
    sqlglot = SqlrpDataFusion
    max_expression_depth = 1000  # nested groups of DEPTH terms (module docstring)
    arrays = True
    array_base = 1
    transactional = False
    nan_propagating_sums = True
    float32 = True  # REAL and FLOAT are Float32 (module docstring)
    executes = True

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        # no JSON type: JSON as text (module docstring)
        return exp.DataType.build("TEXT" if name == "JSON" else name)
