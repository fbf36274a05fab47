"""The engines case: the same projection on every engine sqlrp executes, seconds and ratios from one run.

    PYTHONPATH=. python bench/engines.py                       # 200,000 x 784 -> 200, every engine
    PYTHONPATH=. python bench/engines.py --rows 20000 --engines duckdb,spark
    PYTHONPATH=. python bench/engines.py --smoke               # tiny; CI

The MNIST-like table (``--rows`` x 784) is generated *inside* each engine by the same integer
formula, ``f_j = ((id * 7919 + j * 104729) % 1000) / 1000``, so every engine holds identical data
without a bulk load through Python (loading is not timed).  For ``s = sqrt(d)`` and ``s = 3`` the
stored projection is projected with the engine's ``auto`` strategy into a table
(``sqlrp.project(..., into=...)``, ``check=False``); the output's first rows are compared with
NumPy on the same formula, so a fast wrong answer cannot pass.  Printed and written to
``bench/results/engines-<time>.json``: seconds per engine and s, the ratio to DuckDB's time for the
same s, and the ratio of s = 3 to the engine's own s = sqrt(d); each projection is run ``--repeat``
times (2) and the best is the figure, the first run (planning, Spark's code generation) beside it.

Targets (issue 11): on Spark, s = 3 at most 2x Spark's own s = sqrt(d); no engine over 10x
DuckDB's time for s = sqrt(d).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import sqlrp
from sqlrp.compiler import ident
from sqlrp.dialects import get_dialect
from sqlrp.methods import make_projection

ROOT = Path(__file__).resolve().parent.parent

ENGINES = ("duckdb", "postgres", "spark", "clickhouse", "sqlite")


def feature_sql(j: int, id_expr: str) -> str:
    return f"CAST((({id_expr} * 7919 + {j * 104729}) % 1000) AS DOUBLE) / 1000.0"


def feature_numpy(ids: np.ndarray, d: int) -> np.ndarray:
    j = np.arange(d)
    return ((ids[:, None] * 7919 + j[None, :] * 104729) % 1000) / 1000.0


def rows_sql(engine: str, n: int) -> tuple[str, str]:
    """A relation of ids 0..n-1 and the name of its column, per engine."""
    if engine == "duckdb":
        return f"range({n})", "range"
    if engine == "postgres":
        return f"generate_series(0, {n - 1}) AS g(i)", "i"
    if engine == "spark":
        return f"range({n})", "id"
    if engine == "clickhouse":
        return f"numbers({n})", "number"
    # sqlite: a recursive CTE
    return f"(WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < {n - 1}) SELECT i FROM r)", "i"


def make_table(db, engine: str, n: int, d: int) -> None:
    rel, col = rows_sql(engine, n)
    dialect = get_dialect(db.dialect)
    double = (
        "REAL"
        if engine == "sqlite"
        else ("Float64" if engine == "clickhouse" else "DOUBLE PRECISION" if engine == "postgres" else "DOUBLE")
    )
    feats = ", ".join(f"{feature_sql(j, col).replace('DOUBLE', double)} AS f{j}" for j in range(d))
    props = " ENGINE = MergeTree ORDER BY id" if engine == "clickhouse" else ""
    using = " USING parquet" if engine == "spark" else ""
    name = ident("t").sql(dialect.sqlglot)
    db.execute(f"DROP TABLE IF EXISTS {name}")
    db.execute(f"CREATE TABLE {name}{using}{props} AS SELECT CAST({col} AS BIGINT) AS id, {feats} FROM {rel}")


def connect(engine: str, stack: list):
    if engine == "duckdb":
        return sqlrp.connect()
    if engine == "sqlite":
        return sqlrp.connect(os.path.join(stack[0], "bench.sqlite"))
    if engine == "clickhouse":
        return sqlrp.connect("chdb://")
    if engine == "spark":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        return sqlrp.connect("local[2]")
    if engine == "postgres":
        url = os.environ.get("SQLRP_PG_URL")
        if not url:
            from testkit.pgserver import TempPostgres

            server = TempPostgres()
            url = server.start()
            stack.append(server)
        return sqlrp.connect(url)
    raise ValueError(engine)


CASES = {"sqrt_d": "auto", "s3": 3}


def run_engine(
    engine: str, n: int, d: int, k: int, stack: list, repeat: int = 2, cases: tuple[str, ...] = tuple(CASES)
) -> dict:
    out: dict = {"engine": engine}
    db = connect(engine, stack)
    try:
        t0 = time.perf_counter()
        make_table(db, engine, n, d)
        out["load_seconds"] = round(time.perf_counter() - t0, 2)
        for label, s in ((c, CASES[c]) for c in cases):
            proj = make_projection("achlioptas", d, k, seed=1, s=s)
            name = f"bench_{label}"
            sqlrp.create_projection(db, name, "achlioptas", d=d, k=k, seed=1, s=s, replace=True)
            strategy = sqlrp.compiler.strategies.choose(proj, sqlrp.Source("t", "id", "wide", ()), engine)
            times = []
            try:
                for _ in range(repeat):  # the first run includes planning (pairs) and code generation (Spark)
                    t0 = time.perf_counter()
                    sqlrp.project(db, "t", "id", name, into=f"o_{label}", replace=True, check=False)
                    times.append(time.perf_counter() - t0)
            except sqlrp.SqlrpError as exc:
                out[label] = {"refused": str(exc)}
                continue
            seconds = min(times)
            got = db.query_df(
                f"SELECT * FROM {ident(f'o_{label}').sql(get_dialect(db.dialect).sqlglot)} WHERE id < 5 ORDER BY id"
            )
            want = sqlrp.transform(sqlrp.load_projection(db, name), feature_numpy(np.arange(5), d))
            err = float(np.max(np.abs(got.drop(columns="id").to_numpy(dtype=float) - want)) / np.abs(want).max())
            out[label] = {
                "seconds": round(seconds, 2),
                "first": round(times[0], 2),
                "strategy": strategy,
                "relative_error": err,
            }
            print(
                f"  {engine:10s} {label:6s} {seconds:8.2f} s best, {times[0]:8.2f} s first  ({strategy}, "
                f"rel. error {err:.1e})",
                flush=True,
            )
    finally:
        db.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--d", type=int, default=784)
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--smoke", action="store_true", help="1,000 x 64 -> 16")
    parser.add_argument("--repeat", type=int, default=2, help="runs per projection; the best is reported")
    parser.add_argument("--cases", default=",".join(CASES), help="sqrt_d, s3 or both")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    n, d, k = (1_000, 64, 16) if args.smoke else (args.rows, args.d, args.k)
    print(f"engines: {n:,} x {d} -> {k}", flush=True)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="sqlrp-bench-") as tmp:
        stack: list = [tmp]
        try:
            for engine in args.engines.split(","):
                try:
                    results[engine] = run_engine(
                        engine, n, d, k, stack, 1 if args.smoke else args.repeat, tuple(args.cases.split(","))
                    )
                except Exception as exc:  # noqa: BLE001 - one engine's failure is reported, the rest run
                    results[engine] = {"engine": engine, "error": f"{type(exc).__name__}: {exc}"}
                    print(f"  {engine}: ERROR {results[engine]['error']}", flush=True)
        finally:
            for server in stack[1:]:
                server.stop()
    base = results.get("duckdb", {})
    print(
        f"\n{'engine':10s} {'sqrt(d) s':>10s} {'s=3 s':>10s} {'/duckdb sqrt(d)':>16s} {'/duckdb s=3':>12s} "
        f"{'s=3 / own sqrt(d)':>18s}"
    )
    for engine, r in results.items():
        a, b = r.get("sqrt_d", {}).get("seconds"), r.get("s3", {}).get("seconds")
        ra = a / base["sqrt_d"]["seconds"] if a and base.get("sqrt_d", {}).get("seconds") else None
        rb = b / base["s3"]["seconds"] if b and base.get("s3", {}).get("seconds") else None
        own = b / a if a and b else None
        r["ratios"] = {"to_duckdb_sqrt_d": ra, "to_duckdb_s3": rb, "s3_to_own_sqrt_d": own}

        def fmt(v: float | None, unit: str = "") -> str:
            return f"{v:.2f}{unit}" if v is not None else "-"

        print(f"{engine:10s} {fmt(a):>10s} {fmt(b):>10s} {fmt(ra, 'x'):>16s} {fmt(rb, 'x'):>12s} {fmt(own, 'x'):>18s}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"engines-{'smoke' if args.smoke else 'full'}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"rows": n, "d": d, "k": k, "results": results}, indent=2, default=str))
    print(f"\nwrote {path}")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
