"""Quality measures of a projection, in NumPy.

Pairwise distortion of squared distances (000 Eq. 22):
``|‖f(x) - f(y)‖^2 - ‖x - y‖^2| / ‖x - y‖^2``, over all pairs with ``‖x - y‖ > 0``
(duplicate rows are excluded, not divided by).  A valid Gaussian-like RP to k dimensions has expected
distortion ``E|chi2_k/k - 1|`` (:func:`sqlrp.methods.expected_distortion`).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist


def pairwise_distortion(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Distortion of every pair ``i < j`` of rows (original ``X``, projected ``Y``)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
    dx = pdist(X, "sqeuclidean")
    dy = pdist(Y, "sqeuclidean")
    keep = dx > 0
    return np.abs(dy[keep] - dx[keep]) / dx[keep]


def mean_distortion(X: np.ndarray, Y: np.ndarray) -> float:
    """Mean pairwise distortion of squared distances (000 Eq. 22)."""
    return float(pairwise_distortion(X, Y).mean())
