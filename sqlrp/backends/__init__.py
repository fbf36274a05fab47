"""Backends: a live connection to one engine, chosen by URL or by the connection object you have.

URLs (``connect(url)``; the CLI's ``--db``, default ``$SQLRP_DB``):

==============================================  =============================================
``None``, ``""``, ``duckdb://``, ``:memory:``   DuckDB in memory
``duckdb:///path.db``, ``path.duckdb|.db|.ddb``  a DuckDB file
``postgresql://user@host:port/db``              PostgreSQL through psycopg 3 (``+psycopg`` too)
``host=... dbname=...``                         a libpq key/value DSN: PostgreSQL
``sqlite:///path.sqlite``, ``path.sqlite[3]``    SQLite (the standard library)
``chdb://``, ``chdb:///path``                   ClickHouse in-process (``pip install 'sqlrp[clickhouse]'``)
``clickhouse://user:pw@host:8123/db``           a ClickHouse server (clickhouse-connect)
``local[N]``, ``spark://host:7077``, ``sc://``  Spark: local mode, a standalone master, Spark Connect
any other SQLAlchemy URL (``snowflake://``,     the SQLAlchemy backend, with the URL's own driver
``trino://``, ``mysql+pymysql://`` ...)
==============================================  =============================================

Objects: a ``duckdb.DuckDBPyConnection``, a ``psycopg.Connection``, a ``sqlite3.Connection``, a
``pyspark.sql.SparkSession``, a chdb connection, or a SQLAlchemy ``Engine`` / ``Connection`` --
sqlrp uses the connection and never closes what it did not open.

A string that is none of these is an error: it never becomes a new database file.  A driver suffix
names the driver: ``postgresql+psycopg`` is psycopg 3, the backend sqlrp has; ``postgresql+asyncpg``
(or any other driver of an engine sqlrp runs natively) is refused with the URL to use instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from ..errors import InvalidParameter, need
from .base import Backend, ColumnInfo

#: file endings taken as a database path without a URL scheme
DUCKDB_FILES = (".duckdb", ".db", ".ddb")
SQLITE_FILES = (".sqlite", ".sqlite3")
_LIBPQ_DSN = re.compile(r"^\s*(host|hostaddr|dbname|user|port|service|password)\s*=", re.IGNORECASE)
_SPARK_LOCAL = re.compile(r"^local(\[(\d+|\*)\])?$")

#: the engines sqlrp runs itself, by SQLAlchemy backend name: (native driver, how to name it)
_NATIVE = {
    "postgresql": ("psycopg", "postgresql://user@host:port/db"),
    "duckdb": ("duckdb", "duckdb:///path.db"),
    "sqlite": ("pysqlite", "sqlite:///path.sqlite"),
}


def connect(url: object = None, **options: object) -> Backend:
    """Open the database at ``url`` (a URL string, a file path, or a connection object; table above).

    Small-device profile: ``threads=``, ``memory_limit=`` (e.g. ``"1GB"``) and ``temp_directory=`` set
    DuckDB's settings of those names; DuckDB then streams and spills to disk (into ``temp_directory``)
    to stay inside the budget.
    PostgreSQL accepts ``threads=`` (``max_parallel_workers_per_gather``) and ``memory_limit=``
    (``work_mem``) for its own session; other engines ignore them.
    """
    if isinstance(url, Backend):
        return url
    if url is not None and not isinstance(url, str):
        return _from_object(url, **options)
    if url is None or url in ("", ":memory:", "duckdb://", "duckdb:///:memory:"):
        from .duckdb import DuckDBBackend

        return DuckDBBackend(":memory:", **options)  # type: ignore[arg-type]
    text = url.strip()
    if _SPARK_LOCAL.match(text) or text.startswith(("spark://", "sc://")):
        from .spark import SparkBackend

        conf = options.get("conf")  # Spark settings for a session sqlrp starts, e.g. spark.driver.memory
        return SparkBackend.from_master(text, conf=conf)  # type: ignore[arg-type]
    if text.startswith("chdb:"):
        from .clickhouse import ChdbBackend

        path = text[len("chdb:") :].lstrip("/") or ":memory:"
        return ChdbBackend(("/" + path) if text.startswith("chdb:///") and path != ":memory:" else path)
    if "://" not in text:
        return _from_path(text, **options)
    parsed = parse_url(text)
    backend, _, driver = parsed.drivername.partition("+")  # no plugin loading: duckdb has no SQLAlchemy dialect
    backend = "postgresql" if backend == "postgres" else backend
    explicit = bool(driver)
    if backend in _NATIVE and explicit and driver != _NATIVE[backend][0]:
        raise InvalidParameter(
            f"sqlrp runs {backend} through its own driver ({_NATIVE[backend][0]}), not {driver!r}: "
            f"use {_NATIVE[backend][1]} (drop '+{driver}'), or pass a SQLAlchemy Engine built with that driver"
        )
    if backend == "duckdb":
        from .duckdb import DuckDBBackend

        return DuckDBBackend(parsed.database or ":memory:", **options)  # type: ignore[arg-type]
    if backend == "postgresql":
        need("psycopg", "postgres", "PostgreSQL")
        from .postgres import PostgresBackend

        plain = "postgresql" + text[len(text.split("://", 1)[0]) :]  # libpq reads the URL itself
        return PostgresBackend(plain, **options)  # type: ignore[arg-type]
    if backend == "sqlite":
        from .sqlite import SQLiteBackend

        return SQLiteBackend(parsed.database or ":memory:")
    if backend == "clickhouse":
        from .clickhouse import ClickHouseServerBackend

        return ClickHouseServerBackend(parsed)
    need("sqlalchemy", "sqlalchemy", f"a {backend}:// URL (through SQLAlchemy)")
    from .sqlalchemy import SQLAlchemyBackend

    return SQLAlchemyBackend.from_url(text)


@dataclass(frozen=True)
class URL:
    """The parts of ``driver[+dbapi]://user:password@host:port/database?key=value`` (SQLAlchemy's
    URL, read with the standard library: the engines sqlrp runs itself need no SQLAlchemy)."""

    drivername: str
    username: str | None = None
    password: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: dict[str, str] = field(default_factory=dict)

    def render_as_string(self, hide_password: bool = True) -> str:
        """The URL again (the password as ``***`` unless ``hide_password=False``)."""
        auth = quote(self.username or "", safe="")
        if self.password is not None:
            auth += ":" + ("***" if hide_password else quote(self.password, safe=""))
        host = f"[{self.host}]" if self.host and ":" in self.host else (self.host or "")
        netloc = (auth + "@" if auth else "") + host + (f":{self.port}" if self.port else "")
        query = ("?" + urlencode(self.query)) if self.query else ""
        return f"{self.drivername}://{netloc}/{self.database or ''}{query}"


def parse_url(text: str) -> URL:
    """``text`` as a :class:`URL`; ``database`` is the path after the host's ``/`` (``duckdb:///a.db``:
    ``a.db``; ``duckdb:////tmp/a.db``: ``/tmp/a.db``), user and password are percent-decoded."""
    parts = urlsplit(text)
    if not parts.scheme or "://" not in text:
        raise InvalidParameter(f"cannot parse database URL {text!r}")
    try:
        port = parts.port
    except ValueError:
        raise InvalidParameter(f"cannot parse database URL {text!r}: the port is not a number") from None
    return URL(
        drivername=text.split("://", 1)[0].lower(),
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
        host=parts.hostname or None,
        port=port,
        database=unquote(parts.path[1:]) or None,
        query=dict(parse_qsl(parts.query)),
    )


def _from_path(text: str, **options: object) -> Backend:
    """A bare string: a DuckDB or SQLite file by its ending, or a libpq DSN; anything else is refused."""
    if _LIBPQ_DSN.match(text):
        from .postgres import PostgresBackend

        return PostgresBackend(text, **options)  # type: ignore[arg-type]
    lower = text.lower()
    if lower.endswith(DUCKDB_FILES):
        from .duckdb import DuckDBBackend

        return DuckDBBackend(text, **options)  # type: ignore[arg-type]
    if lower.endswith(SQLITE_FILES):
        from .sqlite import SQLiteBackend

        return SQLiteBackend(text)
    raise InvalidParameter(
        f"cannot tell which database {text!r} is: use a URL (duckdb:///file.db, postgresql://user@host/db, "
        f"sqlite:///file.sqlite, chdb://, local[2], spark://host:7077) or a file ending in "
        f"{', '.join(DUCKDB_FILES + SQLITE_FILES)}"
    )


def _from_object(obj: object, **options: object) -> Backend:
    """A connection the caller already has (never closed by sqlrp)."""
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if kind.startswith(("duckdb.", "_duckdb.")):
        from .duckdb import DuckDBBackend

        return DuckDBBackend.wrap(obj, **options)  # type: ignore[arg-type]
    if kind.startswith("psycopg."):
        from .postgres import PostgresBackend

        return PostgresBackend.wrap(obj, **options)  # type: ignore[arg-type]
    if kind.startswith("sqlite3."):
        from .sqlite import SQLiteBackend

        return SQLiteBackend.wrap(obj)
    if kind.startswith("pyspark."):
        from .spark import SparkBackend

        return SparkBackend(obj)
    if kind.startswith("chdb."):
        from .clickhouse import ChdbBackend

        return ChdbBackend.wrap(obj)
    if kind.startswith("sqlalchemy."):
        from .sqlalchemy import SQLAlchemyBackend

        return SQLAlchemyBackend(obj)
    raise InvalidParameter(
        f"cannot use a {kind} as a database: pass a URL, a DuckDB, psycopg, sqlite3, chdb or SQLAlchemy "
        "connection, or a SparkSession"
    )


def default_url() -> str | None:
    """The database the CLI uses without ``--db``: ``$SQLRP_DB``."""
    return os.environ.get("SQLRP_DB") or None


__all__ = ["Backend", "ColumnInfo", "connect", "default_url", "need"]
