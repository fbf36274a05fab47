"""Distances and distortion, in input space and in a polynomial kernel's feature space: what the
tuner (DT-RP, :mod:`.tuning`), the kernel methods' tests and the evaluation (:mod:`sqlrp.evaluation`)
measure a projection with.

- :func:`pdist` / :func:`cdist` / :func:`squareform` -- SciPy's where it is installed, else squared
  Euclidean distances in NumPy (the light core).
- :class:`Kernel` -- the polynomial kernel ``K(x, y) = (x.y + c)^degree`` (000 Eq. 12).
- :func:`pairwise_distortion` / :func:`mean_distortion` / :func:`kernel_distortion` -- the distortion of
  squared distances (López-Sánchez et al. 2018, ``000`` Eq. 22), in a kernel's feature space through the
  kernel trick (Eq. 23).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter, MissingExtra
from ..core.params import count
from .kernels import kernel_sq_distances, polynomial_kernel
from .rff import ShiftKernel


def pdist(X: np.ndarray, metric: str, out: np.ndarray | None = None, **kwargs: Any) -> np.ndarray:
    """:func:`scipy.spatial.distance.pdist` where scipy is installed (``sqlrp[sklearn]``); without it
    (the light core), squared Euclidean distances in NumPy, in the same condensed order (``i < j``)."""
    try:
        from scipy.spatial.distance import pdist as _pdist
    except ImportError:
        return _pdist_numpy(np.asarray(X, dtype=np.float64), metric, out)
    return _pdist(X, metric, out=out, **kwargs) if out is not None else _pdist(X, metric, **kwargs)


def cdist(A: np.ndarray, B: np.ndarray, metric: str, **kwargs: Any) -> np.ndarray:
    """:func:`scipy.spatial.distance.cdist` where scipy is installed, else NumPy (``sqeuclidean``,
    ``cityblock`` with weights ``w``)."""
    try:
        from scipy.spatial.distance import cdist as _cdist
    except ImportError:
        return _cdist_numpy(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64), metric, kwargs.get("w"))
    return _cdist(A, B, metric, **kwargs)


def _cdist_numpy(A: np.ndarray, B: np.ndarray, metric: str, w: np.ndarray | None = None) -> np.ndarray:
    """Distances of each row of ``A`` to each row of ``B``: squared Euclidean, or ``cityblock`` with
    weights ``w``; one row of ``A`` at a time."""
    if metric == "cityblock":
        weights = 1.0 if w is None else w
        return np.array([(np.abs(B - a) * weights).sum(axis=1) for a in A]).reshape(len(A), len(B))
    _only_sqeuclidean(metric)
    return np.array([np.einsum("ij,ij->i", B - a, B - a) for a in A]).reshape(len(A), len(B))


def squareform(condensed: np.ndarray) -> np.ndarray:
    """The symmetric n x n matrix of a condensed distance vector (scipy's ``squareform``), zero diagonal."""
    n = int(round((1 + np.sqrt(1 + 8 * len(condensed))) / 2))
    M = np.zeros((n, n))
    upper = np.triu_indices(n, 1)
    M[upper] = condensed
    return M + M.T


def _only_sqeuclidean(metric: str) -> None:
    if metric != "sqeuclidean":
        raise MissingExtra(f"the {metric!r} distance needs scipy: pip install 'sqlrp[sklearn]'")


def _pdist_numpy(X: np.ndarray, metric: str, out: np.ndarray | None) -> np.ndarray:
    """Squared distances of the rows of ``X``, pairs ``i < j`` in scipy's condensed order, one row
    against the rows after it at a time (memory: one n x d block)."""
    _only_sqeuclidean(metric)
    n = len(X)
    out = np.empty(n * (n - 1) // 2) if out is None else out
    pos = 0
    for i in range(n - 1):
        diff = X[i + 1 :] - X[i]
        out[pos : pos + n - 1 - i] = np.einsum("ij,ij->i", diff, diff)
        pos += n - 1 - i
    return out


@dataclass(frozen=True)
class Kernel:
    """The polynomial kernel ``K(x, y) = (x.y + c)^degree`` (``000`` Eq. 12 with ``modified``:
    ``(x.y)^2 - (x^2).(y^2)``, the degree-2 kernel without its d diagonal features)."""

    degree: int = 2
    c: float = 0.0
    modified: bool = False

    def __post_init__(self) -> None:
        try:
            whole_degree = not isinstance(self.degree, bool) and int(self.degree) == self.degree
        except (TypeError, ValueError, OverflowError):
            whole_degree = False
        if not whole_degree or self.degree < 1:
            raise InvalidParameter(f"kernel degree must be a whole number >= 1, got {self.degree!r}")
        count("kernel degree", int(self.degree), limit="kernel_degree")  # its bound: sqlrp.core.params.LIMITS
        if self.modified and (self.degree != 2 or self.c != 0):
            raise ValueError("the modified kernel is the homogeneous degree-2 kernel (degree=2, c=0)")

    def gram(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        return polynomial_kernel(X, Y, self.degree, self.c, self.modified)

    def describe(self) -> dict[str, Any]:
        return {"kind": "polynomial", "degree": self.degree, "c": self.c, "modified": self.modified}


def feature_sq_distances(X: np.ndarray, kernel: Kernel | None = None) -> np.ndarray:
    """Condensed squared distances ``||phi(x_i) - phi(x_j)||^2`` for ``i < j`` (``000`` Eq. 23)."""
    X = np.asarray(X, dtype=np.float64)
    if kernel is None:
        return pdist(X, "sqeuclidean")
    if isinstance(kernel, ShiftKernel):  # rff's kernel: 2 - 2 k(x - y)
        return kernel.sq_distances(X)
    return kernel_sq_distances(X, kernel.degree, kernel.c, kernel.modified)


def pairwise_distortion(X: np.ndarray, Y: np.ndarray, kernel: Kernel | None = None) -> np.ndarray:
    """Distortion (``000`` Eq. 22) of every pair ``i < j`` with a positive original distance."""
    Y = np.asarray(Y, dtype=np.float64)
    if len(X) != len(Y):
        raise ValueError(f"X has {len(X)} rows but Y has {len(Y)}")
    dx = feature_sq_distances(X, kernel)
    dy = pdist(Y, "sqeuclidean")
    # duplicate rows are excluded; in a kernel's feature space "zero" is up to the kernel trick's rounding
    keep = dx > (0.0 if kernel is None else 1e-12 * max(float(dx.max(initial=0.0)), 1e-300))
    return np.abs(dy[keep] - dx[keep]) / dx[keep]


def mean_distortion(X: np.ndarray, Y: np.ndarray, kernel: Kernel | None = None) -> float:
    """Mean pairwise distortion of squared distances (``000`` Eq. 22)."""
    return float(pairwise_distortion(X, Y, kernel).mean())


def kernel_distortion(
    X: np.ndarray,
    Y: np.ndarray,
    degree: int = 2,
    c: float = 0.0,
    modified: bool = False,
    reduce: bool = True,
) -> float | np.ndarray:
    """Distortion ``|‖y_i - y_j‖^2 - ‖phi(x_i) - phi(x_j)‖^2| / ‖phi(x_i) - phi(x_j)‖^2`` (000 Eq. 22), pairs
    with zero feature-space distance excluded; the mean over pairs, or every pair (``reduce=False``)."""
    dist = pairwise_distortion(X, Y, Kernel(degree, c, modified))
    return float(dist.mean()) if reduce else dist
