"""Fuzzer of writes interleaved with open chunk streams on one connection (issue 41, "Lost data"): on
PostgreSQL a write between two chunks ran inside the stream's transaction and was rolled back when the
stream was closed early.

Hypothesis draws a program of steps on one connection: open streams (``projected(...).chunks(n)``,
several at once), read a chunk of one, write (``to_table``, ``to_table(replace=True)``,
``project(into=...)``, ``create_projection``, ``build_index``, a ``to_table`` that fails), rewrite
the streams' source table, and end a stream (``close()``, dropped and garbage-collected, read to the
end).  The oracle
(:mod:`testkit.stream_writes`):

- every write that returned normally is there with NumPy's values after every step, once every
  stream is gone, and from a new connection afterwards (so committed); a write that failed once
  begun (its sums overflow) left nothing;
- every chunk equals the NumPy reference of the table as it was when its stream began (the first
  ``next``), each chunk as long as asked but the last, and a stream read to the end has every row.

DuckDB, SQLite (files), SQLAlchemy's backend (a SQLite file) and PostgreSQL (a real server, a schema
per example).  CI: a few derandomized
programs per engine (``testkit.fuzz_tables.fuzz_settings``); ``SQLRP_FUZZ_EXAMPLES=N`` for a long run.
"""

from __future__ import annotations

import dataclasses
import gc
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from testkit.fuzz_tables import fuzz_settings
from testkit.stream_writes import Written, check_chunks, make_table, projection, write

ROWS = 60
SIZES = (7, 25, 60, 100)
#: the writes (``failing``: one that fails once begun, and must leave nothing), the index last (the
#: slowest; SQLite refuses it)
KINDS = ("to_table", "replace_table", "project_into", "create_projection", "failing", "build_index")

step = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(SIZES)),
    st.tuples(st.just("next"), st.integers(0, 3)),
    st.tuples(st.just("write"), st.sampled_from(KINDS)),
    st.tuples(st.just("end"), st.integers(0, 3), st.sampled_from(["close", "gc", "exhaust"])),
    st.tuples(st.just("rewrite"), st.integers(0, 10**6)),
)
#: every program opens a stream and reads a chunk first: writes then meet an open stream
program = st.lists(step, min_size=2, max_size=10).map(lambda steps: [("open", 25), ("next", 0), *steps])


@dataclasses.dataclass
class Stream:
    """An open stream of the program: its iterator, projection, chunk size, what it read, and the
    source's features when it began (its first ``next``)."""

    it: Any
    P: Any
    rows: int
    chunks: list[pd.DataFrame] = dataclasses.field(default_factory=list)
    X: np.ndarray | None = None
    done: bool = False

    def read(self, X_now: np.ndarray) -> None:
        """One more chunk (or the end), checked against the reference."""
        if self.done:
            return
        if self.X is None:
            self.X = X_now
        try:
            chunk = next(self.it)
        except StopIteration:
            self.finish()
            return
        before = sum(map(len, self.chunks))
        assert len(chunk) == min(self.rows, ROWS - before), (len(chunk), self.rows, before)
        self.chunks.append(chunk)
        check_chunks(self.chunks, self.P, self.X)

    def finish(self) -> None:
        """The stream ended by itself: every row was handed over."""
        self.done = True
        assert sum(map(len, self.chunks)) == ROWS


def run_program(db: Any, steps: list[tuple], reopen: Any) -> None:
    """Run ``steps`` on ``db`` and check the oracle; ``reopen()`` is a new connection to the same data."""
    X = make_table(db, "t", ROWS, seed=0)
    streams: list[Stream] = []
    made: dict[str, Written] = {}
    counter = iter(range(1, 10**6))
    for op, *args in steps:
        live = [s for s in streams if not s.done]
        if op == "open":
            P = projection(3 + next(counter) % 5, seed=next(counter))
            streams.append(Stream(sqlrp.projected(db, "t", "id", P).chunks(args[0]), P, args[0]))
        elif op == "next" and live:
            live[args[0] % len(live)].read(X)
        elif op == "write":
            kind = args[0]
            n = next(counter)
            tables = [name for name, w in made.items() if w.kind in ("to_table", "replace_table", "project_into")]
            name = tables[n % len(tables)] if kind == "replace_table" and tables else f"o{n}"
            done = write(db, kind, name, "t", X, seed=n)
            if done is not None:
                made[name] = done
        elif op == "rewrite":  # the streams' source replaced under them
            X = make_table(db, "t", ROWS, seed=args[0])
        elif op == "end" and live:
            s = live[args[0] % len(live)]
            how = args[1]
            if how == "exhaust":
                if s.X is None:
                    s.X = X
                s.chunks.extend(s.it)
                check_chunks(s.chunks, s.P, s.X)
                s.finish()
            elif how == "close":
                s.it.close()
                s.done = True
            else:
                s.it = None
                gc.collect()
                s.done = True
        for w in made.values():
            w.check(db)
    for s in streams:  # the streams still open: dropped
        s.it = None
    gc.collect()
    for w in made.values():
        w.check(db)
    with reopen() as again:
        for w in made.values():
            w.check(again)


def _files(tmp_path_factory: Any, ending: str) -> Any:
    def fresh() -> str:
        return str(tmp_path_factory.mktemp("interleave") / f"db{ending}")

    return fresh


@pytest.mark.parametrize("engine", ["duckdb", "sqlite", "sqlalchemy"])
def test_fuzz_writes_between_chunks_embedded(engine, tmp_path_factory) -> None:
    """DuckDB and SQLite files, and SQLAlchemy's backend on a SQLite file."""
    fresh = _files(tmp_path_factory, ".duckdb" if engine == "duckdb" else ".sqlite")

    def connect(path: str) -> Any:
        if engine != "sqlalchemy":
            return sqlrp.connect(path)
        import sqlalchemy as sa

        return sqlrp.connect(sa.create_engine(f"sqlite:///{path}"))

    @fuzz_settings({"duckdb": 5, "sqlite": 6, "sqlalchemy": 4}[engine])
    @given(steps=program)
    def run(steps: list[tuple]) -> None:
        path = fresh()
        db = connect(path)

        def reopen() -> Any:  # a new connection once this one let go of the file (DuckDB: one writer)
            db.close()
            return connect(path)

        try:
            run_program(db, steps, reopen)
        finally:
            db.close()

    run()


def test_fuzz_writes_between_chunks_postgres(pg_url) -> None:
    import psycopg

    sep = "&" if "?" in pg_url else "?"

    @fuzz_settings(5)
    @given(steps=program)
    def run(steps: list[tuple]) -> None:
        schema = f"il_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{pg_url}{sep}options=-csearch_path%3D{schema}"
        db = sqlrp.connect(url)
        try:
            run_program(db, steps, lambda: sqlrp.connect(url))
            assert db.fetchall("SELECT count(*) FROM pg_cursors") == [(0,)]
        finally:
            db.close()
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA "{schema}" CASCADE')

    run()
