"""Driver modules and the packages that install them, for any engine: whether a module can be imported
without importing it, and the ``pip install`` line to name when a driver or a SQLAlchemy dialect is
missing (where the package is named otherwise than its module)."""

from __future__ import annotations

import importlib.util

from ..core.errors import MissingExtra

#: driver module -> the package that installs it, where the names differ
PIP_NAMES = {
    "MySQLdb": "mysqlclient",
    "psycopg2": "psycopg2-binary",
    "psycopg": "'psycopg[binary]'",
    "snowflake": "snowflake-sqlalchemy",
    "sqlalchemy_bigquery": "sqlalchemy-bigquery",
    "google": "sqlalchemy-bigquery",
    "databricks": "databricks-sqlalchemy",
    "clickhouse_sqlalchemy": "clickhouse-sqlalchemy",
    "duckdb_engine": "duckdb-engine",
    "sqlalchemy_redshift": "sqlalchemy-redshift",
    "redshift_connector": "redshift_connector",
    "trino": "'trino[sqlalchemy]'",
}
#: SQLAlchemy dialects that are separate packages (no plugin installed: NoSuchModuleError)
DIALECT_PACKAGES = {
    "snowflake": "snowflake-sqlalchemy",
    "bigquery": "sqlalchemy-bigquery",
    "databricks": "databricks-sqlalchemy",
    "clickhouse": "clickhouse-sqlalchemy",
    "duckdb": "duckdb-engine",
    "redshift": "sqlalchemy-redshift",
    "trino": "'trino[sqlalchemy]'",
}


def importable(module: str) -> bool:
    """True if ``module`` can be imported (``importlib.util.find_spec``, without importing it); False
    for a module missing or blocked at any level of its name."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_dialect(scheme: str) -> MissingExtra:
    """The error for a URL ``scheme://`` whose SQLAlchemy dialect is not installed."""
    package = DIALECT_PACKAGES.get(scheme.split("+", 1)[0])
    how = f"pip install {package}" if package else "install the SQLAlchemy dialect package for it"
    return MissingExtra(f"SQLAlchemy has no dialect for {scheme}:// here: {how}")


def missing_driver(exc: ImportError, scheme: str) -> MissingExtra:
    """The error for a URL ``scheme://`` whose driver failed to import with ``exc``."""
    module = (exc.name or str(exc)).split(".")[0]
    return MissingExtra(
        f"the database URL {scheme}:// needs the driver {module!r}, which is not installed: "
        f"pip install {PIP_NAMES.get(module, module)}"
    )


__all__ = ["DIALECT_PACKAGES", "PIP_NAMES", "importable", "missing_dialect", "missing_driver"]
