"""What the column-block plan (:mod:`sqlrp.pipeline.column_blocks`, issue 42) needs of a DuckDB connection:
a Parquet file's row groups column by column (its footers: ``parquet_metadata``), the memory and threads
the engine has now, a scratch database file to hold each block's partial sums, and scans that keep the
file's row order (``preserve_insertion_order``) so that the blocks line up row for row again
(``POSITIONAL JOIN`` of DuckDB tables: a lockstep scan of both, nothing held whole)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
from sqlglot import exp

from . import resources
from .scan_fit import ScanFit, reader_bytes


class ColumnBlocks:
    """Mixed into :class:`sqlrp.backends.duckdb.DuckDBBackend` (``_con``, ``_files`` are its)."""

    _con: duckdb.DuckDBPyConnection
    con: duckdb.DuckDBPyConnection
    _files: dict[str, tuple[str, str]]
    _scan_fits: dict[str, ScanFit]
    #: the block plan applies here: columns can be read a subset at a time and joined back by position
    reads_column_blocks = True

    def row_group_columns(self, table: str, reader: bool = False) -> list[dict[str, int]] | None:
        """Per row group of the Parquet file (or files) read as ``table``, each top-level column's bytes
        once decoded (``total_uncompressed_size`` in the footers), or with ``reader`` the buffers DuckDB's
        reader holds for its chunks (:func:`sqlrp.backends.scan_fit.reader_bytes` of each leaf's size on
        disk); ``None`` where ``table`` is no Parquet file read by :meth:`read_file` (a DuckDB table's scan
        holds vectors, never a whole row group)."""
        path, fmt = self._files.get(table, ("", ""))
        if fmt != "parquet":
            return None
        try:
            rows = self._con.execute(
                "SELECT file_name, row_group_id, split_part(path_in_schema, ', ', 1), total_uncompressed_size, "
                "total_compressed_size FROM parquet_metadata(?)",
                [path],
            ).fetchall()
        except duckdb.Error:
            return None
        groups: dict[tuple[str, int], dict[str, int]] = {}
        for name, group, column, size, disk in rows:
            held = reader_bytes(int(disk or 0)) if reader else int(size or 0)
            columns = groups.setdefault((name, group), {})
            columns[column] = columns.get(column, 0) + held
        return list(groups.values())

    @contextlib.contextmanager
    def scan_limit(self, memory: int | None, threads: int | None = None) -> Iterator[None]:
        """``memory_limit`` set to ``memory`` bytes (and ``threads``, unless ``--threads`` was given)
        meanwhile -- nothing where ``memory`` is ``None`` -- restored after."""
        if memory is None:
            yield
            return
        before = self._con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchall()[0]
        self._con.execute(f"SET memory_limit = '{int(memory) // 2**20}MiB'")
        if threads and not getattr(self, "_profile", (None,))[0]:
            self._con.execute(f"SET threads = {int(threads)}")
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):
                self._con.execute(f"SET memory_limit = {exp.Literal.string(str(before[0])).sql('duckdb')}")
                self._con.execute(f"SET threads = {int(before[1])}")

    def scan_fit(self, table: str) -> ScanFit | None:
        """The scan chosen for the Parquet file read as ``table`` on a small device
        (:func:`sqlrp.backends.scan_fit.fit_scan`), or ``None``."""
        return self._scan_fits.get(table)

    def scan_room(self) -> tuple[int, int]:
        """``(memory_limit in bytes, threads)`` as set on the connection now."""
        sql = "SELECT current_setting('memory_limit'), current_setting('threads')"
        limit, threads = self._con.execute(sql).fetchall()[0]  # all: no unfinished result left
        return resources.size_bytes(str(limit)) or 2**62, int(threads)

    @contextlib.contextmanager
    def scratch_database(self, path: Path, name: str, row_group_rows: int) -> Iterator[str]:
        """A DuckDB database file at ``path`` attached as ``name`` while the block runs (its tables
        spill to disk, not to memory), its tables in row groups of ``row_group_rows`` rows (a table's
        insert holds one whole: 122,880 rows by default); detached and removed (with its WAL) after,
        whatever happens."""
        literal = exp.Literal.string(str(path)).sql("duckdb")
        rows = int(row_group_rows)
        self.con.execute(f"ATTACH {literal} AS {exp.to_identifier(name).sql('duckdb')} (ROW_GROUP_SIZE {rows})")
        try:
            yield name
        finally:
            with contextlib.suppress(duckdb.Error):
                self.con.execute(f"DETACH {exp.to_identifier(name).sql('duckdb')}")
            for leftover in (path, path.with_name(path.name + ".wal")):
                leftover.unlink(missing_ok=True)

    @contextlib.contextmanager
    def keeping_row_order(self) -> Iterator[None]:
        """Statements meanwhile write rows in the order they are read (``preserve_insertion_order``):
        a block's partial sums in the file's row order, to be joined back by position."""
        before: Any = self._con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
        self._con.execute("SET preserve_insertion_order = true")
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):
                self._con.execute(f"SET preserve_insertion_order = {'true' if before else 'false'}")

    def statement_room(self) -> None:
        """Before a statement that holds its rows inside the engine while this process holds little (a
        search, a projection into a table): on a small device the engine's ``memory_limit`` is raised from
        the profile's half to 80% of what the budget leaves (a search of 1,000 queries on 500,000 x 128
        needs ~300 MB under 512 MB: at 196 MB DuckDB failed to pin a block), unless ``--memory-limit``
        was given."""
        budget = getattr(self, "budget", None)
        given = getattr(self, "_profile", (None, None, None))[1]
        if budget is None or not budget.small or given or budget.memory is None:
            return
        room = int(max(0, budget.memory - resources.resident()) * 0.8)
        current = resources.size_bytes(
            str(self._con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        )
        if current < room:
            self._con.execute(f"SET memory_limit = '{room // resources.MIB}MB'")

    @contextlib.contextmanager
    def common_subexpressions(self) -> Iterator[None]:
        """Statements meanwhile planned with DuckDB's common-subexpression pass, which sqlrp turns off for
        its projections (they have none to find).  The evaluation's distortion query repeats each
        feature's difference: without the pass it holds 330 MB more outside the memory limit (300 rows
        of 384 features: 586 MB against 257 MB peak RSS) -- a small device's whole memory."""
        before = self._con.execute("SELECT current_setting('disabled_optimizers')").fetchall()[0][0]
        self._con.execute("SET disabled_optimizers = ''")
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):
                self._con.execute(f"SET disabled_optimizers = {exp.Literal.string(str(before or '')).sql('duckdb')}")

    def positional_view(self, view: str, tables: list[str], select: list[str], check: str) -> None:
        """``view`` (temporary) over ``tables`` side by side, row ``i`` of each with row ``i`` of the others
        (``POSITIONAL JOIN``), selecting ``select``; a row where ``check`` is false raises instead."""
        joined = " POSITIONAL JOIN ".join(f"{t} AS b{i}" for i, t in enumerate(tables))
        stop = "ERROR('sqlrp column blocks: the partial sums are out of step')"
        self.con.execute(
            f"CREATE OR REPLACE TEMPORARY VIEW {exp.to_identifier(view).sql('duckdb')} AS SELECT "
            f"{', '.join(select)} FROM {joined} WHERE CASE WHEN {check} THEN TRUE ELSE {stop} END"
        )

    def drop_view(self, view: str) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.execute(f"DROP VIEW IF EXISTS temp.main.{exp.to_identifier(view).sql('duckdb')}")
