"""A small device's memory, for real (issue 42): sqlrp under a cgroup memory and CPU limit
(``testkit/cgroup.py``; root, cgroup v1 or v2), no flags -- it reads the budget itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from testkit.cgroup import available, run_limited

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

pytestmark = pytest.mark.skipif(
    not available() and os.environ.get("CI") != "true", reason="needs root and a memory cgroup"
)


def test_the_budget_is_read_from_the_cgroup() -> None:
    code = "from sqlrp.backends.resources import budget; b = budget(); print(b.memory, b.cpus, b.small, b.threads)"
    r = run_limited([sys.executable, "-c", code], 300, 1, env=ENV)
    assert r.finished, r.stderr
    memory, cpus, small, threads = r.stdout.split()
    assert int(memory) == 300 * 2**20 and cpus == "1" and small == "True" and threads == "1"


def test_a_file_larger_than_the_limit_projects_within_it(tmp_path) -> None:
    """A Parquet file larger than the limit, in wide row groups, projected with no flags: it finishes,
    the OOM killer never runs, and the output is NumPy's."""
    import duckdb

    source, out = tmp_path / "emb.parquet", tmp_path / "out.parquet"
    cols = ", ".join(f"CAST(hash(range * 131 + {i}) / 9.2e18 - 1 AS FLOAT) AS f{i}" for i in range(128))
    duckdb.sql(f"COPY (SELECT range AS id, {cols} FROM range(700000)) TO '{source}' (ROW_GROUP_SIZE 100000)")
    limit = 320
    assert source.stat().st_size > limit * 2**20  # larger than the memory
    argv = [sys.executable, "-m", "sqlrp", "project", "--table", str(source), "--id-column", "id", "--k", "16"]
    r = run_limited([*argv, "--seed", "3", "--into", str(out)], limit, 1, env=ENV, timeout=900)
    assert r.finished and not r.oom_killed, (r.status, r.stderr[-500:])
    from sqlrp.methods import reference
    from sqlrp.registry.transfer import read_projection

    p = read_projection(str(out) + ".sqlrp.json")
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}') WHERE id % 1000 = 7 ORDER BY id").df()
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') WHERE id % 1000 = 7 ORDER BY id").df()
    want = reference.transform(p, X.to_numpy(dtype=np.float64))
    Y = got.drop(columns="id").to_numpy()
    assert Y.dtype == np.float32  # the output's type follows the input's (float32 features): one rounding
    np.testing.assert_allclose(Y, want.astype(np.float32), rtol=2**-23, atol=1e-30)
    assert len(got) == 700
