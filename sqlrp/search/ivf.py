"""Inverted lists and RaBitQ codes: what a search index is made of, and its NumPy reference.

The index partitions the table around ``L`` centroids (inverted lists, as pgvector IVFFlat and FAISS
IVF do) and keeps, for each row, a ``D``-bit code of its residual from its list's centroid
(RaBitQ, Gao & Long, SIGMOD 2024).  A query probes its ``P`` nearest lists, estimates its distance to
every row in them from the codes, keeps the ``C`` best estimates and re-ranks those exactly.

**Lists.** The centroids come from k-means on a sample (Lloyd's algorithm, here in NumPy: the one
step that reads rows out of the database, a few thousand of them).  Assigning every row to the
nearest of ``L`` centroids would cost ``L`` distances a row; the lists are therefore two-level: ``T ~
sqrt(L)`` top centroids, each with about ``L / T`` children trained on its own part of the sample, and
a row goes to the nearest child of its nearest top centroid (``T + L/T`` distances a row).  Queries
probe the ``P`` nearest of all ``L`` children.  Centroids are rounded to 20 bits below their largest
coordinate, which changes no estimate measurably and makes integer data's sums exact in every engine.

**Codes** (RaBitQ, Section 3).  With ``H`` the randomized Hadamard rotation (:mod:`sqlrp.search.rotation`),
``y = H(x)`` and ``t = H(c)`` for the row's centroid ``c``, the row keeps

    bits  b_j = [y_j > t_j]                         (D bits in BIGINT words; INT128 on DuckDB)
    nx    = |x - c|^2                               (its residual's squared norm, on the features)
    g     = nx / sum_j |y_j - t_j|                  (|o|^2 / |o|_1 of the rotated residual o = y - t)
    ones  = sum_j b_j
    tb    = sum_j b_j t_j                            (the centroid's rotated coordinates under the bits)

and a query ``q`` is rotated once, ``h = H(q)``, and quantised to ``B = 4`` bits a dimension,
``h_j ~ lo + delta * k_j`` (``delta = (max h - min h) / 15``, ``k_j = floor((h_j - lo) / delta + 1/2)``),
stored as ``B`` bit planes, once per query (not per probed list: the probe's centroid enters through
two constants, ``tb`` a row and ``sum t`` a list).  With ``u = h - t``, RaBitQ's estimator of
``<o, u>`` is ``<xbar, u> / <xbar, o/|o|>`` with ``xbar = (2b - 1) / sqrt(D)``, which simplifies to
``g * (2 * sum_{b_j = 1} u_j - sum_j u_j)``; and

    sum_{b_j = 1} u_j ~ delta * S + lo * ones - tb,   S = sum_p 2^p sum_w popcount(word_w AND plane_{p,w})
    sum_j u_j         ~ hsum - sum_j t_j,             hsum = sum_j (lo + delta * k_j)

with ``tb = sum_{b_j = 1} t_j`` kept with the row.  So

    est = nx + nq - 2 * g * (2 * (delta * S + lo * ones - tb) - (hsum - sum_j t_j)),   nq = |q - c|^2

an estimate of ``|x - q|^2`` (the rotation keeps inner products) whose error shrinks as
``1 / sqrt(D)``.  Every step is a popcount of an AND, a sum or a product of per-row constants: SQL
does it on any engine that counts bits.  :func:`reference_codes` and :func:`estimates` are the NumPy
oracle, in the same order of operations as the SQL, so that integer data gives identical bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import InvalidParameter
from .rotation import rotate

WORD_BITS = 64
#: bits a dimension of the quantised query (RaBitQ's B_q = 4: the estimate is as good as unquantised)
QUERY_BITS = 4
#: rows of the k-means sample per list (FAISS warns below 39)
SAMPLE_PER_LIST = 40
#: most rows read for k-means
MAX_SAMPLE = 100_000
#: the differences :func:`_nearest` holds at once (rows x centroids x features)
NEAREST_BLOCK = 2**21
KMEANS_ITERATIONS = 10
#: significant bits kept in a centroid's coordinates, below its largest coordinate's exponent
CENTROID_BITS = 20


def default_lists(rows: int) -> int:
    """``L``: about ``sqrt(rows)`` lists, at least 1 (1,000 for a million rows; 4,000 lists there did
    no better: ``PYTHONPATH=. python bench/search.py --sqlrp-only --no-photo --lists 4000``)."""
    return max(1, int(round(np.sqrt(max(rows, 1)))))


def default_probes(lists: int) -> int:
    """``P``: the lists a query probes by default when the index has no calibration
    (``calibration_queries=0``; :mod:`sqlrp.search.calibrate` measures them otherwise), 1/12 of them
    and at least 16.  On the embedding-like
    table of ``bench/search.py`` (1M rows, 1,000 lists; true neighbours 57 degrees away) 84 lists hold
    97% of the true neighbours and, with the default candidates, give Recall@10 0.956; 1/16 of them
    (63) gave 0.922, and 0.891 at 250,000 rows."""
    return min(lists, max(16, -(-lists // 12)))


def top_count(lists: int) -> int:
    """``T``: top-level centroids of the two-level lists, about ``sqrt(L)``."""
    return max(1, int(round(np.sqrt(lists))))


@dataclass(frozen=True)
class Lists:
    """The two-level centroids: ``tops`` (T x d), ``leaves`` (L x d) and each leaf's ``parent``."""

    tops: np.ndarray
    leaves: np.ndarray
    parent: np.ndarray

    @property
    def count(self) -> int:
        return len(self.leaves)


def _round_centroids(C: np.ndarray) -> np.ndarray:
    peak = float(np.max(np.abs(C))) if C.size else 0.0
    if peak == 0 or not np.isfinite(peak):
        return C
    grid = 2.0 ** (int(np.floor(np.log2(peak))) - CENTROID_BITS)
    return np.round(C / grid) * grid


def kmeans(Y: np.ndarray, k: int, rng: np.random.Generator, iterations: int = KMEANS_ITERATIONS) -> np.ndarray:
    """``k`` centroids of the rows of ``Y`` by Lloyd's algorithm from ``k`` distinct rows; a list that
    empties takes the row farthest from its centroid."""
    Y = np.asarray(Y, dtype=np.float64)
    k = min(k, len(Y))
    C = Y[rng.choice(len(Y), k, replace=False)].copy()
    yy = (Y * Y).sum(axis=1)
    for _ in range(iterations):
        dist = yy[:, None] - 2 * Y @ C.T + (C * C).sum(axis=1)[None, :]
        near = dist.argmin(axis=1)
        counts = np.bincount(near, minlength=k)
        sums = np.zeros_like(C)
        np.add.at(sums, near, Y)
        full = counts > 0
        C[full] = sums[full] / counts[full, None]
        for j in np.flatnonzero(~full):
            far = int(dist[np.arange(len(Y)), near].argmax())
            C[j] = Y[far]
            near[far] = j
    return C


def train_lists(sample: np.ndarray, lists: int, seed: int) -> Lists:
    """Two-level centroids from ``sample`` (rows x d): ``T`` tops, then each top's share of ``lists``
    children from the sample rows nearest it."""
    sample = np.asarray(sample, dtype=np.float64)
    if len(sample) == 0:
        raise InvalidParameter("no rows to train the lists on")
    lists = max(1, min(int(lists), len(sample)))
    rng = np.random.default_rng(seed)
    tops = _round_centroids(kmeans(sample, top_count(lists), rng))
    near = _nearest(sample, tops)
    counts = np.bincount(near, minlength=len(tops))
    want = _apportion(lists, counts)
    leaves, parent = [], []
    for t in range(len(tops)):
        part = sample[near == t]
        if len(part) == 0:
            continue
        leaves.append(kmeans(part, int(want[t]), rng))
        parent += [t] * len(leaves[-1])
    return Lists(tops, _round_centroids(np.concatenate(leaves)), np.asarray(parent, dtype=np.int64))


def _apportion(total: int, counts: np.ndarray) -> np.ndarray:
    """``total`` children shared among the tops in proportion to their sample rows (largest
    remainders), at least one for a top with rows and never more than its rows: ``lists`` asked is
    ``lists`` got, whenever the sample has that many rows."""
    share = total * counts / counts.sum()
    want = np.where(counts > 0, np.maximum(1, np.floor(share)), 0).astype(int)
    want = np.minimum(want, counts)
    order = np.argsort(-(share - np.floor(share)), kind="stable")
    while want.sum() < total:
        room = [t for t in order if want[t] < counts[t]]
        if not room:
            break
        for t in room[: total - want.sum()]:
            want[t] += 1
    while want.sum() > total:
        t = int(np.argmax(np.where(want > 1, want, 0)))
        want[t] -= 1
    return want


def _nearest(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``C`` for every row of ``X`` (squared distances summed over the
    features; ties to the lowest index, as the SQL's ``(distance, list)`` order).  Rows a block at a
    time, the block's differences at most :data:`NEAREST_BLOCK` values (16 MB: a small device's memory,
    issue 42; 4,096 rows against 27 tops of 128 features held 113 MB)."""
    out = np.empty(len(X), dtype=np.int64)
    rows = max(1, NEAREST_BLOCK // max(1, C.size))
    for start in range(0, len(X), rows):
        block = X[start : start + rows]
        dist = ((block[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        out[start : start + rows] = dist.argmin(axis=1)
    return out


def assign(X: np.ndarray, lists: Lists) -> np.ndarray:
    """NumPy reference of the SQL assignment: the nearest leaf among the children of the nearest top."""
    X = np.asarray(X, dtype=np.float64)
    top = _nearest(X, lists.tops)
    out = np.empty(len(X), dtype=np.int64)
    for t in np.unique(top):
        rows = np.flatnonzero(top == t)
        children = np.flatnonzero(lists.parent == t)
        out[rows] = children[_nearest(X[rows], lists.leaves[children])]
    return out


@dataclass(frozen=True)
class Codes:
    """Every row's list, code words (n x D/64 int64) and the estimator's constants."""

    lists: np.ndarray
    words: np.ndarray
    g: np.ndarray
    ones: np.ndarray
    nx: np.ndarray
    tb: np.ndarray


def pack(bits: np.ndarray) -> np.ndarray:
    """``n x D`` booleans as ``n x D/64`` int64 words, bit ``j`` of word ``w`` = column ``64 w + j``."""
    n, size = bits.shape
    packed = np.zeros((n, size // WORD_BITS), dtype=np.uint64)
    for b in range(WORD_BITS):
        packed |= bits[:, b::WORD_BITS].astype(np.uint64) << np.uint64(b)
    return packed.view(np.int64)


def reference_codes(X: np.ndarray, lists: Lists, signs: np.ndarray, rotated: np.ndarray) -> Codes:
    """NumPy reference of the index rows: ``rotated`` is ``H(leaves)`` (the lists table's ``t``)."""
    X = np.asarray(X, dtype=np.float64)
    at = assign(X, lists)
    o = rotate(X, signs) - rotated[at]
    nx = ((X - lists.leaves[at]) ** 2).sum(axis=1)
    l1 = np.abs(o).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.where(l1 > 0, nx / np.where(l1 > 0, l1, 1), 0.0)
    bits = o > 0
    tb = np.where(bits, rotated[at], 0.0).sum(axis=1)
    return Codes(at, pack(bits), g, bits.sum(axis=1).astype(np.int64), nx, tb)


def query_planes(u: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """The quantised rotated query ``u`` (D,): its ``QUERY_BITS`` planes (QUERY_BITS x D/64 words),
    ``lo``, ``delta`` and ``hsum`` (module docstring)."""
    lo, hi = float(u.min()), float(u.max())
    delta = (hi - lo) / (2**QUERY_BITS - 1)
    if delta == 0:
        k = np.zeros(len(u), dtype=np.int64)
    else:
        k = np.floor((u - lo) / delta + 0.5).astype(np.int64)
    planes = np.stack([pack((((k >> p) & 1) == 1)[None, :])[0] for p in range(QUERY_BITS)])
    usum = float(k.sum()) * delta + len(u) * lo
    return planes, lo, delta, usum


def popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per row of int64 words (n x w) -> n."""
    u = np.ascontiguousarray(words, dtype=np.int64).view(np.uint64)
    return np.unpackbits(u.view(np.uint8), axis=-1).reshape(len(u), -1).sum(axis=-1).astype(np.int64)


def estimates(
    codes: Codes, rows: np.ndarray, planes: np.ndarray, lo: float, delta: float, usum: float, nq: float
) -> np.ndarray:
    """The estimated squared distances of ``rows`` (indices into ``codes``, all in one list) to a
    query whose rotation gave ``planes, lo, delta`` and whose ``usum = hsum - sum_j t_j`` and ``nq``
    are those of that list (module docstring)."""
    words = codes.words[rows]
    S = np.zeros(len(rows), dtype=np.int64)
    for p in range(QUERY_BITS):
        S += (1 << p) * popcount(np.bitwise_and(words, planes[p][None, :]))
    inner = codes.g[rows] * (2 * (delta * S + lo * codes.ones[rows] - codes.tb[rows]) - usum)
    return codes.nx[rows] + nq - 2 * inner


__all__ = [
    "QUERY_BITS",
    "Codes",
    "Lists",
    "assign",
    "default_lists",
    "default_probes",
    "estimates",
    "kmeans",
    "pack",
    "query_planes",
    "reference_codes",
    "train_lists",
]
