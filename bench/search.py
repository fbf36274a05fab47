"""Similarity search benchmark (issue 15): sqlrp's index and search in DuckDB and PostgreSQL against
exact brute force in SQL on the same engine, FAISS (IndexLSH with exact refinement, IndexHNSWFlat)
and hnswlib, all in one run on the same data and queries.

    PYTHONPATH=. python bench/search.py --smoke                   # seconds; CI
    PYTHONPATH=. python bench/search.py                           # 1,000,000 x 128 mixture + digits
    PYTHONPATH=. python bench/search.py --n 100000 --no-postgres

Data (``bench/search_peers.py``): a Gaussian mixture of 1,000 clusters in 128 dimensions from
``sklearn.datasets.make_blobs`` with its own defaults (cluster_std 1, centres in [-10, 10]^128), 1,000
held-out queries; and the UCI digits (1,797 x 64), 300 rows held out as queries.  Recall@10 is
computed here against exact neighbours from NumPy, independently of every contender.

For each contender: Recall@10, seconds for the batch of queries, build seconds and index size.
sqlrp sweeps ``candidates`` (the rows re-ranked exactly per query) and the peers their search
parameter until Recall@10 >= 0.9; the ratios printed are against exact brute force in SQL on the same
engine (``sqlrp.search(..., exact=True)``), and build against projecting the table with the index's
own matrix (``sqlrp.project(..., into=)``).  PostgreSQL's brute force runs on a slice of the queries
(``--pg-exact-queries``) and is scaled to the batch, and says so.
Results: printed, and ``bench/results/search-<mode>-<time>.json`` (gitignored).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from search_peers import (  # noqa: E402
    FaissHNSW,
    FaissLSH,
    HnswlibKNN,
    digits_split,
    exact_knn,
    gaussian_mixture,
    reach,
    recall_at_k,
)

import sqlrp  # noqa: E402

K = 10
TARGET = 0.9


def _frame(X: np.ndarray, id_name: str) -> pd.DataFrame:
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame.insert(0, id_name, np.arange(len(X), dtype=np.int64))
    return frame


def _ids(result: pd.DataFrame, queries: int) -> np.ndarray:
    """``(query_id, id, rank)`` rows as a ``queries x K`` id array (-1 where a query got fewer)."""
    ids = np.full((queries, K), -1, dtype=np.int64)
    for qid, row_id, rank in result[["query_id", "id", "rank"]].itertuples(index=False):
        ids[int(qid), int(rank) - 1] = int(row_id)
    return ids


def _timed(fn, *args, **kwargs):  # noqa: ANN001, ANN202
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a query with fewer than K neighbours shows in the recall
        out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def _load_postgres(db, name: str, frame: pd.DataFrame) -> None:  # noqa: ANN001
    """A table through one ``COPY`` (the same path for every row count)."""
    cols = ", ".join(f'"{c}" {"bigint" if i == 0 else "double precision"}' for i, c in enumerate(frame.columns))
    db.execute(f'DROP TABLE IF EXISTS "{name}"')
    db.execute(f'CREATE TABLE "{name}" ({cols})')
    with db.conn.cursor() as cur, cur.copy(f'COPY "{name}" FROM STDIN WITH (FORMAT csv)') as copy:
        step = 50_000
        for start in range(0, len(frame), step):
            copy.write(frame.iloc[start : start + step].to_csv(index=False, header=False).encode())
    db.execute(f'ANALYZE "{name}"')


def _size(db, engine: str, tables: list[str]) -> int:  # noqa: ANN001
    if engine == "postgres":
        return int(sum(db.fetchall(f"SELECT pg_total_relation_size('\"{t}\"')")[0][0] for t in tables))
    db.execute("CHECKPOINT")
    row = db.fetchall("SELECT block_size, used_blocks FROM pragma_database_size()")[0]
    return int(row[0] * row[1])


def sqlrp_engine(engine: str, X: np.ndarray, Q: np.ndarray, truth: np.ndarray, cfg: dict) -> dict:
    """Load, project (the reference cost), index, sweep ``candidates``, brute force: one engine."""
    server = None
    folder = tempfile.mkdtemp(prefix="sqlrp_search_bench_")
    if engine == "postgres":
        from pgserver import TempPostgres

        server = TempPostgres()
        db = sqlrp.connect(server.start())
    else:
        db = sqlrp.connect(f"duckdb:///{folder}/bench.duckdb", threads=2)
    try:
        points, queries = _frame(X, "id"), _frame(Q, "qid")
        if engine == "postgres":
            _load_postgres(db, "points", points)
            _load_postgres(db, "queries", queries)
        else:
            db.write_dataframe("points", points)
            db.write_dataframe("queries", queries)
        del points, queries
        d, bits = X.shape[1], cfg["bits"]
        sqlrp.create_projection(db, "bench_signs", "achlioptas", d=d, k=bits, seed=0)
        _, project_s = _timed(sqlrp.project, db, "points", "id", "bench_signs", into="projected")
        db.execute('DROP TABLE "projected"')
        before = _size(db, engine, []) if engine == "duckdb" else 0
        index, build_s = _timed(
            sqlrp.build_index, db, "points", "id", "bench_index", projection="bench_signs", band_bits=cfg["band_bits"]
        )
        size = _size(db, engine, ["bench_index", "bench_index__bands"]) - before
        sweep = []
        for candidates in cfg["candidates"]:
            result, seconds = _timed(sqlrp.search, db, "bench_index", "queries", "qid", top=K, candidates=candidates)
            sweep.append(
                {"candidates": candidates, "recall": recall_at_k(_ids(result, len(Q)), truth), "batch_s": seconds}
            )
            print(
                f"   {engine} candidates={candidates}: recall {sweep[-1]['recall']:.3f} in {seconds:.2f} s", flush=True
            )
            if sweep[-1]["recall"] >= TARGET and len(sweep) >= 2:
                break
        exact_queries = cfg["exact_queries"] if engine == "duckdb" else cfg["pg_exact_queries"]
        exact_queries = min(exact_queries or len(Q), len(Q))
        table = "queries"
        if exact_queries < len(Q):
            db.execute(f'CREATE TABLE "queries_slice" AS SELECT * FROM "queries" WHERE "qid" < {exact_queries}')
            table = "queries_slice"
        exact, exact_s = _timed(sqlrp.search, db, "bench_index", table, "qid", top=K, exact=True)
        exact_recall = recall_at_k(_ids(exact, exact_queries), truth[:exact_queries])
        print(
            f"   {engine} exact SQL: {exact_queries} queries in {exact_s:.2f} s (recall {exact_recall:.3f})", flush=True
        )
        return {
            "engine": engine,
            "bits": bits,
            "band_bits": index.band_bits,
            "project_s": project_s,
            "build_s": build_s,
            "index_bytes": size,
            "sweep": sweep,
            "exact_queries": exact_queries,
            "exact_s": exact_s,
            "exact_batch_s": exact_s * len(Q) / exact_queries,
            "exact_recall": exact_recall,
        }
    finally:
        db.close()
        if server is not None:
            server.stop()


def peers(X: np.ndarray, Q: np.ndarray, truth: np.ndarray, cfg: dict) -> list[dict]:
    out = []
    for cls, params in ((FaissLSH, {"nbits": 2 * X.shape[1]}), (FaissHNSW, {}), (HnswlibKNN, {})):
        result = reach(cls, X, Q, K, truth, TARGET, **params)
        result.pop("ids")
        out.append({"name": cls.name, **result})
        print(
            f"   {cls.name}: recall {result['recall']:.3f} in {result['query_s']:.3f} s ({result['params']})",
            flush=True,
        )
    return out


def dataset(title: str, X: np.ndarray, Q: np.ndarray, cfg: dict) -> dict:
    print(f"\n== {title}: {len(X):,} x {X.shape[1]}, {len(Q):,} queries", flush=True)
    truth, truth_s = _timed(exact_knn, X, Q, K)
    print(f"   exact neighbours (NumPy, for recall): {truth_s:.2f} s", flush=True)
    engines = [sqlrp_engine(engine, X, Q, truth, cfg) for engine in cfg["engines"]]
    return {
        "title": title,
        "rows": len(X),
        "d": X.shape[1],
        "queries": len(Q),
        "sqlrp": engines,
        "peers": peers(X, Q, truth, cfg),
    }


def report(result: dict) -> None:
    print(f"\n{result['title']}: {result['rows']:,} x {result['d']}, {result['queries']:,} queries, Recall@{K}")
    head = f"{'contender':<34}{'recall':>8}{'batch s':>10}{'build s':>10}{'index MB':>10}{'vs exact SQL':>14}"
    print(head)
    print("-" * len(head))
    for e in result["sqlrp"]:
        engine = e["engine"]
        scaled = "" if e["exact_queries"] == result["queries"] else f" (from {e['exact_queries']} queries)"
        print(
            f"{'exact brute force SQL, ' + engine:<34}{e['exact_recall']:>8.3f}{e['exact_batch_s']:>10.2f}"
            f"{0:>10.2f}{0:>10.1f}{1:>13.1f}x{scaled}"
        )
        for s in e["sweep"]:
            label = f"sqlrp {engine}, C={s['candidates']}"
            print(
                f"{label:<34}{s['recall']:>8.3f}{s['batch_s']:>10.2f}{e['build_s']:>10.2f}"
                f"{e['index_bytes'] / 2**20:>10.1f}{e['exact_batch_s'] / s['batch_s']:>13.1f}x"
            )
        print(
            f"{'  (projecting, k = ' + str(e['bits']) + ')':<34}{'':>8}{'':>10}{e['project_s']:>10.2f}"
            f"   build / project = {e['build_s'] / e['project_s']:.2f}x, bands of {e['band_bits']} bits"
        )
    for p in result["peers"]:
        print(
            f"{p['name'] + ' (' + p['params'] + ')':<34}{p['recall']:>8.3f}{p['query_s']:>10.3f}"
            f"{p['build_s']:>10.2f}{p['index_bytes'] / 2**20:>10.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, every contender once (CI)")
    parser.add_argument("--n", type=int, default=1_000_000, help="rows of the mixture")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-digits", action="store_true")
    parser.add_argument("--bits", type=int, default=256)
    parser.add_argument("--band-bits", type=int, help="default: from the rows (sqlrp.index.default_band_bits)")
    parser.add_argument("--candidates", default="100,300,1000,3000", help="sqlrp's sweep, until recall >= 0.9")
    parser.add_argument("--exact-queries", type=int, help="DuckDB brute force on this many queries (default all)")
    parser.add_argument("--pg-exact-queries", type=int, default=20, help="PostgreSQL brute force: queries run")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    cfg = {
        "engines": ["duckdb"] + ([] if args.no_postgres else ["postgres"]),
        "bits": args.bits,
        "band_bits": args.band_bits,
        "candidates": [int(c) for c in args.candidates.split(",")],
        "exact_queries": args.exact_queries,
        "pg_exact_queries": args.pg_exact_queries,
    }
    if args.smoke:
        cfg.update(candidates=[20, 100], bits=128)
        X, Q = gaussian_mixture(3_000, d=16, clusters=30, queries=20)
    else:
        X, Q = gaussian_mixture(args.n)
    results = [
        dataset(f"Gaussian mixture ({'30' if args.smoke else '1,000'} clusters, make_blobs defaults)", X, Q, cfg)
    ]
    del X, Q
    if not args.no_digits:
        X, Q = digits_split(queries=300)
        results.append(dataset("digits (UCI, 300 held-out queries)", X, Q, cfg))
    for result in results:
        report(result)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"search-{'smoke' if args.smoke else 'full'}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1, default=str))
    print(f"\nresults: {path}")
    os.sync()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
