"""A Raspberry Pi's memory (issue 42): each command and each contender under a cgroup memory and CPU
limit, no swap.

    PYTHONPATH=. python bench/small_device.py                      # 2,000,000 x 384 float32, 512 MB/1 CPU and 1 GB/2
    PYTHONPATH=. python bench/small_device.py --rows 300000 --limits 512:1   # one limit, a smaller file
    PYTHONPATH=. python bench/small_device.py --commands project,index,search,tune,evaluate
    PYTHONPATH=. python bench/small_device.py --smoke              # 20,000 x 32 under 512 MB, every command (CI)

``--commands`` (default ``project``): ``project`` (the Parquet file into a Parquet file), ``project_table``
(a DuckDB table into a table of the same database), ``index``, ``search`` (``--queries`` rows of the table
as queries, against an index built outside the limit), ``tune`` and ``evaluate``, each with no flags.
Beside ``sqlrp``: for ``project`` the contenders below; for ``project_table`` the same statement by hand in
DuckDB (``CREATE TABLE AS``); for ``search`` the exact nearest rows by hand, in DuckDB (``array_distance``,
a ``QUALIFY`` top 10) and in pyarrow + NumPy (batches of the table, a running top 10); ``index``, ``tune``
and ``evaluate`` have no by-hand counterpart (what they compute is sqlrp's own), so sqlrp alone.

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
group's peak anonymous memory (sampled: what the processes hold, without the page cache the kernel drops
under the limit), the process's peak resident memory, and whether the OOM killer ended it; then sqlrp's
ratio to the fastest by-hand contender that finished.  Every finished projection is compared with NumPy
on the first rows.
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

TABLE_BY_HAND = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE OR REPLACE TABLE out_hand AS " + open(sys.argv[2]).read().strip().rstrip(";"))
"""

SEARCH_DUCKDB = """
import sys, duckdb
db, d, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
con = duckdb.connect(db, read_only=True)
feats = ", ".join(f"f{i}" for i in range(d))
vec = f"CAST([{feats}] AS FLOAT[{d}])"
con.execute(
    f"COPY (SELECT q.id AS query_id, e.id, array_distance(q.v, e.v) AS distance FROM "
    f"(SELECT id, {vec} AS v FROM q) q, (SELECT id, {vec} AS v FROM emb) e "
    f"QUALIFY row_number() OVER (PARTITION BY q.id ORDER BY array_distance(q.v, e.v), e.id) <= 10) TO '{out}'"
)
"""

SEARCH_NUMPY = """
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
source, queries, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
f = pq.ParquetFile(source)
names = [n for n in f.schema_arrow.names if n != "id"]
Q = ids_q = None
best_d = best_i = None
for batch in f.iter_batches(batch_size=16384):
    X = np.column_stack([batch.column(n).to_numpy(zero_copy_only=False) for n in names]).astype(np.float64)
    ids = batch.column("id").to_numpy()
    if Q is None:
        Q, ids_q = X[:queries].copy(), ids[:queries].copy()
        best_d, best_i = np.full((len(Q), 10), np.inf), np.zeros((len(Q), 10), dtype=np.int64)
    dist = (Q * Q).sum(1)[:, None] - 2 * Q @ X.T + (X * X).sum(1)[None, :]
    both_d = np.concatenate([best_d, dist], axis=1)
    both_i = np.concatenate([best_i, np.broadcast_to(ids, dist.shape)], axis=1)
    keep = np.argsort(both_d, axis=1, kind="stable")[:, :10]
    best_d, best_i = np.take_along_axis(both_d, keep, 1), np.take_along_axis(both_i, keep, 1)
distance = np.sqrt(np.maximum(best_d, 0)).ravel()
t = pa.table({"query_id": np.repeat(ids_q, 10), "id": best_i.ravel(), "distance": distance})
pq.write_table(t, out)
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


def make_database(path: Path, source: Path, queries: int) -> None:
    """The DuckDB database of the table commands: ``emb`` (the file's rows) and ``q`` (its first
    ``queries`` rows), written once, outside any limit."""
    if path.exists():
        return
    import duckdb

    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE emb AS SELECT * FROM read_parquet('{source}')")
    con.execute(f"CREATE TABLE q AS SELECT * FROM emb ORDER BY id LIMIT {int(queries)}")
    con.close()


def project_runs(args: argparse.Namespace, ctx: dict, memory: int, cpus: int) -> dict:
    """``project`` of the Parquet file: sqlrp, DuckDB by hand (defaults, tuned), pyarrow + NumPy."""
    tmp, source, env = ctx["tmp"], ctx["source"], ctx["env"]
    out = Path(tmp) / "sqlrp.parquet"
    base = [*ctx["cli"], "project", "--table", str(source), "--id-column", "id", "--k", str(args.k)]
    runs = {
        "sqlrp": run_limited(
            [*base, "--projection", str(ctx["sidecar"]), "--into", str(out), "--replace"], memory, cpus, env=env
        )  # --replace: the previous limit's output is there
    }
    for mode in ("default", "tuned"):
        target = Path(tmp) / f"duckdb_{mode}.parquet"
        argv = [sys.executable, "-c", BY_HAND, str(ctx["sql"]), str(target), mode, str(cpus), f"{memory // 2}MB"]
        runs[f"duckdb_{mode}"] = run_limited(argv, memory, cpus, env=env)
    target = Path(tmp) / "pyarrow_numpy.parquet"
    argv = [sys.executable, "-c", PYARROW, str(source), str(ctx["sidecar"]), str(target), str(ROOT)]
    runs["pyarrow_numpy"] = run_limited(argv, memory, cpus, env=env)
    return {
        n: (r, check(Path(tmp) / (f"{n}.parquet"), source, ctx["sidecar"]) if r.finished else None)
        for n, r in runs.items()
    }


def table_runs(args: argparse.Namespace, ctx: dict, memory: int, cpus: int) -> dict:
    """The commands on the DuckDB table: ``project_table`` (and its statement by hand), ``index``,
    ``search`` (and the exact search by hand), ``tune``, ``evaluate``."""
    db, env, cli, tmp = str(ctx["db"]), ctx["env"], ctx["cli"], ctx["tmp"]
    argv = {
        "project_table": [
            "project",
            "--db",
            db,
            "--table",
            "emb",
            "--id-column",
            "id",
            "--projection",
            str(ctx["sidecar"]),
            "--into",
            "out",
            "--replace",
        ],
        "index": ["index", "--db", db, "--table", "emb", "--id-column", "id", "--name", "ix_limited", "--replace"],
        "search": [
            "search",
            "--db",
            db,
            "--index",
            "ix",
            "--query-table",
            "q",
            "--query-id-column",
            "id",
            "--into",
            "found",
            "--replace",
        ],
        "tune": [
            "tune",
            "--db",
            db,
            "--table",
            "emb",
            "--id-column",
            "id",
            "--k",
            str(args.k),
            "--name",
            "tuned",
            "--replace",
        ],
        "evaluate": [
            "evaluate",
            "--input",
            str(ctx["source"]),
            "--id-column",
            "id",
            "--projection",
            str(ctx["sidecar"]),
        ],
    }[ctx["command"]]
    runs = {"sqlrp": (run_limited([*cli, *argv], memory, cpus, env=env), None)}
    if ctx["command"] == "project_table":
        hand = TABLE_BY_HAND
        runs["duckdb_default"] = (
            run_limited([sys.executable, "-c", hand, db, str(ctx["table_sql"])], memory, cpus, env=env),
            None,
        )
    if ctx["command"] == "search":
        out = str(Path(tmp) / "hand.parquet")
        runs["duckdb_exact"] = (
            run_limited([sys.executable, "-c", SEARCH_DUCKDB, db, str(args.d), out], memory, cpus, env=env),
            None,
        )
        argv = [sys.executable, "-c", SEARCH_NUMPY, str(ctx["source"]), str(args.queries), out]
        runs["pyarrow_numpy_exact"] = (run_limited(argv, memory, cpus, env=env), None)
    return runs


def prepare(args: argparse.Namespace, folder: Path, tmp: str) -> dict:
    """The input file, its database, the projection (drawn outside the limit) and the SQL by hand."""
    source = folder / f"emb_{args.rows}x{args.d}_rg{args.row_group}.parquet"
    make_input(source, args.rows, args.d, args.row_group)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "sqlrp"]
    ctx = {"source": source, "env": env, "cli": cli, "tmp": tmp}
    sidecar = folder / f"emb_{args.rows}x{args.d}_k{args.k}.sqlrp.json"
    if not sidecar.exists():
        out = Path(tmp) / "drawn.parquet"
        base = [*cli, "project", "--table", str(source), "--id-column", "id", "--k", str(args.k), "--seed", "1"]
        subprocess.run([*base, "--into", str(out)], env=env, check=True, capture_output=True)
        sidecar.write_text(Path(str(out) + ".sqlrp.json").read_text())
    ctx["sidecar"] = sidecar
    compile_ = [*cli, "compile", "--id-column", "id", "--projection", str(sidecar)]
    ctx["sql"] = Path(tmp) / "project.sql"
    ctx["sql"].write_text(
        subprocess.run([*compile_, "--table", str(source)], env=env, check=True, capture_output=True, text=True).stdout
    )
    if set(args.commands.split(",")) - {"project"}:
        ctx["db"] = folder / f"emb_{args.rows}x{args.d}.duckdb"
        make_database(ctx["db"], source, args.queries)
        ctx["table_sql"] = Path(tmp) / "table.sql"
        printed = subprocess.run(
            [*compile_, "--db", str(ctx["db"]), "--table", "emb"], env=env, check=True, capture_output=True, text=True
        )
        ctx["table_sql"].write_text(printed.stdout)
        if "search" in args.commands:  # the index searched, built outside the limit
            index = [*cli, "index", "--db", str(ctx["db"]), "--table", "emb", "--id-column", "id", "--name", "ix"]
            subprocess.run([*index, "--replace"], env=env, check=True, capture_output=True)
    return ctx


def report(command: str, runs: dict) -> None:
    print(f"-- {command}")
    print(f"{'contender':<22}{'seconds':>9}{'anon MB':>9}{'RSS MB':>8}  result")
    done = {}
    for name, (r, verdict) in runs.items():
        state = (verdict or "finished") if r.finished else ("OOM-killed" if r.oom_killed else "failed")
        why = "" if r.finished else (r.stderr.strip().splitlines() or [""])[-1][:100]
        print(f"{name:<22}{r.seconds:>9.1f}{r.anon_mb:>9.0f}{r.rss_mb:>8.0f}  {state} {why}")
        if r.finished and verdict in (None, "exact"):
            done[name] = r.seconds
    hand = {n: s for n, s in done.items() if n != "sqlrp"}
    if "sqlrp" in done and hand:
        best = min(hand, key=hand.get)
        print(f"sqlrp / {best}: {done['sqlrp'] / hand[best]:.2f}x")
    rows = [(n, round(r.seconds, 1), round(r.anon_mb), r.finished, v) for n, (r, v) in runs.items()]
    print(json.dumps({"command": command, "rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--row-group", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--limits", default="512:1,1024:2", help="MB:CPUs, comma-separated")
    parser.add_argument("--commands", default="project", help="comma-separated: " + ", ".join(COMMANDS))
    parser.add_argument("--folder", default=os.environ.get("SQLRP_BENCH_DATA", "/tmp/sqlrp-small-device"))
    parser.add_argument("--smoke", action="store_true", help="20,000 x 32 under 512 MB, every command once")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.d, args.row_group, args.limits, args.queries = 20_000, 32, 5_000, "512:1", 50
        args.commands = ",".join(COMMANDS)
    if not available():
        print("no writable memory cgroup (root, cgroup v1 or v2): nothing measured")
        return
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        ctx = prepare(args, folder, tmp)
        size = ctx["source"].stat().st_size / 2**20
        print(f"input: {ctx['source'].name}, {size:.0f} MB on disk; k = {args.k}")
        for limit in args.limits.split(","):
            memory, cpus = (int(x) for x in limit.split(":"))
            print(f"\n== {memory} MB, {cpus} CPU(s) (input {size / memory:.1f}x the limit) ==")
            for command in args.commands.split(","):
                ctx["command"] = command
                runs = (
                    project_runs(args, ctx, memory, cpus)
                    if command == "project"
                    else table_runs(args, ctx, memory, cpus)
                )
                report(command, runs)


COMMANDS = ("project", "project_table", "index", "search", "tune", "evaluate")


if __name__ == "__main__":
    main()
