"""Sign signatures (issue 15, first stage): the SQL's packed words equal the NumPy reference bit
for bit on DuckDB and PostgreSQL, the sign bit included; bad bit counts and pooling are refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import wide_frame

import sqlrp
from sqlrp.compiler import Source
from sqlrp.core.errors import InvalidParameter
from sqlrp.methods import make_projection
from sqlrp.search.signatures import check_bits, hamming, signature_select, signature_sql, signatures


@pytest.mark.parametrize("method, params", [("achlioptas", {"s": 3}), ("gaussian", {}), ("pk-rp", {"t": 2})])
def test_signatures_match_numpy_bit_for_bit(db, method, params):
    # integer features: every sum is exact in SQL and in NumPy, so every sign is the same
    X = np.random.default_rng(31).integers(-5, 6, size=(60, 20)).astype(np.float64)
    db.write_dataframe("t", wide_frame(X))
    proj = make_projection(method, 20, 128, seed=4, **params)
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(20)))
    sql = signature_sql(proj, source, db.dialect)
    rows = db.fetchall(f'SELECT * FROM ({sql}) AS s ORDER BY "id"')
    got = np.array([r[1:] for r in rows], dtype=np.int64)
    expected = signatures(proj, X)
    if method != "gaussian":  # Gaussian weights: sums are not exact, signs near 0 could differ
        np.testing.assert_array_equal(got, expected)
    else:
        assert np.mean(got == expected) > 0.9
    assert got.shape == (60, 2) and (got < 0).any() and (got > 0).any()  # the sign bit is used


def test_hamming_is_the_number_of_differing_signs():
    proj = make_projection("achlioptas", 10, 64, seed=1, s=1)
    X = np.random.default_rng(2).normal(size=(5, 10))
    sig = signatures(proj, X)
    signs = sqlrp.transform(proj, X) > 0
    expected = (signs[:, None, :] != signs[None, :, :]).sum(axis=2)
    assert np.array_equal(hamming(sig[:, None, :], sig[None, :, :]), expected)


def test_bits_must_be_a_multiple_of_64_and_rows_are_not_pooled():
    for k in (0, 63, 100, 65):
        with pytest.raises(InvalidParameter, match="multiple of 64"):
            check_bits(k)
    from sqlrp.core.errors import EngineLimit
    from sqlrp.search.signatures import hamming_expression

    with pytest.raises(EngineLimit, match="sqlite.*bit count"):
        hamming_expression(1, "a", "b", "sqlite")
    proj = make_projection("achlioptas", 4, 64, seed=0)
    with pytest.raises(InvalidParameter, match="pooling"):
        signature_select(proj, Source("t", "id", "wide", ("a", "b", "c", "d"), group_column="g"))


def test_hamming_distances_in_sql_match_numpy(db):
    """Every pair's Hamming distance from the engine's bit count (DuckDB xor/bit_count, PostgreSQL
    #/bit_count over bit(64)) equals NumPy's, words with the sign bit set included."""
    from sqlrp.dialects import get_dialect
    from sqlrp.search.signatures import hamming_expression

    X = np.random.default_rng(32).integers(-4, 5, size=(25, 12)).astype(np.float64)
    db.write_dataframe("t", wide_frame(X))
    proj = make_projection("achlioptas", 12, 192, seed=5, s=1)
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(12)))
    db.execute(f'CREATE TABLE "sig" AS {signature_sql(proj, source, db.dialect)}')
    distance = get_dialect(db.dialect).render(hamming_expression(3, "a", "b", db.dialect))
    rows = db.fetchall(
        f'SELECT a."id", b."id", {distance} FROM "sig" AS a, "sig" AS b ORDER BY a."id", b."id"'
    )
    got = np.array([r[2] for r in rows]).reshape(25, 25)
    sig = signatures(proj, X)
    assert (sig < 0).any()
    np.testing.assert_array_equal(got, hamming(sig[:, None, :], sig[None, :, :]))
    assert got.max() > 64  # more than one word differs somewhere
