"""NumPy evaluator of the IR: the oracle for every SQL path and the in-memory path for DataFrames.

``K = X^power W + bias`` (linear stage, sparse ``W``), then
``y_c = scale * f(inner * sum_{t in terms(c)} weight_t * prod_{f in t} K[:, vector_f])`` (combiner, then
the elementwise output function ``f``: identity, ``cos`` or ``sign``, :data:`sqlrp.core.ir.FUNCTIONS`).
Optional pooling sums ``y`` over rows that share a group key (CBP-KRP, 003 Ch. 5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import InputError, overflow_error
from ..core.ir import Combiner, Composed, LinearStage, Projection

DENSE_ENTRIES = 1 << 22  # 32 MB of float64: above this the NumPy path never builds the dense matrix
DENSE_DENSITY = 0.01  # below this share of non-zeros a sparse product does less work than BLAS


def sparse_product(X: np.ndarray, row: np.ndarray, col: np.ndarray, weight: np.ndarray, n_cols: int) -> np.ndarray:
    """``X @ W`` for the sparse ``W`` with ``W[row[t], col[t]] += weight[t]`` (n x ``n_cols``).

    A dense ``W`` and BLAS when ``W`` is small (at most :data:`DENSE_ENTRIES` entries) and not very
    sparse (:data:`DENSE_DENSITY`): BLAS runs on every core, scipy.sparse on one, and on PK-RP's
    vectors the dense product wins (``PYTHONPATH=. python -m bench.probes reference``; the figures
    are in ``docs/benchmarks.md``, "Methods").  Otherwise scipy.sparse where it is
    installed (``sqlrp[sklearn]``); in the light core, the products of the non-zeros summed per
    column (``np.add.reduceat``) over blocks of rows."""
    X = np.asarray(X, dtype=np.float64)
    try:
        import scipy.sparse as sp  # late: keeps `import sqlrp` light (CLI start-up)
    except ImportError:
        sp = None
    small = X.shape[1] * n_cols <= DENSE_ENTRIES
    if small and (sp is None or len(row) >= DENSE_DENSITY * X.shape[1] * n_cols):
        W = np.zeros((X.shape[1], n_cols))
        np.add.at(W, (row, col), weight)
        return X @ W
    if sp is not None:
        return np.asarray(X @ sp.csc_matrix((weight, (row, col)), shape=(X.shape[1], n_cols)))
    out = np.zeros((X.shape[0], n_cols))
    order = np.argsort(col, kind="stable")
    row, col, weight = row[order], col[order], weight[order]
    present, starts = np.unique(col, return_index=True)
    block = max(1, DENSE_ENTRIES // max(1, len(row)))
    for lo in range(0, X.shape[0], block):
        terms = X[lo : lo + block][:, row] * weight
        out[lo : lo + block][:, present] = np.add.reduceat(terms, starts, axis=1)
    return out


def linear_outputs(linear: LinearStage, X: np.ndarray) -> np.ndarray:
    """``K`` (n x p): the linear stage applied to the rows of ``X``."""
    if linear.power is None:
        K = sparse_product(X, linear.feature, linear.vector, linear.weight, linear.p)
    else:
        K = np.empty((X.shape[0], linear.p))
        for pw in np.unique(linear.power):
            cols = np.flatnonzero(linear.power == pw)
            keep = np.isin(linear.vector, cols)
            at = np.searchsorted(cols, linear.vector[keep])
            K[:, cols] = sparse_product(X**pw, linear.feature[keep], at, linear.weight[keep], len(cols))
    if linear.bias is not None:
        K = K + linear.bias
    return K


def combine(combiner: Combiner, K: np.ndarray) -> np.ndarray:
    """Combiner stage on linear outputs ``K`` (n x p) -> n x k, before the scale factor.

    Terms are grouped by their number of factors ``f``; each group's products are ``f`` gathered
    column blocks of ``K`` multiplied together (a term without factors is the constant 1), then the
    weighted sums per component are one matrix product -- over blocks of rows, so the gathered
    products stay near :data:`DENSE_ENTRIES` entries."""
    if combiner.is_identity:
        return K
    n, n_terms = K.shape[0], combiner.n_terms
    counts = np.bincount(combiner.factor_term, minlength=n_terms)
    order = np.argsort(combiner.factor_term, kind="stable")
    fv = combiner.factor_vector[order]  # the factors, grouped by term in term order
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    groups = [(terms, fv[starts[terms][:, None] + np.arange(f)]) for f in np.unique(counts[counts > 0])
              for terms in [np.flatnonzero(counts == f)]]  # fmt: skip
    out = np.empty((n, combiner.k))
    step = max(1, DENSE_ENTRIES // max(1, n_terms))
    for lo in range(0, n, step):
        block = K[lo : lo + step]
        prods = np.ones((len(block), n_terms))
        for terms, index in groups:
            product = block[:, index[:, 0]]
            for j in range(1, index.shape[1]):
                product *= block[:, index[:, j]]
            prods[:, terms] = product
        out[lo : lo + step] = sparse_product(
            prods, np.arange(n_terms), combiner.term_component, combiner.term_weight, combiner.k
        )
    return out


def output_function(projection: Projection, Y: np.ndarray) -> np.ndarray:
    """The projection's elementwise output function ``f(inner * Y)`` (:data:`sqlrp.core.ir.FUNCTIONS`),
    the same operations in the same order as the SQL (:func:`sqlrp.compiler.select.apply_function`)."""
    name = projection.function
    if name == "identity":
        return Y
    inner = float(projection.function_scale)
    U = Y * inner if inner != 1.0 else Y
    return np.cos(U) if name == "cos" else np.sign(U)


def transform(
    projection: Projection | Composed,
    X: np.ndarray,
    groups: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> np.ndarray:
    """Project the rows of ``X`` (n x d).  With ``groups``, sum the projections per group key
    (output rows in sorted key order).  A :class:`Composed` projection applies its stages in turn
    (pooling is not defined for it).  Rows whose projection overflows to infinity or NaN are refused
    as the SQL path refuses them (:func:`check_outputs`, naming ``labels`` or the row positions).

    :param projection: the projection to apply.
    :param X: the rows, ``n x d``, finite.
    :param groups: per row, its group key: pool the projected rows of each group (``None``: no pooling).
    :param labels: per row, the label an error names it by (ids, a frame's index; ``None``: its position).
    :returns: the projected rows, ``n x k`` float64 (with ``groups``: one row per key, keys sorted).
    """
    if isinstance(projection, Composed):
        if groups is not None:
            raise InputError("pooling (a group key) is not supported for composed projections")
        return transform(projection.second, transform(projection.first, X, labels=labels), labels=labels)
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
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, not warned about
        Y = output_function(projection, combine(projection.combiner, linear_outputs(projection.linear, X)))
        Y = Y * projection.scale
        if groups is not None:
            keys, inverse = np.unique(np.asarray(groups), return_inverse=True)
            pooled = np.zeros((len(keys), Y.shape[1]))
            np.add.at(pooled, inverse, Y)
            return check_outputs(pooled, keys, what="rows with id")
    return check_outputs(Y, labels)


#: the largest magnitude of each output type the in-memory paths return
LARGEST = {np.dtype(np.float64): float(np.finfo(np.float64).max), np.dtype(np.float32): float(np.finfo(np.float32).max)}


def check_outputs(Y: Any, labels: Any = None, dtype: Any = np.float64, what: str | None = None) -> Any:
    """``Y`` if every projected value is finite and fits ``dtype``, else the SQL path's overflow
    error (:func:`sqlrp.core.errors.overflow_error`) naming the first rows: ``labels`` (ids, a
    frame's index) or, without them, the row positions.  The one check of every in-memory path
    (``sqlrp.transform``, ``transform_frame``, ``SQLRandomProjection.transform``): sums of finite
    features can overflow (three values of 1e308), and a float64 result above 3.4e38 is infinity once
    cast to float32.  ``Y`` may be a SciPy sparse matrix (its stored values are checked)."""
    top = LARGEST.get(np.dtype(dtype), LARGEST[np.dtype(np.float64)])
    if hasattr(Y, "tocsr"):  # scipy.sparse: only stored values can be non-finite
        csr = Y.tocsr()
        bad_value = ~(np.abs(csr.data) <= top)  # NaN compares False: bad
        bad = np.zeros(csr.shape[0], dtype=bool)
        if bad_value.any():
            rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
            bad[rows[bad_value]] = True
    else:
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(np.asarray(Y)) <= top).all(axis=1) if np.ndim(Y) == 2 else ~(np.abs(Y) <= top)
    if bad.any():
        named = np.asarray(labels)[bad] if labels is not None else np.flatnonzero(bad)
        kind = "float32 outputs" if top < LARGEST[np.dtype(np.float64)] else "float64 sums"
        raise overflow_error(
            named[:5], what or ("rows with id" if labels is not None else "rows"), "nothing was returned", kind
        )
    return Y
