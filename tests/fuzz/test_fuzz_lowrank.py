"""Random small tables through ``sqlrp.fit`` (issue 43): either the oracle's components -- the sketch's
(:func:`sqlrp.methods.lowrank.randomized_pca` given the same ``Omega``) or, on the exact route, NumPy's SVD
of the centred table -- wherever the spectrum separates them, and the oracle's singular values always;
or a one-line refusal (``k > d``); fewer components than ``k`` only with a warning (rank below ``k``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.methods.lowrank import flip_signs, oversampled, randomized_pca, sketch_matrix
from testkit.frames import wide_frame
from testkit.fuzz_tables import fuzz_settings


def close(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


@fuzz_settings(8)
@given(
    n=st.integers(3, 40),
    d=st.integers(1, 12),
    k=st.integers(1, 4),
    p=st.integers(0, 10),
    q=st.integers(0, 2),
    shape=st.sampled_from(["plain", "constant", "duplicate", "integers"]),
    route=st.sampled_from(["sql", "arrow"]),
    gram=st.sampled_from(["auto", "never"]),
    seed=st.integers(0, 1000),
)
def test_fuzz_fit_equals_the_oracle_or_refuses(n, d, k, p, q, shape, route, gram, seed):
    """Any small table: the oracle's components (where its spectrum separates them), or a one-line refusal."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 2.0 ** -np.arange(d) + rng.normal(size=d)
    if shape == "constant":  # a feature without variance
        X[:, -1] = 3.0
    elif shape == "duplicate" and d > 1:  # rank below d
        X[:, -1] = X[:, 0]
    elif shape == "integers":
        X = np.round(X * 4)
    options = {"name": "pc", "route": route, "power_iterations": q, "gram": gram, "oversample": p}
    with sqlrp.connect() as db:
        db.write_dataframe("t", wide_frame(X))
        if k > d:
            with pytest.raises(InvalidParameter, match="more than the table's"):
                sqlrp.fit(db, "t", "id", k=k, **options)
            return
        if np.ptp(X, axis=0).max() == 0:
            with pytest.raises(InputError, match="no variance to explain"):
                sqlrp.fit(db, "t", "id", k=k, **options)
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitted = sqlrp.fit(db, "t", "id", k=k, **options)
    assert (fitted.k < k) == any("components were fitted" in str(w.message) for w in caught)
    A = X - X.mean(axis=0)
    rank = np.linalg.matrix_rank(A)
    s_fit = fitted.singular_values_
    assert fitted.k <= k and (fitted.k == min(k, rank) or s_fit[-1] < 1e-4 * s_fit[0])
    if fitted.params["exact"]:
        want = exact_pca(X, k)
    else:
        omega = sketch_matrix(d, oversampled(k, p, d), 0)
        if np.linalg.matrix_rank(A @ omega) < min(omega.shape[1], rank):
            return  # a degenerate sketch: the oracle's QR makes up directions the fit drops
        want = randomized_pca(X, omega, q, k)
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


@fuzz_settings(6)
@given(
    n=st.integers(3, 60),
    d=st.integers(2, 80),
    v=st.floats(0.05, 0.99),
    gram=st.sampled_from(["auto", "never"]),
    route=st.sampled_from(["sql", "arrow"]),
    seed=st.integers(0, 1000),
)
def test_fuzz_variance_keeps_the_fewest_components(n, d, v, gram, route, seed):
    """``variance=v``: the kept ratio exceeds ``v`` and one component fewer does not; on the exact route the
    count is exact PCA's (scikit-learn's rule), and a sketch's is never below it."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.8 ** np.arange(d) + rng.normal(size=d)
    with sqlrp.connect() as db:
        db.write_dataframe("t", wide_frame(X))
        fitted = sqlrp.fit(db, "t", "id", variance=v, name="pc", gram=gram, route=route, power_iterations=1)
    ratio = fitted.explained_variance_ratio_
    assert ratio.sum() > v - 1e-12 and ratio[:-1].sum() <= v + 1e-12
    exact = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    cumulative = np.cumsum(exact) / exact.sum()
    count = int(np.searchsorted(cumulative, v, side="right")) + 1
    if np.min(np.abs(cumulative - v)) > 1e-9:  # not at the threshold itself, where rounding decides
        assert fitted.k == count if fitted.params["exact"] else fitted.k >= count


@fuzz_settings(5)
@given(
    n=st.integers(3, 30),
    d=st.integers(2, 30),
    k=st.integers(1, 3),
    q=st.integers(0, 1),
    density=st.floats(0.2, 1.0),
    gram=st.sampled_from(["auto", "never"]),
    seed=st.integers(0, 1000),
)
def test_fuzz_long_layout_equals_the_oracle(n, d, k, q, density, gram, seed):
    """A sparse long table (absent entries are 0): the singular values of the same fit on the dense table's
    oracle; every id keeps a row in feature 0 and the last feature has a value, so ``n`` and ``d`` agree."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 0.7 ** np.arange(d) + rng.normal(size=d)
    X[rng.random(X.shape) > density] = 0.0
    X[:, 0], X[0, -1] = 1.0 + np.arange(n) % 2, 5.0
    rows, cols = np.nonzero(X)
    frame = pd.DataFrame({"id": rows, "feature": cols, "value": X[rows, cols]})
    options = {"name": "pc", "power_iterations": q, "gram": gram, "layout": "long"}
    with sqlrp.connect() as db:
        db.write_dataframe("t", frame)
        if k > d:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = sqlrp.fit(db, "t", "id", k=k, **options)
    if fitted.params["exact"]:
        want = exact_pca(X, k)
    else:
        omega, A = sketch_matrix(d, oversampled(k, 10, d), 0), X - X.mean(axis=0)
        if np.linalg.matrix_rank(A @ omega) < min(omega.shape[1], np.linalg.matrix_rank(A)):
            return  # a degenerate sketch (as above)
        want = randomized_pca(X, omega, q, k)
    assert fitted.params["rows"] == n
    assert close(fitted.singular_values_, want.singular_values[: fitted.k]) <= 1e-8
