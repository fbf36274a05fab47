"""A query's result streamed from a cursor on a connection that other work shares (issue 41).

A stream must never own what other statements on its connection run in: SQLite refuses a ``DROP TABLE``
while a read is pending on the connection and aborts the read when a rollback changes the schema, and
a SQLAlchemy stream held a transaction that later statements joined -- and lost when it rolled back.
Such a backend therefore reads an open stream to the end into memory (:meth:`Stream.drain`) before
anything else runs on the connection, and the stream hands the rest over from there: the rows are
those of the query as it was when it began, and the other statement runs as if no stream were open.
Reading a stream to the end without other work between costs nothing more than before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Stream:
    """A ``cursor`` (anything with ``fetchmany``, ``fetchall`` and ``close``: a DB-API cursor, a
    SQLAlchemy result) read ``rows`` at a time by :meth:`next_rows`, until :meth:`drain` reads the
    rest; ``finish(ok)`` then runs once, when the cursor is done with (``ok``: no error met)."""

    def __init__(self, cursor: Any, finish: Callable[[bool], None] | None = None) -> None:
        self.cursor = cursor
        self.rest: list[Any] | None = None  # the rows read by drain(), handed over from ``at``
        self.at = 0
        self.error: BaseException | None = None  # the query's error met by drain(), raised at the next rows
        self._finish = finish

    def next_rows(self, rows: int) -> list[Any]:
        """The next ``rows`` rows at most (none: the result is read), from the cursor or from what
        :meth:`drain` read."""
        if self.error is not None:
            raise self.error
        if self.rest is None:
            return list(self.cursor.fetchmany(rows))
        batch = self.rest[self.at : self.at + rows]
        self.at += len(batch)
        return batch

    def drain(self) -> None:
        """Read the rows not fetched yet into memory, and let go of the cursor (then ``finish``)."""
        if self.rest is not None:
            return
        try:
            self.rest = list(self.cursor.fetchall())
        except Exception as exc:  # noqa: BLE001 - the query's error, raised to the stream's reader
            self.rest, self.error = [], exc
        self.close(self.error is None)

    def close(self, ok: bool = True) -> None:
        """Close the cursor and run ``finish(ok)``, once."""
        finish, self._finish = self._finish, None
        try:
            self.cursor.close()
        finally:
            if finish is not None:
                finish(ok)
