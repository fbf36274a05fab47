"""Issue 41, "Lost data": writes made while a chunk stream is open on the same connection were rolled
back on PostgreSQL when the stream was closed early.  One test per instance of the issue -- each write
(``to_table``, ``project(into=...)``, ``create_projection``, ``build_index``) between two chunks, then
the stream ended by ``close()``, ``break``, garbage collection or read to the end -- on PostgreSQL (a
real server), DuckDB and SQLite: the write is there with NumPy's values, and the chunks read equal
NumPy's too (:mod:`testkit.stream_writes`).  The interleavings as a class: ``tests/fuzz/test_fuzz_interleave.py``.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pandas as pd
import pytest

import sqlrp
from testkit.stream_writes import WRITES, check_chunks, make_table, projection, write

ROWS, CHUNK = 300, 100
ENDINGS = ("close", "break", "gc", "exhausted")


@pytest.fixture(params=["postgres", "duckdb", "sqlite"])
def engine(request, tmp_path):
    """A connection to each engine that streams chunks from a connection other work shares."""
    if request.param == "postgres":
        yield request.getfixturevalue("pg")
        return
    db = sqlrp.connect(str(tmp_path / ("s.sqlite" if request.param == "sqlite" else "d.duckdb")))
    yield db
    db.close()


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("kind", WRITES)
def test_a_write_between_chunks_outlives_the_stream(engine, kind, ending):
    db = engine
    X = make_table(db, "t", ROWS, seed=3)
    P = projection(8, seed=5)
    chunks: list[pd.DataFrame] = []
    if ending == "break":  # the loop's iterator is dropped, and so closed, when the loop is left
        for chunk in sqlrp.projected(db, "t", "id", P).chunks(CHUNK):
            chunks.append(chunk)
            made = write(db, kind, "out", "t", X, seed=11)
            break
    else:
        it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
        chunks.append(next(it))
        made = write(db, kind, "out", "t", X, seed=11)
        if ending == "close":
            it.close()
        elif ending == "gc":
            del it
            gc.collect()
        else:
            chunks.extend(it)
            assert sum(map(len, chunks)) == ROWS
    assert len(chunks[0]) == CHUNK
    check_chunks(chunks, P, X)
    if made is None:  # refused (SQLite has no index): nothing of it is there
        assert "out" not in db.table_names()
        return
    made.check(db)
    # and from another connection, so committed (SQLite and DuckDB: the file, after this one is closed)
    if db.dialect == "postgres":
        with sqlrp.connect(db.url) as other:
            made.check(other)
    else:
        path = db.path
        db.close()
        with sqlrp.connect(path) as again:
            made.check(again)


def test_postgres_stream_reads_on_after_other_statements(pg):
    """After another statement ended the stream's transaction the rows not read yet come from the
    cursor PostgreSQL kept: two streams interleaved with writes hand over every row, in order."""
    X = make_table(pg, "t", ROWS, seed=1)
    P, Q = projection(8, seed=2), projection(4, seed=3)
    a = sqlrp.projected(pg, "t", "id", P).chunks(70)
    b = sqlrp.projected(pg, "t", "id", Q).chunks(120)
    got_a, got_b = [next(a)], [next(b)]
    made = write(pg, "to_table", "out", "t", X, seed=4)
    got_a.append(next(a))
    X2 = make_table(pg, "t", ROWS, seed=9)  # the source rewritten under the open streams
    got_b.extend(b)
    got_a.extend(a)
    check_chunks(got_a, P, X)
    check_chunks(got_b, Q, X)
    assert sum(map(len, got_a)) == sum(map(len, got_b)) == ROWS
    made.check(pg)
    check_chunks(list(sqlrp.projected(pg, "t", "id", P).chunks(100)), P, X2)
    assert pg.fetchall("SELECT count(*) FROM pg_cursors") == [(0,)]
    assert pg.conn.info.transaction_status == 0  # idle


def test_postgres_caller_connection_writes_outlive_the_stream(pg_url):
    """On a caller's psycopg connection (``wrap``), the caller's own statements between chunks commit
    on their own: the stream holds no transaction there."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS t, mine")
        db = sqlrp.connect(conn)
        X = make_table(db, "t", ROWS, seed=1)
        P = projection(8, seed=2)
        it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
        first = next(it)
        conn.execute("CREATE TABLE mine AS SELECT 1 AS x")
        it.close()
        check_chunks([first], P, X)
        assert conn.execute("SELECT count(*) FROM mine").fetchone() == (1,)
        conn.execute("DROP TABLE t, mine")
        db.close()


def test_sqlite_stream_keeps_its_rows_when_its_table_is_replaced(tmp_path):
    """SQLite refused replacing a table while a stream was open on the connection ("database table is
    locked"): the stream is read into memory first, and hands over the rows of the table it began on."""
    db = sqlrp.connect(str(tmp_path / "s.sqlite"))
    X = make_table(db, "t", ROWS, seed=1)
    P = projection(8, seed=2)
    it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
    chunks = [next(it)]
    X2 = make_table(db, "t", ROWS, seed=7)
    made = write(db, "replace_table", "t2", "t", X2, seed=3)
    chunks.extend(it)
    check_chunks(chunks, P, X)
    assert sum(map(len, chunks)) == ROWS
    made.check(db)
    assert not np.array_equal(X, X2)
    db.close()


@pytest.fixture(params=["postgres", "sqlalchemy-postgres", "sqlalchemy-sqlite"])
def shared(request, tmp_path):
    """PostgreSQL, and SQLAlchemy's backend (whose stream held a transaction later statements joined)
    on PostgreSQL and on a SQLite file."""
    import sqlalchemy as sa

    if request.param == "postgres":
        yield request.getfixturevalue("pg")
        return
    if request.param == "sqlalchemy-postgres":
        engine = sa.create_engine(request.getfixturevalue("pg").url.replace("postgresql://", "postgresql+psycopg://"))
    else:
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'sa.sqlite'}")
    db = sqlrp.connect(engine)
    yield db
    db.close()
    engine.dispose()


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_table_written_between_chunks_outlives_the_stream_here_too(shared, ending):
    db = shared
    X = make_table(db, "t", ROWS, seed=3)
    P = projection(8, seed=5)
    it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
    chunks = [next(it)]
    made = write(db, "to_table", "out", "t", X, seed=11)
    made_too = write(db, "create_projection", "cp", "t", X, seed=12)
    chunks.append(next(it))
    if ending in ("close", "break"):
        it.close()
    elif ending == "gc":
        del it
        gc.collect()
    else:
        chunks.extend(it)
    check_chunks(chunks, P, X)
    made.check(db)
    made_too.check(db)


def test_a_stream_that_fails_later_loses_no_write(shared):
    """The query fails past the rows read (a division by zero at id 250): the write made between the
    chunks stays, and the stream raises the query's error instead of handing over more rows."""
    db = shared
    if db.dialect == "sqlite":
        pytest.skip("SQLite's 1 / 0 is NULL, not an error")
    X = make_table(db, "t", ROWS, seed=3)
    it = db.iter_chunks('SELECT "id", 1 / ("id" - 250) AS "x" FROM "t"', rows=100)  # no sort: rows as read
    first = next(it)
    made = write(db, "to_table", "out", "t", X, seed=11)
    with pytest.raises(Exception, match="division by zero"):
        list(it)
    assert sorted(first["id"].tolist()) == list(range(100))
    made.check(db)


@pytest.mark.parametrize("ending", ENDINGS)
def test_hyper_writes_between_chunks(ending, tmp_path):
    """Tableau Hyper runs one query at a time on a connection: a write between two chunks failed
    ("The connection is not ready").  Now the stream is read into memory first and the writes run;
    Hyper has no index (refused before anything is written)."""
    try:
        import tableauhyperapi  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and tableauhyperapi is not installed ({exc})")
        pytest.skip(f"tableauhyperapi is not installed ({exc}): pip install 'sqlrp[hyper]'")
    db = sqlrp.connect(str(tmp_path / "h.hyper"))
    try:
        X = make_table(db, "t", ROWS, seed=3)
        P = projection(8, seed=5)
        it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
        chunks = [next(it)]
        made = [write(db, kind, f"o_{kind}", "t", X, seed=11) for kind in WRITES]
        if ending in ("close", "break"):
            it.close()
        elif ending == "gc":
            del it
            gc.collect()
        else:
            chunks.extend(it)
            assert sum(map(len, chunks)) == ROWS
        check_chunks(chunks, P, X)
        assert made[-1] is None and "o_build_index" not in db.table_names()
        for w in made[:-1]:
            w.check(db)
    finally:
        db.close()


def test_postgres_stream_dropped_while_the_connection_is_busy(pg):
    """A stream the garbage collector finalises while the connection is in use (its lock held, as
    inside another statement of this thread) must not wait for the lock -- it would wait forever --
    nor be forgotten: its cursor is closed at the connection's next statement."""
    X = make_table(pg, "t", ROWS, seed=1)
    P = projection(8, seed=2)
    it = sqlrp.projected(pg, "t", "id", P).chunks(CHUNK)
    first = next(it)
    with pg._conn.lock:
        del it
        gc.collect()
    assert len(pg._unclosed) == 1
    made = write(pg, "to_table", "out", "t", X, seed=4)
    assert pg.fetchall("SELECT count(*) FROM pg_cursors") == [(0,)]
    check_chunks([first], P, X)
    made.check(pg)


def _failed_write_leaves_nothing(db) -> None:
    X = make_table(db, "t", ROWS, seed=3)
    P = projection(8, seed=5)
    it = sqlrp.projected(db, "t", "id", P).chunks(CHUNK)
    chunks = [next(it)]
    failed = write(db, "failing", "bad", "t", X, seed=11)
    made = write(db, "to_table", "out", "t", X, seed=12)
    chunks.append(next(it))
    it.close()
    check_chunks(chunks, P, X)
    failed.check(db)
    made.check(db)


def test_a_write_that_fails_between_chunks_leaves_nothing(engine):
    """A write that fails once begun (its sums overflow) while a stream is open leaves no table, and
    the next write and the stream go on."""
    _failed_write_leaves_nothing(engine)


def test_a_write_that_fails_between_chunks_leaves_nothing_here_too(shared):
    """SQLAlchemy: the failed write joined the stream's transaction, was not rolled back by itself,
    and the stream committed its half-written table when closed."""
    _failed_write_leaves_nothing(shared)
