"""DuckDB backend: the embedded default (a file, or in memory).

By URL ``duckdb:///path.db`` (``duckdb://`` or ``duckdb:///:memory:`` in memory), a path ending in
``.duckdb`` / ``.db`` / ``.ddb``, ``:memory:``, no URL at all, or a ``duckdb.DuckDBPyConnection`` of
the caller's (:meth:`DuckDBBackend.wrap`).  The session settings sqlrp makes on it (the small-device
profile among them): :mod:`sqlrp.backends.duckdb_settings`."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import duckdb
import numpy as np
from sqlglot import exp

from ..core import files
from ..core.errors import InputError, need
from ..core.lazy import pd
from ..core.names import scratch_name
from ..core.nodes import ident
from ..dialects import get_dialect
from . import catalog
from .base import Backend, ColumnInfo, missing_table, url_path
from .duckdb_arrow import ArrowStreams
from .duckdb_blocks import ColumnBlocks
from .duckdb_settings import QUIET, configure, fit_row_groups, same_settings, setting_literal
from .scan_fit import ScanFit
from .values import recut

_ARRAY = re.compile(r"^(?P<elem>.+?)\[(?P<len>\d*)\]$")


class DuckDBBackend(ArrowStreams, ColumnBlocks, Backend):
    dialect = "duckdb"
    registration = catalog.DUCKDB

    def __init__(
        self,
        path: str = ":memory:",
        threads: int | None = None,
        memory_limit: str | None = None,
        temp_directory: str | None = None,
    ):
        self.path = path
        self.url = f"duckdb:///{path}"
        # a database file that is not there is made by the first statement that writes, not by
        # connecting: until then reads see an empty database, and a mistyped path leaves no file
        new_file = path and not path.startswith((":memory:", "md:")) and files.creatable(path)
        self._pending: str | None = os.path.abspath(path) if new_file else None
        self._profile = (threads, memory_limit, temp_directory)
        self._con = duckdb.connect(":memory:" if self._pending else path)
        self._setup(threads, memory_limit, temp_directory)
        self._quiet()

    def _quiet(self) -> None:
        """DuckDB's own bar (printed past its ``progress_bar_time``) only where asked: sqlrp's --progress
        bar covers the whole command (a caller's connection, :meth:`wrap`, keeps its own settings)."""
        for statement in QUIET:  # both: setting the print true turns the bar on again
            self._con.execute(statement)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, for anything that may write: a database file that was missing is made now
        (with sqlrp's settings, and the files read so far as tables again)."""
        if self._pending is not None:
            placeholder, self._con = self._con, duckdb.connect(self._pending)
            self._pending = None
            placeholder.close()
            read = self._files
            self._setup(*self._profile)
            self._quiet()
            for path, (_, fmt) in read.items():
                self._con.execute(self._view_sql(path, fmt))
            self._files = read
        return self._con

    @property
    def missing_file(self) -> str | None:
        """The path of a database file that was not there when connected and that nothing has written
        yet (the API's read-only calls, e.g. ``list_projections``, refuse it)."""
        return self._pending

    def _setup(self, threads: int | None, memory_limit: str | None, temp_directory: str | None = None) -> None:
        self.budget = configure(self._con, threads, memory_limit, temp_directory)
        self._in_tx = False
        self._files: dict[str, tuple[str, str]] = {}  # path -> (absolute path, format) read as a table
        self._scan_fits: dict[str, ScanFit] = {}  # path -> the scan chosen for it on a small device
        self._frames: dict[str, Any] = {}  # a registered frame's scratch name -> the frame (cursors see it too)
        self._pending_settings: dict[str, object] = {}
        self._pending_unregister: set[str] = set()  # relations an aborted transaction kept (bound)

    @classmethod
    def open(
        cls,
        target: str,
        threads: int | None = None,
        memory_limit: str | None = None,
        temp_directory: str | None = None,
    ) -> DuckDBBackend:
        """The database file ``target`` names (a path or ``duckdb:///path``), else one in memory."""
        return cls(url_path(target), threads, memory_limit, temp_directory)

    @classmethod
    def wrap(
        cls,
        con: duckdb.DuckDBPyConnection,
        threads: int | None = None,
        memory_limit: str | None = None,
        temp_directory: str | None = None,
    ) -> DuckDBBackend:
        """Use an open DuckDB connection (the caller's: :meth:`close` leaves it open).  sqlrp's
        session settings (``disabled_optimizers``, ``threads``, ``memory_limit``) apply to it."""
        self = cls.__new__(cls)
        self.path = "(caller's connection)"
        self.url = "duckdb:///(caller's connection)"
        self._con = con
        self._pending = None
        self.owns_connection = False
        self._setup(threads, memory_limit, temp_directory)
        return self

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        self.con.execute(sql, params) if params is not None else self.con.execute(sql)

    reports_progress = True
    binds_constants = True
    streams_arrow = True

    @contextlib.contextmanager
    def bound(self, constants: dict[str, Any]) -> Iterator[None]:
        """Each matrix as a registered relation ``(_r, c0 .. c{d-1})`` (NumPy columns, no copy through
        Python objects) for the block's statements: :func:`sqlrp.compiler.lists.binding`."""
        for name, W in constants.items():
            self.con.register(name, {"_r": np.arange(len(W)), **{f"c{i}": W[:, i].copy() for i in range(W.shape[1])}})
        try:
            yield
        finally:
            for name in constants:
                try:
                    self.con.unregister(name)
                except duckdb.Error:  # an aborted transaction refuses it: after the rollback, and the
                    self._pending_unregister.add(name)  # statement's own error goes through (not this one)

    def execute_watched(self, sql: str, report: Callable[[float], None], every: float = 0.25) -> None:
        """Run ``sql`` on a worker thread (DuckDB releases the GIL) and poll ``query_progress()``.

        One statement, so one plan and the whole table for the scan's parallel tasks: the id-range
        batches this replaces planned the statement once per batch and ran batches within one row
        group on one thread (``python -m bench.probes progress``; figures in docs/benchmarks.md,
        "Backends").  The percentage moves as row groups finish, so small tables jump.  Ctrl-C
        interrupts the statement; its error, if any, is raised here.  The connection's progress
        settings are put back as they were."""
        failed: list[BaseException] = []

        def run() -> None:
            try:
                self.con.execute(sql)
            except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
                failed.append(exc)

        settings = {"enable_progress_bar": "true", "enable_progress_bar_print": "false", "progress_bar_time": "0"}
        before = {name: self.con.execute(f"SELECT current_setting('{name}')").fetchone()[0] for name in settings}
        for name, value in settings.items():
            self.con.execute(f"SET {name} = {value}")
        worker = threading.Thread(target=run, name="sqlrp-statement", daemon=True)
        try:
            worker.start()
            while worker.is_alive():
                worker.join(every)
                done = self.con.query_progress()
                if done >= 0:
                    report(float(done))
        except BaseException:
            self.con.interrupt()
            worker.join()
            raise
        finally:
            self._restore(before)
        if failed:
            raise failed[0]
        report(100.0)

    @contextlib.contextmanager
    def reading_few_rows(self) -> Iterator[None]:
        # prefetching reads each Parquet column chunk whole, even for the length of the first array of a
        # file in one row group (figures in docs/benchmarks.md, "Backends")
        name = "disable_parquet_prefetching"
        before = self._con.execute(f"SELECT current_setting('{name}')").fetchone()[0]  # type: ignore[index]
        self._con.execute(f"SET {name} = true")
        try:
            yield
        finally:
            self._restore({name: before})

    @contextlib.contextmanager
    def streaming_reader(self) -> Iterator[None]:
        """One DuckDB thread while Python consumes a stream (``sqlrp fit``'s Arrow pass): the reader on one
        core and NumPy's BLAS on the other; with more threads DuckDB runs ahead and holds row groups, and
        the peak memory grows with the table (bench/lowrank.py: 1.3 GB at 1,000,000 x 256 with 2)."""
        before = self._con.execute("SELECT current_setting('threads')").fetchone()[0]  # type: ignore[index]
        self._con.execute("SET threads = 1")
        try:
            yield
        finally:
            self._restore({"threads": before})

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        cur = self._con.execute(sql, params) if params is not None else self._con.execute(sql)  # reads: no file made
        return cur.fetchall()

    def query_df(self, sql: str) -> pd.DataFrame:
        return self._con.execute(sql).df()

    def query_arrow(self, sql: str) -> Any:
        """The result as a ``pyarrow.Table``, handed over by DuckDB without a pandas copy."""
        need("pyarrow", "arrow", "Arrow output")
        return self._con.sql(sql).to_arrow_table()  # a relation: no DB-API copy of the rows

    def iter_arrow(self, sql: str, rows: int = 100_000) -> Iterator[Any]:
        """The result as ``pyarrow.Table`` chunks of at most ``rows`` rows, streamed from DuckDB's
        Arrow reader (record batches; no pandas on the way)."""
        pa = need("pyarrow", "arrow", "Arrow output")
        cur = self._cursor()
        try:
            reader = cur.sql(sql).to_arrow_reader(int(rows))
            for batch in reader:
                if batch.num_rows:
                    yield pa.Table.from_batches([batch])
        finally:
            cur.close()

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result: DuckDB hands over whole vectors (2,048 rows), re-cut to ``rows``.  The
        stream runs on a cursor of its own (another connection to the same database, in its own
        transaction): statements run on this one between chunks commit on their own, whenever and
        however the stream ends (issue 41; ``tests/reliability/test_stream_writes.py``)."""
        cur = self._cursor()
        try:
            res = cur.execute(sql)
            vectors = max(1, -(-int(rows) // 2048))

            def chunks() -> Iterator[pd.DataFrame]:
                while len(chunk := res.fetch_df_chunk(vectors)):
                    yield chunk

            yield from recut(chunks(), int(rows))
        finally:
            cur.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._in_tx:
            yield
            return
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        try:
            yield
        except GeneratorExit:  # abandoned (a signal in ``__exit__``), closed by the collector later
            with contextlib.suppress(duckdb.ConnectionException):  # closed: DuckDB dropped the transaction
                self._con.execute("ROLLBACK")
            raise
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")
        finally:
            self._in_tx = False
            if self._pending_settings:  # refused inside the aborted transaction: put them back now
                self._restore(self._pending_settings)
            for name in list(self._pending_unregister):
                with contextlib.suppress(duckdb.Error):
                    self.con.unregister(name)
                self._pending_unregister.discard(name)

    def _restore(self, settings: dict[str, object]) -> None:
        """SET each setting back to its value; an aborted transaction refuses SET, so then keep them
        for the end of the transaction (and let the statement's own error through)."""
        try:
            for name, value in settings.items():
                self._con.execute(f"SET {name} = {setting_literal(value)}")  # settings: no file made
            self._pending_settings = {}
        except duckdb.Error:
            self._pending_settings = settings

    def columns(self, table: str, schema: str | None = None, catalog: str | None = None) -> list[ColumnInfo]:
        """Columns of ``[catalog.][schema.]table``; a catalog is an attached database.  A name that
        is no table but ends like a data file (``emb.parquet``, ``part-*.csv``) is that file, read
        through a temporary view of the same name (:meth:`read_file`)."""
        rows = self._lookup(table, schema, catalog)
        if not rows and schema is None and catalog is None:
            rows = self._lookup(table, "main", "temp")  # a file read before, or the caller's temp view
            if not rows and files.file_format(table) is not None:
                self.read_file(table)
                rows = self._lookup(table, "main", "temp")
        if not rows:
            raise self._missing(table, schema, catalog)
        out = []
        for name, dtype in rows:
            m = _ARRAY.match(dtype)
            if m:
                out.append(ColumnInfo(name, dtype, m["elem"], int(m["len"]) if m["len"] else None))
            else:
                out.append(ColumnInfo(name, dtype))
        return out

    def _missing(self, table: str, schema: str | None, catalog: str | None) -> InputError:
        """The error for ``[catalog.][schema.]table`` not found: a catalog that is not attached, a schema
        that is not there, or the tables that are, each named (issue 41)."""
        if catalog is not None:
            attached = [r[0] for r in self.fetchall("SELECT database_name FROM duckdb_databases()")]
            if catalog not in attached:
                return InputError(
                    f"no table named {'.'.join(p for p in (catalog, schema, table) if p)!r}: no catalog (attached "
                    f"database) named {catalog!r}; attached: {', '.join(sorted(attached))}. ATTACH it first, "
                    "or leave --catalog out"
                )
        database = "coalesce(?, current_database())"
        names = f"SELECT schema_name FROM duckdb_schemas() WHERE database_name = {database}"
        schemas = [r[0] for r in self.fetchall(names, [catalog])]
        names = f"SELECT table_name FROM information_schema.tables WHERE table_catalog = {database} AND lower("
        tables = [
            r[0]
            for r in self.fetchall(names + "table_schema) = lower(coalesce(?, current_schema()))", [catalog, schema])
        ]
        return missing_table(table, schema, tables, reads_files=catalog is None, catalog=catalog, schemas=schemas)

    def _lookup(self, table: str, schema: str | None, catalog: str | None) -> list[tuple[str, str]]:
        # DuckDB matches quoted names ignoring ASCII case ("Out" is "out"): so does the lookup
        key = get_dialect("duckdb").identifier_key
        found = self.fetchall(
            "SELECT table_name, table_schema, column_name, data_type FROM information_schema.columns "
            "WHERE lower(table_name) = lower(?) AND lower(table_schema) = lower(coalesce(?, current_schema())) "
            "AND table_catalog = coalesce(?, current_database()) ORDER BY ordinal_position",
            [table, schema, catalog],
        )
        want = (key(table), key(schema) if schema is not None else None)
        return [(c, t) for n, s, c, t in found if (key(n), key(s) if schema is not None else None) == want]

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor (DuckDB: another connection to the same database) that sees the files read as
        tables and the frames registered: temporary views and registrations belong to one connection, so
        they are made again on it."""
        cur = self._con.cursor()
        same_settings(self._con, cur)
        for path, (_, fmt) in self._files.items():
            cur.execute(self._view_sql(path, fmt))
        for name, frame in self._frames.items():
            cur.register(name, frame)
        return cur

    def _view_sql(self, path: str, fmt: str) -> str:
        name = exp.Table(this=ident(path), db=exp.to_identifier("main"), catalog=exp.to_identifier("temp"))
        query = exp.select(exp.Star()).from_(exp.Table(this=files.reader(path, fmt)))
        return f"CREATE OR REPLACE TEMPORARY VIEW {name.sql('duckdb')} AS {query.sql('duckdb')}"

    def read_file(self, path: str, fmt: str | None = None) -> str:
        """Make the file (or glob) ``path`` a table named ``path``: a temporary view over
        ``read_parquet`` / ``read_csv`` / ``read_json`` of its absolute path (a quoted literal), in
        the format ``fmt``, its ending, or what its first bytes say (:func:`sqlrp.core.files.sniff`).
        Returns the name to use as a table.  Missing files are an :class:`InputError`."""
        files.check_exists(path)
        fmt = fmt or files.sniff(path)
        try:
            self._con.execute(self._view_sql(path, fmt))
        except duckdb.Error as exc:
            raise InputError(f"DuckDB cannot read {path!r} as {fmt}: {str(exc).splitlines()[0]}") from None
        self._files[path] = (files.absolute(path), fmt)
        if fmt == "parquet" and self.budget.small:
            given = getattr(self, "_profile", (None, None))  # the options given win over the fit
            fit = fit_row_groups(self._con, self._files[path][0], self.budget, threads=given[0], memory_limit=given[1])
            if fit is not None:
                self._scan_fits[path] = fit
        return path

    def estimate_rows(self, table: str, schema: str | None = None, catalog: str | None = None) -> int | None:
        """``duckdb_tables().estimated_size`` (kept by the storage; views have none); a Parquet file's
        row count from its footers; a frame registered for the call (:meth:`frame_table`), its length,
        as the table it would be written to would say (the same strategy either way)."""
        if schema is None and catalog is None and table in self._frames:
            return len(self._frames[table])
        if schema is None and catalog is None and self._files.get(table, ("", ""))[1] == "parquet":
            with contextlib.suppress(duckdb.Error):
                return int(
                    self.fetchall("SELECT sum(num_rows) FROM parquet_file_metadata(?)", [self._files[table][0]])[0][0]
                )
        rows = self.fetchall(
            "SELECT estimated_size FROM duckdb_tables() WHERE table_name = ? "
            "AND schema_name = coalesce(?, current_schema()) AND database_name = coalesce(?, current_database())",
            [table, schema, catalog],
        )
        return int(rows[0][0]) if len(rows) == 1 and rows[0][0] is not None else None

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        name = ident(table).sql("duckdb")
        view = "__sqlrp_frame"
        self.con.register(view, df)
        try:
            with self.transaction():
                if replace:
                    self.con.execute(f"DROP TABLE IF EXISTS {name}")
                self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM {view}")
        finally:
            self.con.unregister(view)

    @contextlib.contextmanager
    def frame_table(self, frame: Any) -> Iterator[str]:
        """``frame`` registered with the connection (a temporary view over the caller's memory: pandas,
        polars and Arrow are read in place) under a scratch name, unregistered on exit."""
        name = scratch_name("frame")
        self.con.register(name, frame)
        self._frames[name] = frame  # estimate_rows gives its length (a view has no estimate); cursors register it
        try:
            yield name
        finally:
            self._frames.pop(name, None)
            self.con.unregister(name)

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        view = "__sqlrp_frame"
        cols = ", ".join(ident(c).sql("duckdb") for c in df.columns)
        self.con.register(view, df)
        try:
            self.con.execute(f"INSERT INTO {ident(table).sql('duckdb')} ({cols}) SELECT {cols} FROM {view}")
        finally:
            self.con.unregister(view)

    def insert_columns(self, table: str, columns: dict[str, Any]) -> None:
        view = "__sqlrp_columns"
        arrays = {c: v for c, v in columns.items() if isinstance(v, np.ndarray)}
        scalars = [v for v in columns.values() if not isinstance(v, np.ndarray)]
        names = ", ".join(ident(c).sql("duckdb") for c in columns)
        values = ", ".join(ident(c).sql("duckdb") if c in arrays else "?" for c in columns)
        self.con.register(view, arrays)
        try:
            self.con.execute(f"INSERT INTO {ident(table).sql('duckdb')} ({names}) SELECT {values} FROM {view}", scalars)
        finally:
            self.con.unregister(view)

    def close(self) -> None:
        if self.owns_connection:
            self._con.close()
