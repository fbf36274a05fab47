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
