"""NumPy evaluator of the IR: the oracle for every SQL path and the in-memory path for DataFrames.

``K = X^power W + bias`` (linear stage, sparse ``W``), then
``y_c = scale * sum_{t in terms(c)} weight_t * prod_{f in t} K[:, vector_f]`` (combiner).
Optional pooling sums ``y`` over rows that share a group key (CBP-KRP, 003 Ch. 5).
"""

from __future__ import annotations

import numpy as np

from .errors import InputError
from .ir import Combiner, Composed, LinearStage, Projection


def linear_outputs(linear: LinearStage, X: np.ndarray) -> np.ndarray:
    """``K`` (n x p): the linear stage applied to the rows of ``X``."""
    import scipy.sparse as sp  # late: keeps `import sqlrp` light (CLI start-up)

    W = sp.csc_matrix((linear.weight, (linear.feature, linear.vector)), shape=(linear.d, linear.p))
    if linear.power is None:
        K = np.asarray(X @ W)
    else:
        K = np.empty((X.shape[0], linear.p))
        for pw in np.unique(linear.power):
            cols = np.flatnonzero(linear.power == pw)
            K[:, cols] = np.asarray((X**pw) @ W[:, cols])
    if linear.bias is not None:
        K = K + linear.bias
    return K


def combine(combiner: Combiner, K: np.ndarray) -> np.ndarray:
    """Combiner stage on linear outputs ``K`` (n x p) -> n x k, before the scale factor."""
    if combiner.is_identity:
        return K
    n = K.shape[0]
    order = np.argsort(combiner.factor_term, kind="stable")
    ft, fv = combiner.factor_term[order], combiner.factor_vector[order]
    prods = np.ones((n, combiner.n_terms))
    if len(ft):
        starts = np.searchsorted(ft, np.arange(combiner.n_terms))
        has = np.bincount(ft, minlength=combiner.n_terms) > 0
        reduced = np.multiply.reduceat(K[:, fv], np.minimum(starts, len(ft) - 1), axis=1)
        prods[:, has] = reduced[:, has]
    import scipy.sparse as sp

    T = sp.csr_matrix(
        (combiner.term_weight, (np.arange(combiner.n_terms), combiner.term_component)),
        shape=(combiner.n_terms, combiner.k),
    )
    return np.asarray(prods @ T)


def transform(projection: Projection | Composed, X: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """Project the rows of ``X`` (n x d).  With ``groups``, sum the projections per group key
    (output rows in sorted key order).  A :class:`Composed` projection applies its stages in turn
    (pooling is not defined for it)."""
    if isinstance(projection, Composed):
        if groups is not None:
            raise InputError("pooling (a group key) is not supported for composed projections")
        return transform(projection.second, transform(projection.first, X))
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise InputError(f"expected a 2-D array (rows x features), got shape {X.shape}")
    if X.shape[1] != projection.d:
        raise InputError(
            f"the projection expects d = {projection.d} features but the input has {X.shape[1]}; "
            "use a projection made for this data or select the matching columns"
        )
    if not np.all(np.isfinite(X)):
        raise InputError("the input contains NaN or infinite values; clean or impute them first")
    Y = combine(projection.combiner, linear_outputs(projection.linear, X)) * projection.scale
    if groups is not None:
        keys, inverse = np.unique(np.asarray(groups), return_inverse=True)
        pooled = np.zeros((len(keys), Y.shape[1]))
        np.add.at(pooled, inverse, Y)
        return pooled
    return Y
