"""Polynomial kernels, feature-space distances by the kernel trick, and the explicit feature map.

- :func:`polynomial_kernel` -- ``K(x, y) = (x.y + c)^g``; ``modified=True`` (degree 2, ``c = 0``) is
  000 Eq. 12, ``(x.y)^2 - (x^2).(y^2)``, whose feature space drops the ``d`` diagonal features ``x_i^2``.
- :func:`kernel_sq_distances` -- ``||phi(x) - phi(y)||^2 = K(x,x) + K(y,y) - 2 K(x,y)`` for every pair
  ``i < j`` (000 Eq. 23), without ever forming ``phi``.
- :func:`sqlrp.methods.distortion.kernel_distortion` measures a projection against those distances
  (000 Eq. 22).
- :func:`explicit_feature_map` -- ``phi(x)`` itself for small ``d`` (every degree-``g`` monomial with
  the square root of its multinomial coefficient, 000 Eq. 7 for ``g = 2``), so that "explicit phi + RP"
  (000 Section 3, the *explicit approach*) exists as the baseline.
- :func:`kernel_of` -- which kernel a projection approximates (from its method and parameters).
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter


def _check(degree: int, c: float, modified: bool) -> None:
    if int(degree) != degree or degree < 0:
        raise InvalidParameter(f"degree must be a whole number >= 0, got {degree!r}")
    if c < 0:
        raise InvalidParameter(f"c must be >= 0, got {c!r}")
    if modified and (degree != 2 or c != 0):
        raise InvalidParameter("the modified kernel (000 Eq. 12) is defined for degree 2 and c = 0 only")


def polynomial_kernel(
    X: np.ndarray, Y: np.ndarray | None = None, degree: int = 2, c: float = 0.0, modified: bool = False
) -> np.ndarray:
    """Gram matrix ``K[i, j] = (x_i . y_j + c)^degree`` (``modified``: minus ``(x_i^2) . (y_j^2)``)."""
    _check(degree, c, modified)
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    K = (X @ Y.T + c) ** degree
    if modified:
        K = K - (X**2) @ (Y**2).T
    return K


def kernel_sq_distances(X: np.ndarray, degree: int = 2, c: float = 0.0, modified: bool = False) -> np.ndarray:
    """``||phi(x_i) - phi(x_j)||^2`` for all pairs ``i < j`` (condensed order, as ``scipy.pdist``), by the
    kernel trick (000 Eq. 23).  ``degree = 1, c = 0`` gives the plain squared Euclidean distances."""
    K = polynomial_kernel(X, degree=degree, c=c, modified=modified)
    diag = np.diag(K)
    i, j = np.triu_indices(len(K), k=1)
    return np.maximum(diag[i] + diag[j] - 2 * K[i, j], 0.0)


def feature_dim(d: int, degree: int, c: float = 0.0, modified: bool = False) -> int:
    """Dimension of the explicit feature space: ``C(d' + g - 1, g)`` monomials (``d' = d + 1`` if ``c > 0``)."""
    d_eff = d + (1 if c > 0 else 0)
    return math.comb(d_eff + degree - 1, degree) - (d if modified else 0)


def explicit_feature_map(
    X: np.ndarray, degree: int = 2, c: float = 0.0, modified: bool = False, max_features: int = 2_000_000
) -> np.ndarray:
    """``phi(X)`` with ``<phi(x), phi(y)> = K(x, y)`` exactly: one column per monomial
    ``x_{i1} ... x_{ig}`` (``i1 <= ... <= ig``) times ``sqrt(g! / prod_i mult_i!)`` (000 Eq. 7 for g = 2:
    ``x_i^2`` and ``sqrt(2) x_i x_j``).  Inhomogeneous kernels append the constant feature ``sqrt(c)``
    first (003 Eq. 4.17).  ``modified`` (degree 2) drops the ``d`` diagonal columns ``x_i^2``.
    For small ``d`` only: the width grows as ``d^g / g!``."""
    _check(degree, c, modified)
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    width = feature_dim(d, degree, c, modified)
    if width * max(n, 1) > max_features * 100 or width > max_features:
        raise InvalidParameter(f"the explicit feature space has {width} dimensions; too large to materialise")
    Z = np.hstack([X, np.full((n, 1), math.sqrt(c))]) if c > 0 else X
    cols, coefs = [], []
    for combo in combinations_with_replacement(range(Z.shape[1]), degree):
        counts = np.bincount(combo, minlength=1)
        if modified and counts.max() == degree:
            continue
        coef = math.factorial(degree)
        for m in counts:
            coef //= math.factorial(int(m))
        cols.append(combo)
        coefs.append(math.sqrt(coef))
    if degree == 0:
        return np.ones((n, 1))
    idx = np.array(cols, dtype=np.int64)
    out = np.ones((n, len(cols)))
    for j in range(degree):
        out *= Z[:, idx[:, j]]
    return out * np.array(coefs)


def kernel_of(projection: Any) -> dict[str, Any]:
    """The kernel a projection approximates: ``{"degree", "c", "modified"}`` (linear methods: degree 1)."""
    params = getattr(projection, "params", {}) or {}
    if "degree" not in params:
        return {"degree": 1, "c": 0.0, "modified": False}
    return {
        "degree": int(params["degree"]),
        "c": float(params.get("c", 0.0)),
        "modified": bool(params.get("modified", False)),
    }


__all__ = [
    "explicit_feature_map",
    "feature_dim",
    "kernel_sq_distances",
    "kernel_of",
    "polynomial_kernel",
]
