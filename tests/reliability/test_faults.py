"""Fault suite: ``kill -9`` at random moments while sqlrp stores projections and materialises,
replaces and tops up output tables, on a DuckDB file and on PostgreSQL.  After every kill: the
database opens, the registry is consistent (every stored projection loads, with all its rows), the
output table is absent or complete and exact, and a re-run succeeds.

``SQLRP_FAULT_KILLS`` sets the kills per backend and mode (3 by default, as CI runs it; the issue's
full run is 20: ``SQLRP_FAULT_KILLS=20 python -m pytest tests/reliability/test_faults.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest

import sqlrp
from testkit.frames import wide_frame

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("SQLRP_FAULT_KILLS", "3"))
N, D, K = 20_000, 96, 24

# the child: store a projection under a fresh name, then materialise (create/replace/top up)
CHILD = f"""
import sys, sqlrp
url, mode, name = sys.argv[1:4]
db = sqlrp.connect(url)
print("connected", flush=True)
sqlrp.create_projection(db, name, "achlioptas", d={D}, k={K}, s=3, seed=11)
if mode == "incremental":
    sqlrp.project(db, "t", "id", "rp", into="o", incremental=True, progress=4)
else:
    sqlrp.project(db, "t", "id", "rp", into="o", replace=True)
print("done", flush=True)
"""


def _kill_during(url: str, mode: str, delay: float | None) -> float:
    """Start the child, kill -9 it ``delay`` seconds after it connected (``None``: let it finish);
    the seconds it ran after connecting, negative if it was killed while still working."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, url, mode, f"killed_{uuid.uuid4().hex[:8]}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout.readline().strip() == "connected"
    started = time.perf_counter()
    if delay is None:
        assert child.wait(timeout=600) == 0
        return time.perf_counter() - started
    time.sleep(delay)
    killed = child.poll() is None
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    return -delay if killed else delay


def _consistent(url: str, X: np.ndarray, want: np.ndarray, partial_ok: bool) -> None:
    db = sqlrp.connect(url)
    try:
        for name in sqlrp.list_projections(db)["name"]:
            proj = sqlrp.load_projection(db, name)  # every stored projection loads whole
            entries = db.fetchall("SELECT count(*) FROM sqlrp_linear_entry WHERE projection = ?", [name])[0][0]
            assert entries == proj.linear.nnz
        if "o" in db.table_names():
            got = db.query_df('SELECT * FROM "o" ORDER BY "id"')
            ids = got["id"].to_numpy()
            assert len(np.unique(ids)) == len(ids)  # never a row twice
            if not partial_ok:
                assert len(ids) == N  # absent or complete
            np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want[ids], rtol=1e-9, atol=1e-12)
    finally:
        db.close()


def _exercise(url: str, mode: str) -> None:
    X = np.random.default_rng(12).normal(size=(N, D))
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(X))
        sqlrp.create_projection(db, "rp", "achlioptas", d=D, k=K, s=3, seed=11)
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
    rng = np.random.default_rng(13)
    duration = _kill_during(url, mode, None)  # an undisturbed run: the kills land inside its span
    _consistent(url, X, want, partial_ok=False)
    if mode == "incremental":  # the kills hit top-ups of half the ids: time one of those, not the first run
        with sqlrp.connect(url) as db:
            db.execute('DELETE FROM "o" WHERE "id" % 2 = 0')
        duration = _kill_during(url, mode, None)
        _consistent(url, X, want, partial_ok=False)
    if mode != "incremental":
        with sqlrp.connect(url) as db:
            db.execute('DROP TABLE "o"')  # the kills then hit a first creation and later replacements
    killed = 0
    for _ in range(KILLS):
        delay = float(rng.uniform(0.05, 0.95)) * duration
        for _attempt in range(8):  # a run that ended before its kill (quicker than the timed one): again, sooner
            if mode == "incremental":
                with sqlrp.connect(url) as db:
                    db.execute('DELETE FROM "o" WHERE "id" % 2 = 0')  # every top-up has half the ids to add
            landed = _kill_during(url, mode, delay) < 0
            # top-ups commit batch by batch: a kill leaves whole batches, never a half batch or a duplicate
            _consistent(url, X, want, partial_ok=(mode == "incremental"))
            if landed:
                killed += 1
                break
            delay /= 2
    assert killed == KILLS  # every kill landed while work was under way
    with sqlrp.connect(url) as db:  # the re-run completes the output
        sqlrp.project(
            db, "t", "id", "rp", into="o", incremental=(mode == "incremental"), replace=(mode != "incremental")
        )
    _consistent(url, X, want, partial_ok=False)


@pytest.mark.parametrize("mode", ["replace", "incremental"])
def test_kill_9_on_a_duckdb_file(tmp_path, mode):
    _exercise(f"duckdb:///{tmp_path / 'faults.duckdb'}", mode)


@pytest.mark.parametrize("mode", ["replace", "incremental"])
def test_kill_9_on_postgres(pg_url, mode):
    schema = f"f_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    try:
        _exercise(f"{pg_url}{sep}options=-csearch_path%3D{schema}", mode)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_postgres_cancels_the_query_of_a_client_killed_mid_statement(pg_url):
    """Issue 13, C1: the server kept a killed client's projection running.  sqlrp's sessions ask
    PostgreSQL to poll the client while a statement runs (client_connection_check_interval)."""
    tag = f"sqlrp_fault_{uuid.uuid4().hex[:8]}"
    code = (
        f"import sqlrp; db = sqlrp.connect({pg_url!r}); print('go', flush=True); "
        f"db.execute('SELECT pg_sleep(60) AS {tag}')"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert child.stdout.readline().strip() == "go"
    query = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active' AND pid <> pg_backend_pid()"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        deadline = time.time() + 10
        while admin.execute(query, [f"%{tag}%"]).fetchone()[0] == 0:  # the statement is running
            assert time.time() < deadline
            time.sleep(0.1)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        deadline = time.time() + 10
        while admin.execute(query, [f"%{tag}%"]).fetchone()[0]:
            assert time.time() < deadline, "the server still runs the dead client's statement"
            time.sleep(0.2)


# ---- files: a killed write leaves nothing the next run must clean by hand (issue 42, item 3) ----

FILE_CHILD = """
import sys, sqlrp
db = sqlrp.connect("duckdb://")
print("connected", flush=True)
sqlrp.project(db, sys.argv[1], "id", method="achlioptas", k=48, s=1, seed=3, into=sys.argv[2], replace=True)
print("done", flush=True)
"""


def test_a_killed_file_write_leaves_no_litter_after_the_next_write(tmp_path) -> None:
    """``kill -9`` while ``project`` writes a Parquet file: its hidden staging file may stay behind (no
    process is left to remove it), but the next write to the same output removes it -- its writer is
    dead -- while a live writer's staging file is left alone.  The output is then whole and exact."""
    source = tmp_path / "in.parquet"
    frame = wide_frame(np.random.default_rng(5).normal(size=(200_000, 64)))
    frame.to_parquet(source)
    out = tmp_path / "out.parquet"
    kills = 0
    for delay in (0.3, 0.8, 1.5):
        child = subprocess.Popen(
            [sys.executable, "-c", FILE_CHILD, str(source), str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert child.stdout.readline().strip() == "connected"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        kills += child.wait() == -signal.SIGKILL
    assert kills
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is no process's now: a writer killed before it could clean up
    (tmp_path / f".out.parquet.sqlrp-{dead.pid}-{'b' * 12}.tmp").write_bytes(b"x" * 1000)
    (tmp_path / f".out.parquet.sqlrp-{dead.pid}-{'b' * 12}.sqlrp.json").write_text("{}")
    (tmp_path / f".other.parquet.sqlrp-{dead.pid}-{'b' * 12}.tmp").write_bytes(b"another output's: not ours")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live writer's file
    try:
        mine = tmp_path / f".out.parquet.sqlrp-{live.pid}-{'a' * 12}.tmp"
        mine.write_bytes(b"in progress")
        db = sqlrp.connect("duckdb://")
        sqlrp.project(db, str(source), "id", method="achlioptas", k=48, s=1, seed=3, into=str(out), replace=True)
        db.close()
        left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
        assert left == sorted([mine.name, f".other.parquet.sqlrp-{dead.pid}-{'b' * 12}.tmp"]), left
    finally:
        live.kill()
        live.wait()
    got = __import__("pandas").read_parquet(out).sort_values("id")
    from sqlrp.registry.transfer import read_projection

    p = read_projection(str(out) + ".sqlrp.json")
    X = frame.sort_values("id").drop(columns="id").to_numpy(dtype=float)
    want = sqlrp.methods.reference.transform(p, X)
    np.testing.assert_allclose(got.drop(columns="id").to_numpy(dtype=float), want, rtol=1e-9, atol=1e-9)
