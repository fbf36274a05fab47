"""A small device's memory, for real (issue 42): sqlrp under a cgroup memory and CPU limit
(``testkit/cgroup.py``; root, cgroup v1 or v2), no flags -- it reads the budget itself; and the plan
that reads a file's columns in blocks where a row group does not fit (:mod:`sqlrp.pipeline.column_blocks`),
forced on a small file by a tiny ``memory_limit``, compared with NumPy."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from unittest import mock

import duckdb
import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import EngineLimit
from sqlrp.methods import make_projection, reference
from sqlrp.pipeline.column_blocks import plan_blocks
from sqlrp.pipeline.plan import plan
from sqlrp.registry.transfer import read_projection
from sqlrp.search import ivf
from testkit.cgroup import available, run_limited

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

needs_cgroup = pytest.mark.skipif(
    not available() and os.environ.get("CI") != "true", reason="needs root and a memory cgroup"
)


def wide_file(path: Path, rows: int, d: int, row_group: int, kind: str = "DOUBLE") -> Path:
    """``rows`` x ``d`` features of type ``kind`` (and ``id``) in row groups of ``row_group`` rows."""
    cols = ", ".join(f"CAST(hash(range * 131 + {i}) / 9.2e18 - 1 AS {kind}) AS f{i}" for i in range(d))
    duckdb.sql(f"COPY (SELECT range AS id, {cols} FROM range({rows})) TO '{path}' (ROW_GROUP_SIZE {row_group})")
    return path


def exact(out: str, source: Path, rtol: float = 1e-9) -> None:
    """The file ``out`` holds NumPy's projection (its sidecar's) of every row of ``source``."""
    p = read_projection(out + ".sqlrp.json")
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}') ORDER BY id").df()
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') ORDER BY id").df().to_numpy(np.float64)
    want = reference.transform(p, X)
    assert len(got) == len(X)
    Y = got.drop(columns="id").to_numpy(np.float64)
    np.testing.assert_allclose(Y, want, rtol=rtol, atol=rtol * np.max(np.abs(want)))


#: 60,000 x 64 doubles in row groups of 20,000 rows: 10.6 MB each, and a scan of one needs ~44 MB: under a
#: forced memory_limit of 40 MB (one thread) its columns are read in blocks
TIGHT = {"memory_limit": "40MB", "threads": 1}


@pytest.fixture(scope="module")
def too_wide(tmp_path_factory) -> Path:
    return wide_file(tmp_path_factory.mktemp("blocks") / "wide.parquet", 60_000, 64, 20_000)


@pytest.mark.parametrize("method, options", [("achlioptas", {}), ("gaussian", {}), ("maclaurin", {"degree": 2})])
def test_column_blocks_equal_numpy(too_wide: Path, tmp_path: Path, method: str, options: dict) -> None:
    """Linear and kernel methods alike: the partial sums of each block of columns, added, then the
    combiner -- NumPy's projection of the whole rows, to 1e-9."""
    db = sqlrp.connect(**TIGHT)
    blocks = plan_blocks(db, plan(db, str(too_wide), "id", method=method, k=8, seed=5, store=False, **options))
    assert blocks is not None and len(blocks) > 1 and sum(map(len, blocks)) == 64
    assert sorted(i for b in blocks for i in b) == list(range(64))
    out = str(tmp_path / "out.parquet")
    sqlrp.project(db, str(too_wide), "id", method=method, k=8, seed=5, into=out, **options)
    exact(out, too_wide)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out.parquet", "out.parquet.sqlrp.json"]  # no scratch left


def test_column_blocks_into_a_table_and_float32(tmp_path: Path) -> None:
    """Into a table of the database, from float32 features (the output float32, one rounding)."""
    source = wide_file(tmp_path / "f32.parquet", 60_000, 96, 30_000, "FLOAT")
    db = sqlrp.connect(str(tmp_path / "t.duckdb"), **TIGHT)
    assert len(plan_blocks(db, plan(db, str(source), "id", method="achlioptas", k=6, seed=2, store=False))) > 1
    sqlrp.project(db, str(source), "id", method="achlioptas", k=6, seed=2, into="out")
    p = sqlrp.load_projection(db, sqlrp.list_projections(db)["name"].iloc[0])
    got = db.query_df("SELECT * FROM out ORDER BY id")
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') ORDER BY id").df().to_numpy(np.float64)
    Y = got.drop(columns="id").to_numpy()
    assert Y.dtype == np.float32 and len(Y) == 60_000
    np.testing.assert_allclose(Y, reference.transform(p, X).astype(np.float32), rtol=2**-22, atol=1e-30)
    assert sorted(f.name for f in tmp_path.iterdir() if f.name.startswith(".")) == []


def test_a_file_that_fits_is_read_whole(too_wide: Path) -> None:
    db = sqlrp.connect(memory_limit="200MB", threads=1)
    assert plan_blocks(db, plan(db, str(too_wide), "id", method="achlioptas", k=8, store=False)) is None


def test_a_composition_is_refused_naming_the_budget(too_wide: Path, tmp_path: Path) -> None:
    db = sqlrp.connect(**TIGHT)
    with pytest.raises(EngineLimit, match=r"10 MiB decoded, more than the 38 MiB memory_limit .* a composition cannot"):
        sqlrp.project(db, str(too_wide), "id", method="craftmap", k=8, into=str(tmp_path / "o.parquet"))
    assert list(tmp_path.iterdir()) == []


@needs_cgroup
def test_the_budget_is_read_from_the_cgroup() -> None:
    code = "from sqlrp.backends.resources import budget; b = budget(); print(b.memory, b.cpus, b.small, b.threads)"
    r = run_limited([sys.executable, "-c", code], 300, 1, env=ENV)
    assert r.finished, r.stderr
    memory, cpus, small, threads = r.stdout.split()
    assert int(memory) == 300 * 2**20 and cpus == "1" and small == "True" and threads == "1"


@needs_cgroup
def test_a_file_larger_than_the_limit_projects_within_it(tmp_path) -> None:
    """A Parquet file larger than the limit, in wide row groups, projected with no flags: it finishes,
    the OOM killer never runs, and the output is NumPy's."""
    source, out = tmp_path / "emb.parquet", tmp_path / "out.parquet"
    cols = ", ".join(f"CAST(hash(range * 131 + {i}) / 9.2e18 - 1 AS FLOAT) AS f{i}" for i in range(128))
    duckdb.sql(f"COPY (SELECT range AS id, {cols} FROM range(700000)) TO '{source}' (ROW_GROUP_SIZE 100000)")
    limit = 320
    assert source.stat().st_size > limit * 2**20  # larger than the memory
    probe = (
        "import sqlrp, sys; db = sqlrp.connect(); f = db.scan_fit(db.read_file(sys.argv[1])); "
        "print(f.single, f.pinned, f.threads)"
    )
    r = run_limited([sys.executable, "-c", probe, str(source)], limit, 1, env=ENV)
    assert r.stdout.split() == ["True", "True", "1"], r.stderr[-500:]  # one pass, pinned: 512 KiB chunks
    argv = [sys.executable, "-m", "sqlrp", "project", "--table", str(source), "--id-column", "id", "--k", "16"]
    r = run_limited([*argv, "--seed", "3", "--into", str(out)], limit, 1, env=ENV, timeout=900)
    assert r.finished and not r.oom_killed, (r.status, r.stderr[-500:])
    p = read_projection(str(out) + ".sqlrp.json")
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}') WHERE id % 1000 = 7 ORDER BY id").df()
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') WHERE id % 1000 = 7 ORDER BY id").df()
    want = reference.transform(p, X.to_numpy(dtype=np.float64))
    Y = got.drop(columns="id").to_numpy()
    assert Y.dtype == np.float32  # the output's type follows the input's (float32 features): one rounding
    np.testing.assert_allclose(Y, want.astype(np.float32), rtol=2**-23, atol=1e-30)
    assert len(got) == 700


@needs_cgroup
def test_row_groups_wider_than_the_limit_project_in_column_blocks(tmp_path: Path) -> None:
    """A file whose row group (51 MB of 256 float32 columns) the reader cannot hold in a 200 MB device
    (with Python's share, it would need ~230 MB), no flags: sqlrp reads it in column blocks, finishes
    within the limit, and writes NumPy's projection; the scratch database is gone."""
    source = wide_file(tmp_path / "emb.parquet", 200_000, 256, 50_000, "FLOAT")
    assert source.stat().st_size > 190 * 2**20  # as large as the device's memory
    out = tmp_path / "out.parquet"
    probe = (
        "import sqlrp, sys; from sqlrp.pipeline.column_blocks import plan_blocks; "
        "from sqlrp.pipeline.plan import plan; db = sqlrp.connect(); "
        "print(len(plan_blocks(db, plan(db, sys.argv[1], 'id', method='gaussian', k=16, "
        "store=False)) or [0]))"
    )
    r = run_limited([sys.executable, "-c", probe, str(source)], 200, 1, env=ENV)
    assert r.finished and int(r.stdout) > 1, (r.stdout, r.stderr[-500:])  # the budget alone asks for blocks
    argv = [sys.executable, "-m", "sqlrp", "project", "--table", str(source), "--id-column", "id", "--k", "16"]
    r = run_limited([*argv, "--method", "gaussian", "--into", str(out)], 200, 1, env=ENV, timeout=900)
    assert r.finished and not r.oom_killed, (r.status, r.stderr[-500:])
    assert r.peak_mb <= 200
    exact(str(out), source, rtol=2**-22)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["emb.parquet", "out.parquet", "out.parquet.sqlrp.json"]


def test_evaluate_reads_a_too_wide_file_in_column_blocks(too_wide: Path) -> None:
    """evaluate's sample (and the metrics computed in SQL on it) from a file whose row groups do not fit:
    the same table as with memory to spare."""
    proj = make_projection("achlioptas", 64, 8, seed=1)
    tables = [sqlrp.evaluate(sqlrp.connect(**limits), str(too_wide), "id", proj).table for limits in (TIGHT, {})]
    assert tables[0]["sql"].notna().sum() == 6
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_nearest_centroids_in_bounded_blocks() -> None:
    """k-means' nearest centroid, a few rows at a time (the differences held bounded: a small device's
    memory), is the nearest of the whole computation."""
    rng = np.random.default_rng(3)
    X, C = rng.standard_normal((1000, 16)), rng.standard_normal((30, 16))
    want = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    with mock.patch.object(ivf, "NEAREST_BLOCK", 30 * 16 * 7):  # 7 rows a block
        assert np.array_equal(ivf._nearest(X, C), want)


@needs_cgroup
def test_a_statement_gets_the_room_the_budget_leaves() -> None:
    """Before a search or a projection into a table the engine's memory_limit is raised from the profile's
    half to 80% of what the budget leaves; --memory-limit given stays."""
    code = (
        "import sqlrp; from sqlrp.backends.resources import size_bytes; "
        "q = \"SELECT current_setting('memory_limit')\"; "
        "db = sqlrp.connect(); a = size_bytes(db.fetchall(q)[0][0]); db.statement_room(); "
        "b = size_bytes(db.fetchall(q)[0][0]); "
        "g = sqlrp.connect(memory_limit='100MB'); g.statement_room(); c = size_bytes(g.fetchall(q)[0][0]); "
        "print(a, b, c)"
    )
    r = run_limited([sys.executable, "-c", code], 400, 1, env=ENV)
    assert r.finished, r.stderr[-500:]
    before, after, given = (int(x) for x in r.stdout.split())
    assert before < after <= 0.8 * 400 * 2**20 and after > 1.4 * before
    assert given == 100 * 10**6 or abs(given - 100 * 10**6) < 2**20
