"""Search: the exact brute force and the RaBitQ estimates."""

from __future__ import annotations

import numpy as np

import sqlrp

from .common import seconds


def search_exact(n: int = 200_000, queries: int = 100) -> None:
    """Exact k-NN by brute force in DuckDB, the baseline of bench/search.py, on an embedding-like
    ``FLOAT[128]`` table: sqlrp's own SQL (``search(..., exact=True)``: ``array_distance`` and
    ``min_by(id, (distance, id), K)``, ties by id) against the one statement a user writes,
    ``min_by(id, array_distance(b.v, q.v), 10)`` (no tie rule), on the same tables.  Seconds per query."""
    import pyarrow as pa

    from bench.search_peers import embedding_like

    X, Q = embedding_like(n, 128, queries)
    db = sqlrp.connect(threads=2)
    for name, key, M in (("points", "id", X), ("queries", "qid", Q)):
        arr = pa.FixedSizeListArray.from_arrays(pa.array(M.ravel()), M.shape[1])
        db.con.register("_f", pa.table({key: pa.array(np.arange(len(M))), "v": arr}))
        db.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _f")
        db.con.unregister("_f")
    sqlrp.build_index(db, "points", "id", "idx", lists=16, layout="array", array_column="v")
    forms = {
        "sqlrp search(exact=True)": lambda: sqlrp.search(db, "idx", "queries", "qid", top=10, exact=True),
        "min_by(id, array_distance, 10)": lambda: db.fetchall(
            "SELECT q.qid, min_by(p.id, array_distance(p.v, q.v), 10) FROM queries q, points p GROUP BY q.qid"
        ),
    }
    print(f"exact 10-NN by brute force in DuckDB, {queries} queries x {n:,} rows x 128 (FLOAT[128])")
    for label, fn in forms.items():
        t = seconds(fn)
        print(f"  {label:<34} {t:8.2f} s  {t / queries:.4f} s per query")


def rabitq(n: int = 200_000, lists: int = 448, probes: int = 32, queries: int = 200) -> None:
    """The code behind the search's estimates, in NumPy on the embedding-like table (``sqlrp.search.ivf``'s
    estimator, the SQL's oracle): Recall@10 after re-ranking the ``C`` best estimates of the probed
    lists, for the randomized Hadamard rotation with 2 rounds and 1 round at 256 bits, and 2 rounds
    at 128 bits.  The ceiling is the share of true neighbours in the probed lists.  (A first probe
    in a throw-away script, before this one, measured a sparse Achlioptas projection of the
    residuals, s = sqrt(d), far worse: 0.611 at C = 200 with 128 bits against 0.870 for a dense
    orthogonal rotation; so the rotation is orthogonal.)"""
    from bench.search_peers import embedding_like
    from sqlrp.search.ivf import estimates, query_planes, reference_codes, train_lists
    from sqlrp.search.rotation import rotate, rotation_signs

    X, Q = embedding_like(n, 128, queries)
    X, Q = X.astype(np.float64), Q.astype(np.float64)
    import faiss

    flat = faiss.IndexFlatL2(128)
    flat.add(X.astype(np.float32))
    truth = flat.search(Q.astype(np.float32), 10)[1]
    rng = np.random.default_rng(0)
    L = train_lists(X[rng.choice(n, 40 * lists, replace=False)], lists, 0)

    def rotations():
        yield "Hadamard, 2 rounds", 256, rotation_signs(256, 1, 2)
        yield "Hadamard, 1 round", 256, rotation_signs(256, 1, 1)
        yield "Hadamard, 2 rounds", 128, rotation_signs(128, 1, 2)

    for label, size, signs in rotations():
        rotated = rotate(L.leaves, signs)
        codes = reference_codes(X, L, signs, rotated)
        RQ = rotate(Q, signs)
        found = {c: [] for c in (50, 100, 200, 400)}
        ceiling = []
        for qi in range(len(Q)):
            dist = ((Q[qi] - L.leaves) ** 2).sum(axis=1)
            rows_, est_ = [], []
            planes, lo, delta, hsum = query_planes(RQ[qi])  # once per query, as the SQL
            for lst in np.argsort(dist)[:probes]:
                rows = np.flatnonzero(codes.lists == lst)
                rows_.append(rows)
                usum = hsum - rotated[lst].sum()
                est_.append(estimates(codes, rows, planes, lo, delta, usum, float(dist[lst])))
            rows, est = np.concatenate(rows_), np.concatenate(est_)
            ceiling.append(len(set(rows) & set(truth[qi])) / 10)
            for c in found:
                best = rows[np.argsort(est)[:c]]
                exact = best[np.argsort(((X[best] - Q[qi]) ** 2).sum(1))[:10]]
                found[c].append(len(set(exact) & set(truth[qi])) / 10)
        cells = ", ".join(f"C {c}: {np.mean(v):.3f}" for c, v in found.items())
        print(f"  {label:<20} {size} bits  {cells}  (ceiling {np.mean(ceiling):.3f})", flush=True)


def search_small(n: int = 50_000, d: int = 64, queries: int = 1000) -> None:
    """Where a search of a small table spends its time (issue 33: pgvector's HNSW was faster on the
    50,000-row photo patches): 1,000 queries against ``n x d`` power-law rows on DuckDB, at probes
    5 to 40 -- the whole call, the one statement in DuckDB alone, and ten queries (the cost that does
    not grow with the batch).  If the time hardly moves with the probes, it is spent per query
    outside the probed lists (the probe windows, the planes, the re-rank) and in building the SQL."""
    import pandas as pd

    from sqlrp.pipeline.sources import resolve_source
    from sqlrp.search.index import load_index
    from sqlrp.search.query import search_select

    rng = np.random.default_rng(0)
    X = rng.standard_normal((n + queries, d)) / np.sqrt(np.arange(1, d + 1))
    db = sqlrp.connect(threads=2)
    names = [f"f{i}" for i in range(d)]
    db.write_dataframe("t", pd.DataFrame(X[:n], columns=names).assign(id=np.arange(n)))
    db.write_dataframe("q", pd.DataFrame(X[n:], columns=names).assign(qid=np.arange(queries)))
    db.execute("CREATE TABLE q10 AS SELECT * FROM q WHERE qid < 10")
    sqlrp.build_index(db, "t", "id", "ix")
    layout, dialect = load_index(db, "ix").layout, db.sql_dialect
    source = resolve_source(db, "q", "qid")
    for probes in (5, 10, 20, 40):
        call = lambda p=probes: sqlrp.search(db, "ix", "q", "qid", probes=p, candidates=100)  # noqa: E731
        whole = min(seconds(call) for _ in range(3))
        sql = dialect.render(search_select(layout, source, dialect, top=10, candidates=100, probes=probes))
        alone = min(seconds(lambda s=sql: db.query_df(s)) for _ in range(3))
        print(f"  P {probes:>3}: search() {whole:.3f} s, its statement alone {alone:.3f} s", flush=True)
    ten = min(seconds(lambda: sqlrp.search(db, "ix", "q10", "qid", probes=20, candidates=100)) for _ in range(3))
    print(f"  10 queries, P 20: {ten:.3f} s", flush=True)
