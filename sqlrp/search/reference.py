"""The NumPy oracle of a search: every step of :func:`sqlrp.search.query.search_select` on the same
centroids and rotation (:func:`reference_search`), the rows' lists (:func:`reference_assign`), the
adaptive probe rule (:func:`probe_counts`), and Recall@K (:func:`result_recall`).  Integer data gives
the SQL's lists, codes, candidates and ranks bit for bit (the parity tests)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Unpack

import numpy as np

from ..core.lazy import pd
from .ivf import Lists, assign, estimates, query_planes, reference_codes
from .rotation import rotate
from .sql import FINE, FINE_SCALE, RESULT_COLUMNS, Probing, check_search, probing


def normalise(X: np.ndarray) -> np.ndarray:
    """NumPy reference of :func:`feature_rows` for ``angular``: rows over their norms, zero rows kept."""
    X = np.asarray(X, dtype=np.float64)
    norm = np.sqrt((X * X).sum(axis=1))
    return X / np.where(norm == 0, 1.0, norm)[:, None]


def euclidean(diff: np.ndarray) -> np.ndarray:
    """NumPy reference of :func:`~sqlrp.search.sql.pair_distance`'s Euclidean distance of the
    differences ``diff`` (rows): below ``2^-FINE`` computed again on the differences times
    ``2^FINE_SCALE``, so that their squares do not underflow."""
    with np.errstate(under="ignore"):
        d = np.sqrt((diff * diff).sum(axis=1))
        small = d < 2.0**-FINE
        if small.any():
            fine = np.ldexp(diff[small], FINE_SCALE)
            d[small] = np.ldexp(np.sqrt((fine * fine).sum(axis=1)), -FINE_SCALE)
    return d


def probe_counts(distances: np.ndarray, floor: int, cap: int | None = None, ratio: float | None = None) -> np.ndarray:
    """NumPy reference of the lists each query probes: ``floor``, or under the adaptive rule
    (:func:`probe_adaptive`) between ``floor`` and ``cap`` by the ``ratio`` of squared centroid
    distances (``distances``: queries x lists, squared)."""
    n, lists = distances.shape
    if ratio is None:
        return np.full(n, min(floor, lists), dtype=np.int64)
    d0 = distances.min(axis=1, keepdims=True)
    within = (distances <= ratio * d0).sum(axis=1)
    return np.clip(within, min(floor, lists), min(cap if cap is not None else lists, lists)).astype(np.int64)


def reference_search(
    X: np.ndarray,
    ids: Sequence,
    Q: np.ndarray,
    query_ids: Sequence,
    lists: Lists,
    signs: np.ndarray,
    metric: str = "euclidean",
    scale: int = 0,
    **options: Unpack[Probing],
) -> pd.DataFrame:
    """Every step of :func:`search_select` in NumPy, on the same centroids and rotation: the same
    lists (adaptive with ``ratio`` and ``cap``: :func:`probe_counts`), codes, estimates, candidates
    (ties by id) and exact ranks.  ``scale``: the index's (:mod:`sqlrp.search.scale`): the rows and
    queries times ``2^scale``, as the SQL reads them (``lists`` are the stored, scaled, centroids),
    Euclidean distances divided by it again.  ``options``: :class:`~.sql.Probing`."""
    top, candidates, probes, ratio, cap = probing(options)
    check_search(top, candidates, probes, metric)
    ids = np.asarray(ids)
    X, Q = np.ldexp(np.asarray(X, dtype=np.float64), scale), np.ldexp(np.asarray(Q, dtype=np.float64), scale)
    if metric == "angular":
        X, Q = normalise(X), normalise(Q)
    rotated = rotate(lists.leaves, signs)
    codes = reference_codes(X, lists, signs, rotated)
    RQ = rotate(Q, signs)
    out = []
    for qi, qid in enumerate(query_ids):
        dist = ((Q[qi][None, :] - lists.leaves) ** 2).sum(axis=1)
        count = int(probe_counts(dist[None, :], probes, max(cap or probes, probes), ratio)[0])
        probed = np.lexsort((np.arange(len(dist)), dist))[:count]
        found, est = [], []
        planes, lo, delta, hsum = query_planes(RQ[qi])
        for lst in probed:
            rows = np.flatnonzero(codes.lists == lst)
            nq = ((Q[qi] - lists.leaves[lst]) ** 2).sum()
            found.append(rows)
            est.append(estimates(codes, rows, planes, lo, delta, hsum - rotated[lst].sum(), nq))
        rows, est = np.concatenate(found), np.concatenate(est)
        best = rows[np.lexsort((ids[rows], est))][:candidates]
        if metric == "angular":
            d = ((X[best] - Q[qi]) ** 2).sum(axis=1) / 2.0
        else:
            d = np.ldexp(euclidean(X[best] - Q[qi]), -scale)
        for rank, at in enumerate(np.lexsort((ids[best], d))[:top], start=1):
            out.append((qid, ids[best[at]], rank, d[at]))
    return pd.DataFrame(out, columns=list(RESULT_COLUMNS))


def reference_assign(X: np.ndarray, lists: Lists, metric: str = "euclidean", scale: int = 0) -> np.ndarray:
    """The lists the SQL puts the rows of ``X`` in (``scale``: the index's, as in :func:`reference_search`)."""
    X = np.ldexp(np.asarray(X, dtype=np.float64), scale)
    return assign(normalise(X) if metric == "angular" else X, lists)


def true_distances(X: np.ndarray, Q: np.ndarray, metric: str = "euclidean") -> np.ndarray:
    """Queries x rows: the exact distances, computed so that nothing over- or underflows whatever the
    magnitudes (``math.dist``, which scales, for Euclidean; normalised rows of :func:`numpy.hypot`-style
    scaled norms for ``angular``): the oracle of the searches' values near the doubles' limits."""
    X, Q = np.asarray(X, dtype=np.float64), np.asarray(Q, dtype=np.float64)
    if metric == "angular":

        def unit(A: np.ndarray) -> np.ndarray:
            peak = np.abs(A).max(axis=1, keepdims=True) if A.shape[1] else np.zeros((len(A), 1))
            B = A / np.where(peak == 0, 1.0, peak)
            return B / np.where(peak == 0, 1.0, np.sqrt((B * B).sum(axis=1, keepdims=True)))

        U, V = unit(X), unit(Q)
        return ((V[:, None, :] - U[None, :, :]) ** 2).sum(axis=2) / 2.0
    return np.array([[math.dist(q, x) for x in X] for q in Q], dtype=np.float64).reshape(len(Q), len(X))


def result_recall(found: pd.DataFrame, truth: pd.DataFrame) -> float:
    """Recall@K: the mean over the queries of truth of ``|found ids & true ids| / |true ids|``
    (both frames ``(query_id, id, ...)``; a query with no result counts 0)."""
    got = found.groupby("query_id")["id"].apply(set).to_dict()
    scores = [len(got.get(qid, set()) & set(true)) / len(true) for qid, true in truth.groupby("query_id")["id"]]
    return float(np.mean(scores)) if scores else float("nan")
