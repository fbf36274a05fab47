"""DuckDB: the embedded default.  LIST / ARRAY subscripts are cheap (``x[i]``, 1-based)."""

from __future__ import annotations

from sqlglot.dialects.duckdb import DuckDB

from .base import SqlrpDialect, extend


class DuckDBDialect(SqlrpDialect):
    name = "duckdb"
    sqlglot = extend(DuckDB)
    star_exclude = True
    nan_propagating_sums = True
