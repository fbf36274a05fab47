"""Issue 42, item 3: a write killed at any point (``kill -9``: no cleanup runs) leaves nothing a later run
must clean by hand.  Staging files (every output format, and ``projections export``) and scratch tables
(DuckDB, SQLite, PostgreSQL) carry the writer's pid and host tag; the next command that writes there
removes a dead writer's and leaves a live one's, and another host's, alone.

The children kill themselves with SIGKILL at a chosen moment -- when a staging file has bytes in it, when
a scratch table was just created -- so that every kill lands mid-write; the code they run is sqlrp's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg
import pytest

import sqlrp
from sqlrp.backends.staging import sweep_scratch_tables
from sqlrp.core.files import staging_path, sweep_staging
from sqlrp.core.names import host_tag, orphaned, scratch_name
from sqlrp.registry.transfer import read_projection
from testkit.frames import wide_frame

ROOT = Path(__file__).resolve().parents[2]

# the child: a watcher thread kills the process once the staging file of the output holds bytes (or, where the
# write outruns it, the rename into place does)
FILE_CHILD = """
import os, signal, sys, threading, time
from pathlib import Path
import sqlrp
source, out, what = sys.argv[1:4]
target = Path(out)

def watch():
    while True:
        for f in target.parent.iterdir():
            try:
                if f.name.startswith("." + target.name + ".sqlrp-") and f.stat().st_size > 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            except FileNotFoundError:  # renamed into place meanwhile
                pass
        time.sleep(0.0005)

def killed(*args, **kwargs):  # a write too fast for the watcher: die where the rename would make it whole
    os.kill(os.getpid(), signal.SIGKILL)

db = sqlrp.connect("duckdb://")
os.replace = killed
threading.Thread(target=watch, daemon=True).start()
if what == "export":
    p = sqlrp.create_projection(db, "big", "gaussian", d=3000, k=300, seed=1)
    sqlrp.export_projection(db, "big", out, replace=True)
else:
    sqlrp.project(db, source, "id", method="achlioptas", k=8, s=1, seed=3, into=out, replace=True)
print("finished", flush=True)
"""


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def _run_child(code: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A Parquet file large enough that writing its projection takes a while (40,000 x 24)."""
    X = np.random.default_rng(7).normal(size=(40_000, 24))
    path = tmp_path_factory.mktemp("in") / "in.parquet"
    wide_frame(X).to_parquet(path)
    return path, X


@pytest.mark.parametrize("ending", [".parquet", ".csv", ".json"])
def test_a_file_write_killed_mid_write_is_swept_by_the_next(tmp_path, source, ending):
    path, X = source
    out = tmp_path / f"out{ending}"
    child = _run_child(FILE_CHILD, str(path), str(out), "project")
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = [p.name for p in tmp_path.iterdir()]
    # staging files of the output, or of its sidecar's staging file (killed while the sidecar was written)
    assert left and all(name.startswith((f".{out.name}.sqlrp-", f"..{out.name}.sqlrp-")) for name in left), left
    assert not out.exists()  # never a half-written output under its own name
    with sqlrp.connect() as db:
        sqlrp.project(db, str(path), "id", method="achlioptas", k=8, s=1, seed=3, into=str(out), replace=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name, out.name + ".sqlrp.json"]
    got = {".parquet": pd.read_parquet, ".csv": pd.read_csv, ".json": lambda p: pd.read_json(p, lines=True)}[ending]
    frame = got(out).sort_values("id")
    want = sqlrp.transform(read_projection(str(out) + ".sqlrp.json"), X[frame["id"].to_numpy()])
    np.testing.assert_allclose(frame.drop(columns="id").to_numpy(dtype=float), want, rtol=1e-9, atol=1e-12)


def test_a_killed_export_is_swept_by_the_next(tmp_path):
    out = tmp_path / "big.parquet"
    child = _run_child(FILE_CHILD, "", str(out), "export")
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert [p.name for p in tmp_path.iterdir()] and not out.exists()
    with sqlrp.connect() as db:
        sqlrp.create_projection(db, "small", "achlioptas", d=5, k=2, seed=4)
        sqlrp.export_projection(db, "small", str(out), replace=True)
        want = sqlrp.load_projection(db, "small")
    assert [p.name for p in tmp_path.iterdir()] == [out.name]
    np.testing.assert_array_equal(read_projection(str(out)).linear.weight, want.linear.weight)


REPORT_CHILD = """
import os, re, signal, sys, threading, time
from pathlib import Path
import numpy as np
import sqlrp
folder = Path(sys.argv[1])

def watch():
    while True:
        for f in folder.iterdir():  # a staging file (not writable_folder's probe) with bytes in it
            try:
                if re.search(r"[.]sqlrp-[0-9]+-", f.name) and f.stat().st_size > 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            except FileNotFoundError:
                pass
        time.sleep(0.0005)

db = sqlrp.connect()
db.write_dataframe("t", __import__("testkit.frames").frames.wide_frame(np.random.default_rng(1).normal(size=(80, 5))))
sqlrp.create_projection(db, "rp", "achlioptas", d=5, k=3, seed=2)
threading.Thread(target=watch, daemon=True).start()
sqlrp.evaluate(db, "t", "id", "rp", out=str(folder), sample=40, queries=10)
print("finished", flush=True)
"""


def test_a_killed_report_leaves_no_half_file_and_is_swept_by_the_next(tmp_path):
    """``evaluate --out``: each report file is written whole under a staging name and renamed; a kill leaves
    no half-written ``metrics.csv`` under its own name, and the next report into the folder sweeps the rest."""
    pytest.importorskip("matplotlib")
    folder = tmp_path / "report"
    folder.mkdir()
    child = _run_child(REPORT_CHILD, str(folder))
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = sorted(p.name for p in folder.iterdir())
    assert any(".sqlrp-" in name for name in left), left
    with sqlrp.connect() as db:
        X = np.random.default_rng(1).normal(size=(80, 5))
        db.write_dataframe("t", wide_frame(X))
        sqlrp.create_projection(db, "rp", "achlioptas", d=5, k=3, seed=2)
        sqlrp.evaluate(db, "t", "id", "rp", out=str(folder), sample=40, queries=10)
    names = sorted(p.name for p in folder.iterdir())
    assert not any(".sqlrp-" in name for name in names), names
    assert {"metrics.csv", "metrics.json"} <= set(names)
    assert len(pd.read_csv(folder / "metrics.csv")) > 0


def test_staging_files_of_live_writers_and_other_hosts_are_left(tmp_path):
    target = tmp_path / "out.parquet"
    dead, stamp = _dead_pid(), "c" * 12
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {
            "dead": f".out.parquet.sqlrp-{dead}-{host_tag()}-{stamp}.tmp",
            "dead, older name": f".out.parquet.sqlrp-{dead}-{stamp}.sqlrp.json",
            "live": f".out.parquet.sqlrp-{live.pid}-{host_tag()}-{stamp}.tmp",
            "another host": f".out.parquet.sqlrp-{dead}-{'f00baa' if host_tag() != 'f00baa' else 'baaf00'}-{stamp}.tmp",
            "another output": f".other.parquet.sqlrp-{dead}-{host_tag()}-{stamp}.tmp",
        }
        for name in names.values():
            (tmp_path / name).write_text("x")
        mine = staging_path(target, stamp)
        mine.write_text("x")
        removed = sorted(p.name for p in sweep_staging(target))
        assert removed == sorted([names["dead"], names["dead, older name"]])
        assert mine.exists()  # this process is alive
        assert sweep_staging(target, mine=True) == [mine]  # after an interrupt: its own go too
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [names["live"], names["another host"], names["another output"]]
        )
    finally:
        live.kill()
        live.wait()


def test_scratch_names_say_whose_they_are():
    name = scratch_name("staging")
    assert name.startswith(f"_sqlrp_staging_{os.getpid()}_{host_tag()}_") and len(name) <= 63  # PostgreSQL's limit
    assert not orphaned(name) and orphaned(name, mine=True)
    dead = _dead_pid()
    assert orphaned(name.replace(f"_{os.getpid()}_", f"_{dead}_"))
    other = "f00baa" if host_tag() != "f00baa" else "baaf00"
    assert not orphaned(name.replace(f"_{os.getpid()}_{host_tag()}_", f"_{dead}_{other}_"))
    assert not orphaned("_sqlrp_staging_0123456789ab")  # an older sqlrp's: whose, nobody can tell
    assert not orphaned("user_table")


# ---- tables: the child kills itself right after a scratch table was made (outside a transaction) ----

TABLE_CHILD = """
import os, re, signal, sys
import sqlrp
url, what = sys.argv[1:3]
db = sqlrp.connect(url)
execute = db.execute
# evaluate: the evaluation's sample, made outside a transaction; project: the output, inside one
made = r'CREATE TABLE "?_sqlrp_eval_' if what == "evaluate" else r'CREATE TABLE "?o"? '

def executing(sql, params=None):
    execute(sql, params)
    if re.search(made, sql):
        os.kill(os.getpid(), signal.SIGKILL)

db.execute = executing
if what == "evaluate":
    sqlrp.evaluate_search(db, "ix")
else:
    sqlrp.project(db, "t", "id", "rp", into="o")
print("finished", flush=True)
"""


def _litter(db) -> list[str]:
    return sorted(t for t in db.table_names() if t.startswith("_sqlrp_"))


def _killed_then_swept(url: str, what: str = "evaluate") -> None:
    """Kill a child mid-write (:data:`TABLE_CHILD`), then write there again: the dead child's scratch
    tables are gone, a live writer's and another host's are not, and the output is exact."""
    X = np.random.default_rng(11).normal(size=(400, 6))
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(X))
        sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=3, seed=2)
        if what == "evaluate":
            sqlrp.build_index(db, "t", "id", "ix", lists=4)
        else:  # no sqlrp path leaves a scratch table on SQLite (each is made inside a transaction): as if one had
            db.execute(f'CREATE TABLE "_sqlrp_frame_{_dead_pid()}_{host_tag()}_{"e" * 12}" (x INTEGER)')
        live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        other = "f00baa" if host_tag() != "f00baa" else "baaf00"
        kept = [
            f"_sqlrp_staging_{live.pid}_{host_tag()}_{'a' * 12}",
            f"_sqlrp_staging_{_dead_pid()}_{other}_{'b' * 12}",
        ]
        for name in kept:  # a live writer's, another host's: never taken
            db.execute(f'CREATE TABLE "{name}" (x INTEGER)')
    try:
        child = _run_child(TABLE_CHILD, url, what)
        assert child.returncode == -signal.SIGKILL, child.stderr
        with sqlrp.connect(url) as db:
            left = [t for t in _litter(db) if t not in kept]
            if what == "evaluate":
                assert left and all(orphaned(t) for t in left), left  # the kill left its scratch table
            else:  # the child swept the dead one before its own write, which the kill rolled back
                assert left == [], left
            assert "o" not in db.table_names()  # the killed transaction's output: rolled back
            sqlrp.project(db, "t", "id", "rp", into="o", replace=True)  # the next write there
            assert _litter(db) == sorted(kept)
            got = db.query_df('SELECT * FROM "o" ORDER BY "id"')
            want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want[got["id"].to_numpy()], rtol=1e-9)
    finally:
        live.kill()
        live.wait()


def test_a_killed_write_on_a_duckdb_file(tmp_path):
    _killed_then_swept(f"duckdb:///{tmp_path / 'k.duckdb'}")


def test_a_killed_write_on_sqlite(tmp_path):
    _killed_then_swept(f"sqlite:///{tmp_path / 'k.sqlite'}", "project")


def test_a_killed_write_on_postgres(pg_url):
    schema = f"k_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    try:
        _killed_then_swept(f"{pg_url}{sep}options=-csearch_path%3D{schema}")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_sweep_leaves_user_tables_and_a_live_writers(tmp_path):
    with sqlrp.connect(f"duckdb:///{tmp_path / 's.duckdb'}") as db:
        dead = f"_sqlrp_frame_{_dead_pid()}_{host_tag()}_{'d' * 12}"
        for name in ("_sqlrp_user_named", dead, scratch_name("staging"), "t"):
            db.execute(f'CREATE TABLE "{name}" (x INTEGER)')
        assert sweep_scratch_tables(db) == [dead]
        assert dead not in db.table_names() and len(db.table_names()) == 3


def test_a_sidecar_staging_file_of_a_killed_writer_is_swept(tmp_path):
    """Killed while writing the sidecar under its staging name (through its own staging file): the nested
    staging file is the output's too, and the next write of the output sweeps it (seen in CI, issue 44)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # its pid: a writer no longer running
    tag = host_tag()
    outer = f".out.parquet.sqlrp-{child.pid}-{tag}-636bc83017fe"
    names = [f"{outer}.tmp", f".{outer}.sqlrp.json.sqlrp-{child.pid}-{tag}-f5a6916f8541.tmp"]
    other = f"..other.parquet.sqlrp-{child.pid}-{tag}-636bc83017fe.sqlrp.json.sqlrp-{child.pid}-{tag}-f5a6916f8541.tmp"
    for name in [*names, other]:
        (tmp_path / name).write_text("half")
    removed = sweep_staging(tmp_path / "out.parquet")
    assert sorted(p.name for p in removed) == sorted(names)
    assert [p.name for p in tmp_path.iterdir()] == [other]  # another output's: left alone
