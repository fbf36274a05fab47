"""What the statement cache's tests share (issue 42, item 4; :mod:`sqlrp.start`): a DuckDB file with a table
and a stored projection, the ``sqlrp`` command run as a user runs it (a fresh interpreter, ``python -m
sqlrp``) with the cache's entries in a folder of the test's, and the outputs read back as bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import sqlrp

ROOT = Path(__file__).resolve().parents[1]
D, K, ROWS = 6, 4, 40


def make_db(folder: Path, seed: int = 0) -> tuple[str, np.ndarray]:
    """``folder/x.duckdb``: table ``t`` (``id``, ``f0 .. f5`` DOUBLE) and the stored projection ``rp``."""
    X = np.random.default_rng(seed).normal(size=(ROWS, D))
    url = f"duckdb:///{folder / 'x.duckdb'}"
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", pd.DataFrame(X, columns=[f"f{j}" for j in range(D)]).assign(id=np.arange(ROWS)))
        sqlrp.create_projection(db, "rp", "achlioptas", d=D, k=K, seed=1)
    return url, X


def run(argv: list[str], folder: Path, cache: str = "trace", script: str | None = None) -> subprocess.CompletedProcess:
    """``python -m sqlrp *argv`` in ``folder`` (``cache``: ``SQLRP_STATEMENT_CACHE``; the entries in
    ``folder/cache``).  ``script``: code run before the command in the same interpreter (a probe)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQLRP_")}
    env.update(PYTHONPATH=str(ROOT), SQLRP_CACHE_DIR=str(folder / "cache"), SQLRP_STATEMENT_CACHE=cache)
    if script is None:
        command = [sys.executable, "-m", "sqlrp", *argv]
    else:
        runner = f"import runpy, sys\nsys.argv = ['sqlrp', *{argv!r}]\nrunpy.run_module('sqlrp', run_name='__main__')"
        command = [sys.executable, "-c", script + "\n" + runner]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def said(done: subprocess.CompletedProcess) -> tuple[int, str, str]:
    """The status, stdout and stderr of a run without the cache's own trace lines."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("statement cache: ")]
    return done.returncode, done.stdout, "\n".join(lines)


def outputs(folder: Path, name: str) -> dict[str, bytes]:
    """The output file ``name`` and its sidecar as bytes (absent: not listed), and any staging file left."""
    found = {p.name: p.read_bytes() for p in (folder / name, folder / f"{name}.sqlrp.json") if p.exists()}
    left = [p.name for p in folder.iterdir() if p.name.startswith(f".{name}.")]
    assert not left, f"staging files left: {left}"
    return found


def project_argv(url: str, into: str, *options: str) -> list[str]:
    return ["project", "--db", url, "--projection", "rp", "--table", "t", "--id-column", "id", "--into", into, *options]


__all__ = ["D", "K", "ROWS", "make_db", "outputs", "project_argv", "run", "said"]
