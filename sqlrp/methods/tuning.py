"""Data-tuned random projections (DT-RP) and the "best of n RPs" baseline.

Source: *Data-Tuned Random Projection*, paper 002 (``docs/reference/papers.md``), Section 3
(Algorithm 1) and Section 4.2.  Given a small sample ``X`` (n x d, n ~ 50-500), DT-RP tunes a sparse
Achlioptas sign matrix ``R`` (d x k) by guided random search on the loss (002 Eq. 5 / 7)::

    L(R) = mean_{i<j, D_X[i,j] > 0} |D_X[i,j] - D_P[i,j]| / D_X[i,j],   P = sqrt(s)/sqrt(k) X R

Each iteration draws a column ``c`` and a new Achlioptas column ``w``, forms ``p = sqrt(s)/sqrt(k) X w``
and ``D_P* = D_P - D(P[:, c]) + D(p)`` (002 Eq. 10-11), and keeps ``w`` if ``L`` drops.  Pairs with
``D_X = 0`` (duplicate rows) are excluded from the mean, never divided by.

Cost per iteration: ``O(nd + n^2)``
--------------------------------------
``P`` (n x k) and ``E = D_X - D_P`` over the pairs ``i < j`` are kept.  A proposal costs one
``X w`` (done for 512 proposals at a time as one BLAS product, the ``O(nd)`` part) plus two
one-dimensional pair-distance vectors ``D(P[:, c])`` and ``D(p)`` and one weighted L1 sum
``sum_ij |E_ij + D(q)_ij - D(p)_ij| / D_X[ij]`` (the ``O(n^2)`` part), each one compiled pass in
SciPy (``pdist`` / weighted ``cdist``), into reused buffers.  ``D(P[:, c])`` of all k columns is
cached when it fits ``cache_mb`` (then a proposal needs only ``D(p)``).  Never ``O(n^2 k)``: ``D_P``
is not recomputed.  The result is the one the plain algorithm gives (tests compare with a naive
recomputation of Eq. 5, decision by decision).

Its speed against the paper's (``PYTHONPATH=. python -m bench.probes dtrp``) is in
``docs/benchmarks.md``, "Methods".  What remains is three compiled passes over the n(n-1)/2 pairs
per proposal; a fused loop (numba or C) would be the next step.

Tried and dropped: a sign-based exact lower bound to skip full evaluations -- in
practice about 97% of proposals passed it (too many pairs change the sign of their error).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Combiner, LinearStage, Projection
from .distortion import cdist, mean_distortion, pdist  # scipy on first use
from .linear import achlioptas, check_dims, resolve_s
from .sparsity import kurtosis_of

__all__ = [
    "TuneResult",
    "best_of_n",
    "candidate_block",
    "dtrp_loss",
    "projection_from_dense",
    "tune_matrix",
]


def dtrp_loss(X: np.ndarray, R: np.ndarray, s: float) -> float:
    """The DT-RP loss (002 Eq. 5): mean relative distortion of squared distances of ``X`` under
    ``P = sqrt(s)/sqrt(k) X R``, over pairs with ``D_X > 0``.  The naive ``O(ndk + n^2 (d + k))``
    evaluation; the tuner never calls it inside its loop."""
    X = np.asarray(X, dtype=np.float64)
    k = R.shape[1]
    return mean_distortion(X, (X @ R) * (math.sqrt(s) / math.sqrt(k)))


def candidate_block(rng: np.random.Generator, d: int, k: int, s: float, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` DT-RP proposals in draw order: target columns ``c`` (uniform on [0, k)) and new
    columns ``w`` as a dense ``d x count`` array with Achlioptas entries ``{+1 w.p. 1/(2s), 0, -1 w.p.
    1/(2s)}`` (002 Algorithm 1, step 2; the ``sqrt(s)`` magnitude is left to the scale)."""
    cols = rng.integers(0, k, size=count)
    u = rng.random((d, count))
    w = np.zeros((d, count))
    w[u < 1.0 / s] = -1.0
    w[u < 0.5 / s] = 1.0
    return cols, w


@dataclass
class TuneResult:
    """What :func:`tune_matrix` returns: the tuned dense sign matrix and how it got there."""

    R: np.ndarray  # d x k, entries in {-1, 0, +1}
    s: float
    initial_loss: float
    loss: float
    iterations: int
    accepted: int
    seconds: float
    n_pairs: int
    history: list[tuple[int, float]] = field(default_factory=list)  # (iteration, loss) at each accept

    @property
    def k(self) -> int:
        return int(self.R.shape[1])

    @property
    def d(self) -> int:
        return int(self.R.shape[0])


def tune_matrix(
    X: np.ndarray,
    k: int,
    s: float | str = "auto",
    iterations: int = 4000,
    seed: int | None = 0,
    record: bool = False,
    cache_mb: float = 256,
) -> TuneResult:
    """Tune a d x k sparse sign matrix on the sample ``X`` with DT-RP (002 Section 3, Algorithm 1).

    The start is the Achlioptas matrix :func:`sqlrp.methods.linear.achlioptas` draws for the same
    ``(d, k, s, seed)``, so DT-RP is compared with "its" plain RP run for run.  ``s="auto"`` is chosen
    from the sample's kurtosis (:func:`sqlrp.methods.sparsity.choose_s`), as every sparse default is.
    With ``record`` the loss after every accepted proposal is kept in ``history`` as ``(iteration, loss)``.
    ``cache_mb`` bounds the memory for caching ``D(P[:, c])`` of all k columns (``8 k n (n-1) / 2``
    bytes: 200 MB at n = 500, k = 200); above it each proposal recomputes ``D(P[:, c])``.  Either way
    the result is the same.
    """
    t0 = time.perf_counter()
    X = _check_sample(X)
    n, d = X.shape
    check_dims(d, k)
    if int(iterations) != iterations or iterations < 0:
        raise InvalidParameter(f"iterations must be a whole number >= 0, got {iterations}")
    s_val = resolve_s(s, d, kurtosis_of(X) if isinstance(s, str) else None)  # auto: from the sample
    scale = math.sqrt(s_val) / math.sqrt(k)
    dx, w, m = _pair_weights(X)
    R = achlioptas(d, k, s=s_val, seed=seed).linear.dense()
    P = np.ascontiguousarray((X @ R) * scale)
    E = dx - pdist(P, "sqeuclidean")  # D_X - D_P, condensed (pairs i < j)
    total = _weighted_l1(E, np.zeros_like(E), w)  # = m * L(R)
    initial = total / m
    rng = np.random.default_rng(None if seed is None else [int(seed), 0x5D7])
    history: list[tuple[int, float]] = [(0, initial)] if record else []
    accepted = 0
    it = 0
    base, dp = np.empty_like(E), np.empty_like(E)  # reused buffers: no allocation in the loop
    PT = np.ascontiguousarray(P.T)  # row c = column c of P, contiguous
    cache = None  # D(P[:, c]) of every column, when it fits the memory budget (saves one pdist per proposal)
    if k * len(E) * 8 <= cache_mb * 2**20:
        cache = np.empty((k, len(E)))
        for c in range(k):
            pdist(PT[c][:, None], "sqeuclidean", out=cache[c])
    while it < iterations:
        count = min(512, iterations - it)
        cols, Wc = candidate_block(rng, d, k, s_val, count)
        PnT = np.ascontiguousarray(((X @ Wc) * scale).T)  # count x n: the O(nd) part of every proposal
        for j in range(count):
            c = int(cols[j])
            # Eq. 11: D_P* = D_P - D(P[:, c]) + D(p); here E* = (E + D(q)) - D(p)
            if cache is not None:
                np.add(cache[c], E, out=base)
            else:
                pdist(PT[c][:, None], "sqeuclidean", out=base)
                base += E
            pdist(PnT[j][:, None], "sqeuclidean", out=dp)
            new_total = _weighted_l1(base, dp, w)
            if new_total < total:
                np.subtract(base, dp, out=E)
                total = new_total
                PT[c] = PnT[j]
                if cache is not None:
                    cache[c] = dp
                R[:, c] = Wc[:, j]
                accepted += 1
                if record:
                    history.append((it + j + 1, total / m))
        it += count
    return TuneResult(
        R=R,
        s=s_val,
        initial_loss=initial,
        loss=total / m,
        iterations=int(iterations),
        accepted=accepted,
        seconds=time.perf_counter() - t0,
        n_pairs=m,
        history=history,
    )


def _check_sample(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise InvalidParameter(f"DT-RP needs a 2-D sample with at least 2 rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise InvalidParameter("the training sample contains NaN or infinite values")
    return X


def _pair_weights(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Condensed ``D_X`` (pairs i < j), weights ``1 / D_X`` (0 for duplicate rows: excluded, never
    divided by) and the number of valid pairs."""
    dx = pdist(X, "sqeuclidean")
    valid = dx > 0
    m = int(valid.sum())
    if m == 0:
        raise InvalidParameter("every row of the training sample is identical: no pair has a positive distance")
    w = np.zeros_like(dx)
    w[valid] = 1.0 / dx[valid]
    return dx, w, m


def _weighted_l1(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> float:
    """``sum_i w_i |a_i - b_i|`` in one compiled pass (SciPy's weighted city-block distance)."""
    return float(cdist(a[None, :], b[None, :], "cityblock", w=w)[0, 0])


def best_of_n(
    X: np.ndarray,
    k: int,
    s: float | str = "auto",
    n: int | None = 10,
    seed: int | None = 0,
    time_budget: float | None = None,
) -> TuneResult:
    """The "best of n RPs" baseline (002 Section 4.2): draw Achlioptas matrices with seeds
    ``seed, seed + 1, ...`` and keep the one with the lowest loss (002 Eq. 5) on ``X``.  Stops after
    ``n`` draws or, with ``time_budget`` (seconds), when the budget is spent (at least one draw)."""
    t0 = time.perf_counter()
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    check_dims(d, k)
    if n is None and time_budget is None:
        raise InvalidParameter("best_of_n needs n draws or a time budget")
    s_val = resolve_s(s, d, kurtosis_of(X) if isinstance(s, str) else None)  # auto: from the sample
    scale = math.sqrt(s_val) / math.sqrt(k)
    X = _check_sample(X)
    dx, w, m = _pair_weights(X)
    base = 0 if seed is None else int(seed)
    best_R, best, first, draws = None, math.inf, math.nan, 0
    while True:
        R = achlioptas(d, k, s=s_val, seed=base + draws).linear.dense()
        loss = _weighted_l1(dx, pdist((X @ R) * scale, "sqeuclidean"), w) / m
        if draws == 0:
            first = loss
        if loss < best:
            best, best_R = loss, R
        draws += 1
        if n is not None and draws >= n:
            break
        if time_budget is not None and time.perf_counter() - t0 >= time_budget:
            break
    assert best_R is not None
    return TuneResult(
        R=best_R,
        s=s_val,
        initial_loss=first,
        loss=best,
        iterations=draws,
        accepted=0,
        seconds=time.perf_counter() - t0,
        n_pairs=m,
    )


def projection_from_dense(
    R: np.ndarray, s: float, method: str, params: dict[str, Any] | None = None, seed: int | None = None
) -> Projection:
    """A d x k {-1, 0, +1} matrix as an ordinary stored-and-compiled linear projection
    (sign linear stage, identity combiner, scale ``sqrt(s)/sqrt(k)``)."""
    R = np.asarray(R)
    if not np.all(np.isin(R, (-1.0, 0.0, 1.0))):
        raise InvalidParameter("a tuned matrix must hold only -1, 0 and +1")
    d, k = R.shape
    feature, vector = np.nonzero(R)
    order = np.lexsort((feature, vector))
    feature, vector = feature[order], vector[order]
    linear = LinearStage(d=d, p=k, vector=vector, feature=feature, weight=R[feature, vector])
    return Projection(
        method=method,
        linear=linear,
        combiner=Combiner.identity(k),
        scale=math.sqrt(s) / math.sqrt(k),
        params=dict(params or {}),
        seed=seed,
    )
