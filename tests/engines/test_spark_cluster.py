"""sqlrp on real Spark servers started from the PySpark distribution on 127.0.0.1
(``testkit/sparkcluster.py``): a standalone cluster (a master and two workers, 1 core and 1 GB each)
through ``spark://``, and a Spark Connect server through ``sc://``.  Each writes a table with
``write_dataframe``, projects it with ``sqlrp.project`` (returned and ``into=`` a table) and checks
the numbers against NumPy.

The clients run in a child process: Spark allows one SparkContext per process, and the other Spark
tests of the session hold a ``local[2]`` one.  Under ``CI=true`` a server that cannot start fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from testkit.sparkcluster import SparkCluster, SparkClusterUnavailable, SparkConnectServer

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parents[2]

CLIENT = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, pandas as pd
    import sqlrp

    started = time.perf_counter()
    db = sqlrp.connect(sys.argv[1])
    connected = time.perf_counter() - started
    rng = np.random.default_rng(3)
    X = np.round(rng.uniform(-8, 8, (300, 16)), 2)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(16)])
    df.insert(0, "id", np.arange(len(X), dtype=np.int64))
    db.write_dataframe("cluster_t", df.sample(frac=1.0, random_state=1))  # stored out of id order
    t = time.perf_counter()
    sqlrp.create_projection(db, "rp6", "achlioptas", d=16, k=6, s=3, seed=11)
    got = sqlrp.project(db, "cluster_t", "id", "rp6")
    sqlrp.project(db, "cluster_t", "id", "rp6", into="cluster_rp")
    stored = db.query_df("SELECT * FROM cluster_rp ORDER BY id")
    projected = time.perf_counter() - t
    want = sqlrp.transform(sqlrp.load_projection(db, "rp6"), X)
    scale = np.abs(want).max()
    try:  # classic sessions only (Spark Connect has no SparkContext on the client)
        sc = db.spark.sparkContext
        master = sc.master
        executors = sc._jsc.sc().getExecutorMemoryStatus().keySet().toList().mkString(",").split(",")
    except Exception:
        master, executors = None, None
    print(json.dumps({
        "url": db.url,
        "master": master,
        "executors": executors,
        "ids_ordered": got["id"].tolist() == list(range(len(X))),
        "error": float(np.max(np.abs(got.drop(columns="id").to_numpy() - want)) / scale),
        "error_into": float(np.max(np.abs(stored.drop(columns="id").to_numpy() - want)) / scale),
        "connect_s": connected,
        "project_s": projected,
    }))
    db.close()
    """
)


def _unavailable(what: str, exc: Exception | str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true and the {what} could not be started: {exc}")
    pytest.skip(f"{what} unavailable (CI would fail here): {exc}")


def _client(url: str, env: dict[str, str], logs: str) -> dict:
    """Run :data:`CLIENT` against ``url`` in a child process; its JSON line."""
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    run = subprocess.run(
        [sys.executable, "-c", CLIENT, url],
        capture_output=True,
        text=True,
        env=dict(env, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=path),
        cwd=ROOT,
        timeout=150,
        check=False,
    )
    assert run.returncode == 0, f"client failed:\n{run.stderr[-4000:]}\n{logs}"
    result = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"\nclient of {url}: {result}", file=sys.stderr)
    return result


@pytest.fixture(scope="module")
def cluster():
    started = time.perf_counter()
    try:
        spark_cluster = SparkCluster(workers=2, cores=1, memory="1g")
    except SparkClusterUnavailable as exc:
        _unavailable("Spark cluster", exc)
    try:
        spark_cluster.start(timeout=60)
    except SparkClusterUnavailable as exc:
        spark_cluster.stop()
        _unavailable("Spark cluster", exc)
    except BaseException:
        spark_cluster.stop()
        raise
    print(f"\nSpark cluster {spark_cluster.url} up in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    yield spark_cluster
    daemons = list(spark_cluster.processes)
    spark_cluster.stop()
    assert not spark_cluster.root.exists()
    assert all(proc.returncode is not None for proc in daemons)  # every daemon we started has ended


def test_project_on_a_standalone_cluster(cluster):
    result = _client(cluster.url, cluster.env(), cluster.logs())  # env: SPARK_CONF_DIR, the executors' JVM options
    assert result["master"] == cluster.url
    assert len([e for e in result["executors"] if e]) == 3  # the driver and one executor per worker
    assert result["ids_ordered"]
    assert result["error"] <= 1e-9 and result["error_into"] <= 1e-9
    assert cluster.alive_workers() == 2


def test_project_through_spark_connect():
    missing = [m for m in ("grpc", "grpc_status", "zstandard") if importlib.util.find_spec(m) is None]
    if missing:  # the test extra installs pyspark[connect]: under CI its absence is a failure
        _unavailable("Spark Connect client", f"needs {missing}: pip install 'pyspark[connect]'")
    try:
        server = SparkConnectServer()
    except SparkClusterUnavailable as exc:
        _unavailable("Spark Connect server", exc)
    try:
        try:
            server.start(timeout=60)
        except SparkClusterUnavailable as exc:
            _unavailable("Spark Connect server", exc)
        result = _client(server.url, dict(os.environ), server.logs())
    finally:
        process = server.process
        server.stop()
    assert process is not None and process.returncode is not None and not server.root.exists()
    assert result["url"] == server.url and result["master"] is None  # a Connect session, no local context
    assert result["ids_ordered"]
    assert result["error"] <= 1e-9 and result["error_into"] <= 1e-9
