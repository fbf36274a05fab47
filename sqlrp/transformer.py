"""A scikit-learn transformer over sqlrp projections, with the interface of scikit-learn's own
``SparseRandomProjection`` (``sklearn/random_projection.py``): ``components_``, ``inverse_transform``,
sparse input, float32 kept as float32 -- plus :meth:`SQLRandomProjection.to_database`, which stores
the fitted matrix so that the SQL path (``sqlrp.project``) projects with it.  ``method="pca"`` / ``"svd"``
fits the top components instead (:func:`sqlrp.fit` on the rows of ``X``), with scikit-learn ``PCA``'s attributes.

Its dense in-memory path is the NumPy reference evaluator, so for the same stored matrix it gives the
same numbers as the SQL path to ~1e-12 relative.  Needs ``pip install 'sqlrp[sklearn]'``.
"""

from __future__ import annotations

import dataclasses
import warnings
from numbers import Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.utils import check_array
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_is_fitted, validate_data

from .api import fit as fit_table
from .backends import connect
from .core.errors import InputError, InvalidParameter
from .core.ir import Projection
from .core.lazy import pd
from .core.params import count, is_whole
from .methods import johnson_lindenstrauss_min_dim, make_projection, reference
from .methods.lowrank import LowRank
from .methods.rff import data_gamma
from .methods.sparsity import data_sparsity, kurtosis_of
from .registry.store import Registry


class SQLRandomProjection(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Random projection whose matrix can be stored in, and compiled for, a database.

    ``transform(X) = X @ components_.T`` with ``components_ = scale * W.T`` (k x d, sparse), where
    ``W`` holds the stored weights and ``scale`` the delayed scale factor (``1 / sqrt(k)``).

    :param n_components: Dimensionality of the target projection space (``k``).  ``"auto"``: adjusted to
        the number of samples by the Johnson-Lindenstrauss bound (:func:`sqlrp.johnson_lindenstrauss_min_dim`),
        the quality of the embedding being controlled by ``eps``; otherwise a whole number >= 1 (more
        than the number of features warns, as scikit-learn's projections do).
    :param method: ``"pca"`` or ``"svd"``: not random, the top ``n_components`` principal components (centred)
        or right singular vectors of ``X`` by :func:`sqlrp.fit`'s randomized range finder (Halko, Martinsson &
        Tropp 2011; ``random_state`` seeds its sketch), run in-process on ``X`` -- the same numbers as
        ``sqlrp.fit`` on a table of ``X``'s rows; ``transform(X) = (X - mean_) @ components_.T``; dense input only.
        Otherwise ``"achlioptas"`` (sign matrix, entries ``sqrt(s) * {+1, 0, -1}`` with probabilities
        ``1/(2s), 1 - 1/s, 1/(2s)``; 000 Eq. 2-3) or ``"gaussian"`` (N(0, 1) weights); the kernel methods
        of :data:`sqlrp.methods.METHODS` take dense input only.
    :param s: Sparsity for ``achlioptas``: 1 (dense signs), 3 (Achlioptas); ``"auto"``: chosen from the
        data's kurtosis (Li, Hastie & Church 2006; :mod:`sqlrp.methods.sparsity`), at most ``sqrt(d)``.
    :param density: Ratio in the range (0, 1] of non-zero components in the random projection matrix:
        scikit-learn's name for the same choice, ``density = 1 / s`` (``1 / 3.0`` reproduces Achlioptas,
        2001); ``"auto"`` leaves it to ``s``.  Giving both is an error.
    :param eps: Parameter to control the quality of the embedding according to the Johnson-Lindenstrauss
        lemma when ``n_components`` is ``"auto"`` (``0 < eps < 1``); smaller values give a better embedding
        and more dimensions.  As scikit-learn's projections do, a bound larger than the number of features
        is an error.
    :param random_state: Controls the pseudo random number generator used to generate the projection
        matrix at fit time: pass an int for reproducible output across multiple function calls; ``None``
        draws an int, recorded as the projection's seed (a ``RandomState`` instance is not taken: the seed
        is stored with the matrix).
    :param kernel: ``method="rff"`` (random Fourier features, scikit-learn's ``RBFSampler`` with the same
        ``gamma``, ``n_components`` and ``random_state``): ``"rbf"`` or ``"laplacian"``.
    :param gamma: ``method="rff"``: the kernel's bandwidth, a number > 0 or ``"scale"`` (``1 / (d X.var())``
        of the data fitted, as scikit-learn's SVC; ``RBFSampler``'s default is ``1.0``).
    :param weights: ``method="rff"``: the directions, ``gaussian`` (``RBFSampler``'s), ``orthogonal``,
        ``structured`` or ``signs`` (default: :data:`sqlrp.methods.rff.DEFAULT_WEIGHTS`).
    :param oversample: ``method="pca"`` / ``"svd"`` (a low-rank fit, :func:`sqlrp.fit`'s options of the same
        names): extra sketch columns ``p`` (scikit-learn's PCA: ``n_oversamples``).
    :param power_iterations: low-rank fit: passes of subspace iteration, a count or ``"auto"``
        (scikit-learn's PCA: ``iterated_power``).
    :param whiten: low-rank fit: divide each score by the square root of its component's variance (scikit-learn's
        PCA: ``whiten``).
    :param projection: Use this (e.g. stored, loaded) projection instead of generating one; ``fit``
        checks its ``d`` against the number of features.
    :param prefix: Output feature names ``{prefix}0 .. {prefix}{k-1}`` (``"p"``: the SQL path's column
        names); ``None`` names them as scikit-learn's projections do, ``sqlrandomprojection0 ...``.
    :param dense_output: If True, ensure that the output of the random projection is a dense numpy array
        even if the input is sparse; if False, the projected data uses a sparse representation if the
        input is sparse (dense input: always dense).
    :param compute_inverse_components: Learn the inverse transform by computing the pseudo-inverse of the
        components during fit (``inverse_components_``, dense, n_features x n_components; linear methods).
    :ivar projection_: The projection used (stored with :meth:`to_database`).
    :ivar components_: Random matrix used for the projection, a CSR sparse matrix of shape
        (n_components, n_features) (linear methods only); ``pca`` / ``svd``: the principal axes, dense, as
        scikit-learn's ``PCA.components_``, with ``mean_``, ``explained_variance_``,
        ``explained_variance_ratio_`` and ``singular_values_`` beside them.
    :ivar inverse_components_: Pseudo-inverse of the components, of shape (n_features, n_components);
        only computed if ``compute_inverse_components`` is True.
    :ivar n_components_: Concrete number of components computed when ``n_components="auto"``.
    """

    def __init__(
        self,
        n_components: int | str = "auto",
        *,
        method: str = "achlioptas",
        s: float | str = "auto",
        density: float | str = "auto",
        eps: float = 0.1,
        random_state: int | None = None,
        projection: Projection | None = None,
        prefix: str | None = None,
        dense_output: bool = False,
        compute_inverse_components: bool = False,
        kernel: str = "rbf",
        gamma: float | str = "scale",
        weights: str | None = None,
        oversample: int = 10,
        power_iterations: int | str = "auto",
        whiten: bool = False,
    ):
        self.n_components = n_components
        self.method = method
        self.s = s
        self.density = density
        self.eps = eps
        self.random_state = random_state
        self.projection = projection
        self.prefix = prefix
        self.dense_output = dense_output
        self.compute_inverse_components = compute_inverse_components
        self.kernel = kernel
        self.gamma = gamma
        self.weights = weights
        self.oversample = oversample
        self.power_iterations = power_iterations
        self.whiten = whiten

    def fit(self, X: Any, y: Any = None) -> SQLRandomProjection:
        sparse = ["csr", "csc"] if self.__sklearn_tags__().input_tags.sparse else False  # rff: dense only
        X = validate_data(self, X, accept_sparse=sparse, dtype=[np.float64, np.float32])
        n, d = X.shape
        if self.projection is not None:
            if self.projection.d != d:
                raise InputError(f"the projection expects d = {self.projection.d} features, X has {d}")
            self.projection_ = _as_lowrank(self.projection)
        else:
            k = self._n_components(n, d)
            seed = self.random_state
            if seed is None:
                seed = int(np.random.default_rng().integers(2**31 - 1))
            self.projection_ = self._lowrank(X, k, seed) if self._lowrank_method else self._random(X, d, k, seed)
        self.n_components_ = self._n_features_out = self.projection_.k
        if isinstance(self.projection_, LowRank):
            self._lowrank_attributes(self.projection_)
        elif self._linear:
            lin = self.projection_.linear
            W = sp.csr_matrix((lin.weight * self.projection_.scale, (lin.vector, lin.feature)), shape=(lin.p, lin.d))
            self.components_ = W
            if self.compute_inverse_components:
                self.inverse_components_ = np.linalg.pinv(W.toarray())
        return self

    def _random(self, X: Any, d: int, k: int, seed: int) -> Projection:
        """A random projection of ``method`` (its parameters from the data where asked)."""
        params = {"s": self._sparsity()} if self.method == "achlioptas" else self._rff_params()
        params = data_sparsity(self.method, params, lambda: kurtosis_of(X))  # s from the data (issue 24)
        params = data_gamma(self.method, params, lambda: _variance(X))  # gamma="scale" from the data
        return make_projection(self.method, d, k, seed=seed, **params)

    @property
    def _lowrank_method(self) -> bool:
        return self.method in ("pca", "svd")

    def _lowrank(self, X: np.ndarray, k: int, seed: int) -> LowRank:
        """:func:`sqlrp.fit` itself on ``X``'s rows, a table of a throw-away in-memory DuckDB (its Arrow route:
        the rows stay in this process): the same algorithm, hence the same numbers.  (A table, not a
        registered frame: DuckDB's Arrow reader runs on a cursor, which does not see the connection's
        registered views.)"""
        n = X.shape[0]
        if n < 2:
            raise InvalidParameter(f"method={self.method!r} fits at least 2 samples, got n_samples={n}")
        frame = pd.DataFrame(np.asarray(X, dtype=np.float64)).add_prefix("f")
        frame.insert(0, "id", np.arange(n, dtype=np.int64))
        options = {"oversample": self.oversample, "power_iterations": self.power_iterations, "whiten": self.whiten}
        db = connect()
        try:
            db.write_dataframe("x", frame)
            return fit_table(db, "x", "id", self.method, k=k, name="fitted", seed=seed, **options)
        finally:
            db.close()

    def _lowrank_attributes(self, fitted: LowRank) -> None:
        """scikit-learn's ``PCA`` attributes, read from the stored projection."""
        self.components_ = fitted.components_
        self.mean_ = fitted.mean_
        self.explained_variance_ = fitted.explained_variance_
        self.explained_variance_ratio_ = fitted.explained_variance_ratio_
        self.singular_values_ = fitted.singular_values_

    def _rff_params(self) -> dict[str, Any]:
        """``kernel``, ``gamma`` and ``weights`` for ``method="rff"`` (none for the other methods)."""
        if self.method != "rff":
            return {}
        return {"kernel": self.kernel, "gamma": self.gamma, "weights": self.weights}

    def _n_components(self, n: int, d: int) -> int:
        """k: ``n_components`` if a whole number >= 1 (``1.5`` is refused, as scikit-learn's own
        projections refuse it, not truncated; more than ``d`` warns as theirs do), or the JL bound for
        ``"auto"`` (``0 < eps < 1``), refused when it exceeds ``d`` as scikit-learn refuses it.  ``pca`` / ``svd``:
        at most ``d`` (refused beyond, as scikit-learn's PCA refuses it); ``"auto"``: ``min(n - 1, d)``
        (``svd``: ``min(n, d)``), as scikit-learn's ``PCA(n_components=None)`` keeps all."""
        if isinstance(self.n_components, str) and self.n_components == "auto" and self.method == "rff":
            return 100  # RBFSampler's default: the JL bound is about distances, not a kernel's error
        if isinstance(self.n_components, str) and self.n_components == "auto" and self._lowrank_method:
            return min(n - (self.method == "pca"), d)  # as many as the centred rows' rank allows
        if isinstance(self.n_components, str) and self.n_components == "auto":
            eps = self.eps
            if isinstance(eps, bool) or not isinstance(eps, Real) or not 0 < eps < 1:
                raise InvalidParameter(f"eps must be a number in (0, 1) for n_components='auto', got {eps!r}")
            k = johnson_lindenstrauss_min_dim(n, eps)
            if k > d:
                raise InvalidParameter(
                    f"eps={eps} and n_samples={n} lead to a target dimension of {k} which is larger than the "
                    f"original space with n_features={d}"
                )
            return k
        if not is_whole(self.n_components):
            raise InvalidParameter(f"n_components must be 'auto' or a whole number >= 1, got {self.n_components!r}")
        k = count("n_components", self.n_components, limit="k")
        if k > d and self._lowrank_method:
            raise InvalidParameter(
                f"n_components={k} must be at most n_features={d} for method={self.method!r} (fewer components)"
            )
        if k > d and self.method != "rff":  # random features usually outnumber the inputs
            warnings.warn(
                f"The number of components is higher than the number of features: n_features < n_components "
                f"({d} < {k}). The dimensionality of the problem will not be reduced.",
                DataDimensionalityWarning,
                stacklevel=3,
            )
        return k

    def _sparsity(self) -> float | str:
        """``s``, or ``1 / density`` when scikit-learn's ``density`` is given instead."""
        if isinstance(self.density, str) and self.density == "auto":
            return self.s
        if not (isinstance(self.s, str) and self.s == "auto"):
            raise InvalidParameter(f"give s or density, not both (s = {self.s!r}, density = {self.density!r})")
        density = self.density
        if isinstance(density, bool) or not isinstance(density, Real) or not 0 < density <= 1:
            raise InvalidParameter(f"density must be 'auto' or a number in (0, 1], got {density!r}")
        return 1.0 / float(density)

    @property
    def _linear(self) -> bool:
        return self.projection_.is_linear

    def transform(self, X: Any) -> Any:
        """``X @ components_.T`` (dense ``X``: the NumPy reference of the SQL path), in ``X``'s dtype.
        Rows whose projection overflows -- to infinity in float64, or past float32's range when ``X``
        is float32 -- raise the SQL path's :class:`~sqlrp.core.errors.InputError`."""
        check_is_fitted(self, "projection_")
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=[np.float64, np.float32], reset=False)
        if sp.issparse(X):
            if isinstance(self.projection_, LowRank):
                raise InputError(f"sparse input: method={self.projection_.method!r} takes a dense array")
            if not self._linear:
                raise InputError("sparse input needs a linear projection (achlioptas, gaussian); pass a dense array")
            with np.errstate(over="ignore", invalid="ignore"):  # refused below, as the SQL path refuses it
                Y = safe_sparse_dot(X.astype(np.float64), self.components_.T, dense_output=self.dense_output)
        else:
            Y = reference.transform(self.projection_, np.asarray(X, dtype=np.float64))
        # overflow to infinity, or past float32's range once cast back: the SQL path's error
        return reference.check_outputs(Y, dtype=X.dtype).astype(X.dtype, copy=False)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Back to the input space: ``X @ pinv(components_).T`` (dense, like scikit-learn's); ``pca`` /
        ``svd``: ``X @ components_ + mean_`` as scikit-learn's ``PCA`` (whitened scores first times
        ``sqrt(explained_variance_)``)."""
        check_is_fitted(self, "components_")
        if isinstance(self.projection_, LowRank):
            Y = check_array(X, dtype=[np.float64, np.float32])
            if self.projection_.params.get("whiten"):
                Y = Y * np.sqrt(self.explained_variance_)
            return np.asarray(Y @ self.components_ + self.mean_).astype(Y.dtype, copy=False)
        X = check_array(X, dtype=[np.float64, np.float32], accept_sparse=("csr", "csc"))
        inverse = getattr(self, "inverse_components_", None)
        if inverse is None:
            inverse = np.linalg.pinv(self.components_.toarray())
        out = X @ inverse.T
        return np.asarray(out.toarray() if sp.issparse(out) else out)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        check_is_fitted(self, "projection_")
        if self.prefix is None:
            return super().get_feature_names_out(input_features)
        return np.asarray([f"{self.prefix}{j}" for j in range(self.n_components_)], dtype=object)

    def to_database(self, db: Any, name: str, replace: bool = False) -> str:
        """Store the fitted matrix in ``db`` (a backend or a URL) under ``name``; then
        ``sqlrp.project(db, table, id, name)`` projects inside the database with it."""
        check_is_fitted(self, "projection_")
        Registry.of(connect(db)).save(self.projection_, name, replace=replace)
        return name

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = self.method not in ("rff", "pca", "svd")  # rff's cos needs dense rows
        return tags


def _as_lowrank(projection: Projection) -> Projection:
    """A stored PCA / SVD fit (loaded from a registry: a plain :class:`Projection`) as the
    :class:`~sqlrp.methods.lowrank.LowRank` it was, so that its scikit-learn attributes are read back."""
    fitted = projection.method in ("pca", "svd") and "explained_variance" in projection.params
    if not fitted or isinstance(projection, LowRank):
        return projection
    return LowRank(**{f.name: getattr(projection, f.name) for f in dataclasses.fields(projection)})


def _variance(X: Any) -> float:
    """``X.var()`` over every entry (``rff`` fits dense rows only)."""
    return float(np.asarray(X, dtype=np.float64).var())
