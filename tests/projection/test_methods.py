"""Generation: distribution, determinism, parameter checks, JL helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.random_projection import johnson_lindenstrauss_min_dim as sk_jl

import sqlrp
from sqlrp.methods import achlioptas, expected_distortion, gaussian, johnson_lindenstrauss_min_dim


def test_jl_min_dim_matches_scikit_learn():
    for n in (10, 1000, 10**6):
        for eps in (0.05, 0.1, 0.5):
            assert johnson_lindenstrauss_min_dim(n, eps) == sk_jl(n, eps=eps)
    assert np.array_equal(johnson_lindenstrauss_min_dim(np.array([100, 1000]), 0.1), sk_jl([100, 1000], eps=0.1))


def test_expected_distortion_values():
    assert expected_distortion(40) == pytest.approx(0.1777, abs=1e-3)
    assert expected_distortion(160) == pytest.approx(0.0891, abs=1e-3)
    # large-k limit sqrt(4 / (pi k))
    assert expected_distortion(10_000) == pytest.approx(math.sqrt(4 / (math.pi * 10_000)), rel=0.01)


@pytest.mark.parametrize("s", [1, 3, "auto"])
def test_achlioptas_distribution(s):
    d, k = 400, 300
    p = achlioptas(d, k, s=s, seed=7)
    s_val = 20.0 if s == "auto" else float(s)
    assert p.params["s"] == s_val
    assert p.scale == pytest.approx(math.sqrt(s_val) / math.sqrt(k))
    assert set(np.unique(p.linear.weight)) <= {-1.0, 1.0}
    density = p.linear.nnz / (d * k)
    assert density == pytest.approx(1 / s_val, rel=0.05)
    assert abs(np.mean(p.linear.weight)) < 0.05  # balanced signs
    # no duplicate (vector, feature) entries
    assert (
        len({(v, f) for v, f in zip(p.linear.vector.tolist(), p.linear.feature.tolist(), strict=True)}) == p.linear.nnz
    )


def test_generation_is_deterministic():
    a, b, c = achlioptas(50, 10, s=3, seed=1), achlioptas(50, 10, s=3, seed=1), achlioptas(50, 10, s=3, seed=2)
    assert np.array_equal(a.linear.dense(), b.linear.dense())
    assert not np.array_equal(a.linear.dense(), c.linear.dense())
    assert np.array_equal(gaussian(5, 3, seed=4).linear.weight, gaussian(5, 3, seed=4).linear.weight)


def test_rows_are_norm_preserving_on_average():
    """E ||f(x)||^2 = ||x||^2: the scale sqrt(s)/sqrt(k) is right."""
    x = np.random.default_rng(0).standard_normal(100)
    for s in (1, 3, "auto"):
        norms = [np.sum(sqlrp.transform(achlioptas(100, 50, s=s, seed=i), x[None, :]) ** 2) for i in range(200)]
        assert np.mean(norms) == pytest.approx(np.sum(x**2), rel=0.05)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d=10, k=0), "k"),
        (dict(d=10, k=-3), "k"),
        (dict(d=10, k=5, s=0.5), "s must be >= 1"),
        (dict(d=10, k=5, s="lots"), "s must be"),
        (dict(d=0, k=5), "d >= 1"),
    ],
)
def test_nonsense_parameters(kwargs, message):
    with pytest.raises(sqlrp.InvalidParameter, match=message):
        sqlrp.make_projection("achlioptas", **kwargs)


def test_unknown_method():
    with pytest.raises(sqlrp.InvalidParameter, match="unknown method"):
        sqlrp.make_projection("fourier", 3, 2)
