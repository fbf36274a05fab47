"""MySQL and MariaDB (``sqlrp/dialects/mysql.py``) through SQLAlchemy: what the server cannot take,
refused before it is sent.

The server's ``max_allowed_packet`` is read on connect (:func:`packet_limit`) and is the profile's
statement limit for the connection (:attr:`sqlrp.backends.sqlalchemy.SQLAlchemyBackend.sql_dialect`:
the compiler splits a longer statement, or refuses it naming the limit), and a statement longer than it
is refused before it is sent (:func:`refuse_oversized`: the server would drop the connection, "server has
gone away").  On an engine without NaN (:attr:`~sqlrp.dialects.base.SqlrpDialect.holds_nan`: MySQL,
MariaDB, SQL Server) a frame holding NaN or infinity is refused before anything is written, naming the
column and the row (:func:`refuse_non_finite`).  Rows written by the driver (a frame, the registry's
rows) go in batches whose ``INSERT`` fits the packet (:func:`packet_batches`): the driver joins a batch
into statements of up to 1,000,000 bytes, more than a small ``max_allowed_packet``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..core.errors import EngineLimit, InputError
from ..core.lazy import pd
from ..core.names import PREFIX
from ..dialects.base import SqlrpDialect
from .base import Backend
from .values import column_values


def packet_limit(db: Backend) -> int | None:
    """MySQL/MariaDB: a statement travels as one packet of at most ``max_allowed_packet`` bytes, 16
    MiB by default in MariaDB, 64 MiB in MySQL 8, set per server.  Read it (``None``: a MySQL-compatible
    server without it): the profile of the connection keeps statements within it
    (:meth:`~sqlrp.dialects.mysql.MySQLDialect.with_packet_limit`)."""
    from sqlalchemy.exc import DBAPIError

    try:
        return int(db.fetchall("SELECT @@max_allowed_packet")[0][0])
    except (DBAPIError, TypeError, ValueError, IndexError):  # a MySQL-compatible server without it
        return None


def named_lock(key: str) -> str:
    """``key`` as a name ``GET_LOCK`` takes (at most 64 characters): itself, or its SHA-256 in hex.  The
    registry's migrations take turns under it (:meth:`sqlrp.backends.sqlalchemy.SQLAlchemyBackend.lock`)."""
    import hashlib

    return key if len(key) <= 64 else hashlib.sha256(key.encode()).hexdigest()


def refuse_oversized(sql: str, limit: int | None, engine: str) -> None:
    """A statement longer than the server accepts (``limit`` bytes) ends the connection ("MySQL server
    has gone away"): refuse it before it is sent, naming the limit."""
    if limit is not None and len(sql) > limit // 4 and len(sql.encode()) > limit:
        raise EngineLimit(
            f"{engine}: the statement is {len(sql.encode()):,} bytes; this server accepts at most "
            f"{limit:,} (its max_allowed_packet), and would drop the connection; raise max_allowed_packet on "
            "the server (SET GLOBAL max_allowed_packet = ...), or use a smaller k"
        )


def _value_bytes(value: Any) -> int:
    """At most how many bytes ``value`` takes in an ``INSERT``'s text, with its comma: a string or bytes
    each byte escaped (doubled) and quoted, a number as its ``repr``."""
    if value is None:
        return 5
    if isinstance(value, str):
        return 2 * len(value.encode()) + 12
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 2 * len(bytes(value)) + 12
    return len(repr(value)) + 2


def packet_batches(
    rows: Iterator[Sequence[Any]], most: int, limit: int | None, header: int, engine: str
) -> Iterator[list[Sequence[Any]]]:
    """``rows`` in batches of at most ``most`` rows whose multi-row ``INSERT`` (``header`` bytes of
    ``INSERT INTO t (...) VALUES``, then each row) fits ``limit`` bytes, the server's
    ``max_allowed_packet`` (``None``: no limit known, batches of ``most``).  A row that alone would not
    fit is :class:`EngineLimit`, before it is sent."""
    if limit is None:
        while batch := list(itertools.islice(rows, most)):
            yield batch
        return
    room = limit - header - 1024  # the packet's header, and the driver's spacing
    batch: list[Sequence[Any]] = []
    size = 0
    for row in rows:
        need = sum(_value_bytes(v) for v in row) + 3
        if need > room:
            raise EngineLimit(
                f"{engine}: a row of about {need:,} bytes does not fit this server's max_allowed_packet "
                f"({limit:,} bytes); raise max_allowed_packet on the server (SET GLOBAL max_allowed_packet = ...)"
            )
        if batch and (size + need > room or len(batch) >= most):
            yield batch
            batch, size = [], 0
        batch.append(row)
        size += need
    if batch:
        yield batch


def refuse_non_finite(table: str, df: pd.DataFrame, dialect: SqlrpDialect, engine: str) -> None:
    """On an engine whose DOUBLE holds no NaN and no infinity (MySQL, MariaDB, SQL Server:
    :attr:`~sqlrp.dialects.base.SqlrpDialect.holds_nan`), :class:`InputError` naming the first column
    and row holding one, before anything is written to ``engine`` (its dialect name; ``dialect``, its
    profile): the driver would fail half-way ("nan can not be used with MySQL"), and writing NULL
    instead would let ``nulls="zero"`` read it as 0."""
    if dialect.holds_nan:
        return
    for name in df.columns:
        series = df[name]
        if isinstance(series.dtype, np.dtype) and series.dtype.kind == "f":  # NaN here is a value, not NULL
            values = series.to_numpy(dtype=np.float64)
        elif getattr(series.dtype, "kind", "O") in "fO":  # masked floats, objects: what the driver is sent
            cells = column_values(series, nan_as_null=False)
            values = np.array([v if isinstance(v, float) else 0.0 for v in cells], dtype=np.float64)
        else:
            continue
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            what = "the frame" if table.startswith(f"{PREFIX}frame_") else f"table {table!r}"
            raise InputError(
                f"{what}: column {str(name)!r} holds {float(values[bad[0]])!r} (its row {int(bad[0])}, counting "
                f"from 0), and {engine} stores no NaN or infinity; replace it (by NULL, with --nulls=zero "
                "if 0 is meant) before writing; nothing was written"
            )


__all__ = ["named_lock", "packet_batches", "packet_limit", "refuse_non_finite", "refuse_oversized"]
