"""The built-in engines' registrations: how :func:`sqlrp.connect` reaches each, in strings, with the
module and class of its backend, which is imported only when the engine is used (issue 42, item 4).

``sqlrp project --db duckdb:///x.db`` used to import every backend module to find the one of the
``duckdb`` scheme (and to fill the help's example URLs): the ClickHouse one brought sqlglot's
ClickHouse dialect and optimizer, the SQLite one ``sqlite3``, and so on, for nothing.  Here a URL,
a file ending, a pattern or a connection class is matched without importing any of them; the
backend class is found by :attr:`~sqlrp.backends.base.Registration.backend` (``module:Class``) on
first use.  Each backend class declares its registration by naming its entry here
(``registration = catalog.DUCKDB``); a backend made elsewhere (a plugin's, a test's) declares its
own ``Registration(...)`` in its body and is reached the same way.
"""

from __future__ import annotations

from ..core.errors import DRIVER_MODULES
from .base import Registration

CHDB = Registration(
    name="ClickHouse in-process (chdb)",
    schemes=("chdb",),
    connections=("chdb.",),
    drivers=("chdb",),
    extra="clickhouse",
    example="chdb:///path",
    backend="sqlrp.backends.clickhouse:ChdbBackend",
)

CLICKHOUSE = Registration(
    name="ClickHouse server",
    schemes=("clickhouse",),
    connections=("clickhouse_connect.",),
    drivers=("clickhouse_connect",),
    extra="clickhouse",
    example="clickhouse://user:password@host:8123/db",
    backend="sqlrp.backends.clickhouse:ClickHouseServerBackend",
)

DATAFUSION = Registration(
    name="DataFusion",
    schemes=("datafusion",),
    connections=("datafusion.",),
    drivers=("datafusion",),
    extra="datafusion",
    example="datafusion://",
    backend="sqlrp.backends.datafusion:DataFusionBackend",
)

DUCKDB = Registration(
    name="DuckDB",
    schemes=("duckdb",),
    url_drivers=("duckdb",),
    files=(".duckdb", ".db", ".ddb"),
    patterns=(r":memory:$",),
    connections=("duckdb.", "_duckdb."),
    drivers=("duckdb", "_duckdb"),
    example="duckdb:///path.db",
    default=True,
    backend="sqlrp.backends.duckdb:DuckDBBackend",
)

HYPER = Registration(
    name="Tableau Hyper",
    schemes=("hyper",),
    files=(".hyper",),
    connections=("tableauhyperapi.",),
    drivers=("tableauhyperapi",),
    extra="hyper",
    example="hyper:///path.hyper",
    backend="sqlrp.backends.hyper:HyperBackend",
)

POSTGRES = Registration(
    name="PostgreSQL",
    schemes=("postgresql", "postgres"),
    url_drivers=("psycopg",),
    patterns=(r"\s*(host|hostaddr|dbname|user|port|service|password)\s*=",),  # a libpq key/value DSN
    connections=("psycopg.",),
    drivers=("psycopg",),
    extra="postgres",
    example="postgresql://user@host:port/db",
    backend="sqlrp.backends.postgres:PostgresBackend",
)

SPARK = Registration(
    name="Spark",
    schemes=("spark", "sc"),
    patterns=(r"^local(\[(\d+|\*)\])?$",),  # a local master: local, local[4], local[*]
    connections=("pyspark.",),
    drivers=("pyspark", "py4j"),
    extra="spark",
    example="local[2], spark://host:7077, sc://host:15002",
    backend="sqlrp.backends.spark:SparkBackend",
)

SQLALCHEMY = Registration(
    name="SQLAlchemy",
    connections=("sqlalchemy.",),
    drivers=("sqlalchemy",),
    extra="sqlalchemy",
    example="snowflake://user@account/db/schema",
    fallback=True,
    backend="sqlrp.backends.sqlalchemy:SQLAlchemyBackend",
)

SQLITE = Registration(
    name="SQLite",
    schemes=("sqlite",),
    url_drivers=("pysqlite",),
    files=(".sqlite", ".sqlite3"),
    connections=("sqlite3.",),
    drivers=("sqlite3",),
    example="sqlite:///path.sqlite",
    magic=b"SQLite format 3\x00",  # https://www.sqlite.org/fileformat.html, "The Database Header"
    backend="sqlrp.backends.sqlite:SQLiteBackend",
)

#: the built-in registrations, in the order their modules' names sort (the order in which importing
#: every backend module made them, before this catalog)
BUILT_IN: tuple[Registration, ...] = (CHDB, CLICKHOUSE, DATAFUSION, DUCKDB, HYPER, POSTGRES, SPARK, SQLALCHEMY, SQLITE)

# the drivers' exceptions are the engines' errors from the start, whichever backend module is imported
DRIVER_MODULES.update(driver for reg in BUILT_IN for driver in reg.drivers)
