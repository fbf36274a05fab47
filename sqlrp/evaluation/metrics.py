"""Quality measures of a projection, in NumPy (the oracle the SQL versions are tested against).

- Pairwise distortion of squared distances (López-Sánchez et al. 2018, ``000`` Eq. 22)::

      distortion(x, y) = | ||f(x) - f(y)||^2 - ||phi(x) - phi(y)||^2 | / ||phi(x) - phi(y)||^2

  in input space (``phi`` = identity) or in a kernel's feature space through the kernel trick
  (``000`` Eq. 23: ``||phi(x) - phi(y)||^2 = K(x, x) + K(y, y) - 2 K(x, y)``).  Pairs at distance 0
  (duplicate rows) are excluded, never divided by.
- Recall@K of K-nearest-neighbour search in the projected space (``002`` Eq. 12):
  ``|nu ∩ nu'| / K`` averaged over queries; queries are searched in a separate database set.
  Ties in distance are broken by database order (the SQL version breaks them by id, which is the
  same order when the database rows are sorted by id).
- Neighbourhood preservation (``002`` Eq. 13-15): ``Q_NX(K) = 1/(nK) sum_i |nu_iK ∩ nu'_iK|``,
  ``R_NX(K) = ((n-1) Q_NX(K) - K) / (n - 1 - K)``, ``AUC = sum_K R_NX(K)/K / sum_K 1/K``, K = 1..n-2.
- Kernel reconstruction NRMSE (Hamid et al. 2014, ``001``, Figs. 5-6): ``||K_hat - K||_F / ||K||_F``
  with ``K_hat = Y Y^T``.
- Downstream accuracy of a linear classifier on raw, projected and explicit-kernel features
  (``000`` Table 6 protocol, with scikit-learn's ``LinearSVC`` in place of LIBSVM).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter, need
from ..methods import METHODS, make_projection
from ..methods.distortion import Kernel, cdist, feature_sq_distances, pairwise_distortion, pdist
from ..methods.distortion import _cdist_numpy as _cdist_numpy  # the light core's fallbacks (tests compare them)
from ..methods.distortion import _pdist_numpy as _pdist_numpy
from ..methods.distortion import mean_distortion as mean_distortion  # a metric (sqlrp.evaluation lists them)
from ..methods.distortion import squareform as squareform
from ..methods.kernels import kernel_of
from ..methods.rff import ShiftKernel

#: ``evaluate(kernel=...)``: the kernel the projection itself approximates (its stored method and parameters)
FROM_PROJECTION = "projection"


def resolve_kernel(kernel: Kernel | str | None, projection: Any) -> Kernel | None:
    """The kernel whose feature space ``evaluate`` measures distortion in (issue 24).

    ``"projection"`` (the default of ``evaluate``): the kernel the projection approximates, from its stored
    method and parameters (:func:`sqlrp.methods.kernels.kernel_of`: degree, ``c``, modified), ``None`` (input
    space) for linear projections; a :class:`Kernel` overrides it; ``None`` is the input space.  A kernel
    projection measured in input space reports distortions of 10-100 (000 Eq. 22 against the wrong
    distances), so the stored kernel is the only safe default."""
    if kernel is None or isinstance(kernel, (Kernel, ShiftKernel)):
        return kernel
    if kernel != FROM_PROJECTION:
        raise InvalidParameter(f"kernel must be a Kernel, None (input space) or {FROM_PROJECTION!r}, got {kernel!r}")
    shift = ShiftKernel.of(projection)  # random Fourier features: the Gaussian or Laplacian kernel
    if shift is not None:
        return shift
    spec = kernel_of(projection)
    if spec["degree"] < 2:  # degree 1: (x.y + c) has the input space's distances; degree 0: none
        return None
    return Kernel(spec["degree"], spec["c"], spec["modified"])


def same_method(projection: Any, k: int, seed: int | None = 0) -> Any:
    """A fresh projection of the same method and parameters as ``projection`` to ``k`` outputs, for the
    distortion-against-k curve of a kernel projection.  Sizes that default to a multiple of k (PK-RP's
    ``p = g*t*k``, CRAFTMaps' ``up_k = 4k``) follow the new k."""
    params = dict(projection.params or {})
    taken = inspect.signature(METHODS[projection.method]).parameters
    kept = {key: v for key, v in params.items() if key in taken and key not in ("p", "up_k", "seed")}
    if projection.method == "craftmap":
        kept.update({key[3:]: v for key, v in params.items() if key.startswith("up_") and key != "up_k"})
    return make_projection(projection.method, projection.d, k, seed=seed, **kept)


def distortion_summary(X: np.ndarray, Y: np.ndarray, kernel: Kernel | None = None) -> dict[str, float]:
    """``n_pairs``, ``mean``, ``median``, ``p95`` and ``max`` of the pairwise distortion (percentiles
    interpolated linearly, as SQL's ``percentile_cont``)."""
    dist = pairwise_distortion(X, Y, kernel)
    if len(dist) == 0:
        return {"n_pairs": 0, "mean": float("nan"), "median": float("nan"), "p95": float("nan"), "max": float("nan")}
    return {
        "n_pairs": int(len(dist)),
        "mean": float(dist.mean()),
        "median": float(np.percentile(dist, 50)),
        "p95": float(np.percentile(dist, 95)),
        "max": float(dist.max()),
    }


def knn_indices(queries: np.ndarray, database: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` nearest database rows of each query (squared Euclidean; ties by index)."""
    D = cdist(np.asarray(queries, dtype=np.float64), np.asarray(database, dtype=np.float64), "sqeuclidean")
    if k > D.shape[1]:
        raise ValueError(f"K = {k} but the database has only {D.shape[1]} rows")
    return np.argsort(D, axis=1, kind="stable")[:, :k]


def recall_at_k(
    X_query: np.ndarray,
    X_database: np.ndarray,
    Y_query: np.ndarray,
    Y_database: np.ndarray,
    k: int = 5,
    per_query: bool = False,
) -> float | np.ndarray:
    """Recall@K (``002`` Eq. 12): the share of the true K nearest database neighbours of each query
    (found in the original space) that K-NN search in the projected space returns; mean over queries."""
    true = knn_indices(X_query, X_database, k)
    found = knn_indices(Y_query, Y_database, k)
    hits = np.array([len(np.intersect1d(t, f)) for t, f in zip(true, found, strict=True)]) / k
    return hits if per_query else float(hits.mean())


def _ranks(D: np.ndarray) -> np.ndarray:
    """Neighbour ranks per row (self = 0, nearest other = 1, ties broken by index)."""
    D = D.copy()
    np.fill_diagonal(D, -np.inf)
    order = np.argsort(D, axis=1, kind="stable")
    ranks = np.empty_like(order)
    rows = np.arange(len(D))[:, None]
    ranks[rows, order] = np.arange(D.shape[1])[None, :]
    return ranks


def q_nx(X: np.ndarray, Y: np.ndarray, kernel: Kernel | None = None) -> np.ndarray:
    """``Q_NX(K)`` for ``K = 1 .. n-1`` (``002`` Eq. 13), from the co-ranking of the two spaces:
    the pair ``(i, j)`` is in both K-neighbourhoods of ``i`` exactly when ``max(rho_ij, r_ij) <= K``."""
    n = len(X)
    Dh = squareform(feature_sq_distances(X, kernel))
    Dl = squareform(pdist(np.asarray(Y, dtype=np.float64), "sqeuclidean"))
    both = np.maximum(_ranks(Dh), _ranks(Dl))
    np.fill_diagonal(both, n)  # self never counts
    counts = np.bincount(both.ravel(), minlength=n + 1)[1:n]
    K = np.arange(1, n)
    return np.cumsum(counts) / (n * K)


def r_nx(Q: np.ndarray) -> np.ndarray:
    """``R_NX(K) = ((n-1) Q_NX(K) - K) / (n-1-K)`` for ``K = 1 .. n-2`` (``002`` Eq. 14)."""
    n = len(Q) + 1
    K = np.arange(1, n - 1)
    return ((n - 1) * Q[: n - 2] - K) / (n - 1 - K)


def auc_rnx(R: np.ndarray) -> float:
    """Area under the ``R_NX`` curve with a log-scaled K (``002`` Eq. 15), in [-1, 1]."""
    K = np.arange(1, len(R) + 1)
    return float(np.sum(R / K) / np.sum(1.0 / K))


def kernel_nrmse(K_hat: np.ndarray, K: np.ndarray) -> float:
    """``||K_hat - K||_F / ||K||_F`` (``001``)."""
    return float(np.linalg.norm(K_hat - K) / np.linalg.norm(K))


def linear_classifier_accuracy(
    F_train: np.ndarray, y_train: np.ndarray, F_test: np.ndarray, y_test: np.ndarray, C: float = 1.0
) -> float:
    """Test accuracy of a standardised linear SVM (``000`` Table 6 protocol); needs ``sqlrp[sklearn]``."""
    need("sklearn", "sklearn", "the linear-classifier accuracy")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    model = make_pipeline(StandardScaler(), LinearSVC(C=C, max_iter=5000))
    model.fit(F_train, y_train)
    return float(model.score(F_test, y_test))
