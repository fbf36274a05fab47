"""A Raspberry Pi's memory (issue 42): each contender under a cgroup memory and CPU limit, no swap.

    PYTHONPATH=. python bench/small_device.py                      # 2,000,000 x 384 float32, 512 MB/1 CPU and 1 GB/2
    PYTHONPATH=. python bench/small_device.py --rows 300000 --limits 512:1   # one limit, a smaller file
    PYTHONPATH=. python bench/small_device.py --smoke              # 20,000 x 32 under 512 MB (CI)

The input is a wide Parquet file of ``--rows`` x ``--d`` float32 features in ``--row-group``-row groups
(written once, in ``--folder``), projected to ``k = 64`` Parquet by:

- ``sqlrp``: ``sqlrp project --table F --id-column id --k 64 --into OUT`` -- no flags: sqlrp reads the
  budget (``sqlrp/backends/resources.py``);
- ``duckdb_default``: the SQL ``sqlrp compile`` prints for the same matrix, run by hand in one
  ``COPY (...) TO`` with DuckDB's defaults (its memory_limit is 80% of the cgroup's);
- ``duckdb_tuned``: the same statement with the best settings a user would find by hand: threads = the
  CPUs, memory_limit half the limit, ``preserve_insertion_order = false``, Parquet prefetching off,
  written row groups of 16,384 rows;
- ``pyarrow_numpy``: ``pyarrow.parquet.ParquetFile.iter_batches`` (16,384 rows), ``X @ W`` with the
  dense matrix of the same projection, each batch written with a ``ParquetWriter``.

Each runs in a cgroup of its own (``testkit/cgroup.py``: v1 or v2, root); the table gives seconds, the
process's peak resident memory, and whether the OOM killer ended it; then sqlrp's ratio to the fastest
by-hand contender that finished.  Every finished output is compared with NumPy on the first rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testkit.cgroup import available, run_limited  # noqa: E402

BY_HAND = """
import sys, time, duckdb
sql, out, mode, threads, mem = sys.argv[1:6]
con = duckdb.connect()
options = "FORMAT parquet"
if mode == "tuned":
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET memory_limit = '{mem}'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET disable_parquet_prefetching = true")
    options += ", ROW_GROUP_SIZE 16384"
text = open(sql).read().strip().rstrip(";")
con.execute(f"COPY ({text}) TO '{out}' ({options})")
"""

PYARROW = """
import sys, json, numpy as np, pyarrow as pa, pyarrow.parquet as pq
source, sidecar, out = sys.argv[1:4]
sys.path.insert(0, sys.argv[4])
from sqlrp.registry.transfer import read_projection
from sqlrp.methods import reference
p = read_projection(sidecar)
W = reference.transform(p, np.eye(p.d))  # a linear projection's dense d x k matrix: the images of the unit rows
f = pq.ParquetFile(source)
names = [n for n in f.schema_arrow.names if n != "id"]
writer = None
for batch in f.iter_batches(batch_size=16384):
    X = np.column_stack([batch.column(n).to_numpy(zero_copy_only=False) for n in names]).astype(np.float64)
    Y = X @ W
    t = pa.table({"id": batch.column("id"), **{f"p{j}": Y[:, j] for j in range(Y.shape[1])}})
    writer = writer or pq.ParquetWriter(out, t.schema)
    writer.write_table(t)
writer.close()
"""


def make_input(path: Path, rows: int, d: int, row_group: int) -> None:
    if path.exists():
        return
    import duckdb

    cols = ", ".join(f"CAST(random() * 2 - 1 AS FLOAT) AS f{i}" for i in range(d))
    con = duckdb.connect()
    con.execute("SELECT setseed(0.5)")
    con.execute(
        f"COPY (SELECT CAST(range AS BIGINT) AS id, {cols} FROM range({rows})) TO '{path}' "
        f"(FORMAT parquet, ROW_GROUP_SIZE {row_group})"
    )


def check(out: Path, source: Path, sidecar: Path) -> str:
    """``exact`` if the first 2,000 rows of ``out`` equal NumPy's on the same rows, else what differs."""
    import duckdb
    import numpy as np

    from sqlrp.methods import reference
    from sqlrp.registry.transfer import read_projection

    p = read_projection(sidecar)
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}') ORDER BY id LIMIT 2000").df()
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') ORDER BY id LIMIT 2000").df().to_numpy()
    want = reference.transform(p, X.astype(np.float64))
    err = np.max(np.abs(got.drop(columns="id").to_numpy() - want)) / max(1e-300, np.max(np.abs(want)))
    return "exact" if err < 1e-6 else f"max relative error {err:.2g}"  # float32 inputs: 1e-6 covers the cast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--row-group", type=int, default=100_000)
    parser.add_argument("--limits", default="512:1,1024:2", help="MB:CPUs, comma-separated")
    parser.add_argument("--folder", default=os.environ.get("SQLRP_BENCH_DATA", "/tmp/sqlrp-small-device"))
    parser.add_argument("--only", default="sqlrp,duckdb_default,duckdb_tuned,pyarrow_numpy")
    parser.add_argument("--smoke", action="store_true", help="20,000 x 32 under 512 MB, every contender once")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.d, args.row_group, args.limits = 20_000, 32, 5_000, "512:1"
    if not available():
        print("no writable memory cgroup (root, cgroup v1 or v2): nothing measured")
        return
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"emb_{args.rows}x{args.d}_rg{args.row_group}.parquet"
    make_input(source, args.rows, args.d, args.row_group)
    size = source.stat().st_size / 2**20
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sqlrp_cli = [sys.executable, "-m", "sqlrp"]
    print(f"input: {source.name}, {size:.0f} MB on disk; k = {args.k}")
    for limit in args.limits.split(","):
        memory, cpus = (int(x) for x in limit.split(":"))
        print(f"\n== {memory} MB, {cpus} CPU(s) (input {size / memory:.1f}x the limit) ==")
        rows = []
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            out = Path(tmp) / "sqlrp.parquet"
            base = [*sqlrp_cli, "project", "--table", str(source), "--id-column", "id", "--k", str(args.k)]
            runs = {}
            if "sqlrp" in args.only:
                runs["sqlrp"] = run_limited([*base, "--seed", "1", "--into", str(out)], memory, cpus, env=env)
            sidecar = Path(str(out) + ".sqlrp.json")
            if not sidecar.exists():  # the matrix for the others, drawn outside the limit
                subprocess.run([*base, "--seed", "1", "--into", str(out)], env=env, check=True, capture_output=True)
            sql = Path(tmp) / "project.sql"
            printed = subprocess.run(
                [*sqlrp_cli, "compile", "--table", str(source), "--id-column", "id", "--projection", str(sidecar)],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            sql.write_text(printed)
            for mode in ("default", "tuned"):
                if f"duckdb_{mode}" in args.only:
                    target = Path(tmp) / f"duckdb_{mode}.parquet"
                    argv = [sys.executable, "-c", BY_HAND, str(sql), str(target), mode, str(cpus), f"{memory // 2}MB"]
                    runs[f"duckdb_{mode}"] = run_limited(argv, memory, cpus, env=env)
            if "pyarrow_numpy" in args.only:
                target = Path(tmp) / "pyarrow_numpy.parquet"
                argv = [sys.executable, "-c", PYARROW, str(source), str(sidecar), str(target), str(ROOT)]
                runs["pyarrow_numpy"] = run_limited(argv, memory, cpus, env=env)
            for name, r in runs.items():
                target = out if name == "sqlrp" else Path(tmp) / f"{name}.parquet"
                verdict = check(target, source, sidecar) if r.finished else ("OOM-killed" if r.oom_killed else "failed")
                why = "" if r.finished else (r.stderr.strip().splitlines() or [""])[-1][:100]
                rows.append((name, r.seconds, r.rss_mb, r.peak_mb, verdict, why))
        print(f"{'contender':<16}{'seconds':>9}{'peak RSS MB':>13}{'group MB':>10}  result")
        for name, seconds, rss, peak, verdict, why in rows:
            print(f"{name:<16}{seconds:>9.1f}{rss:>13.0f}{peak:>10.0f}  {verdict} {why}")
        done = {n: s for n, s, _, _, v, _ in rows if v == "exact"}
        hand = {n: s for n, s in done.items() if n != "sqlrp"}
        if "sqlrp" in done and hand:
            best = min(hand, key=hand.get)
            print(f"sqlrp / {best}: {done['sqlrp'] / hand[best]:.2f}x")
        print(json.dumps({"limit_mb": memory, "cpus": cpus, "rows": [r[:5] for r in rows]}))


if __name__ == "__main__":
    main()
