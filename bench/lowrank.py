"""Randomized PCA of a Parquet file (issue 43): ``sqlrp fit`` against scikit-learn's ``PCA(svd_solver="randomized")``.

    PYTHONPATH=. python bench/lowrank.py                      # 1,000,000 x 256 float32, k = 32 (~1 GB file)
    PYTHONPATH=. python bench/lowrank.py --smoke              # 20,000 rows: CI size, seconds
    PYTHONPATH=. python bench/lowrank.py --rows 300000 --route sql   # the aggregate-SQL route on DuckDB
    PYTHONPATH=. python bench/lowrank.py --sketch --file /tmp/lr.parquet  # + the sketch's passes; keep the file

The file: ``--rows`` x ``--d`` float32 with a decaying spectrum (``sigma_i = (1 + i)^-0.75`` in a random basis,
plus a random mean; seeded), written in row groups of 100,000 rows, so neither the file nor the exact answer
needs it in memory: the exact PCA's explained variance comes from the Gram matrix summed while writing.

Each contender runs in a process of its own, timed from its start (imports included) to the fitted
components, its peak memory read from ``resource.getrusage(RUSAGE_SELF).ru_maxrss``:

- ``sqlrp``: ``sqlrp.fit(sqlrp.connect(), FILE, "id", k=32, name="pc")`` -- an in-memory DuckDB reads the
  file, the rows stream as Arrow batches into NumPy (the ``arrow`` route; ``--route sql``: aggregate SQL);
- ``sklearn``: ``pyarrow.parquet.read_table`` -> one float32 NumPy array -> ``PCA(32, svd_solver="randomized",
  random_state=0).fit`` (its defaults: 10 oversamples, ``n_iter="auto"``), the route a user takes.

Printed: seconds, explained variance ratio of the top k (and of the exact PCA), peak RSS, and the ratios.
Targets (the issue): sqlrp within 1.5x of scikit-learn's time, at most a quarter of its peak memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SQLRP = """
import resource, sys, time, json
t0 = time.perf_counter()
import sqlrp
path, k, route, gram = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with sqlrp.connect() as db:
    fitted = sqlrp.fit(db, path, "id", k=k, name="pc", route=route, gram=gram)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "ev": float(fitted.explained_variance_ratio_.sum()),
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "passes": fitted.params["passes"],
    "why": fitted.params["power_iterations_why"]}))
"""

SKLEARN = """
import resource, sys, time, json
t0 = time.perf_counter()
import numpy as np
import pyarrow.parquet as pq
from sklearn.decomposition import PCA
path, k = sys.argv[1], int(sys.argv[2])
table = pq.read_table(path)
X = np.column_stack([table.column(f"f{i}").to_numpy() for i in range(table.num_columns - 1)])
del table
pca = PCA(k, svd_solver="randomized", random_state=0).fit(X)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "ev": float(pca.explained_variance_ratio_.sum()),
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_table(path: Path, rows: int, d: int, k: int, seed: int = 0) -> float:
    """Write the file; return the exact PCA's explained variance ratio of the top ``k`` (from the Gram matrix)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    sigma = (1.0 + np.arange(d)) ** -0.75
    mix = (basis * sigma).T  # rows: sigma_i * basis_i
    mean = rng.normal(size=d)
    gram, total, n = np.zeros((d, d)), np.zeros(d), 0
    schema = pa.schema([("id", pa.int64())] + [(f"f{i}", pa.float32()) for i in range(d)])
    with pq.ParquetWriter(path, schema) as writer:
        for lo in range(0, rows, 100_000):
            m = min(100_000, rows - lo)
            X = (rng.standard_normal((m, d)) @ mix + mean).astype(np.float32)
            X64 = X.astype(np.float64)
            gram += X64.T @ X64
            total += X64.sum(axis=0)
            n += m
            columns = [pa.array(np.arange(lo, lo + m, dtype=np.int64))] + [pa.array(X[:, i]) for i in range(d)]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
    cov = (gram - np.outer(total, total) / n) / (n - 1)
    eig = np.linalg.eigvalsh(cov)[::-1]
    return float(eig[:k].sum() / eig.sum())


def run(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--route", choices=["auto", "sql", "arrow"], default="auto")
    parser.add_argument("--smoke", action="store_true", help="20,000 rows")
    parser.add_argument("--only", choices=["sqlrp", "sklearn"], help="run one contender")
    parser.add_argument("--sketch", action="store_true", help="also sqlrp.fit(..., gram='never'): the sketch's passes")
    parser.add_argument("--file", help="keep the table in this file (written if missing, else reused)")
    args = parser.parse_args()
    rows = 20_000 if args.smoke else args.rows
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.file or Path(tmp) / "lowrank.parquet")
        t0 = time.perf_counter()
        sidecar = path.with_suffix(".exact.json")
        if not (path.exists() and sidecar.exists()):
            sidecar.write_text(json.dumps(write_table(path, rows, args.d, args.k)))
        exact = json.loads(sidecar.read_text())
        size = path.stat().st_size / 2**20
        print(f"{rows:,} x {args.d} float32 ({size:,.0f} MB) ready in {time.perf_counter() - t0:.1f} s; k = {args.k}")
        print(f"exact PCA: explained variance ratio {exact:.4f}")
        results = {}
        contenders = [("sqlrp", SQLRP, [args.route, "auto"]), ("sklearn", SKLEARN, [])]
        if args.sketch:
            contenders.insert(1, ("sketch", SQLRP, [args.route, "never"]))
        for name, code, extra in contenders:
            if args.only and args.only != name:
                continue
            r = results[name] = run(code, str(path), str(args.k), *extra)
            more = f", {r['passes']} passes ({r['why']})" if "passes" in r else ""
            print(f"{name:8s} {r['seconds']:7.2f} s  ev {r['ev']:.4f}  peak {r['rss_mb']:8,.0f} MB{more}")
        if len(results) == 2:
            a, b = results["sqlrp"], results["sklearn"]
            print(
                f"sqlrp / sklearn: time {a['seconds'] / b['seconds']:.2f}x (target <= 1.5), "
                f"peak memory {a['rss_mb'] / b['rss_mb']:.2f}x (target <= 0.25)"
            )


if __name__ == "__main__":
    main()
