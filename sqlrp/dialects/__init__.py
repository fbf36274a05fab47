"""SQL dialects sqlrp renders to: one small file per engine with its rendering rules and its
limits (``base.py`` lists the profile).  DuckDB, PostgreSQL, SQLite, ClickHouse and Spark execute
through sqlrp's backends; Snowflake, BigQuery, SQL Server, MySQL and Trino have profiles
(``warehouses.py``) and run through SQLAlchemy with their own drivers; any other dialect sqlglot
knows is rendered with the generic profile (portable choices only: no arrays, no FILTER, no lookup).
"""

from __future__ import annotations

import sqlglot

from ..errors import InvalidParameter
from .base import SqlrpDialect, extend
from .clickhouse import ClickHouseDialect
from .duckdb import DuckDBDialect
from .postgres import PostgresDialect
from .spark import SparkDialect
from .sqlite import SQLiteDialect
from .warehouses import BigQueryDialect, MySQLDialect, SnowflakeDialect, TrinoDialect, TSQLDialect

_ALIASES = {
    "postgresql": "postgres",
    "pg": "postgres",
    "sparksql": "spark",
    "spark2": "spark",
    "databricks": "spark",
    "sqlite3": "sqlite",
    "chdb": "clickhouse",
    "mssql": "tsql",
    "sqlserver": "tsql",
    "mariadb": "mysql",
    "presto": "trino",
}
_KNOWN: dict[str, type[SqlrpDialect]] = {
    "duckdb": DuckDBDialect,
    "postgres": PostgresDialect,
    "spark": SparkDialect,
    "sqlite": SQLiteDialect,
    "clickhouse": ClickHouseDialect,
    "snowflake": SnowflakeDialect,
    "bigquery": BigQueryDialect,
    "tsql": TSQLDialect,
    "mysql": MySQLDialect,
    "trino": TrinoDialect,
}
_CACHE: dict[str, SqlrpDialect] = {}


def get_dialect(name: str | SqlrpDialect) -> SqlrpDialect:
    """The dialect called ``name`` (an engine above, or any sqlglot dialect)."""
    if isinstance(name, SqlrpDialect):
        return name
    key = _ALIASES.get(name.lower(), name.lower())
    if key in _CACHE:
        return _CACHE[key]
    if key in _KNOWN:
        dialect = _KNOWN[key]()
    else:
        try:
            base = sqlglot.Dialect.get_or_raise(key).__class__
        except ValueError:
            raise InvalidParameter(
                f"unknown SQL dialect {name!r}; use {', '.join(sorted(_KNOWN))} or another sqlglot dialect"
            ) from None
        dialect = SqlrpDialect()
        dialect.name = key
        dialect.sqlglot = extend(base, depth=100)
        # unknown engine: only the portable constructs (measured to run on Spark, ClickHouse,
        # DataFusion and SQLite: ../shared/DESIGN.md 4b)
        dialect.arrays = False
        dialect.filter_clause = False
        dialect.ordered_array_agg = False
        dialect.values_column_names = False
        dialect.transactional = False
    _CACHE[key] = dialect
    return dialect


__all__ = ["SqlrpDialect", "get_dialect"]
