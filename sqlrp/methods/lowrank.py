"""Randomized low-rank approximation: PCA and truncated SVD of a table from a few aggregate passes (issue 43).

Paper 004 (the survey, ``docs/reference/papers.md``) Section 5.1, Eq. 48-50, after Halko, Martinsson &
Tropp (SIAM Review 2011), Algorithms 4.3 (range finder), 4.4 (subspace iteration) and 5.1 (direct SVD).
For ``A = X - 1 mean^T`` (``n x d``; ``X`` itself for ``method="svd"``), a test matrix ``W`` (``d x l``,
``l = k + p``; first the sparse sign matrix ``Omega`` of :func:`sketch_matrix`) and ``Y = A W``:

- one pass over the rows sums ``C = Y^T A = W^T A^T A`` (``l x d``); then ``G = Y^T Y = C W`` needs no pass;
- ``G = V L V^T`` (``R = L^{1/2} V^T`` plays the Cholesky factor: ``Q = Y R^{-1}`` is orthonormal and never
  written) and ``B = Q^T A = L^{-1/2} V^T C``; eigenvalues of ``G`` below :data:`RANK_TOLERANCE` of the
  largest are dropped, so a rank-deficient table yields fewer components instead of a failed Cholesky;
- ``B = U S V_B^T`` (NumPy): the top ``k`` rows of ``V_B^T`` are the components, ``S^2 / (n - 1)`` their
  variances;
- a power iteration (Alg. 4.4) re-orthonormalises ``A^T Q = B^T`` (``W = qr(B^T)``) and sums ``C`` again:
  one pass each, since ``G`` follows from ``C``.

Only ``l x d`` and ``l x l`` numbers are handled here; the passes that produce them are
:mod:`sqlrp.pipeline.fitting`'s.  :func:`randomized_pca` is the same algorithm on a matrix in memory,
written as HMT write it (QR of ``Y``, ``B = Q^T A``): the oracle of the passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.ir import Combiner, LinearStage, Projection
from .linear import achlioptas

#: eigenvalues of ``G`` at most this fraction of the largest are rounding, not range (the directions dropped)
RANK_TOLERANCE = 1e-12
#: a component whose variance is at most this fraction of the first's is numerically zero
COMPONENT_TOLERANCE = 1e-10
#: ``power_iterations="auto"``: stop when the next pass is predicted to add less than this (relative)
#: to the top k's explained variance; and never more passes than :data:`AUTO_MAX` iterations
AUTO_GAIN = 1e-3
AUTO_MAX = 8


def sketch_matrix(d: int, width: int, seed: int | None) -> np.ndarray:
    """``Omega``, ``d x l``: Achlioptas' sparse signs (:func:`~sqlrp.methods.linear.achlioptas`, ``s = 3``;
    dense signs, ``s = 1``, below 30 features, where a sparse column may well be all zeros).  Where
    ``l >= d`` the identity: the pass then sums the exact Gram matrix ``A^T A`` (``d x d``, no more than the
    sketch's ``l x d``), and the fit is exact PCA in one pass (a random square sign matrix may be singular)."""
    if width >= d:
        return np.eye(d)
    s = 1.0 if d < 30 else 3.0
    return achlioptas(d, width, s=s, seed=seed).linear.dense()


def flip_signs(components: np.ndarray) -> np.ndarray:
    """Each row with its largest-magnitude entry positive (scikit-learn's ``svd_flip``, ``u_based_decision=False``)."""
    if components.size == 0:
        return components
    biggest = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(len(components)), biggest])
    signs[signs == 0] = 1.0
    return components * signs[:, None]


@dataclass
class Sums:
    """What one pass over the rows returns: ``n``, and for ``Z = X - 1 shift^T``: ``sum(Z)`` and ``sum(Z^2)``
    per feature (``d``) and ``(Z W)^T Z`` (``l x d``)."""

    n: int
    shift: np.ndarray
    total: np.ndarray
    squares: np.ndarray
    cross: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.shift + self.total / max(self.n, 1)

    def centred_cross(self, W: np.ndarray, centre: bool) -> np.ndarray:
        """``C = W^T A^T A``: ``(Z W)^T Z`` less ``n (W^T delta) delta^T``, ``delta = mean - shift`` (the
        cross terms vanish since ``A`` sums to 0); ``centre=False``: ``shift`` must be 0 and ``A = X``."""
        if not centre:
            return self.cross
        delta = self.total / self.n
        return self.cross - self.n * np.outer(W.T @ delta, delta)

    def total_variance(self, centre: bool) -> float:
        """``||A||_F^2``: the sum over features of ``sum((x - mean)^2)`` (``sum(x^2)`` uncentred)."""
        if not centre:
            return float(np.sum(self.squares))
        return float(np.sum(np.maximum(self.squares - self.total**2 / self.n, 0.0)))


@dataclass
class Step:
    """One pass's result: ``B``'s singular values and right singular vectors, and the next test matrix."""

    singular_values: np.ndarray
    components: np.ndarray
    next_w: np.ndarray
    rank: int


def step(C: np.ndarray, W: np.ndarray) -> Step:
    """From ``C = W^T A^T A``: ``G = C W``, its eigen-factor, ``B = Q^T A`` and ``B``'s SVD (module doc)."""
    G = C @ W
    G = (G + G.T) / 2.0
    lam, V = np.linalg.eigh(G)
    top = float(lam[-1]) if len(lam) else 0.0
    keep = lam > max(top, 0.0) * RANK_TOLERANCE
    if top <= 0.0 or not np.any(keep):
        return Step(np.zeros(0), np.zeros((0, W.shape[0])), W[:, :0], 0)
    lam, V = lam[keep], V[:, keep]
    B = (V / np.sqrt(lam)).T @ C
    _, s, Vt = np.linalg.svd(B, full_matrices=False)
    next_w, _ = np.linalg.qr(B.T)
    return Step(s, Vt, next_w, int(keep.sum()))


def auto_more(history: list[float], singular_values: np.ndarray, k: int) -> tuple[bool, str]:
    """``power_iterations="auto"``: another pass, and why.  ``history``: the top-``k`` captured variance
    ``sum(S[:k]^2)`` after each pass so far.  Subspace iteration converges geometrically, at the rate
    ``r = (s_l / s_k)^2`` per pass (HMT Section 9.1); the next pass is predicted to add
    ``last gain * r / (1 - r)`` (after the first pass, ``r`` itself) of the variance."""
    s = singular_values
    passes = len(history)
    if passes > AUTO_MAX:
        return False, f"auto: stopped at the most auto tries, {AUTO_MAX} iterations"
    if len(s) <= k or s[k - 1] <= 0:
        return False, f"auto: 0 iterations, the sketch spans the whole range (rank {len(s)} <= k = {k})"
    rate = min(float(s[-1] / s[k - 1]) ** 2, 0.999)
    if passes == 1:
        predicted = rate
        said = f"the sketch's spectrum falls to {rate:.3g} of s_k^2 at s_l"
    else:
        gain = (history[-1] - history[-2]) / max(history[-1], 1e-300)
        predicted = max(gain, 0.0) * rate / (1.0 - rate)
        said = f"the last pass added {gain:.2%} of the variance, at the rate {rate:.3g}"
    more = predicted >= AUTO_GAIN
    verdict = "another pass" if more else f"{passes - 1} iterations"
    return more, f"auto: {verdict}, {said} (predicted gain {predicted:.2%}, stop below {AUTO_GAIN:.1%})"


@dataclass
class Fitted:
    """The fit's result: components (rows), their singular values, the table's mean, row count and the
    total variance (``||A||_F^2``), and how it was reached."""

    components: np.ndarray
    singular_values: np.ndarray
    mean: np.ndarray
    n: int
    total: float
    power_iterations: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def explained_variance(self) -> np.ndarray:
        return self.singular_values**2 / max(self.n - 1, 1)

    @property
    def explained_variance_ratio(self) -> np.ndarray:
        return self.singular_values**2 / self.total if self.total > 0 else np.zeros_like(self.singular_values)


def finish(result: Step, sums: Sums, k: int, centre: bool, q: int) -> Fitted:
    """The top ``k`` components of the last pass (fewer where the table's rank is lower), signs fixed."""
    s = result.singular_values
    keep = int(np.sum(s**2 > (s[0] ** 2 if len(s) else 0.0) * COMPONENT_TOLERANCE)) if len(s) else 0
    keep = min(k, keep)
    if keep == 0:
        raise InputError("the table has no variance to explain: every feature is constant (or zero, with --method svd)")
    comps = flip_signs(result.components[:keep])
    mean = sums.mean if centre else np.zeros(len(sums.shift))
    return Fitted(comps, s[:keep].copy(), mean, sums.n, sums.total_variance(centre), q, {"rank": result.rank})


def lowrank_projection(fitted: Fitted, method: str, whiten: bool, params: dict[str, Any]) -> Projection:
    """The fit as a stored projection: ``y = W^T x + bias`` with ``W = components^T`` (divided by
    ``sqrt(explained_variance)`` when ``whiten``) and ``bias = -W^T mean`` (none for ``svd``)."""
    k, d = fitted.components.shape
    weights = fitted.components.copy()
    if whiten:
        weights /= np.sqrt(np.maximum(fitted.explained_variance, 1e-300))[:, None]
    bias = None if method == "svd" else -(weights @ fitted.mean)
    linear = LinearStage(d=d, p=k, vector=np.repeat(np.arange(k), d), feature=np.tile(np.arange(d), k),
                         weight=weights.ravel(), bias=bias)  # fmt: skip
    return LowRank(method=method, linear=linear, combiner=Combiner.identity(k), scale=1.0, params=params)


class LowRank(Projection):
    """A fitted PCA / SVD projection, with scikit-learn's names for what the fit found (read from ``params``)."""

    @property
    def components_(self) -> np.ndarray:
        """The principal axes, ``k x d`` (unit rows, unwhitened)."""
        w = self.linear.dense().T
        if self.params.get("whiten"):
            w = w * np.sqrt(np.asarray(self.params["explained_variance"]))[:, None]
        return w

    @property
    def singular_values_(self) -> np.ndarray:
        return np.asarray(self.params["singular_values"])

    @property
    def explained_variance_(self) -> np.ndarray:
        return np.asarray(self.params["explained_variance"])

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        return np.asarray(self.params["explained_variance_ratio"])

    @property
    def mean_(self) -> np.ndarray:
        return np.asarray(self.params["mean"])

    @property
    def n_components_(self) -> int:
        return self.k


def randomized_pca(X: np.ndarray, omega: np.ndarray, q: int, k: int, centre: bool = True) -> Fitted:
    """The oracle: HMT Alg. 4.4 + 5.1 on ``X`` in memory, with ``Omega`` given (QR of ``Y`` at each half
    step, ``B = Q^T A``, SVD of ``B``), the top ``k`` components with :func:`flip_signs`."""
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0) if centre else np.zeros(X.shape[1])
    A = X - mean
    Q, _ = np.linalg.qr(A @ omega)
    for _ in range(q):
        Z, _ = np.linalg.qr(A.T @ Q)
        Q, _ = np.linalg.qr(A @ Z)
    _, s, Vt = np.linalg.svd(Q.T @ A, full_matrices=False)
    return Fitted(flip_signs(Vt[:k]), s[:k], mean, len(X), float(np.sum(A * A)), q)


def oversampled(k: int, p: int, d: int) -> int:
    """``l = k + p``, at most ``d`` (a sketch wider than the table adds nothing)."""
    return int(min(k + p, d))


def describe_fit(fitted: Fitted, method: str, k: int | None, p: int, extra: dict[str, Any]) -> dict[str, Any]:
    """The projection's ``params``: what the fit found, and how (JSON numbers)."""

    def floats(a: np.ndarray) -> list[float]:
        return [float(v) if math.isfinite(v) else 0.0 for v in np.asarray(a, dtype=np.float64)]

    return {
        "k_requested": None if k is None else int(k),
        "oversample": int(p),
        "power_iterations": int(fitted.power_iterations),
        "rows": int(fitted.n),
        "rank": int(fitted.info.get("rank", len(fitted.singular_values))),
        "singular_values": floats(fitted.singular_values),
        "explained_variance": floats(fitted.explained_variance),
        "explained_variance_ratio": floats(fitted.explained_variance_ratio),
        "total_variance": float(fitted.total / max(fitted.n - 1, 1)),
        "mean": floats(fitted.mean),
        "centred": method == "pca",
        **extra,
    }


__all__ = [
    "AUTO_GAIN",
    "AUTO_MAX",
    "Fitted",
    "LowRank",
    "Step",
    "Sums",
    "auto_more",
    "describe_fit",
    "finish",
    "flip_signs",
    "lowrank_projection",
    "oversampled",
    "randomized_pca",
    "sketch_matrix",
    "step",
]
