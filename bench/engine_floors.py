"""Probe: lower bounds for the engines case on SQLite and Spark, against DuckDB in the same run.

    PYTHONPATH=. python bench/engine_floors.py                 # 200,000 x 784, s = sqrt(d), k = 200
    PYTHONPATH=. python bench/engine_floors.py --rows 20000 --engines spark

The issue's target is at most 10x DuckDB's time for the s = sqrt(d) projection (``bench/engines.py``).
Each engine gets the same table (``bench/engines.py``'s formula) and runs queries that do strictly
less than any projection must, written to a sink (DuckDB and SQLite: ``sum`` of the result;
Spark: the ``noop`` writer):

- ``read``: every feature read once and added up (a projection reads each at least once);
- ``adds``: as many additions per row as the matrix has non-zeros (5,637), all of one column that
  is already loaded -- no distinct reads, no outputs written.

If either alone takes more than 10x DuckDB's whole projection, no SQL on that engine meets the
target.  ``--engines sqlite`` on 2026-11-23: DuckDB's projection 2.87 s; SQLite read 12.02 s (4.2x),
adds 30.10 s (10.5x); in the session before, adds took 28.43 s against DuckDB's 2.24 s (12.7x).
SQLite's whole projection, ``bench/engines.py --engines duckdb,spark,sqlite --cases sqrt_d --repeat 3``:
115.72 s, 43x.

``--spark-s3``: the other Spark target, s = 3 in at most 2x Spark's own s = sqrt(d) time.  Spark's
s = sqrt(d) projection is run as sqlrp runs it (``sqlrp.project(..., into=...)``), then two floors,
each into the ``noop`` sink:

- ``adds``: as many additions per row as the fewest sqlrp knows how to plan for s = 3 (the ``pairs``
  plan, Paar's greedy on the matrix or its transpose, whichever is smaller), of the features in
  turn, into one sum: the arithmetic of any plan that evaluates the matrix as sums, with no outputs
  to write;
- ``explode``: the 784 features of each row unpivoted to ``(id, feature, value)`` rows (``posexplode``),
  the first step of any plan that joins the rows with the stored matrix instead (sqlrp's ``join``
  strategy), before the join multiplies the rows by the s = 3 matrix's 67 non-zeros per feature.

``--spark-s3`` on 2026-11-23: Spark's s = sqrt(d) projection 18.54 s (2x = 37.1 s); adds (23,620
additions planned) 52.22 s = 2.8x; explode 29.78 s = 1.6x (a run before, 25.63 s = 1.3x of 20.19 s).
The arithmetic alone exceeds the target; a join plan would go on from 157 M exploded rows to 10.5 G
joined ones.
"""

from __future__ import annotations

import argparse
import os
import time

import sqlrp
from bench.engines import make_table
from sqlrp.methods import make_projection

D, K = 784, 200


def grouped(terms: list[str], size: int = 98) -> str:
    """``t0 + t1 + ...`` in parenthesised groups (SQLite and Spark refuse left-deep chains of 1,000)."""
    return " + ".join("(" + " + ".join(terms[i : i + size]) + ")" for i in range(0, len(terms), size))


def best(fn, repeat: int = 2) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--engines", default="sqlite,spark")
    parser.add_argument("--spark-s3", action="store_true", help="Spark's s = 3 floors against its own s = sqrt(d)")
    args = parser.parse_args(argv)
    if args.spark_s3:
        return spark_s3(args.rows)
    n = args.rows
    nnz = make_projection("achlioptas", D, K, seed=1, s="auto").linear.nnz
    read = grouped([f"f{j}" for j in range(D)])
    adds = grouped(["f0"] * nnz)
    print(f"{n:,} x {D}; s = sqrt(d), k = {K}: {nnz:,} non-zeros", flush=True)

    duck = sqlrp.connect()
    make_table(duck, "duckdb", n, D)
    sqlrp.create_projection(duck, "rp", "achlioptas", d=D, k=K, seed=1, s="auto")
    base = best(lambda: sqlrp.project(duck, "t", "id", "rp", into="o", replace=True, check=False))
    print(f"duckdb projection (inline, into a table): {base:.2f} s; 10x = {10 * base:.1f} s", flush=True)

    for engine in args.engines.split(","):
        if engine == "sqlite":
            import sqlite3
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                db = sqlrp.connect(os.path.join(tmp, "floor.sqlite"))
                make_table(db, "sqlite", n, D)
                con: sqlite3.Connection = db.con  # type: ignore[attr-defined]
                for label, expr in (("read", read), ("adds", adds)):
                    seconds = best(lambda e=expr, c=con: c.execute(f"SELECT sum({e}) FROM t").fetchall(), repeat=1)
                    print(f"sqlite {label}: {seconds:.2f} s = {seconds / base:.1f}x duckdb's projection", flush=True)
                db.close()
        elif engine == "spark":
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            from sqlrp.backends.spark import SparkBackend

            db = SparkBackend.from_master("local[2]", conf={"spark.driver.memory": "4g"})
            make_table(db, "spark", n, D)
            spark = db.spark  # type: ignore[attr-defined]
            for label, expr in (("read", read), ("adds", adds)):
                query = f"SELECT id, {expr} AS s FROM t"
                seconds = best(lambda q=query, sp=spark: sp.sql(q).write.mode("overwrite").format("noop").save())
                print(
                    f"spark local[2] {label}: {seconds:.2f} s = {seconds / base:.1f}x duckdb's projection", flush=True
                )
            db.close()
    duck.close()
    return 0


def spark_s3(n: int) -> int:
    from sqlrp.backends.spark import SparkBackend
    from sqlrp.compiler.strategies import best_pairs
    from sqlrp.dialects.spark import HUGE_METHOD_LIMIT

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    linear = make_projection("achlioptas", D, K, seed=1, s=3).linear
    additions = best_pairs(linear, "spark").additions
    print(f"{n:,} x {D}; s = 3, k = {K}: {linear.nnz:,} non-zeros, {additions:,} additions planned (pairs)", flush=True)
    db = SparkBackend.from_master("local[2]", conf={"spark.driver.memory": "4g"})
    make_table(db, "spark", n, D)
    sqlrp.create_projection(db, "rp", "achlioptas", d=D, k=K, seed=1, s="auto")
    base = best(lambda: sqlrp.project(db, "t", "id", "rp", into="o", replace=True, check=False))
    print(f"spark s = sqrt(d) projection (sqlrp, into a table): {base:.2f} s; 2x = {2 * base:.1f} s", flush=True)
    spark = db.spark  # type: ignore[attr-defined]
    spark.conf.set("spark.sql.codegen.hugeMethodLimit", str(HUGE_METHOD_LIMIT))  # as sqlrp's projection runs
    features = ", ".join(f"f{j}" for j in range(D))
    queries = {
        # distinct features in groups of 97 (prime to 784): no two groups alike, so Spark's common
        # subexpression elimination cannot shrink the work the way it does for one repeated column
        "adds": f"SELECT id, {grouped([f'f{i % D}' for i in range(additions)], size=97)} AS s FROM t",
        "explode": f"SELECT id, posexplode(array({features})) AS (feature, value) FROM t",
    }
    for label, query in queries.items():
        seconds = best(lambda q=query, sp=spark: sp.sql(q).write.mode("overwrite").format("noop").save())
        print(f"spark local[2] {label}: {seconds:.2f} s = {seconds / base:.1f}x spark's s = sqrt(d)", flush=True)
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
