"""Tableau Hyper (``tableauhyperapi``): PostgreSQL's SQL, with the differences that matter measured on
tableauhyperapi 0.0.26963 (issue 32, ``../shared/DESIGN.md`` 4d).  sqlglot's Tableau dialect is
Tableau's calculation language, not Hyper's SQL (it writes ``[bracket]`` names), so Hyper is rendered
with sqlglot's PostgreSQL dialect and this file lists what differs from PostgreSQL:

- **UNNEST pairing**: two ``UNNEST`` calls in one select list are a *cross product* (``SELECT
  UNNEST(ARRAY[1,2,3]), UNNEST(ARRAY[10,20,30])`` gives 9 rows), not PostgreSQL's lockstep: a wide
  table is never unnested (``select_unnest = False``; the join/lookup strategies take long tables only).
- **Subscripts**: ``[]`` "requires integer offsets": a BIGINT one (``ARRAY_POSITION`` returns BIGINT)
  is refused, so a computed subscript is cast to INT.  Literal subscripts are 1-based, as in PostgreSQL.
- **Fence**: ``OFFSET`` "requires an integer argument": PostgreSQL's old fence ``OFFSET CAST('0' AS
  BIGINT)`` was refused (its fence is ``LIMIT ALL`` now, ``dialects/postgres.py``, which Hyper runs);
  Hyper plans sub-queries itself and needs none.
- **Types**: ``DOUBLE`` does not exist (``DOUBLE PRECISION`` does, as sqlglot's PostgreSQL dialect
  writes it); ``REAL`` is 4 bytes (``CAST(CAST(0.1 AS REAL) AS DOUBLE PRECISION)`` is
  0.10000000149011612): float32 outputs.  ``JSON`` exists; ``JSONB`` is not needed.
- **Literals**: exponents (``1.6e-16``) read as DOUBLE PRECISION; decimals as NUMERIC.
- **Arrays** exist in SQL, but the Python API returns an array value as raw bytes and its inserter
  takes none: the array layout and array output are refused (``arrays = False``); ``ARRAY_AGG(x ORDER
  BY y)`` and ``ARRAY_POSITION`` work inside a query (the ``lookup`` strategy on long tables).
- **Keys**: ``PRIMARY KEY`` fails ("Index support is disabled"): the registry's tables have none.
- **Transactions**: DDL inside ``BEGIN ... ROLLBACK`` is not undone with the DML (a table created
  in a rolled-back transaction stays, empty), so Hyper counts as non-transactional: outputs are built
  under a staging name and renamed into place (``ALTER TABLE ... RENAME TO`` works).
- **No** ``bit_count`` or row hash function: similarity search is refused; no ``information_schema``
  (the backend reads the API's catalogue).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from .base import SqlrpDialect, extend

_BASE = extend(Postgres)
_INT = exp.DataType.build("INT")


class _Generator(_BASE.Generator):  # type: ignore[name-defined,misc]
    def bracket_offset_expressions(self, expression: exp.Bracket, index_offset: int | None = None) -> list:
        # "'[]' requires integer offsets": a computed (BIGINT) subscript is cast to INT (module docstring)
        indices = super().bracket_offset_expressions(expression, index_offset)
        return [i if i.is_int else exp.Cast(this=i, to=_INT) for i in indices]


SqlrpHyper = type("SqlrpHyper", (_BASE,), {"Generator": _Generator})


class HyperDialect(SqlrpDialect):
    name = "hyper"
    cos_function = "COS"  # Hyper "Mathematical Functions": cos(double precision)
    # "tableau" too: sqlglot's Tableau dialect is the calculation language (module docstring), not SQL
    aliases = ("tableau", "tableau-hyper", "hyperapi")
    sqlglot = SqlrpHyper
    # ---- what varies between engines (dialects/portable.py), each measured (module docstring) ----
    array_base = 1  # literal subscripts as PostgreSQL's: (ARRAY[1.5, 2.5])[1] is 1.5
    exponent_literals = True  # SELECT 1.6e-16 is a DOUBLE PRECISION
    select_unnest = False  # two UNNESTs in one select list: a cross product (module docstring)
    arrays = False  # results and the inserter take no arrays (module docstring)
    ordered_array_agg = True  # ARRAY_AGG(x ORDER BY y), ARRAY_POSITION (1-based), INT subscripts
    filter_clause = True  # SUM(x) FILTER (WHERE ...) measured
    values_column_names = True  # (VALUES ...) AS t(a, b) keeps the names, measured
    float32 = True  # REAL is 4 bytes (module docstring)
    transactional = False  # DDL is not rolled back with DML (module docstring)
    registry_constraints = False  # no PRIMARY KEY ("Index support is disabled")
    correlated_subqueries = True  # NOT EXISTS (SELECT ... WHERE w.b = v.a) measured
    executes = True
    # the fence is the base's: none (OFFSET takes a literal only; Hyper needs no fence)

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        return exp.DataType.build(name, dialect="postgres")
