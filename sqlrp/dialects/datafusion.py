"""Apache DataFusion (the ``datafusion`` Python package: a ``SessionContext``, tables in memory).

sqlglot has no DataFusion dialect.  DataFusion's SQL follows PostgreSQL's where it can (its SQL
reference: https://datafusion.apache.org/user-guide/sql/index.html), so statements are rendered by
sqlglot's PostgreSQL dialect, the closest one.  The differences from PostgreSQL, measured
on datafusion 55.0.0 and cited where the documentation says them:

- **Array subscripts take a signed index.**  Arrays are Arrow lists, 1-based (``x[1]``, the same as
  ``array_element(x, 1)``; ``make_array`` and ``ARRAY[...]`` build one; ``array_agg(x ORDER BY y)``
  and ``array_position`` exist: https://datafusion.apache.org/user-guide/sql/scalar_functions.html,
  "Array Functions").  ``array_position`` returns a UInt64, and ``array_element`` takes an Int64
  index and does not coerce a UInt64 to it: the long layout's ``lookup`` pivot, rendered as for
  PostgreSQL (``_ss[ARRAY_POSITION(_vv, j)]``), failed to plan ("Failed to coerce arguments to
  satisfy a call to 'array_element' function: coercion from List(Float64), UInt64 ..."), and with
  it ``auto`` on long tables and every kernel method there, while the wide layout was exact.  A
  computed subscript is therefore rendered as ``x[CAST(i AS BIGINT)]`` (``_Generator`` below);
  literal subscripts (the array layout) stay as they are.
- **No transactions**: ``BEGIN`` is "Unsupported SQL statement" (``transactional = False``: sqlrp
  builds an output under a staging name and swaps it in, and the registry deletes what a failed
  save wrote).
- **No ALTER TABLE** (https://datafusion.apache.org/user-guide/sql/ddl.html has none): the backend
  renames a table through the session's catalogue and adds a registry column by rebuilding the
  table (``sqlrp/backends/datafusion.py``).
- **Tables in memory.**  ``CREATE TABLE`` makes a ``MemTable``; ``INSERT`` runs on it
  (https://datafusion.apache.org/user-guide/sql/dml.html), and so do ``DELETE`` and ``UPDATE``.
  ``NOT NULL`` and ``DEFAULT`` are kept, ``PRIMARY KEY`` is accepted and not enforced (sqlrp checks
  a name before it stores one).  So sqlrp keeps its registry here (``keeps_registry``), for the
  life of the session.
- **Identifiers**: unquoted names are folded to lower case (``datafusion.sql_parser.
  enable_ident_normalization``, https://datafusion.apache.org/user-guide/configs.html), quoted
  names match exactly: ``"Out"`` and ``"out"`` are two tables, as in PostgreSQL.  No length limit
  (PostgreSQL truncates at 63 bytes).  sqlrp quotes every name.
- **Types**: ``DOUBLE`` / ``DOUBLE PRECISION`` are Float64, ``REAL`` / ``FLOAT`` Float32
  (https://datafusion.apache.org/user-guide/sql/data_types.html): float32 outputs are exact.  There
  is no ``JSON`` type: the registry stores JSON as text.
- **Sums overflow to infinity**: ``1e308 + 1e308`` is ``inf`` (PostgreSQL raises).  NaN equals
  NaN (``CAST('NaN' AS DOUBLE) = CAST('NaN' AS DOUBLE)`` is true), as in PostgreSQL.
- **Missing functions**: no bit count of an integer (``bit_count``), so search indexes are refused
  (:meth:`~sqlrp.dialects.base.SqlrpDialect.popcount`); no row hash (``hash_record_extended``); no
  ``current_schema()``.  ``EXISTS`` with an outer reference plans in ``WHERE`` (as an anti-join),
  not in a select list.
- **Limits**: no documented cap on columns or statement size.  Expression depth is bounded by the
  stack of the thread that plans the query: a left-deep sum of 6,000 terms plans, one of 8,000
  overflows the stack and kills the process (a segmentation fault, not an error).  Sums are
  therefore rendered as nested groups of at most 100 terms (:data:`DEPTH`), as on SQLite and Spark,
  and conditions over many columns are balanced trees (``sqlrp.core.nodes.balanced``).
- **Unnest**: two ``unnest()`` of equal length in one select list run in lockstep (measured), so a
  wide table can be read as a long one when the ``join`` or ``lookup`` strategy is forced.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from .base import SqlrpDialect, extend

DEPTH = 100  # terms per group of a sum: far below the 6,000-8,000 terms that overflow the stack

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
    cos_function = "cos"  # DataFusion "Scalar Functions": cos(numeric_expression)
    aliases = ("apache-datafusion", "arrow-datafusion")
    sqlglot = SqlrpDataFusion
    # a left-deep sum of 6,000 terms plans, 8,000 kill the process (module docstring)
    max_expression_depth = 6000
    arrays = True
    array_base = 1
    transactional = False
    nan_propagating_sums = True
    select_unnest = True  # lockstep unnest() in one select list (module docstring)
    # 1.6e-16 is a Float64 (arrow_typeof, measured on datafusion 55); no fence (the base's)
    exponent_literals = True
    float32 = True  # REAL and FLOAT are Float32 (module docstring)
    executes = True

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        # no JSON type: JSON as text (module docstring)
        return exp.DataType.build("TEXT" if name == "JSON" else name)
