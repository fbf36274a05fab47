"""Similarity search on ClickHouse (chdb) and Spark (local[2]) against each engine's own exact brute
force (``sqlrp.search(..., exact=True)``: every query against every row, a window per query), in one
run on the same embedding-like rows and held-out queries.  Recall@10 is computed against NumPy.

    PYTHONPATH=. SPARK_LOCAL_IP=127.0.0.1 python bench/search_engines.py [--n 20000] [--d 32] [--queries 100]
        [--engines clickhouse,spark]

Printed: per engine, build seconds, and for the defaults and two larger settings the batch seconds,
Recall@10, and the exact statement's seconds over the search's (a ratio measured in the same run).
A first measurement of where the engines stand, not a benchmark of record: small tables, shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import sqlrp
from sqlrp.search.reference import result_recall


def embedding_like(n: int, seed: int, d: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal((n, d)) / np.sqrt(np.arange(1, d + 1))) @ basis.T


def frame(X: np.ndarray, id_name: str) -> pd.DataFrame:
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df.insert(0, id_name, np.arange(len(X), dtype=np.int64))
    return df


def connect(engine: str):  # noqa: ANN201
    if engine == "clickhouse":
        return sqlrp.connect("chdb://")
    from sqlrp.backends.spark import SparkBackend

    return SparkBackend.from_master("local[2]")


def timed(fn):  # noqa: ANN001, ANN201
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def run(engine: str, X: np.ndarray, Q: np.ndarray, top: int) -> None:
    db = connect(engine)
    try:
        db.write_dataframe("bench_rows", frame(X, "id"), replace=True)
        db.write_dataframe("bench_queries", frame(Q, "qid"), replace=True)
        _, build = timed(lambda: sqlrp.build_index(db, "bench_rows", "id", "bench_idx", replace=True))
        idx = sqlrp.load_index(db, "bench_idx")
        print(f"{engine}: {len(X):,} x {X.shape[1]}, {idx.lists} lists, {idx.bits}-bit codes, build {build:.2f} s")
        if idx.calibration is not None:
            print(f"  {idx.calibration.describe()}")
        exact, exact_s = timed(lambda: sqlrp.search(db, "bench_idx", "bench_queries", "qid", top=top, exact=True))
        near = np.vstack([np.argsort(((X - q) ** 2).sum(axis=1), kind="stable")[:top] for q in Q])
        truth = pd.DataFrame({"query_id": np.repeat(np.arange(len(Q)), top), "id": near.ravel()})
        print(f"  exact brute force        recall {result_recall(exact, truth):.3f}  {exact_s:7.2f} s")
        for probes, candidates in ((None, None), (idx.probes * 2, 400)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got, took = timed(
                    lambda p=probes, c=candidates: sqlrp.search(
                        db, "bench_idx", "bench_queries", "qid", top=top, probes=p, candidates=c
                    )
                )
            label = f"P {probes}, C {candidates}" if probes else "defaults (calibrated)"
            print(
                f"  search {label:<17} recall {result_recall(got, truth):.3f}  {took:7.2f} s  "
                f"exact / search {exact_s / took:.1f}x"
            )
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--d", type=int, default=32)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--engines", default="clickhouse,spark")
    args = parser.parse_args(argv)
    both = embedding_like(args.n + args.queries, 7, args.d)
    X, Q = both[: args.n], both[args.n :]
    for engine in args.engines.split(","):
        run(engine.strip(), X, Q, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
