"""SQL dialects sqlrp renders to: one small file per engine with its rendering rules and its
limits (``base.py`` lists the profile).  DuckDB, PostgreSQL, SQLite, ClickHouse and Spark execute
through sqlrp's backends; Snowflake, BigQuery, SQL Server, MySQL and Trino have profiles
(``warehouses.py``) and run through SQLAlchemy with their own drivers; any other dialect sqlglot
knows is rendered with the generic profile (portable choices only: no arrays, no FILTER, no lookup).
"""

from __future__ import annotations

import importlib

import sqlglot

from ..errors import InvalidParameter
from .base import SqlrpDialect, extend

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
#: name -> (module in this folder, class): imported when first asked for, so that ``import sqlrp``
#: does not load ten of sqlglot's dialects (0.24 s of ``python -X importtime -c "import sqlrp"``)
_KNOWN: dict[str, tuple[str, str]] = {
    "duckdb": ("duckdb", "DuckDBDialect"),
    "postgres": ("postgres", "PostgresDialect"),
    "spark": ("spark", "SparkDialect"),
    "sqlite": ("sqlite", "SQLiteDialect"),
    "clickhouse": ("clickhouse", "ClickHouseDialect"),
    "snowflake": ("warehouses", "SnowflakeDialect"),
    "bigquery": ("warehouses", "BigQueryDialect"),
    "tsql": ("warehouses", "TSQLDialect"),
    "mysql": ("warehouses", "MySQLDialect"),
    "trino": ("warehouses", "TrinoDialect"),
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
        module, cls = _KNOWN[key]
        dialect = getattr(importlib.import_module(f".{module}", __name__), cls)()
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
