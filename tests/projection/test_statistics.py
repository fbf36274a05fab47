"""On real data the SQL projection's mean distortion matches the JL floor E|chi2_k/k - 1|."""

from __future__ import annotations

import numpy as np
import pytest

import sqlrp
from sqlrp.evaluation.metrics import mean_distortion
from testkit.frames import wide_frame


@pytest.mark.parametrize("s", [1, 3, "auto"])
def test_distortion_near_jl_floor_on_digits(duck, digits, s):
    rng = np.random.default_rng(0)
    X = digits[rng.choice(len(digits), 500, replace=False)]
    duck.write_dataframe("digits", wide_frame(X))
    k = 160
    values = []
    for seed in range(4):
        out = sqlrp.project(duck, "digits", "id", f"p{seed}", k=k, s=s, seed=seed)
        values.append(mean_distortion(X, out.drop(columns="id").to_numpy()))
    floor = sqlrp.expected_distortion(k)
    assert np.mean(values) == pytest.approx(floor, rel=0.2), (values, floor)


def test_a_broken_scale_would_be_caught(duck, digits):
    """The statistical check can fail: a projection scaled by 1.2 is far from the floor."""
    X = digits[:300]
    p = sqlrp.make_projection("achlioptas", 64, 160, seed=0)
    p.scale *= 1.2
    duck.write_dataframe("digits", wide_frame(X))
    out = sqlrp.project(duck, "digits", "id", p)
    assert mean_distortion(X, out.drop(columns="id").to_numpy()) > 2 * sqlrp.expected_distortion(160)
