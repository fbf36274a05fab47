"""Backends: a live connection to DuckDB or PostgreSQL, chosen by URL.

``connect()`` / ``connect("duckdb:///:memory:")`` -- an in-memory DuckDB;
``connect("duckdb:///path.db")`` or ``connect("path.db")`` -- a DuckDB file;
``connect("postgresql://user@host:port/db")`` -- PostgreSQL through psycopg 3.
"""

from __future__ import annotations

from ..errors import InvalidParameter
from .base import Backend, ColumnInfo


def connect(url: str | Backend | None = None, **options: object) -> Backend:
    """Open the database at ``url`` (SQLAlchemy-style URL, or a DuckDB file path).

    Small-device profile: ``threads=`` and ``memory_limit=`` (e.g. ``"1GB"``) set DuckDB's
    ``threads`` and ``memory_limit``; DuckDB then streams and spills to disk to stay inside the budget.
    PostgreSQL accepts ``threads=`` (``max_parallel_workers_per_gather``) and ``memory_limit=``
    (``work_mem``) for its own session.
    """
    if isinstance(url, Backend):
        return url
    if url is None or url in ("", ":memory:", "duckdb://", "duckdb:///:memory:"):
        from .duckdb import DuckDBBackend

        return DuckDBBackend(":memory:", **options)  # type: ignore[arg-type]
    if "://" not in url:
        from .duckdb import DuckDBBackend

        return DuckDBBackend(url, **options)  # type: ignore[arg-type]
    from sqlalchemy.engine import make_url  # late: only URLs need it (CLI start-up)
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidParameter(f"cannot parse database URL {url!r}") from None
    backend = parsed.get_backend_name()
    if backend == "duckdb":
        from .duckdb import DuckDBBackend

        return DuckDBBackend(parsed.database or ":memory:", **options)  # type: ignore[arg-type]
    if backend in ("postgresql", "postgres"):
        from .postgres import PostgresBackend

        plain = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        return PostgresBackend(plain, **options)  # type: ignore[arg-type]
    raise InvalidParameter(
        f"unsupported database {backend!r} in {url!r}; use duckdb:///file.db or postgresql://user@host/db"
    )


__all__ = ["Backend", "ColumnInfo", "connect"]
