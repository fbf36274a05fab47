"""Regression tests of issue 41's search instances: features near the doubles' limits (every distance
``inf`` on DuckDB, a raw overflow on PostgreSQL), tiny features whose squares underflow, ``top=2**63``,
PostgreSQL ``bits=4096``, PostgreSQL's out-of-range errors through the API, a renamed indexed column.
The fuzzer of the class: ``tests/fuzz/test_fuzz_search_range.py``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import EngineLimit, InputError, InvalidParameter
from sqlrp.search.index import StaleIndex, load_index, load_lists
from sqlrp.search.reference import reference_search, true_distances
from sqlrp.search.scale import limit, resolution, scale_exponent


def _table(db, name: str, X: np.ndarray, key: str = "id") -> None:
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame.insert(0, key, np.arange(len(X), dtype=np.int64))
    db.write_dataframe(name, frame)


def _rows(scale: float, n: int = 40, d: int = 4) -> np.ndarray:
    return np.random.default_rng(7).normal(size=(n, d)) * scale


def _check(hits: pd.DataFrame, X: np.ndarray, Q: np.ndarray, top: int, e: int, fine: bool = True) -> None:
    """Every query's ``top`` distances are the true smallest, each at its id's true distance."""
    T = true_distances(X, Q)
    tol = 4 * resolution(X.shape[1], e, fine)
    for qi in range(len(Q)):
        got = hits[hits["query_id"] == qi].sort_values("rank")
        dist = got["distance"].to_numpy(dtype=np.float64)
        assert np.isfinite(dist).all(), got
        np.testing.assert_allclose(dist, T[qi, got["id"].to_numpy(dtype=np.int64)], rtol=1e-9, atol=tol)
        np.testing.assert_allclose(dist, np.sort(T[qi])[:top], rtol=1e-9, atol=tol)


@pytest.mark.parametrize("magnitude", [1e250, 1e-320])
def test_extreme_magnitudes_find_true_neighbours(db, magnitude) -> None:
    """Features of 1e250 gave every distance ``inf`` on DuckDB (wrong neighbours, a row not finding
    itself, exact != index) and an overflow error on PostgreSQL; 1e-200 every distance 0."""
    X = _rows(magnitude, n=24)
    if magnitude < 1e-310:  # subnormal: a few distinct steps of the smallest double
        X = np.round(_rows(1.0, n=24) * 4) * magnitude
    _table(db, "t", X)
    sqlrp.build_index(db, "t", "id", "ix", lists=3, calibration_queries=12)
    idx = load_index(db, "ix")
    e = scale_exponent(float(np.abs(X).max()))
    assert idx.scale == e != 0
    Q = X[:5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        everything = sqlrp.search(db, "ix", "t", "id", top=3, probes=idx.lists, candidates=len(X))
        exact = sqlrp.search(db, "ix", "t", "id", top=3, exact=True)
        default = sqlrp.search(db, "ix", "t", "id", top=3)
    for hits in (everything, exact):
        _check(hits[hits["query_id"] < 5], X, Q, 3, e, db.dialect != "postgres")
        assert (hits[hits["rank"] == 1]["distance"] == 0).all()  # every row finds itself
    assert everything["id"].tolist() == exact["id"].tolist()  # the same distances, ranked by (distance, id)
    # the NumPy replay of every step, on the index's own (scaled) centroids
    cal = idx.calibration
    want = reference_search(X, np.arange(len(X)), X, list(range(len(X))), load_lists(db, idx), idx.signs,
                            scale=e, top=3, candidates=cal.default_candidates(3), probes=cal.floor,
                            ratio=cal.ratio, cap=cal.cap)  # fmt: skip
    np.testing.assert_allclose(default["distance"].to_numpy(float), want["distance"].to_numpy(float), rtol=1e-9)


def test_tiny_differences_beside_ones_rank_by_true_distance(duck) -> None:
    """Rows 1e-300 apart beside features of 1: their squares underflowed to 0, every such row tied at
    distance 0 and ranked by id.  The fine distance (below 2^-400, on differences times 2^500) ranks them."""
    X = np.array([[1.0, 0], [1.0, 3e-300], [1.0, 1e-300], [1.0, 2e-300], [5.0, 5.0], [1.0, 1e-310]])
    _table(duck, "t", X)
    sqlrp.build_index(duck, "t", "id", "ix", lists=2, calibration_queries=0)
    assert load_index(duck, "ix").scale == 0
    for options in ({"exact": True}, {"probes": 2, "candidates": 6}):
        hits = sqlrp.search(duck, "ix", "t", "id", top=4, **options)
        assert hits[hits["query_id"] == 0]["id"].tolist() == [0, 5, 2, 3]
        assert hits[hits["query_id"] == 1]["id"].tolist() == [1, 3, 2, 5]
        _check(hits, X, X, 4, 0)


def test_queries_beyond_the_index_are_refused(db) -> None:
    X = _rows(1.0)
    _table(db, "t", X)
    _table(db, "q", np.array([[1e300, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]), key="qid")
    sqlrp.build_index(db, "t", "id", "ix", lists=2, calibration_queries=0)
    assert limit(4, 0) < 1e300
    for options in ({}, {"exact": True}):
        with pytest.raises(InputError, match=r"query table 'q' has features up to 1e\+300 .* index 'ix'") as err:
            sqlrp.search(db, "ix", "q", "qid", **options)
        assert "\n" not in str(err.value)


def test_a_table_grown_beyond_the_index_is_refused(db) -> None:
    X = _rows(1.0)
    _table(db, "t", X)
    sqlrp.build_index(db, "t", "id", "ix", lists=2, calibration_queries=0)
    db.execute("UPDATE t SET f0 = 1e300 WHERE id = 3")
    with pytest.raises(InputError, match="table 't' has features up to 1e\\+300"):
        sqlrp.search(db, "ix", "t", "id", exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InputError, match="beyond what index 'ix' can compare"):
            sqlrp.search(db, "ix", "t", "id")
    with pytest.raises(InputError, match="beyond what index 'ix' can compare"):
        sqlrp.build_index(db, "t", "id", "ix", incremental=True)
    if db.dialect == "postgres":  # features of 1 beside 1e300: PostgreSQL raises where their squares underflow
        with pytest.raises(InputError, match="index 'ix': a double underflowed"):
            sqlrp.build_index(db, "t", "id", "ix", replace=True, lists=2, calibration_queries=0)
        return
    sqlrp.build_index(db, "t", "id", "ix", replace=True, lists=2, calibration_queries=0)  # a rebuild scales for it
    X[3, 0] = 1e300
    hits = sqlrp.search(db, "ix", "t", "id", top=2, exact=True)
    _check(hits, X, X, 2, load_index(db, "ix").scale)


def test_postgres_underflow_is_one_line(pg) -> None:
    """PostgreSQL raises where a product underflows to 0 (NumPy rounds): one sqlrp line, not psycopg's."""
    X = _rows(1.0, n=20, d=2)
    X[:5] = np.arange(1, 6)[:, None] * 1e-300  # differences whose squares underflow beside features of 1
    _table(pg, "t", X)
    with pytest.raises(sqlrp.SqlrpError) as err:
        sqlrp.build_index(pg, "t", "id", "ix", lists=2, calibration_queries=0)
        sqlrp.search(pg, "ix", "t", "id", exact=True)
    text = str(err.value)
    assert "\n" not in text and "underflowed" in text and "index 'ix'" in text, text
    assert type(err.value).__module__.startswith("sqlrp")


def test_top_beyond_the_bound(duck) -> None:
    _table(duck, "t", _rows(1.0))
    sqlrp.build_index(duck, "t", "id", "ix", lists=2, calibration_queries=0)
    for bad in (2**63, 2**31, 10**6):
        with pytest.raises(InvalidParameter, match="top must be at most 999,999"):
            sqlrp.search(duck, "ix", "t", "id", top=bad)
    with pytest.raises(InvalidParameter, match="candidates must be at most 999,999"):
        sqlrp.search(duck, "ix", "t", "id", candidates=2**63)
    with pytest.raises(InvalidParameter, match="probes"):
        sqlrp.search(duck, "ix", "t", "id", probes=2**63)
    with pytest.warns(UserWarning, match="fewer than top = 40000"):  # the default candidates kept within the bound
        hits = sqlrp.search(duck, "ix", "t", "id", top=40000)
    assert len(hits) == 40 * 40


def test_postgres_bits_beyond_its_columns(pg) -> None:
    _table(pg, "t", _rows(1.0))
    with pytest.raises(EngineLimit, match=r"postgres.*4096-bit codes.*bits=1024 or less") as err:
        sqlrp.build_index(pg, "t", "id", "ix", bits=4096)
    assert "\n" not in str(err.value)
    assert not pg.table_exists("ix")


def test_renamed_indexed_column_names_the_rebuild(db) -> None:
    _table(db, "t", _rows(1.0))
    _table(db, "q", _rows(1.0, n=3), key="qid")
    sqlrp.build_index(db, "t", "id", "ix", lists=2, calibration_queries=0)
    db.execute("ALTER TABLE t RENAME COLUMN f1 TO renamed")
    for call in (
        lambda: sqlrp.search(db, "ix", "q", "qid"),
        lambda: sqlrp.search(db, "ix", "q", "qid", exact=True),
        lambda: sqlrp.build_index(db, "t", "id", "ix", incremental=True),
    ):
        rebuild = r"no longer has the column 'f1' index 'ix' was built on.*(--replace|replace=True)"
        with pytest.raises(StaleIndex, match=rebuild):
            call()


def test_cli_search_beyond_range_is_one_line(tmp_path) -> None:
    import subprocess
    import sys

    url = f"duckdb:///{tmp_path}/r.duckdb"
    db = sqlrp.connect(url)
    _table(db, "t", _rows(1.0))
    _table(db, "q", np.array([[1e300, 0.0, 0.0, 0.0]]), key="qid")
    sqlrp.build_index(db, "t", "id", "ix", lists=2, calibration_queries=0)
    db.close()
    run = subprocess.run(
        [sys.executable, "-m", "sqlrp", "search", "--db", url, "--index", "ix", "--query-table", "q",
         "--query-id-column", "qid"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert run.stderr.startswith("error:") and run.stderr.count("\n") == 1, run.stderr
    assert math.isfinite(limit(4, 0))
