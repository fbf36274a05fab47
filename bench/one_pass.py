"""``sqlrp project`` against the SQL it prints, run by hand, and against two by-hand routes (issue 34).

    PYTHONPATH=. python bench/one_pass.py                      # 200,000 x 300 float32, k = 64, 2 rounds
    PYTHONPATH=. python bench/one_pass.py --rows 1000000       # other shapes: --rows, --d, --k
    PYTHONPATH=. python bench/one_pass.py --smoke              # 5,000 x 32, one round (CI)

Every contender is a fresh process (``python ...``), timed from start to exit, its peak resident
memory read with ``os.wait4`` (the data is made in another child, so this process stays small):

- ``sqlrp``: ``sqlrp project --table T --id-column id --k K --seed R --into OUT --no-progress`` (a new
  projection each round, defaults: ``s = auto`` from the sample, the checks on);
- ``hand SQL``: the SQL ``sqlrp compile`` prints for the same projection (same options), run by hand
  in one statement on the same engine: DuckDB ``COPY (...) TO`` a file or ``CREATE TABLE AS``,
  PostgreSQL ``CREATE TABLE AS`` (psycopg; also with ``SET jit = off``, as sqlrp's connection sets
  it: JIT-compiling the long expressions is what PostgreSQL's default spends most on); compiling is
  not timed; sqlrp is imported from bytecode (``compileall`` first), as an installed package is;
- ``numpy`` (files): DuckDB fetches the features (``fetchnumpy``), NumPy multiplies by a dense sign
  matrix (``X @ R``, float32, BLAS), pyarrow writes Parquet;
- ``sklearn`` (files): pyarrow reads, scikit-learn ``SparseRandomProjection`` fits and transforms,
  pyarrow writes Parquet.

Cases: ``wide`` -- Parquet of ``d`` FLOAT columns -> Parquet; ``array`` -- Parquet of one ``FLOAT[d]``
column (pyarrow's fixed-size list, one row group as pyarrow writes 200,000 rows) -> Parquet; ``duckdb``
-- the wide rows as a table in a DuckDB file -> a table; ``postgres`` -- the same as ``real`` columns in
a throw-away PostgreSQL server (``testkit/pgserver.py``) -> a table.  Targets: sqlrp within 1.15x of the
hand-run SQL, and faster than both by-hand routes on the Parquet cases.  The contenders of a case run
alternately, ``--repeat`` rounds; the best time and the largest peak of each are printed.  Beside each
ratio, its floor from start-up alone (:func:`start_up`: importing NumPy, sqlglot and sqlrp and building
the command line, which the hand-run SQL's process does not pay), the bound on any in-process design.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HAND = """
import sys
sql = open(sys.argv[1]).read().strip().rstrip(";")
target, db = sys.argv[2], sys.argv[3]
if db.startswith("postgresql://"):
    import psycopg
    with psycopg.connect(db) as con:
        if sys.argv[4:] == ["jit-off"]:  # as sqlrp's connection sets it
            con.execute("SET jit = off")
        con.execute(f'DROP TABLE IF EXISTS "{target}"')
        con.execute(f'CREATE TABLE "{target}" AS {sql}')
else:
    import duckdb
    con = duckdb.connect(db)
    if target.endswith(".parquet"):
        con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet)")
    else:
        con.execute(f'CREATE OR REPLACE TABLE "{target}" AS {sql}')
    con.close()
"""

BY_NUMPY = """
import sys, duckdb, numpy as np, pyarrow as pa, pyarrow.parquet as pq
src, out, k, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
con = duckdb.connect()
if layout == "array":
    t = con.sql(f"SELECT id, emb FROM '{src}'").to_arrow_table()
    ids = t["id"].to_numpy()
    emb = t["emb"].combine_chunks()
    X = emb.values.to_numpy().reshape(len(t), -1)
else:
    cols = con.sql(f"SELECT * FROM '{src}'").fetchnumpy()
    ids = cols.pop("id")
    X = np.column_stack(list(cols.values()))
d = X.shape[1]
rng = np.random.default_rng(0)
s = np.sqrt(d)
signs = rng.choice([-1.0, 0.0, 1.0], size=(d, k), p=[1 / (2 * s), 1 - 1 / s, 1 / (2 * s)])
R = (signs * np.sqrt(s / k)).astype(X.dtype)
Y = X @ R
pq.write_table(pa.table({"id": ids, **{f"p{j}": Y[:, j] for j in range(k)}}), out)
"""

BY_SKLEARN = """
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from sklearn.random_projection import SparseRandomProjection
src, out, k, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t = pq.read_table(src)
ids = t["id"].to_numpy()
if layout == "array":
    X = t["emb"].combine_chunks().values.to_numpy().reshape(len(t), -1)
else:
    X = np.column_stack([t[c].to_numpy() for c in t.column_names if c != "id"])
Y = SparseRandomProjection(n_components=k, random_state=0).fit_transform(X)
pq.write_table(pa.table({"id": ids, **{f"p{j}": Y[:, j] for j in range(k)}}), out)
"""


def generate(folder: Path, rows: int, d: int) -> None:
    """``wide.parquet`` (``id``, ``f0..``: float32 normal), ``array.parquet`` (``id``, ``emb`` FLOAT[d]),
    both by pyarrow with its defaults, and ``emb.db`` holding the wide rows as table ``w``."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    X = np.random.default_rng(0).standard_normal((rows, d), dtype=np.float32)
    ids = np.arange(rows, dtype=np.int64)
    pq.write_table(pa.table({"id": ids, **{f"f{i}": X[:, i] for i in range(d)}}), folder / "wide.parquet")
    emb = pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), d)
    pq.write_table(pa.table({"id": ids, "emb": emb}), folder / "array.parquet")
    con = duckdb.connect(str(folder / "emb.db"))
    con.execute(f"CREATE TABLE w AS SELECT * FROM read_parquet('{folder / 'wide.parquet'}')")
    con.execute(f"COPY w TO '{folder / 'wide.csv'}' (HEADER)")
    con.close()


def timed(argv: list[str], cwd: Path, stdout: Path | None = None) -> tuple[float, float]:
    """Run ``argv`` in ``cwd``; its wall seconds and peak RSS in MB (``os.wait4``)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # sqlrp imported from bytecode, as an installed package is
    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115 - closed below
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    if stdout:
        out.close()  # type: ignore[union-attr]
    err = child.stderr.read().decode() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed:\n{err[-3000:]}")
    return seconds, usage.ru_maxrss / 1024


def case_runs(name: str, folder: Path, args: argparse.Namespace, db: str | None, rnd: int) -> dict[str, tuple]:
    """One round of the contenders of case ``name``: ``{contender: (seconds, peak MB)}``."""
    py = sys.executable
    table = {"wide": "wide.parquet", "array": "array.parquet"}.get(name, "w")
    common = ["--table", table, "--id-column", "id", "--k", str(args.k), "--seed", str(rnd)]
    where = ["--db", db] if db else []
    out = f"out_{name}.parquet" if db is None else "w_rp"
    runs = {}
    for old in (out, f"{out}.sqlrp.json", "hand.parquet"):
        (folder / old).unlink(missing_ok=True)
    project = [py, "-m", "sqlrp", "project", *where, *common, "--into", out, "--no-progress"]
    runs["sqlrp"] = timed(project + ([] if db is None else ["--replace"]), folder)
    sql = folder / f"hand_{name}.sql"
    # the projection the command just stored (a file's: its definition beside the output), compiled
    same = ["--projection", f"{out}.sqlrp.json"] if db is None else []
    timed([py, "-m", "sqlrp", "compile", *where, *common, *same], folder, stdout=sql)
    target = "hand.parquet" if db is None else "hand"
    engine = db if (db or "").startswith("postgresql://") else str(folder / "emb.db") if db else ":memory:"
    runs["hand SQL"] = timed([py, "-c", HAND, str(sql), target, engine], folder)
    if engine.startswith("postgresql://"):  # PostgreSQL JIT-compiles the long expressions by default
        runs["hand, jit off"] = timed([py, "-c", HAND, str(sql), target, engine, "jit-off"], folder)
    if db is None:
        layout = "array" if name == "array" else "wide"
        runs["numpy"] = timed([py, "-c", BY_NUMPY, table, "numpy.parquet", str(args.k), layout], folder)
        runs["sklearn"] = timed([py, "-c", BY_SKLEARN, table, "sklearn.parquet", str(args.k), layout], folder)
    return runs


def load_postgres(url: str, folder: Path, d: int) -> None:
    """Table ``w`` (``id bigint``, ``f0..`` real) from ``wide.csv``, analysed."""
    import psycopg

    with psycopg.connect(url) as con:
        con.execute("DROP TABLE IF EXISTS w")
        con.execute("CREATE TABLE w (id bigint, " + ", ".join(f"f{i} real" for i in range(d)) + ")")
        with con.cursor() as cur, cur.copy("COPY w FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
            with open(folder / "wide.csv", "rb") as fh:
                while block := fh.read(1 << 20):
                    copy.write(block)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("VACUUM ANALYZE w")


def start_up(folder: Path) -> float:
    """What starting the command costs beyond what the hand-run SQL's process pays: ``python -m sqlrp
    --version`` (Python, NumPy, sqlglot, DuckDB and sqlrp imported, the command line built) less
    ``python -c "import duckdb"``, best of 3 each.  No design that compiles in a Python process gets
    below ``(hand + this) / hand``: the floor of the ratio, printed beside it."""
    sqlrp = min(timed([sys.executable, "-m", "sqlrp", "--version"], folder)[0] for _ in range(3))
    duck = min(timed([sys.executable, "-c", "import duckdb"], folder)[0] for _ in range(3))
    return max(0.0, sqlrp - duck)


def report(name: str, runs: dict[str, list[tuple[float, float]]], fixed: float = 0.0) -> list[str]:
    best = {who: min(s for s, _ in r) for who, r in runs.items()}
    peak = {who: max(m for _, m in r) for who, r in runs.items()}
    lines = []
    for who in runs:
        times = ", ".join(f"{s:.2f}" for s, _ in runs[who])
        lines.append(f"  {name:8s} {who:9s} best {best[who]:7.2f} s ({times}); peak RSS {peak[who]:6.0f} MB")
    ratio = best["sqlrp"] / best["hand SQL"]
    verdict = "MET" if ratio <= 1.15 else "not met"
    line = f"  {name:8s} sqlrp / hand SQL {ratio:5.2f}x (target <= 1.15x: {verdict}"
    line += f"; floor from start-up {(best['hand SQL'] + fixed) / best['hand SQL']:4.2f}x)"
    if "hand, jit off" in best:
        line += f"; sqlrp / hand, jit off {best['sqlrp'] / best['hand, jit off']:4.2f}x"
    for who in ("numpy", "sklearn"):
        if who in best:
            line += f"; sqlrp / {who} {best['sqlrp'] / best[who]:4.2f}x"
    lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=300)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cases", default="wide,array,duckdb,postgres")
    parser.add_argument("--dir", help="where the data goes (default: a temporary folder, removed)")
    parser.add_argument("--smoke", action="store_true", help="5,000 x 32, one round")
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.d, args.k, args.repeat = 5_000, 32, 8, 1
    if args.generate:  # the child that makes the data
        generate(Path(args.generate), args.rows, args.d)
        return 0
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sqlrp_one_pass_"))
    folder.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        t0 = time.perf_counter()
        for old in ("emb.db", "emb.db.wal"):
            (folder / old).unlink(missing_ok=True)
        make = [sys.executable, __file__, "--generate", str(folder), "--rows", str(args.rows), "--d", str(args.d)]
        subprocess.run(make, check=True)
        print(f"{args.rows:,} x {args.d} float32 -> k = {args.k}; data made in {time.perf_counter() - t0:.1f} s")
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "sqlrp")], check=True)
        cases = args.cases.split(",")
        urls: dict[str, str | None] = {"wide": None, "array": None, "duckdb": "duckdb:///emb.db"}
        if "postgres" in cases:
            from testkit.pgserver import PostgresUnavailable, TempPostgres

            try:
                server = TempPostgres()
                urls["postgres"] = server.start()
                load_postgres(urls["postgres"], folder, args.d)
            except PostgresUnavailable as exc:
                print(f"  postgres: skipped ({exc})")
                cases.remove("postgres")
                server = None
        fixed = start_up(folder)
        print(f"start-up beyond the hand-run SQL's (import duckdb): {fixed:.2f} s")
        lines = []
        for name in cases:
            runs: dict[str, list[tuple[float, float]]] = {}
            for rnd in range(args.repeat):
                for who, result in case_runs(name, folder, args, urls[name], rnd + 1).items():
                    runs.setdefault(who, []).append(result)
            lines += report(name, runs, fixed)
            print("\n".join(lines[-len(runs) - 1 :]), flush=True)
    finally:
        if server is not None:
            server.stop()
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
