"""A scikit-learn transformer over sqlrp projections (fit / transform / get_feature_names_out).

Its in-memory path is the NumPy reference evaluator, so for the same stored matrix it gives the
same numbers as the SQL path (``sqlrp.project``) to ~1e-12 relative.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import reference
from .errors import InputError
from .ir import Projection
from .methods import johnson_lindenstrauss_min_dim, make_projection


class SQLRandomProjection(TransformerMixin, BaseEstimator):
    """Random projection whose matrix can be stored in, and compiled for, a database.

    Parameters
    ----------
    n_components : int or "auto"
        Output dimension k; ``"auto"`` uses :func:`johnson_lindenstrauss_min_dim` with ``eps``.
    method : str
        ``"achlioptas"`` (sign matrix, entries ``sqrt(s) * {+1, 0, -1}`` with probabilities
        ``1/(2s), 1 - 1/s, 1/(2s)``; 000 Eq. 2-3) or ``"gaussian"`` (N(0, 1) weights).
    s : float or "auto"
        Sparsity for ``achlioptas``: 1 (dense signs), 3 (Achlioptas), ``"auto"`` = sqrt(d).
    eps : float
        Distortion allowed by ``n_components="auto"``.
    random_state : int or None
        Seed of the generator (an int is drawn and recorded when None).
    projection : Projection or None
        Use this (e.g. stored, loaded) projection instead of generating one; ``fit`` checks d.
    prefix : str
        Output feature names are ``{prefix}0 .. {prefix}{k-1}``, the SQL path's column names.
    """

    def __init__(
        self,
        n_components: int | str = "auto",
        *,
        method: str = "achlioptas",
        s: float | str = "auto",
        eps: float = 0.1,
        random_state: int | None = None,
        projection: Projection | None = None,
        prefix: str = "p",
    ):
        self.n_components = n_components
        self.method = method
        self.s = s
        self.eps = eps
        self.random_state = random_state
        self.projection = projection
        self.prefix = prefix

    def fit(self, X: Any, y: Any = None) -> SQLRandomProjection:
        X = validate_data(self, X, dtype=np.float64)
        n, d = X.shape
        if self.projection is not None:
            if self.projection.d != d:
                raise InputError(f"the projection expects d = {self.projection.d} features, X has {d}")
            self.projection_ = self.projection
        else:
            k = johnson_lindenstrauss_min_dim(n, self.eps) if self.n_components == "auto" else int(self.n_components)
            seed = self.random_state
            if seed is None:
                seed = int(np.random.default_rng().integers(2**31 - 1))
            params = {"s": self.s} if self.method == "achlioptas" else {}
            self.projection_ = make_projection(self.method, d, k, seed=seed, **params)
        self.n_components_ = self.projection_.k
        return self

    def transform(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "projection_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return reference.transform(self.projection_, X)

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        check_is_fitted(self, "projection_")
        return np.asarray([f"{self.prefix}{j}" for j in range(self.n_components_)], dtype=object)
