"""Random small tables through ``sqlrp.fit`` (issue 43): either the oracle's components -- the sketch's
(:func:`sqlrp.methods.lowrank.randomized_pca` given the same ``Omega``) or, on the exact route, NumPy's SVD
of the centred table -- wherever the spectrum separates them, and the oracle's singular values always;
or a one-line refusal (``k > d``); fewer components than ``k`` only with a warning (rank below ``k``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.core.errors import InvalidParameter
from sqlrp.methods.lowrank import flip_signs, oversampled, randomized_pca, sketch_matrix
from testkit.frames import wide_frame
from testkit.fuzz_tables import fuzz_settings


def oracle(X: np.ndarray, k: int, q: int, p: int = 10, seed: int = 0):
    return randomized_pca(X, sketch_matrix(X.shape[1], oversampled(k, p, X.shape[1]), seed), q, k)


def close(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


@fuzz_settings(6)
@given(
    n=st.integers(3, 40),
    d=st.integers(1, 9),
    k=st.integers(1, 4),
    q=st.integers(0, 2),
    route=st.sampled_from(["sql", "arrow"]),
    gram=st.sampled_from(["auto", "never"]),
    seed=st.integers(0, 1000),
)
def test_fuzz_fit_equals_the_oracle_or_refuses(n, d, k, q, route, gram, seed):
    """Any small table: the oracle's components (where its spectrum separates them), or a one-line refusal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 2.0 ** -np.arange(d) + rng.normal(size=d)
    with sqlrp.connect() as db:
        db.write_dataframe("t", wide_frame(X))
        if k > d:
            with pytest.raises(InvalidParameter):
                sqlrp.fit(db, "t", "id", k=k, name="pc", route=route, power_iterations=q, gram=gram)
            return
        with pytest.warns() if min(n - 1, d) < k else _nothing():
            fitted = sqlrp.fit(db, "t", "id", k=k, name="pc", route=route, power_iterations=q, gram=gram)
    want = oracle(X, k, q) if fitted.params["passes"] > 1 or not fitted.params["exact"] else exact_pca(X, k)
    s = np.concatenate([want.singular_values, [0.0]])
    kept = fitted.k
    gaps = np.abs(np.diff(s[: kept + 1])) / s[0]
    if np.all(gaps > 1e-3):  # separated singular values: the components are well-defined
        assert close(fitted.components_, want.components[:kept]) <= 1e-6
    assert close(fitted.singular_values_, want.singular_values[:kept]) <= 1e-8


def exact_pca(X: np.ndarray, k: int):
    """NumPy's SVD of the centred table: the exact route's oracle."""
    A = X - X.mean(axis=0)
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    return type("Exact", (), {"components": flip_signs(Vt[:k]), "singular_values": s[:k]})


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
