"""PostgreSQL backend (psycopg 3), by URL ``postgresql://user@host:port/db`` (``postgres://`` and
``postgresql+psycopg://`` too), a libpq key/value DSN (``host=... dbname=...``), or a
``psycopg.Connection`` of the caller's (:meth:`PostgresBackend.wrap`)."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidParameter
from ..core.lazy import pd
from ..core.nodes import ident
from ..dialects.postgres import ADVISORY_LOCK
from . import catalog
from .base import Backend, ColumnInfo, memory_size, missing_table
from .placeholders import quoting_tokens
from .typenames import KIND_TYPES
from .values import py, value_kind

if TYPE_CHECKING:
    import psycopg

# what psycopg's placeholder parser must not see: string literals, quoted identifiers and comments
# (standard_conforming_strings: no backslash escapes), and the ``?`` and ``%`` outside them
_TOKENS = quoting_tokens("?%")

#: the column type of each kind of DataFrame column (:func:`~sqlrp.backends.values.value_kind`)
_PG_TYPES = {**KIND_TYPES, "timestamp": "text"}

# Results of fixed-width numeric columns are read as binary COPY and parsed by NumPy in one pass
# (:func:`_binary_columns`).  The format (PostgreSQL 15 docs, COPY, "Binary Format"): an 11-byte
# signature, a 32-bit flags field, a 32-bit header-extension length and that many bytes; then per
# row a 16-bit field count and, per field, a 32-bit length (-1 for NULL) and the value in network
# byte order; a 16-bit -1 ends the data.  Type OIDs are pg_type's (src/include/catalog/pg_type.dat).
_BINARY_TYPES = {20: ">i8", 21: ">i2", 23: ">i4", 700: ">f4", 701: ">f8"}  # int8 int2 int4 float4 float8
_BINARY_HEADER = 11 + 4 + 4

#: numbers for the streams' cursor names: two streams open on one connection need two names
_STREAM_NUMBERS = itertools.count()


class _Stream:
    """One open :meth:`PostgresBackend.iter_chunks`: its ``WITH HOLD`` cursor, and the error its
    transaction's commit met when other work ended that transaction early (raised at its next chunk)."""

    def __init__(self, cursor: psycopg.ServerCursor) -> None:
        self.cursor = cursor
        self.error: BaseException | None = None


class PostgresBackend(Backend):
    dialect = "postgres"
    registration = catalog.POSTGRES

    def __init__(
        self, url: str, threads: int | None = None, memory_limit: str | None = None, temp_directory: str | None = None
    ):
        """``threads``: max_parallel_workers_per_gather; ``memory_limit``: work_mem; ``temp_directory``
        is DuckDB's setting and is not used here (the server spills into its own temp_tablespaces)."""
        import psycopg

        self.url = url
        self._conn = psycopg.connect(url, autocommit=True)
        self._setup(threads, memory_limit)

    @classmethod
    def open(
        cls, target: str, threads: int | None = None, memory_limit: str | None = None, temp_directory: str | None = None
    ) -> PostgresBackend:
        """A URL (``postgres[ql][+psycopg]://``, handed to libpq as ``postgresql://``) or a libpq DSN."""
        if "://" in target:
            target = "postgresql" + target[len(target.split("://", 1)[0]) :]  # libpq reads the URL itself
        return cls(target, threads, memory_limit, temp_directory)

    @classmethod
    def wrap(
        cls,
        conn: psycopg.Connection,
        threads: int | None = None,
        memory_limit: str | None = None,
        temp_directory: str | None = None,
    ) -> PostgresBackend:
        """Use an open psycopg 3 connection (the caller's: :meth:`close` leaves it open).  It must
        not be inside a transaction; sqlrp switches it to autocommit and runs its own."""
        import psycopg

        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raise InvalidParameter("the psycopg connection is inside a transaction: commit or roll back first")
        self = cls.__new__(cls)
        self.url = "postgresql://(caller's connection)"
        conn.autocommit = True
        self._conn = conn
        self.owns_connection = False
        self._setup(threads, memory_limit)
        return self

    def _setup(self, threads: int | None, memory_limit: str | None) -> None:
        self._stream_tx: _Stream | None = None  # the stream whose transaction is open (iter_chunks)
        self._unclosed: list[_Stream] = []  # streams dropped while the connection was busy: closed next
        # LLVM JIT compiles every generated expression: for a d = 784, s = 3 projection (52k terms)
        # it ran for minutes without answering cancels (bench/run.py, PostgreSQL 15; docs/benchmarks.md);
        # plain interpretation is quick.  sqlrp's statements are all such expressions: JIT off.
        self.execute("SET jit = off")
        # a client that dies (kill -9, a closed laptop) must not leave its projection running on the
        # server: PostgreSQL 14+ polls the socket while a query runs and cancels it once the client
        # is gone ("client_connection_check_interval"; by default it notices only when it next writes)
        if self.conn.info.server_version >= 140000:
            self.execute("SET client_connection_check_interval = '1s'")
        if threads:
            self.execute(f"SET max_parallel_workers_per_gather = {max(0, int(threads) - 1)}")
        if memory_limit:
            size = memory_size(memory_limit).upper().replace("IB", "B").replace(" ", "").replace("KB", "kB")
            self.execute(f"SET work_mem = '{size}'")

    @staticmethod
    def _pg(sql: str) -> str:
        """sqlrp's ``?`` placeholders as psycopg's ``%s``, and every ``%`` doubled: psycopg reads
        ``%`` anywhere in the text, quoted identifiers too (a table named ``a%b`` or ``a?b`` with
        parameters would otherwise fail or bind into the name)."""

        def token(m: re.Match[str]) -> str:
            text = m.group(0)
            return "%s" if text == "?" else text.replace("%", "%%")

        return _TOKENS.sub(token, sql)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        with self.conn.cursor() as cur:
            if params is None:
                cur.execute(sql.encode())  # bytes: no placeholder parsing of user identifiers
            else:
                cur.execute(self._pg(sql), params)

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        with self.conn.cursor() as cur:
            if params is None:
                cur.execute(sql.encode())
            else:
                cur.execute(self._pg(sql), params)
            return cur.fetchall()

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame.  All-numeric results (a projection's id and outputs) come as
        binary COPY parsed into NumPy columns (:func:`_binary_columns`); anything else, or a result
        holding a NULL, as rows.  50,000 x 200: ``PYTHONPATH=. python -m bench.probes pg-read``."""
        columns = self.query_columns(sql)
        if columns is not None:
            return pd.DataFrame(columns, copy=False)
        with self.conn.cursor() as cur:
            cur.execute(sql.encode())
            names = [d.name for d in cur.description]
            return pd.DataFrame.from_records(cur.fetchall(), columns=names)

    def query_columns(self, sql: str) -> dict[str, np.ndarray] | None:
        """The result of ``sql`` as NumPy columns, through ``COPY (sql) TO STDOUT (FORMAT BINARY)``;
        None (nothing read) unless every column is a distinct name of type int2/int4/int8/float4/
        float8, and None (read, then dropped) if the data holds a NULL.  The types come from the
        query wrapped in ``LIMIT 0``, which the server plans but does not run: a projection is
        planned twice."""
        query = sql.strip().rstrip(";").encode()
        with self.conn.cursor() as cur:
            cur.execute(b"SELECT * FROM (" + query + b") AS sqlrp_result LIMIT 0")
            names = [d.name for d in cur.description or ()]
            types = [_BINARY_TYPES.get(d.type_code) for d in cur.description or ()]
        if not names or None in types or len(set(names)) != len(names):
            return None
        data = bytearray()
        with self.conn.cursor() as cur, cur.copy(b"COPY (" + query + b") TO STDOUT (FORMAT BINARY)") as copy:
            for block in copy:
                data += block
        return _binary_columns(data, names, types)  # type: ignore[arg-type]

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result ``rows`` rows at a time through a server-side ``WITH HOLD`` cursor.

        A stream never owns the transaction other work on the connection runs in (issue 41: a
        ``to_table`` between two chunks ran inside the stream's transaction, and closing the stream
        early rolled the table back).  The cursor is declared in a transaction of its own, which
        streams the rows as they are fetched; any other statement on the connection (:attr:`conn`)
        first commits that transaction -- PostgreSQL then keeps the rows not read yet for the cursor
        ("DECLARE", WITH HOLD: materialised at the commit) -- so that statement, and everything
        after it, runs and commits on its own.  On a caller's connection (:meth:`wrap`), which the
        caller may use directly, the transaction is committed as soon as the cursor is declared.
        Closing the stream (read to the end, ``close()``, ``break``, garbage collection) closes the
        cursor and commits or rolls back only its own transaction, which holds nothing else."""
        import psycopg

        conn = self.conn  # another stream's transaction is ended first
        stream = _Stream(conn.cursor(name=f"sqlrp_stream_{next(_STREAM_NUMBERS)}", withhold=True))
        try:
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                conn.execute(b"BEGIN")
                self._stream_tx = stream
            stream.cursor.execute(sql.encode())
            if not self.owns_connection:
                self._end_stream_tx()
            names = [d.name for d in stream.cursor.description or ()]
            while True:
                if self._stream_tx not in (None, stream):  # no FETCH inside another stream's transaction
                    self._end_stream_tx()
                if stream.error is not None:
                    raise stream.error
                batch = stream.cursor.fetchmany(rows)
                if not batch:
                    break
                yield pd.DataFrame.from_records(batch, columns=names)
        finally:
            self._close_stream(stream)

    @property
    def conn(self) -> psycopg.Connection:
        """The psycopg connection, for every statement but a stream's own ``FETCH``: a stream's
        transaction still open is committed first (:meth:`iter_chunks`) and the cursors of streams
        dropped while the connection was busy are closed, so that nothing runs inside a stream's
        transaction."""
        dropped, self._unclosed = self._unclosed, []
        for stream in dropped:  # the owner of the open transaction first: closed, not committed with its rows
            if stream is self._stream_tx:
                self._close_stream(stream)
        if self._stream_tx is not None:
            self._end_stream_tx()
        for stream in dropped:
            self._close_stream(stream)  # busy again (another thread): kept for the next statement
        return self._conn

    def _end_stream_tx(self) -> None:
        """Commit the open stream's transaction: its cursor keeps the rows not read yet.  A commit
        that fails (the rest of the query raised, e.g. a float overflow) rolls back that transaction
        only -- it held nothing else -- and the error is the stream's, raised at its next chunk."""
        stream, self._stream_tx = self._stream_tx, None
        if stream is None:
            return
        try:
            self._conn.execute(b"COMMIT")
        except Exception as exc:  # noqa: BLE001 - the stream's error, not the caller's statement's
            stream.error = exc
            self._idle()

    def _idle(self) -> None:
        """Roll back a transaction left open or failed, if any (nothing but a stream's is ever open here)."""
        import psycopg

        if self._conn.info.transaction_status in (
            psycopg.pq.TransactionStatus.INTRANS,
            psycopg.pq.TransactionStatus.INERROR,
        ):
            self._conn.execute(b"ROLLBACK")

    def _close_stream(self, stream: _Stream) -> None:
        """Close ``stream``'s cursor and end its transaction if it is still open (a commit after a
        clean read, else a rollback: it holds nothing else).  Dropped by the garbage collector while
        the connection is in use (a statement of this thread, or another thread's), the stream is
        closed at the connection's next statement instead (:attr:`conn`)."""
        if self._conn.closed:
            return
        if not self._conn.lock.acquire(blocking=False):
            self._unclosed.append(stream)
            return
        self._conn.lock.release()
        owner = self._stream_tx is stream
        if owner:
            self._stream_tx = None
        try:
            stream.cursor.close()
        except Exception:  # noqa: BLE001 - a failed transaction: rolled back below, the cursor with it
            pass
        if owner:
            import psycopg

            if self._conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
                self._conn.execute(b"COMMIT")
            self._idle()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def lock(self, key: str) -> None:
        self.fetchall(ADVISORY_LOCK, [key])

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        rows = self.fetchall(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
            "       CASE WHEN t.typcategory = 'A' THEN format_type(t.typelem, NULL) END "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE c.relname = ? AND n.nspname = coalesce(?, current_schema()) "
            "  AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
            "ORDER BY a.attnum",
            [table, schema],
        )
        if not rows:
            raise missing_table(table, schema, self.table_names(schema))
        return [ColumnInfo(name, dtype, elem) for name, dtype, elem in rows]

    def estimate_rows(self, table: str, schema: str | None = None, catalog: str | None = None) -> int | None:
        """``pg_class.reltuples``, which VACUUM, ANALYZE and CREATE INDEX keep; -1 (never counted) is ``None``."""
        rows = self.fetchall(
            "SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relname = ? AND n.nspname = coalesce(?, current_schema())",
            [table, schema],
        )
        return int(rows[0][0]) if len(rows) == 1 and rows[0][0] is not None and rows[0][0] >= 0 else None

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        name = ident(table).sql("postgres")
        defs = []
        for column in df.columns:
            defs.append(f"{ident(str(column)).sql('postgres')} {_pg_type(df[column])}")
        with self.transaction():
            if replace:
                self.execute(f"DROP TABLE IF EXISTS {name}")
            self.execute(f"CREATE TABLE {name} ({', '.join(defs)})")
            self.insert_frame(table, df)

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        cols = ", ".join(ident(str(c)).sql("postgres") for c in df.columns)
        with (
            self.conn.cursor() as cur,
            cur.copy(f"COPY {ident(table).sql('postgres')} ({cols}) FROM STDIN".encode()) as copy,
        ):
            # NumPy's dtypes only: pandas' masked ones (Int64, Float64, boolean) hold NA, which is NULL, not
            # the text NaN that to_csv would write (an Int64 with NA was "NaN" for a bigint, issue 41)
            if len(df.columns) and all(
                isinstance(df[c].dtype, np.dtype) and df[c].dtype.kind in "fiub" for c in df.columns
            ):
                # numbers only: the whole frame as one block of COPY text, written by pandas in C (floats
                # in their shortest exact form, NaN as NaN), faster than a write_row per row
                # (``python -m bench.probes pg-copy``, figures in docs/benchmarks.md; the round trip of
                # every bit: tests/io/test_outputs.py)
                # float32 columns widened first: pandas writes a float32 as its own shortest text
                # (-0.0062582386), which a double column would read as another number than the float32's
                narrow = [c for c in df.columns if df[c].dtype.kind == "f" and df[c].dtype.itemsize < 8]
                wide = df.astype(dict.fromkeys(narrow, np.float64))
                block = wide.to_csv(sep="\t", header=False, index=False, na_rep="NaN", lineterminator="\n")
                copy.write(block)
                return
            for row in df.itertuples(index=False, name=None):
                copy.write_row([py(v) for v in row])

    def insert_columns(self, table: str, columns: dict[str, Any]) -> None:
        """Rows given column by column (NumPy arrays of one length, scalars repeated), without pandas:
        the registry is written on every ``project --into`` and importing pandas cost that command more
        than the rows do.  Integer and finite float columns (a matrix's) go as one block of COPY text,
        floats as Python's ``repr`` (the shortest text that reads back as the same double; a float32
        widened exactly first); anything else (NULL, NaN, booleans) row by row through psycopg."""
        lengths = {len(v) for v in columns.values() if isinstance(v, np.ndarray)}
        if len(lengths) != 1:
            raise ValueError(f"postgres: insert_columns wants arrays of one length, got lengths {sorted(lengths)}")
        (n,) = lengths
        cols = ", ".join(ident(c).sql("postgres") for c in columns)
        plain = all(_plain(v) for v in columns.values())
        with (
            self.conn.cursor() as cur,
            cur.copy(f"COPY {ident(table).sql('postgres')} ({cols}) FROM STDIN".encode()) as copy,
        ):
            if plain:
                texts = [_copy_texts(v, n) for v in columns.values()]
                copy.write("".join("\t".join(row) + "\n" for row in zip(*texts, strict=True)))
                return
            arrays = [v.tolist() if isinstance(v, np.ndarray) else [v] * n for v in columns.values()]
            for row in zip(*arrays, strict=True):
                copy.write_row([py(v) for v in row])

    def close(self) -> None:
        if self.owns_connection:
            self._conn.close()
        else:  # the caller's connection: left idle, without sqlrp's cursors
            with contextlib.suppress(Exception):
                self.conn  # noqa: B018 - ends a stream's transaction, closes dropped streams


def _plain(column: Any) -> bool:
    """A column :meth:`PostgresBackend.insert_columns` writes as text itself: integers, finite floats,
    or a scalar number or string."""
    if isinstance(column, np.ndarray):
        return column.dtype.kind in "iu" or (column.dtype.kind == "f" and bool(np.isfinite(column).all()))
    return isinstance(column, str) or (
        isinstance(column, (int, float, np.integer, np.floating))
        and not isinstance(column, (bool, np.bool_))
        and bool(np.isfinite(column))
    )


def _copy_texts(column: Any, n: int) -> list[str]:
    """A :func:`_plain` column as ``n`` COPY texts: ``repr`` of each float (``tolist`` gives Python
    floats, a float32 widened exactly), integers as they are, a string with COPY's escapes."""
    if isinstance(column, np.ndarray):
        return [repr(v) if isinstance(v, float) else str(v) for v in column.tolist()]
    if isinstance(column, str):
        return [column.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")] * n
    return [repr(float(column)) if isinstance(column, (float, np.floating)) else str(int(column))] * n


def _pg_type(series: pd.Series) -> str:
    """The PostgreSQL type of a DataFrame column (:func:`~sqlrp.backends.values.value_kind`)."""
    return _PG_TYPES[value_kind(series)]


def _binary_columns(data: bytearray, names: list[str], types: list[str]) -> dict[str, np.ndarray] | None:
    """Binary COPY ``data`` of fixed-width columns as native NumPy arrays, or None if a value is
    NULL.  Rows without NULLs all have the same size, so the body is one structured array; every
    row's field count and every field's length are checked, which proves each row starts where the
    parse assumed (row 0 starts after the header; a row whose fields all have their full width ends
    where the next begins), so a NULL anywhere is detected rather than misread."""
    if len(data) < _BINARY_HEADER + 2 or data[:11] != b"PGCOPY\n\xff\r\n\x00" or data[-2:] != b"\xff\xff":
        raise ValueError("postgres: not a binary COPY stream")
    start = _BINARY_HEADER + int.from_bytes(data[15:19], "big")
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i, t in enumerate(types):
        fields += [(f"len{i}", ">i4"), (f"val{i}", t)]
    row = np.dtype(fields)
    body = memoryview(data)[start : len(data) - 2]
    if len(body) % row.itemsize:
        return None
    rows = np.frombuffer(body, dtype=row)
    if not (rows["count"] == len(types)).all():
        return None
    for i, t in enumerate(types):
        if not (rows[f"len{i}"] == np.dtype(t).itemsize).all():
            return None
    native = [np.dtype(t).newbyteorder("=") for t in types]
    return {name: rows[f"val{i}"].astype(native[i]) for i, name in enumerate(names)}
