"""``SQLRandomProjection`` against scikit-learn: every ``check_estimator`` check, and the interface of
``SparseRandomProjection`` (components_, inverse_transform, sparse input, float32, feature names),
plus storing the fitted matrix for the SQL path."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.random_projection import SparseRandomProjection
from sklearn.utils.estimator_checks import parametrize_with_checks

import sqlrp
from sqlrp.transformer import SQLRandomProjection
from testkit.frames import wide_frame


@parametrize_with_checks(
    [
        SQLRandomProjection(n_components=3, random_state=0),
        SQLRandomProjection(method="rff", n_components=3, random_state=0),
        SQLRandomProjection(method="pca", n_components=2, random_state=0),
        SQLRandomProjection(method="svd", n_components=2, random_state=0, whiten=True),
    ]
)
def test_check_estimator(estimator, check):
    check(estimator)


def test_components_are_the_map_and_oriented_like_sklearn():
    X = np.random.default_rng(1).normal(size=(40, 50))
    ours = SQLRandomProjection(10, s=3, random_state=2).fit(X)
    theirs = SparseRandomProjection(10, density=1 / 3, random_state=2).fit(X)
    assert sp.issparse(ours.components_) and ours.components_.shape == theirs.components_.shape == (10, 50)
    np.testing.assert_allclose(ours.transform(X), X @ ours.components_.T.toarray(), rtol=1e-12)
    # the same distribution: entries +-sqrt(s / k) (000 Eq. 2-3, scaled by 1 / sqrt(k))
    assert np.allclose(np.unique(np.abs(ours.components_.data)), np.sqrt(3 / 10))
    assert np.allclose(np.unique(np.abs(theirs.components_.data)), np.sqrt(3 / 10))


def test_inverse_transform_and_precomputed_inverse():
    X = np.random.default_rng(3).normal(size=(30, 12))
    plain = SQLRandomProjection(20, s=1, random_state=4).fit(X)  # k > d: the map is injective
    ahead = SQLRandomProjection(20, s=1, random_state=4, compute_inverse_components=True).fit(X)
    assert ahead.inverse_components_.shape == (12, 20)
    np.testing.assert_allclose(plain.inverse_transform(plain.transform(X)), X, atol=1e-10)
    np.testing.assert_allclose(ahead.inverse_transform(ahead.transform(X)), X, atol=1e-10)


def test_sparse_input_dense_output_and_float32():
    X = sp.random(60, 40, density=0.1, format="csr", random_state=5)
    model = SQLRandomProjection(7, s=3, random_state=6).fit(X)
    Y = model.transform(X)
    assert sp.issparse(Y)
    np.testing.assert_allclose(Y.toarray(), model.transform(X.toarray()), rtol=1e-12)
    dense = SQLRandomProjection(7, s=3, random_state=6, dense_output=True).fit(X).transform(X)
    assert isinstance(dense, np.ndarray)
    Y32 = model.transform(X.toarray().astype(np.float32))
    assert Y32.dtype == np.float32
    np.testing.assert_allclose(Y32, Y.toarray(), rtol=1e-5)


def test_feature_names_like_sklearn_or_the_sql_prefix():
    X = np.ones((5, 4))
    assert list(SQLRandomProjection(3, random_state=0).fit(X).get_feature_names_out()) == [
        "sqlrandomprojection0",
        "sqlrandomprojection1",
        "sqlrandomprojection2",
    ]
    assert list(SQLRandomProjection(2, random_state=0, prefix="p").fit(X).get_feature_names_out()) == ["p0", "p1"]


def test_a_fitted_matrix_goes_to_the_database(db):
    X = np.random.default_rng(7).normal(size=(25, 9))
    model = SQLRandomProjection(4, s=3, random_state=8, prefix="p").fit(X)
    model.to_database(db, "fitted")
    db.write_dataframe("t", wide_frame(X))
    sql = sqlrp.project(db, "t", "id", "fitted")
    np.testing.assert_allclose(sql.drop(columns="id").to_numpy(), model.transform(X), rtol=1e-12)
    assert list(sql.columns[1:]) == list(model.get_feature_names_out())
    with pytest.raises(sqlrp.ProjectionExists):
        model.to_database(db, "fitted")


def test_sklearns_parameter_names_and_refusals():
    """``density`` as scikit-learn spells it (s = 1 / density); ``n_components="auto"`` whose bound
    exceeds the features raises as scikit-learn's does; more components than features warns as theirs."""
    from sklearn.exceptions import DataDimensionalityWarning

    X = np.random.default_rng(3).normal(size=(40, 64))
    ours = SQLRandomProjection(8, density=1 / 3, random_state=1).fit(X)
    assert ours.projection_.params["s"] == pytest.approx(3.0)
    same = SQLRandomProjection(8, s=3, random_state=1).fit(X)
    np.testing.assert_array_equal(ours.transform(X), same.transform(X))
    with pytest.raises(ValueError, match="larger than the original space with n_features=64"):
        SQLRandomProjection("auto", eps=0.5).fit(X)
    with pytest.raises(ValueError, match="larger than the original space") as theirs:
        SparseRandomProjection("auto", eps=0.5).fit(X)
    assert "n_features=64" in str(theirs.value)
    with pytest.warns(DataDimensionalityWarning, match=r"\(64 < 70\)"):
        SQLRandomProjection(70, random_state=0).fit(X)
    for bad in (0, 1.5, -0.2):
        with pytest.raises(ValueError, match="density"):
            SQLRandomProjection(8, density=bad).fit(X)
    with pytest.raises(ValueError, match="not both"):
        SQLRandomProjection(8, s=3, density=0.5).fit(X)


def test_pca_is_sqlrp_fit_on_the_same_rows(db):
    """``method="pca"`` runs :func:`sqlrp.fit` (here its sketching route, ``d > 8 (k + p)``, with power
    iterations) on ``X``: the same components, variances and mean as ``sqlrp.fit`` on a table of ``X``."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 200)) * 0.97 ** np.arange(200) + 3.0
    ours = SQLRandomProjection(5, method="pca", random_state=4, oversample=6, power_iterations=2).fit(X)
    db.write_dataframe("t", wide_frame(X))
    theirs = sqlrp.fit(db, "t", "id", "pca", k=5, name="p5", seed=4, oversample=6, power_iterations=2)
    assert ours.projection_.params["exact"] is False and ours.projection_.params["passes"] == 3
    for name in ("components_", "mean_", "explained_variance_", "explained_variance_ratio_", "singular_values_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-9, atol=1e-12, err_msg=name)
    assert ours.components_.shape == (5, 200) and isinstance(ours.components_, np.ndarray)
    np.testing.assert_allclose(ours.transform(X), (X - ours.mean_) @ ours.components_.T, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("oversample", [10, 2])  # 10: the exact (Gram) route; 2: sketch + auto power iterations
def test_pca_explains_the_digits_as_sklearn_does(oversample):
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    X = load_digits().data
    ours = SQLRandomProjection(5, method="pca", random_state=0, oversample=oversample).fit(X)
    theirs = PCA(5, svd_solver="full").fit(X)
    assert ours.projection_.params["exact"] is (oversample == 10)
    np.testing.assert_allclose(ours.explained_variance_, theirs.explained_variance_, rtol=0.01)
    np.testing.assert_allclose(ours.explained_variance_ratio_, theirs.explained_variance_ratio_, rtol=0.01)
    np.testing.assert_allclose(ours.mean_, theirs.mean_, rtol=1e-12)
    if oversample == 10:  # exact: the same axes and signs (svd_flip), the same scores and inverse
        np.testing.assert_allclose(ours.components_, theirs.components_, atol=1e-8)
        Y = ours.transform(X)
        np.testing.assert_allclose(Y, theirs.transform(X), atol=1e-8)
        np.testing.assert_allclose(ours.inverse_transform(Y), theirs.inverse_transform(Y), atol=1e-8)


def test_whitened_pca_and_its_inverse_as_sklearn():
    from sklearn.decomposition import PCA

    X = np.random.default_rng(2).normal(size=(80, 6)) @ np.random.default_rng(3).normal(size=(6, 6))
    ours = SQLRandomProjection(3, method="pca", whiten=True, random_state=0).fit(X)
    theirs = PCA(3, svd_solver="full", whiten=True).fit(X)
    Y = ours.transform(X)
    np.testing.assert_allclose(Y, theirs.transform(X), atol=1e-9)
    np.testing.assert_allclose(Y.std(axis=0, ddof=1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(ours.components_, theirs.components_, atol=1e-9)  # unwhitened, unit rows
    np.testing.assert_allclose(ours.inverse_transform(Y), theirs.inverse_transform(Y), atol=1e-9)


@pytest.mark.parametrize("method, whiten", [("pca", False), ("pca", True), ("svd", False)])
def test_a_fitted_pca_goes_to_the_database(db, method, whiten):
    X = np.random.default_rng(5).normal(size=(50, 8)) + 2.0
    model = SQLRandomProjection(3, method=method, whiten=whiten, random_state=1, prefix="p").fit(X)
    model.to_database(db, "fitted")
    db.write_dataframe("t", wide_frame(X))
    sql = sqlrp.project(db, "t", "id", "fitted").sort_values("id")
    np.testing.assert_allclose(sql.drop(columns="id").to_numpy(), model.transform(X), rtol=1e-9, atol=1e-12)
    if method == "svd":  # no centring: the mean is 0 and X = Y V exactly where k = rank
        assert not np.any(model.mean_)
        np.testing.assert_allclose(model.transform(X), X @ model.components_.T, rtol=1e-12)


def test_pca_refusals():
    X = np.random.default_rng(6).normal(size=(20, 4))
    with pytest.raises(ValueError, match="n_features=4"):
        SQLRandomProjection(5, method="pca").fit(X)
    with pytest.raises(TypeError):  # sparse input: PCA's scores need the dense centred rows
        SQLRandomProjection(2, method="pca").fit(sp.csr_matrix(X))
    model = SQLRandomProjection(2, method="pca", random_state=0).fit(X)
    with pytest.raises(sqlrp.InputError, match="dense"):
        model.transform(sp.csr_matrix(X))
    assert SQLRandomProjection(method="pca", random_state=0).fit(X).n_components_ == 4  # "auto": min(n - 1, d)


def test_a_stored_pca_loaded_back_has_pcas_attributes(db):
    X = np.random.default_rng(8).normal(size=(30, 6))
    model = SQLRandomProjection(2, method="pca", whiten=True, random_state=0).fit(X)
    model.to_database(db, "a")
    again = SQLRandomProjection(projection=sqlrp.load_projection(db, "a")).fit(X)
    for name in ("components_", "mean_", "explained_variance_", "singular_values_"):
        np.testing.assert_array_equal(getattr(again, name), getattr(model, name), err_msg=name)
    Y = model.transform(X)
    np.testing.assert_allclose(again.transform(X), Y, rtol=1e-12)
    np.testing.assert_allclose(again.inverse_transform(Y), model.inverse_transform(Y), rtol=1e-12)
