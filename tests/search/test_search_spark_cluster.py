"""Similarity search on a real Spark standalone cluster (``testkit/sparkcluster.py``: a master and two
workers, 1 core and 1 GB each, on 127.0.0.1): an index built and searched through ``spark://``
returns the NumPy oracle's candidates and ranks (ids and ranks equal, distances to 1e-9 relative),
and a refresh after the table changed matches the oracle again.

The client runs in a child process (Spark allows one SparkContext per process, and the other Spark
tests hold a ``local[2]`` one).  Under ``CI=true`` a cluster that cannot start fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testkit.sparkcluster import SparkCluster, SparkClusterUnavailable

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parents[2]

CLIENT = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np, pandas as pd
    import sqlrp
    from sqlrp.search.index import load_lists
    from sqlrp.search.reference import reference_search

    def clustered(n, seed, d=12, centres=10):  # integer rows: every sum exact, in SQL and NumPy
        rng = np.random.default_rng(seed)
        C = rng.integers(-30, 31, size=(centres, d))
        return (C[rng.integers(0, centres, n)] + rng.integers(-4, 5, size=(n, d))).astype(np.float64)

    def frame(X, id_name, ids):
        df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
        df.insert(0, id_name, ids)
        return df

    def compare(got, X, ids, Q, top, candidates, probes):
        idx = sqlrp.load_index(db, "cidx")
        ref = reference_search(
            X, ids, Q, np.arange(len(Q)), load_lists(db, idx), idx.signs, top=top, candidates=candidates, probes=probes
        )
        same = len(got) == len(ref) > 0 and (
            got[["query_id", "id", "rank"]].to_numpy(dtype=np.int64) == ref[["query_id", "id", "rank"]].to_numpy()
        ).all()
        error = float(np.max(np.abs(got["distance"].to_numpy() - ref["distance"].to_numpy())
                             / np.maximum(ref["distance"].to_numpy(), 1e-300)))
        return bool(same), error, len(got)

    db = sqlrp.connect(sys.argv[1])
    both = clustered(330, 5)
    X, Q = both[:300], both[300:]
    ids = np.random.default_rng(1).permutation(300) * 3 + 1
    db.write_dataframe("cpts", frame(X, "id", ids))
    db.write_dataframe("cqs", frame(Q, "qid", np.arange(30)))
    sqlrp.build_index(db, "cpts", "id", "cidx", lists=10, bits=64)
    built = compare(sqlrp.search(db, "cidx", "cqs", "qid", top=5, candidates=25, probes=3), X, ids, Q, 5, 25, 3)
    X2 = np.concatenate([X[20:], clustered(10, 6)])  # 20 rows gone, 10 new
    ids2 = np.concatenate([ids[20:], np.arange(5000, 5010)])
    db.write_dataframe("cpts", frame(X2, "id", ids2), replace=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sqlrp.search(db, "cidx", "cqs", "qid", top=5, candidates=25, probes=3)
    stale = any("changed since index" in str(w.message) for w in caught)
    sqlrp.build_index(db, "cpts", "id", "cidx", incremental=True)
    refreshed = compare(sqlrp.search(db, "cidx", "cqs", "qid", top=5, candidates=25, probes=3), X2, ids2, Q, 5, 25, 3)
    sc = db.spark.sparkContext
    executors = sc._jsc.sc().getExecutorMemoryStatus().keySet().toList().mkString(",").split(",")
    print(json.dumps({"master": sc.master, "executors": executors, "built": built, "stale": stale,
                      "refreshed": refreshed}))
    db.close()
    """
)


def _unavailable(exc: Exception | str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true and the Spark cluster could not be started: {exc}")
    pytest.skip(f"Spark cluster unavailable (CI would fail here): {exc}")


def test_search_on_a_standalone_cluster():
    try:
        cluster = SparkCluster(workers=2, cores=1, memory="1g")
    except SparkClusterUnavailable as exc:
        _unavailable(exc)
    try:
        try:
            cluster.start(timeout=60)
        except SparkClusterUnavailable as exc:
            _unavailable(exc)
        started = time.perf_counter()
        env = cluster.env()
        path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        run = subprocess.run(
            [sys.executable, "-c", CLIENT, cluster.url],
            capture_output=True,
            text=True,
            env=dict(env, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=path),
            cwd=ROOT,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, f"client failed:\n{run.stderr[-4000:]}\n{cluster.logs()}"
        result = json.loads(run.stdout.strip().splitlines()[-1])
        print(f"\nsearch on {cluster.url} in {time.perf_counter() - started:.1f} s: {result}", file=sys.stderr)
        assert cluster.alive_workers() == 2
    finally:
        cluster.stop()
    assert result["master"] == cluster.url
    assert len([e for e in result["executors"] if e]) == 3  # the driver and one executor per worker
    same, error, rows = result["built"]
    assert same and error <= 1e-9 and rows == 150
    assert result["stale"]
    same, error, rows = result["refreshed"]
    assert same and error <= 1e-9 and rows == 150
