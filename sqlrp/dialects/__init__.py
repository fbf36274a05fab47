"""SQL dialects sqlrp renders to.  DuckDB, PostgreSQL and Spark have their own files; any other
dialect sqlglot knows (trino, bigquery, snowflake, ...) is rendered through sqlglot with no changes."""

from __future__ import annotations

import sqlglot

from ..errors import InvalidParameter
from .base import SqlrpDialect, extend
from .duckdb import DuckDBDialect
from .postgres import PostgresDialect
from .spark import SparkDialect

_ALIASES = {"postgresql": "postgres", "pg": "postgres", "sparksql": "spark", "spark2": "spark"}
_KNOWN: dict[str, type[SqlrpDialect]] = {
    "duckdb": DuckDBDialect,
    "postgres": PostgresDialect,
    "spark": SparkDialect,
}


def get_dialect(name: str | SqlrpDialect) -> SqlrpDialect:
    """The dialect called ``name`` (``duckdb``, ``postgres``, ``spark``, or any sqlglot dialect)."""
    if isinstance(name, SqlrpDialect):
        return name
    key = _ALIASES.get(name.lower(), name.lower())
    if key in _KNOWN:
        return _KNOWN[key]()
    try:
        base = sqlglot.Dialect.get_or_raise(key).__class__
    except ValueError:
        raise InvalidParameter(
            f"unknown SQL dialect {name!r}; use duckdb, postgres, spark or another sqlglot dialect"
        ) from None
    dialect = SqlrpDialect()
    dialect.name = key
    dialect.sqlglot = extend(base)
    return dialect


__all__ = ["SqlrpDialect", "get_dialect"]
