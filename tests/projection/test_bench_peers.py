"""The benchmark's kernel peers (bench/kernel_peers.py) compute what the papers say: checked
against a direct evaluation of 003 Pseudocode 1 and against sqlrp's reference for P-RP."""

from __future__ import annotations

import math

import numpy as np

import sqlrp
from bench import kernel_peers
from sqlrp.methods import make_projection


def test_author_pk_rp_is_pseudocode_1():
    X = np.random.default_rng(0).normal(size=(7, 5))
    for degree in (2, 3):
        config = kernel_peers.author_config(5, 4, degree=degree, p=40, t=3, seed=1)
        S, index = config["S"], config["index"]
        assert all(len(set(row)) == degree * 3 for row in index.tolist())  # distinct per output (step 2)
        expected = np.zeros((7, 4))
        for n in range(7):
            K = X[n] @ S
            for c in range(4):
                expected[n, c] = sum(math.prod(K[index[c, degree * i + j]] for j in range(degree)) for i in range(3))
        expected /= math.sqrt(3 * 4)
        np.testing.assert_allclose(kernel_peers.author_pk_rp(X, config), expected, rtol=1e-12)
        np.testing.assert_allclose(
            kernel_peers._products_numpy(X @ S, index, degree, 3) / math.sqrt(12), expected, rtol=1e-12
        )


def test_in_memory_p_rp_equals_the_reference():
    X = np.random.default_rng(1).normal(size=(9, 12))
    proj = make_projection("p-rp", 12, 5, seed=2, m=4)
    for dense in (True, False):
        np.testing.assert_allclose(kernel_peers.in_memory_p_rp(X, proj, dense), sqlrp.transform(proj, X), rtol=1e-12)
