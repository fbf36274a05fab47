"""DuckDB's side of ``project``'s Arrow route (:mod:`sqlrp.pipeline.arrow_route`): a query's rows as a
stream of Arrow record batches read on a cursor of their own, and a stream of batches made in Python read
back as a relation of the connection -- neither held whole."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import duckdb

from ..core.errors import need
from ..core.names import scratch_name


class ArrowStreams:
    """Mixed into :class:`sqlrp.backends.duckdb.DuckDBBackend` (``con``, ``_cursor`` and
    ``_pending_unregister`` are its)."""

    con: duckdb.DuckDBPyConnection
    _pending_unregister: set[str]

    def _cursor(self) -> duckdb.DuckDBPyConnection:  # pragma: no cover - DuckDBBackend's
        raise NotImplementedError

    @contextlib.contextmanager
    def arrow_reader(self, sql: str, rows: int) -> Iterator[Any]:
        """The rows of ``sql`` as a ``pyarrow.RecordBatchReader`` of batches of at most ``rows`` rows, read
        on a cursor of its own (the connection stays free for the statement that consumes them)."""
        need("pyarrow", "arrow", "Arrow output")
        cur = self._cursor()
        try:
            yield cur.sql(sql).to_arrow_reader(int(rows))
        finally:
            cur.close()

    @contextlib.contextmanager
    def arrow_relation(self, reader: Any) -> Iterator[str]:
        """The ``pyarrow.RecordBatchReader`` ``reader`` as a relation of the connection, under a scratch
        name that is yielded (read once, by one statement), unregistered on exit."""
        name = scratch_name("arrow")
        self.con.register(name, reader)
        try:
            yield name
        finally:
            try:
                self.con.unregister(name)
            except duckdb.Error:  # an aborted transaction refuses it: after the rollback (as ``bound``)
                self._pending_unregister.add(name)
