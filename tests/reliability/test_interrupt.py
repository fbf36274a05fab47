"""Ctrl-C and SIGTERM on the commands that write (issue 41): ``python -m sqlrp`` started for real on a
table large enough to keep it busy, stopped by a signal once it is at work; then exit status 130, one
line on stderr saying what was and was not written, no traceback, the output absent or unchanged, the
input unchanged, and no staging table or temporary file left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="finds a busy process by /proc (Linux)")
ROWS = 400_000
D = 32


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """A DuckDB file with ``t`` (ROWS x D random features) and ``q`` (its first 20,000 rows)."""
    path = tmp_path_factory.mktemp("interrupt") / "big.db"
    with duckdb.connect(str(path)) as con:
        features = ", ".join(f"random() AS f{j}" for j in range(D))
        con.execute("SELECT setseed(0.5)")
        con.execute(f"CREATE TABLE t AS SELECT i AS id, {features} FROM range({ROWS}) r(i)")
        con.execute("CREATE TABLE q AS SELECT * FROM t WHERE id < 20000")
    return path


def _fingerprint(path: Path) -> dict:
    """Every table of the file with its row count and a checksum of its first column."""
    with duckdb.connect(str(path), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return {n: con.execute(f'SELECT count(*), sum(hash(x)) FROM "{n}" AS x').fetchone() for n in names}


def _opened(pid: int, path: Path) -> bool:
    """The process has ``path`` open (it has connected: the command is past its start)."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def _interrupt(args: list[str], sig: int, busy, cwd: Path, settle: float = 1.5) -> tuple[int, str]:
    """Run ``sqlrp args``; once ``busy(pid)`` holds (polled) and ``settle`` seconds more, send ``sig``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlrp", *args], cwd=cwd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not busy(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(settle)
        assert proc.poll() is None, f"finished before the signal: {proc.stderr.read().decode()}"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode()


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("interrupted: "), err
    return err


def _no_leftovers(path: Path, before: dict, err: str) -> None:
    """Every table as it was and none new -- but the registry, where ``project`` stores a new projection
    on its way (then the line says so)."""
    after = _fingerprint(path)
    if after.get("sqlrp_projection") != before.get("sqlrp_projection"):
        assert "was stored whole" in err, err
    after = {n: v for n, v in after.items() if not n.startswith("sqlrp_")}
    before = {n: v for n, v in before.items() if not n.startswith("sqlrp_")}
    assert after == before, set(after) ^ set(before)  # the input and everything else as it was, nothing new


#: the SQL route, and the Arrow route's stream (issue 44: BLAS sums, read back by the compiled statement)
ROUTES = pytest.mark.parametrize("route", ["sql", "arrow"])


@ROUTES
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_project_into_table(big, sig, route):
    before = _fingerprint(big)
    args = ["project", "--db", f"duckdb:///{big}", "--table", "t", "--id-column", "id", "--route", route]
    args += ["--method", "gaussian", "--k", "512", "--into", "out"]  # dense: long enough never to finish first
    status, err = _interrupt(args, sig, lambda pid: _opened(pid, big), big.parent)
    assert status == 130, err
    assert "table 'out' was not written" in _one_line(err)
    assert "the input table 't' is unchanged" in err
    _no_leftovers(big, before, err)


@ROUTES
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_project_into_parquet(big, tmp_path, sig, route):
    before = _fingerprint(big)
    out = tmp_path / "out.parquet"
    args = ["project", "--db", f"duckdb:///{big}", "--table", "t", "--id-column", "id", "--route", route]
    args += ["--method", "gaussian", "--k", "512", "--into", str(out)]

    def writing(_pid: int) -> bool:  # the temporary file beside the output exists while DuckDB writes it
        return any(tmp_path.glob(".out.parquet.*"))

    status, err = _interrupt(args, sig, writing, tmp_path, settle=0.5)
    assert status == 130, err
    assert f"file '{out}' was not written" in _one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output, no temporary file
    _no_leftovers(big, before, err)


def test_index(big):
    before = _fingerprint(big)
    args = ["index", "--db", f"duckdb:///{big}", "--table", "t", "--id-column", "id", "--name", "ix"]
    args += ["--lists", "2000", "--calibration-queries", "0"]
    status, err = _interrupt(args, signal.SIGINT, lambda pid: _opened(pid, big), big.parent, settle=3)
    assert status == 130, err
    assert "index 'ix' was not written" in _one_line(err)
    assert "table 'ix__lists' was not written" in err
    _no_leftovers(big, before, err)


def test_search_into(big):
    with duckdb.connect(str(big)) as con:  # a small index of q, searched by q exactly: long, bounded
        con.execute("CREATE TABLE small AS SELECT * FROM q WHERE id < 2000")
    env_args = ["--db", f"duckdb:///{big}"]
    subprocess.run(
        [sys.executable, "-m", "sqlrp", "index", *env_args, "--table", "small", "--id-column", "id", "--name", "sx"]
        + ["--lists", "4", "--calibration-queries", "0"],
        env=_env(),
        check=True,
        capture_output=True,
    )
    before = _fingerprint(big)
    args = ["search", *env_args, "--index", "sx", "--query-table", "t", "--query-id-column", "id"]
    args += ["--top", "50", "--exact", "--into", "found"]
    status, err = _interrupt(args, signal.SIGTERM, lambda pid: _opened(pid, big), big.parent, settle=2)
    assert status == 130, err
    assert "table 'found' was not written" in _one_line(err)
    _no_leftovers(big, before, err)


def test_tune(big):
    before = _fingerprint(big)
    args = ["tune", "--db", f"duckdb:///{big}", "--table", "t", "--id-column", "id", "--k", "16"]
    args += ["--sample", "3000", "--iterations", "1000000", "--name", "tuned"]
    status, err = _interrupt(args, signal.SIGINT, lambda pid: _opened(pid, big), big.parent, settle=3)
    assert status == 130, err
    assert "stored projection 'tuned' was not written" in _one_line(err)
    _no_leftovers(big, before, err)
