"""ClickHouse backends: in-process through chdb (``chdb://``, ``chdb:///path``), or a server through
clickhouse-connect (``clickhouse://user:pw@host:8123/db``).

ClickHouse has no transactions (``transactional = False``: :meth:`transaction` only groups
statements; the registry compensates on failure, :mod:`sqlrp.registry.store`).  Neither driver binds ``?``
placeholders the way the other backends do, so :func:`bind` renders each parameter as a ClickHouse
literal (sqlglot's string escaping; ``nan`` / ``inf`` spelled out) in place of the ``?`` tokens that
stand outside quotes and comments -- user text is never pasted into SQL as SQL.

ClickHouse's SQL behaviours the rest of sqlrp relies on (NULL casts, overflow, NaN, array indexes,
joins), its literals, quoting and type names are in :mod:`sqlrp.dialects.clickhouse`.  This module's own,
measured on chdb 4.4 (ClickHouse 26.9):

- Inserting NULL into a non-Nullable column stores the type's default (0) unless
  ``input_format_null_as_default = 0``: :meth:`insert_frame` sets it, so a NULL there is an error.
- ``projection`` is a keyword in ``CREATE TABLE`` column lists (quoted in the migrations).

Tables written by :meth:`write_dataframe` are ``ENGINE = MergeTree ORDER BY tuple()``: float
columns are ``Float64``, or ``Nullable(Float64)`` where the frame holds a missing value (NaN, None,
``pd.NA``: NULL, as DuckDB reads a frame), list-valued columns ``Array(Float64)`` (ClickHouse arrays
cannot be NULL).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InputError, InvalidParameter, need
from ..core.lazy import pd
from ..core.names import scratch_name
from ..dialects.clickhouse import bare_type, column_type, element_type, literal, quote, sql_type
from . import catalog
from .arrow import arrow_rows, typed_stream
from .base import URL, ColumnInfo, NoTransactions, client_options, missing_table, parse_url
from .placeholders import bind_literals, quoting_tokens
from .staging import dropped_on_failure
from .values import is_array, missing, recut, value_kind

if TYPE_CHECKING:
    import pyarrow as pa

ENGINE = "clickhouse"

# a ``?`` outside string literals, quoted identifiers and comments (ClickHouse escapes: \x and doubling)
_TOKENS = quoting_tokens(backslash=True, backticks=True)

#: every bulk insert: a NULL for a non-Nullable column, or a column missing from the data, is an error
#: (by default ClickHouse stores the column's default, 0, for both)
INSERT_SETTINGS = {"input_format_null_as_default": 0, "input_format_arrow_allow_missing_columns": 0}
#: session settings of every connection sqlrp opens or is given: ClickHouse resolves an alias anywhere
#: in its query, so ``SELECT "_x0" AS "_id", CAST("a" AS Float64) AS "_x0"`` read the feature as the id
#: (a user column named like one of the compiler's aliases); with this, a column's name wins, as in SQL
SESSION_SETTINGS = {"prefer_column_name_to_alias": 1}


def _set_session(conn: Any) -> Any:
    """``conn`` (a chdb connection) with :data:`SESSION_SETTINGS`."""
    for name, value in SESSION_SETTINGS.items():
        conn.query(f"SET {name} = {value}", "CSV")
    return conn


# ----------------------------------------------------------------------------------------------
# SQL text (literals, quoting and type names: sqlrp.dialects.clickhouse) and DataFrames to Arrow


def bind(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with each ``?`` outside quotes and comments replaced by the literal of the next
    parameter (:func:`~sqlrp.backends.placeholders.bind_literals` with this engine's quoting)."""
    return bind_literals(sql, params, _TOKENS, literal, ENGINE)


def column_info(name: str, clickhouse_type: str) -> ColumnInfo:
    """A :class:`ColumnInfo` for a column of ClickHouse type ``clickhouse_type``: scalars by
    :func:`sql_type`, ``Array(T)`` with ``element_type = sql_type(T)`` (no fixed length)."""
    element = element_type(clickhouse_type)
    if element is None:
        return ColumnInfo(name, sql_type(clickhouse_type))
    return ColumnInfo(name, f"{element}[]", element_type=element)


def _load_kind(series: pd.Series) -> str:
    """The kind (:func:`~sqlrp.backends.values.value_kind`) ``series`` is loaded as.  pandas' missing
    values (NaN, None, ``pd.NA``, ``NaT``) become NULL in a ``Nullable`` column, as DuckDB reads a
    frame (so sqlrp's NULL check finds them); ``inf`` stays ``inf``.  Lists and arrays become
    ``Array(Float64)``, which cannot be NULL: a missing array is an :class:`InputError`.  Bytes and
    time-zoned timestamps are stored as their text; a column with no value as ``Float64``."""
    kind = value_kind(series)
    if kind == "array" and not all(is_array(v) for v in series.tolist()):
        raise InputError(
            f"{ENGINE}: column {str(series.name)!r} mixes arrays with other values or missing arrays; "
            "ClickHouse arrays cannot be NULL (use an empty array or drop the row)"
        )
    if kind == "blob" or (kind == "timestamp" and not isinstance(series.dtype, np.dtype)):
        kind = "text"
    if kind == "text" and all(missing(v) for v in series.tolist()):
        kind = "double"
    return kind


def arrow_stream(df: pd.DataFrame) -> tuple[bytes, list[str]]:
    """``df`` as Arrow IPC stream bytes (ClickHouse input format ``ArrowStream``, which matches
    columns to the INSERT's by name) and the ClickHouse type of each column (``column_type``)."""
    return typed_stream(df, _load_kind, column_type, unsigned=True)


# ----------------------------------------------------------------------------------------------
# what both drivers share


class _ClickHouse(NoTransactions):
    """Everything but the driver calls: :meth:`_command`, :meth:`_arrow`, :meth:`_insert_arrow`."""

    dialect = "clickhouse"

    # ---- driver calls (subclasses) ----
    def _command(self, sql: str) -> None:
        raise NotImplementedError

    def _arrow(self, sql: str) -> pa.Table:
        raise NotImplementedError

    def _insert_arrow(self, table: str, columns: list[str], data: bytes) -> None:
        """Insert ``data`` (ArrowStream, columns named as in ``columns``) into ``columns`` of ``table``
        with :data:`INSERT_SETTINGS`."""
        raise NotImplementedError

    # ---- Backend ----
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run a statement; ``params`` are rendered as literals in place of the ``?`` (:func:`bind`)."""
        self._command(bind(sql, params))

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return its rows as tuples (NULL as None, arrays as lists, ``DateTime`` as
        naive UTC ``datetime``)."""
        bound = bind(sql, params)
        table = self._arrow(bound)
        columns = [column.to_pylist() for column in table.columns]
        if any(str(field.type) == "uint32" for field in table.schema):
            self._datetimes(bound, columns)
        return list(zip(*columns, strict=True)) if columns else []

    def _datetimes(self, sql: str, columns: list[list[Any]]) -> None:
        """ClickHouse writes ``DateTime`` to Arrow as its UInt32 seconds: turn those columns (found by
        ``DESCRIBE`` of the query, which does not run it) into ``datetime`` values."""
        try:
            types = [str(row[1]) for row in arrow_rows(self._arrow(f"DESCRIBE ({sql.strip().rstrip(';')})"))]
        except Exception:  # noqa: BLE001 - not a query DESCRIBE takes: leave the numbers
            return
        if len(types) != len(columns):
            return
        for i, ch_type in enumerate(types):
            if bare_type(ch_type).split("(")[0] == "DateTime":
                columns[i] = [
                    None if v is None else datetime.fromtimestamp(v, UTC).replace(tzinfo=None) for v in columns[i]
                ]

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of ``table`` (``schema``: a ClickHouse database; default the current one), their
        ClickHouse types translated by :func:`column_info`."""
        rows = self.fetchall(
            "SELECT name, type FROM system.columns "
            "WHERE database = coalesce(?, currentDatabase()) AND table = ? ORDER BY position",
            [schema, table],
        )
        if not rows:
            raise missing_table(table, schema, self.table_names(schema))
        return [column_info(str(name), str(ch_type)) for name, ch_type in rows]

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views in the database ``schema`` (default: the current database)."""
        rows = self.fetchall(
            "SELECT name FROM system.tables WHERE database = coalesce(?, currentDatabase()) ORDER BY name", [schema]
        )
        return [str(r[0]) for r in rows]

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """True if ``name`` is a view (``system.tables.engine``; ClickHouse's information_schema
        needs ``currentDatabase()``, not ``current_schema()``)."""
        rows = self.fetchall(
            "SELECT engine FROM system.tables WHERE database = coalesce(?, currentDatabase()) AND name = ?",
            [schema, name],
        )
        return bool(rows) and str(rows[0][0]).endswith("View")

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` (``ENGINE = MergeTree ORDER BY tuple()``) holding ``df``.  The rows are
        loaded under a staging name first and the table then renamed (or, with ``replace``, swapped
        in by ``EXCHANGE TABLES``), so a failed load leaves no table and a replaced one survives."""
        data, types = arrow_stream(df)
        staging = scratch_name("load")
        defs = ", ".join(f"{quote(str(c))} {t}" for c, t in zip(df.columns, types, strict=True))
        self._command(f"CREATE TABLE {quote(staging)} ({defs}) ENGINE = MergeTree ORDER BY tuple()")
        with dropped_on_failure(lambda: self._command(f"DROP TABLE IF EXISTS {quote(staging)}")):
            if len(df):
                self._insert_arrow(staging, [str(c) for c in df.columns], data)
            if replace and self.table_exists(table):
                self._swap_in(staging, table)
            else:
                self._command(f"RENAME TABLE {quote(staging)} TO {quote(table)}")

    def _swap_in(self, staging: str, table: str) -> None:
        """Put ``staging`` in the place of ``table`` and drop the old one; ``EXCHANGE TABLES`` is atomic
        (Atomic databases), else drop and rename."""
        try:
            self._command(f"EXCHANGE TABLES {quote(staging)} AND {quote(table)}")
        except Exception:  # noqa: BLE001 - database engines without EXCHANGE: drop and rename
            self._command(f"DROP TABLE IF EXISTS {quote(table)}")
            self._command(f"RENAME TABLE {quote(staging)} TO {quote(table)}")
        else:
            self._command(f"DROP TABLE IF EXISTS {quote(staging)}")

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append ``df`` to ``table`` (columns matched by name; ClickHouse converts the types).  A NULL
        for a non-Nullable column is an error, not a silent 0."""
        if not len(df):
            return
        data, _ = arrow_stream(df)
        self._insert_arrow(table, [str(c) for c in df.columns], data)


# ----------------------------------------------------------------------------------------------
# chdb: ClickHouse in this process


_OTHER_PATH = re.compile(r"already initialized with path '(?P<path>[^']*)'")


def _chdb_connect(path: str) -> Any:
    """``chdb.connect(path)``; chdb runs one database per process, so a second path is refused with
    an error that says so."""
    chdb = need("chdb", "clickhouse", "ClickHouse in-process (chdb://)")
    try:
        return _set_session(chdb.connect(path))  # type: ignore[attr-defined]
    except RuntimeError as exc:
        m = _OTHER_PATH.search(str(exc))
        if not m:
            raise
        raise InvalidParameter(
            f"{ENGINE} (chdb): this process already has chdb open on {m['path']!r}, and chdb runs one "
            f"database per process; close every connection to it before opening {path!r}, or use that path"
        ) from None


class ChdbBackend(_ClickHouse):
    """ClickHouse in-process through chdb: ``chdb://`` (in memory) or ``chdb:///path`` (a folder).

    chdb hosts one engine per process, bound to one path: any number of connections to that path may
    be open (they share its tables), but opening another path while one is open is refused
    (:class:`~sqlrp.core.errors.InvalidParameter`)."""

    registration = catalog.CHDB

    def __init__(self, path: str = ":memory:"):
        self.path = path
        self.url = "chdb://" if path == ":memory:" else f"chdb:///{path.lstrip('/')}"
        self.conn = _chdb_connect(path)

    @classmethod
    def open(cls, target: str, **options: object) -> ChdbBackend:
        """``chdb://`` (in memory), ``chdb:///path`` (an absolute folder) or ``chdb://path`` (relative)."""
        path = target[len("chdb:") :].lstrip("/") or ":memory:"
        return cls(("/" + path) if target.startswith("chdb:///") and path != ":memory:" else path)

    @classmethod
    def wrap(cls, conn: Any, **options: object) -> ChdbBackend:
        """Use an open chdb connection (``chdb.connect(...)``; the caller's: :meth:`close` leaves it open)."""
        self = cls.__new__(cls)
        self.path = None
        self.url = "chdb://(caller's connection)"
        self.conn = _set_session(conn)
        self.owns_connection = False
        return self

    def _command(self, sql: str) -> None:
        self.conn.query(sql, "CSV")

    def _arrow(self, sql: str) -> pa.Table:
        return self.conn.query(sql, "ArrowTable")

    def _insert_arrow(self, table: str, columns: list[str], data: bytes) -> None:
        cols = ", ".join(quote(c) for c in columns)
        settings = ", ".join(f"{name} = {value}" for name, value in INSERT_SETTINGS.items())
        insert = f"INSERT INTO {quote(table)} ({cols}) SETTINGS {settings}"
        with self.conn.send_insert(insert, "ArrowStream") as inserter:
            inserter.append(data)
            inserter.finish()

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame (chdb's own conversion: Nullable numbers as NaN / ``pd.NA``,
        arrays as NumPy arrays)."""
        return self.conn.query(sql, "DataFrame")

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result ``rows`` rows at a time.  Another query on a connection that is streaming
        ends the stream (chdb: "No active streaming query"), so the stream runs on a second
        connection to the same engine; only if none can be opened is the result fetched whole."""
        sibling = self._sibling()
        if sibling is None:
            yield from recut(iter([self.query_df(sql)]), int(rows))
            return
        with contextlib.closing(sibling), contextlib.closing(sibling.send_query(sql, "DataFrame")) as stream:
            yield from recut(iter(stream), int(rows))

    def _sibling(self) -> Any | None:
        """A second connection to this engine, in the same current database; None if chdb refuses."""
        import chdb

        database = self.fetchall("SELECT currentDatabase()")[0][0]
        candidates = [self.path] if self.path is not None else [":memory:"]
        if self.path is None:
            candidates.append(str(self.fetchall("SELECT getServerSetting('path')")[0][0]))
        for path in candidates:
            try:
                sibling = chdb.connect(path)
            except RuntimeError:
                continue
            sibling.query(f"USE {quote(str(database))}", "CSV")
            return _set_session(sibling)
        return None

    def close(self) -> None:
        if self.owns_connection and self.conn is not None:
            self.conn.close()
            self.conn = None


# ----------------------------------------------------------------------------------------------
# a ClickHouse server through clickhouse-connect (HTTP)

#: the URL query options that configure clickhouse-connect's client, by type (``compress``: a flag or a codec)
_CLIENT_OPTIONS = {
    "secure": bool,
    "verify": bool,
    "compress": str,
    "connect_timeout": int,
    "send_receive_timeout": int,
    "client_name": str,
    "ca_cert": str,
    "server_host_name": str,
}


class ClickHouseServerBackend(_ClickHouse):
    """A ClickHouse server through clickhouse-connect (its HTTP interface, port 8123; 8443 with
    ``?secure=true`` or ``clickhouse+https://``).

    URL query options ``secure``, ``verify``, ``compress``, ``connect_timeout``,
    ``send_receive_timeout``, ``client_name``, ``ca_cert``, ``server_host_name`` configure the client;
    any other option is a ClickHouse setting for the session (``?max_threads=8``)."""

    registration = catalog.CLICKHOUSE

    def __init__(self, url: URL):
        need("clickhouse_connect", "clickhouse", "a ClickHouse server (clickhouse://)")
        import clickhouse_connect

        kwargs, settings = client_options(url, _CLIENT_OPTIONS)
        # the driver part of clickhouse+https:// (not url.get_driver_name(): that loads a SQLAlchemy
        # dialect named clickhouse, which clickhouse-connect does not register)
        if url.drivername.partition("+")[2] == "https":
            kwargs["secure"] = True
        self._kwargs = {**kwargs, "settings": {**SESSION_SETTINGS, **settings}}
        self.url = url.render_as_string(hide_password=True)
        self.client = clickhouse_connect.get_client(**self._kwargs)
        self._streamer: Any = None

    @classmethod
    def open(cls, target: str, **options: object) -> ClickHouseServerBackend:
        """``clickhouse[+https]://user:password@host:port/database?option=value`` (class docstring)."""
        return cls(parse_url(target))

    @classmethod
    def wrap(cls, client: Any, **options: object) -> ClickHouseServerBackend:
        """Use an open clickhouse-connect client (the caller's: :meth:`close` leaves it open)."""
        self = cls.__new__(cls)
        self._kwargs = None
        self.url = "clickhouse://(caller's client)"
        self.client = client
        for name, value in SESSION_SETTINGS.items():
            client.set_client_setting(name, value)
        self._streamer = None
        self.owns_connection = False
        return self

    def _command(self, sql: str) -> None:
        self.client.command(sql)

    def _arrow(self, sql: str) -> pa.Table:
        return self.client.query_arrow(sql, use_strings=True)

    def _insert_arrow(self, table: str, columns: list[str], data: bytes) -> None:
        # raw_insert sends "INSERT INTO <table> (<columns>) FORMAT ArrowStream" with the data: the table
        # goes in as given (sqlrp's quoting) and the names quoted already pass its quote_identifier as-is
        self.client.raw_insert(
            quote(table), [quote(c) for c in columns], data, settings=dict(INSERT_SETTINGS), fmt="ArrowStream"
        )

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame (clickhouse-connect's conversion: Nullable floats as NaN, Nullable
        integers as ``pd.NA``, arrays as lists, ``DateTime`` as ``datetime64``)."""
        return self.client.query_df(sql)

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result block by block (``query_df_stream``), re-cut to ``rows`` rows.  A client
        that sqlrp opened streams on a second client without a session, so other queries may run while
        the caller reads the chunks (one HTTP session runs one query at a time)."""
        client = self._stream_client()
        with client.query_df_stream(sql) as stream:
            yield from recut(iter(stream), int(rows))

    def _stream_client(self) -> Any:
        if self._kwargs is None:
            return self.client
        if self._streamer is None:
            import clickhouse_connect

            self._streamer = clickhouse_connect.get_client(**self._kwargs, autogenerate_session_id=False)
        return self._streamer

    def close(self) -> None:
        if self._streamer is not None:
            self._streamer.close()
            self._streamer = None
        if self.owns_connection:
            self.client.close()


__all__ = ["ChdbBackend", "ClickHouseServerBackend", "bind", "column_info", "literal", "sql_type"]
