"""The kernel projections' in-memory peers, written here from the papers (never copied).

- :func:`author_pk_rp` -- PK-RP as its author specifies it for implementation: 003 Appendix A,
  Pseudocode 1 (``../shared/seeds/003_ff2487e5c9ebcf47.txt``): ``K = X S`` for a ``d x p`` matrix
  ``S`` (step 3, a BLAS product), then the loops of steps 4-12 over samples, outputs and the ``t``
  products of ``g`` factors each, scaled by ``1/sqrt(t*k)``.  The loops are compiled by numba where
  it is installed, as the thesis' own implementation was (003 Section 5.4: "numba to accelerate
  loops"), with the samples in parallel; without numba, the same arithmetic in NumPy.
- :func:`author_config` -- the author's default configuration: ``S`` Gaussian, ``p = 3000``,
  ``t = 10``, each output's ``g*t`` indices distinct (Pseudocode 1 step 2).
- :func:`in_memory_p_rp` -- P-RP (000 Eq. 13 and 17) in memory on sqlrp's own stored matrix: the
  ``m*k`` sums ``X R`` as one product (dense BLAS, or scipy.sparse for sparse matrices: the faster
  is the peer), squared, signed and summed per output.
"""

from __future__ import annotations

import math

import numpy as np

try:  # the tests' extras install numba; without it the loops run in NumPy
    from numba import njit, prange
except ImportError:  # pragma: no cover - exercised where numba is missing
    njit = prange = None


def author_config(d: int, k: int, degree: int = 2, p: int = 3000, t: int = 10, seed: int = 0) -> dict:
    """``S`` (d x p, N(0, 1)) and ``index`` (k x g*t, distinct per row), 003 Pseudocode 1 steps 1-2."""
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((d, p))
    index = np.stack([rng.choice(p, size=degree * t, replace=False) for _ in range(k)]).astype(np.int64)
    return {"S": S, "index": index, "degree": degree, "t": t}


def _products_numpy(K: np.ndarray, index: np.ndarray, degree: int, t: int) -> np.ndarray:
    n, k = K.shape[0], index.shape[0]
    out = np.empty((n, k))
    step = max(1, (1 << 24) // max(1, index.size))  # rows per block: the gathered factors stay ~128 MB
    for lo in range(0, n, step):
        gathered = K[lo : lo + step][:, index.reshape(-1)].reshape(-1, k, t, degree)
        out[lo : lo + step] = gathered.prod(axis=3).sum(axis=2)
    return out


if njit is not None:

    @njit(parallel=True, cache=False)
    def _products_numba(K, index, degree, t):  # noqa: ANN001, ANN202 - numba-compiled: Pseudocode 1 steps 4-11
        n, k = K.shape[0], index.shape[0]
        out = np.zeros((n, k))
        for row in prange(n):
            for c in range(k):
                acc = 0.0
                for i in range(t):
                    temp = K[row, index[c, degree * i]]
                    for j in range(1, degree):
                        temp *= K[row, index[c, degree * i + j]]
                    acc += temp
                out[row, c] = acc
        return out


def author_pk_rp(X: np.ndarray, config: dict) -> np.ndarray:
    """003 Pseudocode 1: ``X' = 1/sqrt(t*k) * sum_i prod_j (X S)[:, index[c, g*i + j]]``."""
    S, index, degree, t = config["S"], config["index"], config["degree"], config["t"]
    K = np.asarray(X, dtype=np.float64) @ S  # step 3
    if njit is not None:
        out = _products_numba(K, index, degree, t)
    else:
        out = _products_numpy(K, index, degree, t)
    return out / math.sqrt(t * index.shape[0])  # step 12


def warm_up() -> None:
    """Compile the numba loops before anything is timed."""
    config = author_config(4, 2, p=8, t=2)
    author_pk_rp(np.ones((3, 4)), config)


def in_memory_p_rp(X: np.ndarray, projection, dense: bool = True) -> np.ndarray:  # noqa: ANN001
    """000 Eq. 13 with sqlrp's stored signs: ``x'_j = scale * sum_l sigma_l (x . r_jl)^2``; the
    products ``X R`` by dense BLAS (``dense=True``) or scipy.sparse."""
    lin, comb = projection.linear, projection.combiner
    if dense:
        R = np.zeros((lin.d, lin.p))
        R[lin.feature, lin.vector] = lin.weight
        K = np.asarray(X, dtype=np.float64) @ R
    else:
        import scipy.sparse as sp

        K = np.asarray(X @ sp.csc_matrix((lin.weight, (lin.feature, lin.vector)), shape=(lin.d, lin.p)))
    W = np.zeros((lin.p, comb.k))  # sigma_l of vector (j, l) in column j
    np.add.at(W, (comb.factor_vector.reshape(-1, 2)[:, 0], comb.term_component), comb.term_weight)
    return (K * K) @ W * projection.scale
