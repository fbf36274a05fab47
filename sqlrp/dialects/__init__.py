"""SQL dialects sqlrp renders to: one small file per engine with its rendering rules and its
limits (``base.py`` lists the profile).  DuckDB, PostgreSQL, SQLite, ClickHouse and Spark execute
through sqlrp's backends; Snowflake, BigQuery, SQL Server, MySQL and Trino have profiles
(``warehouses.py``, ``mysql.py``) and run through SQLAlchemy with their own drivers; any other dialect sqlglot
knows is rendered with the generic profile (portable choices only: no arrays, no FILTER, no lookup).
"""

from __future__ import annotations

import importlib
import pkgutil

import sqlglot

from ..core.errors import InvalidParameter
from .base import ALIASES, DIALECTS, SqlrpDialect, extend

_CACHE: dict[str, SqlrpDialect] = {}
_all_imported = False


def _discover(key: str) -> None:
    """Import the dialect files until one declares ``key`` (as a name or an alias): first the file of
    that name, if there is one, then all of them.  Only what is asked for is imported, so that
    ``import sqlrp`` does not load ten of sqlglot's dialects."""
    global _all_imported
    if _all_imported:
        return
    # base and portable (the portable core's rewrite) declare no engine
    files = [m.name for m in pkgutil.iter_modules(__path__) if m.name not in ("base", "portable")]
    if key in files:
        importlib.import_module(f".{key}", __name__)
    if key in DIALECTS or key in ALIASES:
        return
    for module in files:
        importlib.import_module(f".{module}", __name__)
    _all_imported = True


def dialect_name(name: str) -> str:
    """The name of the dialect called ``name``: a dialect's own name, or the one an alias stands for
    (``pg`` -> ``postgres``); ``name`` in lower case if no sqlrp dialect has it."""
    key = name.lower()
    if key not in DIALECTS and key not in ALIASES:
        _discover(key)
    return key if key in DIALECTS else ALIASES.get(key, key)


def dialect_names() -> list[str]:
    """The names of every dialect with a profile of its own (each file in this folder declares its own)."""
    _discover("")
    return sorted(DIALECTS)


def get_dialect(name: str | SqlrpDialect) -> SqlrpDialect:
    """The dialect called ``name`` (an engine above, or any sqlglot dialect)."""
    if isinstance(name, SqlrpDialect):
        return name
    if not isinstance(name, str):
        raise InvalidParameter(f"dialect must be an engine's name (a string), got {name!r}")
    key = name.lower()
    if key in _CACHE:
        return _CACHE[key]
    key = dialect_name(key)
    if key in _CACHE:
        return _CACHE[key]
    if key in DIALECTS:
        dialect = DIALECTS[key]()
    else:
        try:
            base = sqlglot.Dialect.get_or_raise(key).__class__
        except ValueError:
            raise InvalidParameter(
                f"unknown SQL dialect {name!r}; use {', '.join(dialect_names())} or another sqlglot dialect"
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


__all__ = ["SqlrpDialect", "dialect_name", "dialect_names", "get_dialect"]
