"""Polynomial-kernel projections: SQL (DuckDB and PostgreSQL, wide/long/array) equals the NumPy reference
on the same stored matrix; pooling (CBP-KRP) equals the directly computed projection of the pooled
bilinear feature; composition (CRAFTMaps); in-SQL standardisation; kernel functions and the explicit
feature map; and statistical checks on standardised real data against the JL floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sqlrp
from sqlrp.core.errors import InvalidParameter
from sqlrp.core.ir import Composed
from sqlrp.methods import expected_distortion, make_projection, reference
from sqlrp.methods.distortion import kernel_distortion
from sqlrp.methods.kernel import index_matrix
from sqlrp.methods.kernels import (
    explicit_feature_map,
    kernel_of,
    kernel_sq_distances,
    polynomial_kernel,
)
from testkit.frames import array_frame, long_frame, wide_frame

D, K = 6, 5
CASES = [
    ("p-rp", {"m": 1}),
    ("p-rp", {"m": 3, "s": 1}),
    ("p-rp", {"m": 2, "modified": True}),
    ("pk-rp", {"degree": 1, "t": 3}),
    ("pk-rp", {"degree": 2, "t": 3, "index": "distinct", "p": 20}),
    ("pk-rp", {"degree": 3, "t": 2, "c": 1.5}),
    ("pk-rp", {"degree": 4, "t": 2, "distribution": "gaussian", "c": 0.5}),
    ("cbp", {"t": 3}),
    ("maclaurin", {"degree": 1, "c": 1.0}),
    ("maclaurin", {"degree": 2, "c": 1.0}),
    ("maclaurin", {"degree": 3, "c": 0.5, "truncate": True}),
    ("maclaurin", {"degree": 4, "c": 2.0, "truncate": True}),
    ("craftmap", {"up_k": 12, "degree": 2}),
    ("craftmap", {"up": "pk-rp", "up_k": 12, "degree": 3, "c": 1.0, "t": 2}),
]
LAYOUTS = ["wide", "long", "array"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((24, D))
    X[rng.random(X.shape) < 0.2] = 0.0  # exact zeros: the long layout stores only non-zeros
    X[:, 0] += 0.5  # no all-zero row (the long layout would drop it)
    return X


def _load(db, layout: str, X: np.ndarray, groups: np.ndarray | None = None) -> dict:
    frame = {"wide": wide_frame, "long": long_frame, "array": array_frame}[layout](X)
    options: dict = {"layout": layout}
    if groups is not None:
        frame["grp"] = groups[frame["id"].to_numpy()]
        options["group_column"] = "grp"
    db.write_dataframe("src", frame)
    if layout == "wide":
        options["columns"] = [f"f{i}" for i in range(X.shape[1])]
    elif layout == "array":
        options["array_column"] = "x"
    return options


def _sql_output(db, name: str, options: dict) -> np.ndarray:
    out = sqlrp.project(db, "src", "id", name, **options)
    return out.iloc[:, 1:].to_numpy(dtype=float)


def _close(Y: np.ndarray, R: np.ndarray) -> None:
    assert Y.shape == R.shape
    np.testing.assert_allclose(Y, R, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(R).max())))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("method", "params"), CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_sql_equals_reference(db, data, layout, method, params):
    options = _load(db, layout, data)
    sqlrp.create_projection(db, "kp", method=method, d=D, k=K, seed=3, **params)
    stored = sqlrp.load_projection(db, "kp")  # the stored matrix is the source of truth
    Y = _sql_output(db, "kp", options)
    _close(Y, reference.transform(stored, data))
    # the stored projection is the generated one
    _close(
        reference.transform(make_projection(method, D, K, seed=3, **params), data), reference.transform(stored, data)
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pooled_cbp_equals_pooled_bilinear_projection(db, data, layout):
    """CBP-KRP pooled over a group key: SQL GROUP BY == reference pooling == the projection of the
    pooled bilinear feature B_g = sum_{x in g} x x^T computed directly (003 Eq. B.1)."""
    groups = np.arange(len(data)) % 4 + 10
    options = _load(db, layout, data, groups)
    proj = sqlrp.create_projection(db, "cbp1", method="cbp", d=D, k=K, seed=5, t=3, s=1)
    Y = _sql_output(db, "cbp1", options)
    _close(Y, reference.transform(proj, data, groups=groups))
    # direct: y_c = sqrt(s)^2 / sqrt(t k) * sum_i a_ci^T B b_ci with the dense sign vectors
    S = proj.linear.dense() * math.sqrt(proj.params["s"])
    t = proj.params["t"]
    direct = np.zeros((4, K))
    for gi, g in enumerate(np.unique(groups)):
        Xg = data[groups == g]
        B = Xg.T @ Xg
        for c, _w, (a, b) in proj.combiner.terms():
            direct[gi, c] += S[:, a] @ B @ S[:, b]
    _close(Y, direct / math.sqrt(t * K))


@pytest.mark.parametrize(("method", "params"), [("achlioptas", {"s": 3}), ("p-rp", {"m": 2, "modified": True})])
def test_pooled_other_methods(db, data, method, params):
    groups = np.arange(len(data)) % 3
    options = _load(db, "wide", data, groups)
    proj = sqlrp.create_projection(db, "pool", method=method, d=D, k=K, seed=2, **params)
    _close(_sql_output(db, "pool", options), reference.transform(proj, data, groups=groups))


def test_composed_storage_round_trip_and_errors(duck, data):
    proj = sqlrp.create_projection(duck, "cm", method="craftmap", d=D, k=K, seed=1, up_k=10)
    assert isinstance(proj, Composed) and proj.first.k == 10 and proj.second.d == 10
    back = sqlrp.load_projection(duck, "cm")
    assert isinstance(back, Composed) and back.params == proj.params
    _close(reference.transform(back, data), reference.transform(proj, data))
    names = set(sqlrp.list_projections(duck)["name"])
    assert {"cm", "cm__stage1", "cm__stage2"} <= names
    options = _load(duck, "wide", data, np.zeros(len(data), dtype=int))
    with pytest.raises(InvalidParameter, match="pooling"):
        sqlrp.project(duck, "src", "id", "cm", **options)
    sqlrp.drop_projection(duck, "cm")
    assert not sqlrp.list_projections(duck)["name"].str.startswith("cm").any()


@pytest.mark.parametrize("layout", ["wide", "array"])
def test_standardize_in_sql(db, data, layout):
    options = _load(db, layout, data)
    proj = make_projection("pk-rp", D, K, seed=4, degree=2, t=2)
    Y = sqlrp.project(db, "src", "id", proj, standardize=True, **options).iloc[:, 1:].to_numpy()
    sd = data.std(axis=0)
    Z = (data - data.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    _close(Y, reference.transform(proj, Z))


def test_standardize_rejects_long(duck, data):
    options = _load(duck, "long", data)
    with pytest.raises(InvalidParameter, match="long"):
        sqlrp.project(duck, "src", "id", make_projection("p-rp", D, K), standardize=True, **options)


# ------------------------------------------------------------------------------------------------
# the IR and the mathematics, without a database


def test_p_rp_with_s1_even_m_is_the_modified_kernel(data):
    """With s = 1 every r_i^2 is the same constant: for even m the sigma alternation removes the diagonal
    features exactly, so plain P-RP and modified P-RP give identical outputs (the issue's pitfall)."""
    plain = make_projection("p-rp", D, K, seed=1, m=4, s=1)
    modified = make_projection("p-rp", D, K, seed=1, m=4, s=1, modified=True)
    np.testing.assert_allclose(reference.transform(plain, data), reference.transform(modified, data), atol=1e-10)
    odd = make_projection("p-rp", D, K, seed=1, m=3, s=1)
    odd_mod = make_projection("p-rp", D, K, seed=1, m=3, s=1, modified=True)
    assert not np.allclose(reference.transform(odd, data), reference.transform(odd_mod, data))


def test_p_rp_ir_shape():
    proj = make_projection("p-rp", 10, 4, seed=0, m=3, s=3)
    assert proj.linear.p == 12 and proj.combiner.n_terms == 12 and proj.linear.is_signs
    assert proj.scale == pytest.approx(3 / (math.sqrt(6) * 2))
    assert sorted({w for _c, w, _f in proj.combiner.terms()}) == [-1.0, 1.0]
    assert all(len(f) == 2 and f[0] == f[1] for _c, _w, f in proj.combiner.terms())


@pytest.mark.parametrize("degree", [1, 2, 3, 4])
@pytest.mark.parametrize("c", [0.0, 1.5])
def test_explicit_feature_map_reproduces_kernel(data, degree, c):
    phi = explicit_feature_map(data, degree=degree, c=c)
    np.testing.assert_allclose(phi @ phi.T, polynomial_kernel(data, degree=degree, c=c), rtol=1e-10, atol=1e-9)
    dist = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)[np.triu_indices(len(data), 1)]
    np.testing.assert_allclose(kernel_sq_distances(data, degree, c), dist, rtol=1e-8, atol=1e-8)


def test_modified_kernel_feature_map(data):
    phi = explicit_feature_map(data, degree=2, modified=True)
    assert phi.shape[1] == D * (D - 1) // 2
    np.testing.assert_allclose(phi @ phi.T, polynomial_kernel(data, degree=2, modified=True), atol=1e-10)


def test_index_schemes():
    rng = np.random.default_rng(0)
    distinct = index_matrix(50, 8, 20, "distinct", rng)
    assert all(len(set(row)) == 8 for row in distinct.tolist())
    balanced = index_matrix(50, 8, 30, "balanced", rng)
    counts = np.bincount(balanced.ravel(), minlength=30)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 400
    with pytest.raises(InvalidParameter):
        index_matrix(5, 8, 4, "distinct", rng)


def test_pk_rp_drops_unused_vectors_and_scale():
    proj = make_projection("pk-rp", 8, 3, seed=0, degree=3, t=2, p=500, index="distinct", s=4)
    assert proj.linear.p <= 18 and proj.combiner.n_terms == 6
    assert proj.scale == pytest.approx(2.0**3 / math.sqrt(6))


def test_maclaurin_is_unbiased():
    """E<Z(x), Z(y)> = (x.y + c)^r (001 Algorithm 1); with many outputs the estimate is close."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 5)) / math.sqrt(5)
    est = []
    for seed in range(20):
        Z = reference.transform(make_projection("maclaurin", 5, 2000, seed=seed, degree=3, c=1.0), X)
        est.append(Z @ Z.T)
    np.testing.assert_allclose(np.mean(est, axis=0), polynomial_kernel(X, degree=3, c=1.0), atol=0.1)


def test_kernel_of():
    assert kernel_of(make_projection("achlioptas", 5, 3)) == {"degree": 1, "c": 0.0, "modified": False}
    assert kernel_of(make_projection("p-rp", 5, 3, modified=True))["modified"] is True
    assert kernel_of(make_projection("craftmap", 5, 3, degree=3, c=2.0)) == {"degree": 3, "c": 2.0, "modified": False}


def test_invalid_parameters():
    with pytest.raises(InvalidParameter):
        make_projection("p-rp", 5, 3, m=0)
    with pytest.raises(InvalidParameter):
        make_projection("pk-rp", 5, 3, index="sorted")
    with pytest.raises(InvalidParameter):
        make_projection("craftmap", 5, 3, up_k=2)
    with pytest.raises(InvalidParameter):
        make_projection("p-rp", 5, 3, t=4)  # an option P-RP does not take


# ------------------------------------------------------------------------------------------------
# statistics on standardised real data (k = 160, JL floor 0.089)


@pytest.fixture(scope="module")
def standardized_digits():
    from sklearn.datasets import load_digits

    X = load_digits().data
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return X[np.random.default_rng(0).choice(len(X), 150, replace=False)]


def _distortion(proj, X, Y=None) -> float:
    Y = reference.transform(proj, X) if Y is None else Y
    return kernel_distortion(X, Y, **kernel_of(proj))


def test_pk_rp_reaches_jl_floor_in_sql(duck, standardized_digits):
    """Degree-2 PK-RP from DuckDB's SQL output: within 20% of the JL floor at k = 160."""
    X = standardized_digits
    duck.write_dataframe("digits", wide_frame(X))
    proj = make_projection("pk-rp", X.shape[1], 160, seed=11, degree=2, t=20, p=2000, s=3)
    Y = sqlrp.project(duck, "digits", "id", proj, check=False).iloc[:, 1:].to_numpy()
    floor = expected_distortion(160)
    assert _distortion(proj, X, Y) < 1.2 * floor


def test_kernel_methods_near_jl_floor(standardized_digits):
    """Reference evaluator (equal to the SQL output by the parity tests above), averaged over 2 seeds."""
    X = standardized_digits
    floor = expected_distortion(160)

    def mean(method, **params):
        return np.mean([_distortion(make_projection(method, 64, 160, seed=s, **params), X) for s in (0, 1)])

    assert mean("p-rp", m=30) < 1.2 * floor
    assert mean("pk-rp", degree=2, t=30, p=6000) < 1.2 * floor
    assert mean("pk-rp", degree=3, t=30, p=6000) < 1.45 * floor
    # ... and the test can fail: m = 1 is far from the floor (000 Table 1: 0.239 at k = 160)
    assert mean("p-rp", m=1) > 1.5 * floor


def test_pitfall_raw_large_magnitude_features():
    """On raw breast_cancer (features up to ~4000) P-RP with s = 1 and even m measures the modified kernel:
    large distortion against the full kernel, near the floor against the modified one and after
    standardisation."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data[:150]
    proj = make_projection("p-rp", X.shape[1], 160, seed=0, m=10, s=1)
    Y = reference.transform(proj, X)
    floor = expected_distortion(160)
    assert kernel_distortion(X, Y, degree=2) > 3 * floor
    assert kernel_distortion(X, Y, degree=2, modified=True) < 1.5 * floor
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    assert kernel_distortion(Z, reference.transform(proj, Z), degree=2) < 2 * floor


def test_many_linear_sums_fit_postgres(db):
    """P-RP with m = 30 and k = 60 has 1,800 linear sums: more than PostgreSQL's column limit, so they
    travel as one array; the numbers stay those of the reference."""
    X = np.random.default_rng(3).standard_normal((15, 10))
    db.write_dataframe("src", wide_frame(X))
    proj = make_projection("p-rp", 10, 60, m=30, seed=2)
    assert proj.linear.p > 1664
    Y = sqlrp.project(db, "src", "id", proj).iloc[:, 1:].to_numpy(dtype=float)
    _close(Y, reference.transform(proj, X))


def test_pk_rp_has_no_diagonal_pitfall_on_raw_data():
    """The README's claim: PK-RP's products use distinct vectors, so the diagonal features keep their
    weight and raw large-magnitude data stays near the floor against the full kernel."""
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data[:150]
    floor = expected_distortion(160)
    values = [
        kernel_distortion(X, reference.transform(make_projection("pk-rp", 30, 160, seed=s, degree=2, t=30), X))
        for s in range(3)
    ]
    assert np.mean(values) < 1.5 * floor, values


def test_default_pk_rp_keeps_the_accuracy_bar():
    """Issue 12's bar: the default PK-RP (degree 2: s = sqrt(d), t = 10, p = g*t*k) within 5% of the
    author's default configuration (Gaussian, t = 10, p = 3000, distinct indices; 003 Pseudocode 1)
    in mean distortion over 10 seeds on 300 standardised digits, k = 160 -- the dataset of the
    frontier (``examples/kernel_frontier.py``) where sparse vectors lose the most.  s = d fails it."""
    from sklearn.datasets import load_digits

    X = load_digits().data
    sd = X.std(axis=0)
    X = (X[:, sd > 0] - X[:, sd > 0].mean(axis=0)) / sd[sd > 0]
    S = X[np.random.default_rng(0).choice(len(X), 300, replace=False)]
    d = S.shape[1]

    def mean_distortion(**params) -> float:
        runs = [make_projection("pk-rp", d, 160, seed=seed, **params) for seed in range(10)]
        return float(np.mean([kernel_distortion(S, sqlrp.transform(p, S)) for p in runs]))

    author = mean_distortion(distribution="gaussian", t=10, p=3000, index="distinct")
    default = make_projection("pk-rp", d, 160, seed=0)
    assert default.params["s"] == pytest.approx(np.sqrt(d)) and default.linear.p == 2 * 10 * 160
    assert mean_distortion() < 1.05 * author
    assert mean_distortion(s=float(d)) > 1.05 * author  # the check can fail


def test_reference_products_when_factorless_terms_follow():
    """The reference's combiner (the oracle) when the last terms with factors are followed by terms
    without any (Maclaurin's N = 0 draws): each product has all its factors.  It used to drop the
    last factor of the last such term, and the SQL, which was right, disagreed with it (d = 2,000)."""
    from sqlrp.core.ir import Combiner

    K = np.random.default_rng(3).normal(size=(6, 5))
    comb = Combiner(
        k=3,
        term_component=np.array([0, 1, 1, 2, 2]),
        term_weight=np.array([1.0, 2.0, -1.0, 0.5, 3.0]),
        factor_term=np.array([0, 0, 2, 2, 2]),  # terms 1, 3 and 4 have no factors (constants)
        factor_vector=np.array([0, 1, 2, 3, 4]),
    )
    expected = np.stack(
        [K[:, 0] * K[:, 1], 2.0 - K[:, 2] * K[:, 3] * K[:, 4], np.full(6, 3.5)], axis=1
    )
    np.testing.assert_allclose(reference.combine(comb, K), expected, rtol=1e-12)


def test_maclaurin_wide_d_matches_its_reference_in_sql(duck):
    """The case the d = 6,830 probe found: Maclaurin (s = 1) over 2,000 features, through the
    unnested lookup (the inline sums would exceed DuckDB's expression depth)."""
    X = np.random.default_rng(0).normal(size=(30, 2000))
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "mc", "maclaurin", d=2000, k=160, seed=0)
    out = sqlrp.project(duck, "t", "id", "mc")
    expected = sqlrp.transform(proj, X)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), expected, rtol=1e-9, atol=1e-9 * scale)
