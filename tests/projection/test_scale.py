"""Streaming in chunks, incremental projection, id-range batches with a progress bar, and the
small-device profile (DuckDB threads + memory_limit)."""

from __future__ import annotations

import numpy as np
import pytest

import sqlrp
from sqlrp import api
from sqlrp.cli import main
from sqlrp.methods import make_projection, reference
from testkit.frames import wide_frame


@pytest.fixture
def data():
    return np.random.default_rng(11).normal(size=(57, 12))


def _table(db, name: str) -> np.ndarray:
    rows = db.fetchall(f'SELECT * FROM "{name}" ORDER BY "id"')
    return np.array([r[1:] for r in rows], dtype=float), np.array([r[0] for r in rows])


def test_chunks_stream_in_order(db, data):
    proj = make_projection("achlioptas", 12, 5, seed=0, s=3)
    db.write_dataframe("t", wide_frame(data))
    chunks = list(api.project(db, "t", "id", proj, chunk_rows=10))
    assert [len(c) for c in chunks] == [10, 10, 10, 10, 10, 7]
    got = np.vstack([c[[f"p{j}" for j in range(5)]].to_numpy() for c in chunks])
    np.testing.assert_allclose(got, reference.transform(proj, data), rtol=1e-9, atol=1e-12)
    assert np.concatenate([c["id"].to_numpy() for c in chunks]).tolist() == list(range(57))


def test_incremental_adds_only_missing_ids_and_is_idempotent(db, data):
    proj = make_projection("achlioptas", 12, 4, seed=0, s=1)
    db.write_dataframe("t", wide_frame(data[:30]))
    api.project(db, "t", "id", proj, into="out", incremental=True)  # creates
    api.project(db, "t", "id", proj, into="out", incremental=True)  # nothing new
    assert db.fetchall('SELECT count(*) FROM "out"')[0][0] == 30
    db.insert_frame("t", wide_frame(data).iloc[30:])
    api.project(db, "t", "id", proj, into="out", incremental=True, strategy="mailman")
    api.project(db, "t", "id", proj, into="out", incremental=True)
    Y, ids = _table(db, "out")
    assert ids.tolist() == list(range(57))
    np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)


def test_incremental_long_layout(db, data):
    from testkit.frames import long_frame

    proj = make_projection("achlioptas", 12, 4, seed=2, s="auto")
    frame = long_frame(data)
    db.write_dataframe("t", frame[frame["id"] < 20])
    api.project(db, "t", "id", proj, into="out", layout="long", incremental=True)
    db.insert_frame("t", frame[frame["id"] >= 20])
    api.project(db, "t", "id", proj, into="out", layout="long", incremental=True)
    api.project(db, "t", "id", proj, into="out", layout="long", incremental=True)
    Y, ids = _table(db, "out")
    assert ids.tolist() == list(range(57))
    np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)


def test_progress_batches_give_the_same_table(db, data, capsys):
    proj = make_projection("achlioptas", 12, 6, seed=4, s=3)
    db.write_dataframe("t", wide_frame(data))
    api.project(db, "t", "id", proj, into="out", progress=4)
    assert "projecting into out" in capsys.readouterr().err
    Y, ids = _table(db, "out")
    assert ids.tolist() == list(range(57))
    np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)


def test_progress_on_duckdb_follows_one_statement(data, capsys):
    """``progress=True`` on DuckDB: one statement watched through ``query_progress`` (no batches),
    a percentage bar that ends at 100, and the same table as without it."""
    with sqlrp.connect() as db:
        assert db.reports_progress
        proj = make_projection("achlioptas", 12, 6, seed=4, s=3)
        big = np.tile(data, (400, 1))  # 22,800 rows: more than one batch's worth if it batched
        db.write_dataframe("t", wide_frame(big))
        seen: list[float] = []
        original = db.execute_watched
        db.execute_watched = lambda sql, report: (seen.append(sql), original(sql, report))[1]
        api.project(db, "t", "id", proj, into="out", progress=True)
        assert len(seen) == 1 and seen[0].startswith("CREATE TABLE")
        err = capsys.readouterr().err
        assert "projecting into out" in err and "100%" in err
        Y, ids = _table(db, "out")
        assert ids.tolist() == list(range(len(big)))
        np.testing.assert_allclose(Y, reference.transform(proj, big), rtol=1e-9, atol=1e-12)


def test_watched_statement_failure_raises_and_leaves_nothing():
    import duckdb

    with sqlrp.connect() as db:
        db.execute("CREATE TABLE src AS SELECT 'not a number' AS s")
        before = db.fetchall("SELECT current_setting('enable_progress_bar_print')")[0][0]
        reports: list[float] = []
        with pytest.raises(duckdb.ConversionException):
            with db.transaction():
                db.execute_watched('CREATE TABLE "z" AS SELECT CAST(s AS DOUBLE) AS v FROM src', reports.append)
        assert not db.table_exists("z")
        assert 100.0 not in reports
        db.execute_watched('CREATE TABLE "z" AS SELECT 1.5 AS v', reports.append)
        assert reports[-1] == 100.0 and all(0 <= r <= 100 for r in reports)
        assert db.fetchall('SELECT v FROM "z"') == [(1.5,)]
        assert db.fetchall("SELECT current_setting('enable_progress_bar_print')")[0][0] is before  # settings reset
        db.execute("SET progress_bar_time = 1234")  # a user's own setting survives
        db.execute_watched('CREATE TABLE "z2" AS SELECT 2.5 AS v', reports.append)
        assert db.fetchall("SELECT current_setting('progress_bar_time')")[0][0] == 1234


def test_watched_statement_is_interrupted_when_the_caller_is():
    """An exception on the polling side (Ctrl-C is a KeyboardInterrupt) interrupts the running
    statement: the table it was making never appears, and the connection still works."""
    with sqlrp.connect(threads=2) as db:

        def stop(percent: float) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):  # minutes of work if it ran to the end
            db.execute_watched('CREATE TABLE "z" AS SELECT sum(sqrt(range)) AS v FROM range(20000000000)', stop)
        assert not db.table_exists("z")
        assert db.fetchall("SELECT 1 + 1")[0][0] == 2


def test_small_device_profile(tmp_path, data):
    path = str(tmp_path / "small.duckdb")
    with sqlrp.connect(f"duckdb:///{path}", threads=1, memory_limit="64MB") as db:
        assert db.fetchall("SELECT current_setting('threads')")[0][0] == 1
        db.write_dataframe("t", wide_frame(data))
        proj = make_projection("achlioptas", 12, 3, seed=0, s=1)
        api.project(db, "t", "id", proj, into="out")
        Y, _ = _table(db, "out")
        np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)


def test_cli_strategy_threads_progress(tmp_path, data, capsys):
    path = str(tmp_path / "cli.duckdb")
    with sqlrp.connect(path) as db:
        db.write_dataframe("t", wide_frame(data))
    args = ["project", "--db", path, "--table", "t", "--id-column", "id", "--k", "5", "--s", "1"]
    small = ["--threads", "1", "--memory-limit", "256MB"]
    assert main([*args, "--into", "out", "--strategy", "mailman", *small, "--progress"]) == 0
    assert "projecting into out" in capsys.readouterr().err  # asked for: stderr is no terminal under pytest
    assert main([*args, "--into", "out", "--incremental", "--no-progress"]) == 0
    with sqlrp.connect(path) as db:
        assert db.fetchall('SELECT count(*) FROM "out"')[0][0] == 57
        proj = sqlrp.load_projection(db, "t_achlioptas_k5_seed0")
        Y, _ = _table(db, "out")
    np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)
    assert main([*args, "--strategy", "lookup"]) == 0  # the wide table unnested (DuckDB, PostgreSQL)
    assert main([*args[:-4], "--method", "gaussian", "--k", "5", "--strategy", "pairs"]) == 2  # not signs
    capsys.readouterr()
    assert main(["compile", "--table", "t", "--id-column", "id", "--columns", "a,b,c,d", "--k", "3", "--s", "1",
                 "--strategy", "mailman", "--block", "2"]) == 0  # fmt: skip
    assert '"_m0"' in capsys.readouterr().out


def test_inserts_are_staged_where_insert_select_runs_serially(db, data):
    """PostgreSQL inserts through a parallel ``CREATE TEMPORARY TABLE AS`` (``parallel_insert``):
    batches and incremental runs give the same rows, and no staging table outlives its statement."""
    from sqlrp.dialects import get_dialect

    assert get_dialect(db.dialect).parallel_insert is (db.dialect == "duckdb")
    proj = make_projection("achlioptas", 12, 6, seed=5, s=3)
    frame = wide_frame(data)
    db.write_dataframe("t", frame[frame["id"] < 30])
    api.project(db, "t", "id", proj, into="out", progress=3)
    db.insert_frame("t", frame[frame["id"] >= 30])
    api.project(db, "t", "id", proj, into="out", incremental=True)
    api.project(db, "t", "id", proj, into="out", incremental=True)  # idempotent
    Y, ids = _table(db, "out")
    assert ids.tolist() == list(range(57))
    np.testing.assert_allclose(Y, reference.transform(proj, data), rtol=1e-9, atol=1e-12)
    staging = "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE '\\_sqlrp\\_staging%'"
    assert db.fetchall(staging)[0][0] == 0
