"""Similarity search (issue 15): indexes and searches on DuckDB and PostgreSQL give the NumPy
reference's candidates, ranks and distances; signatures are bit-identical across the engines;
incremental top-ups, the exact brute force, the CLI, the evaluation, and the errors."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import array_frame

import sqlrp
from sqlrp.cli import main
from sqlrp.errors import EngineLimit, InputError, InvalidParameter, ProjectionExists
from sqlrp.index import BANDS_SUFFIX, IndexNotFound, default_band_bits
from sqlrp.search import reference_search
from sqlrp.signatures import band_keys, signatures

D = 12


def clustered(n: int, seed: int, d: int = D, centres: int = 10) -> np.ndarray:
    """Integer features around a few centres: every sum is exact, in SQL and in NumPy alike, so
    signs, Hamming distances and squared distances are equal, not merely close."""
    rng = np.random.default_rng(seed)
    C = rng.integers(-30, 31, size=(centres, d))
    return (C[rng.integers(0, centres, n)] + rng.integers(-4, 5, size=(n, d))).astype(np.float64)


def frame(X: np.ndarray, id_name: str = "id", names: list[str] | None = None, ids=None) -> pd.DataFrame:  # noqa: ANN001
    df = pd.DataFrame(X, columns=names or [f"f{i}" for i in range(X.shape[1])])
    df.insert(0, id_name, np.arange(len(X), dtype=np.int64) if ids is None else ids)
    return df


@pytest.fixture
def indexed(db):
    """An index over 400 rows whose ids are shuffled (ties are broken by id, not by row order)."""
    both = clustered(425, 1)  # queries from the same centres as the rows
    X, Q = both[:400], both[400:]
    ids = np.random.default_rng(3).permutation(400) * 7 + 5
    db.write_dataframe("pts", frame(X, ids=ids))
    db.write_dataframe("qs", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "pts", "id", "pts_idx", bits=128, band_bits=8, vectors=True)
    return db, idx, X, ids, Q


@pytest.mark.parametrize("metric", ["euclidean", "angular"])
@pytest.mark.parametrize("rerank", ["original", "vectors"])
def test_search_matches_the_numpy_reference(indexed, metric, rerank):
    db, idx, X, ids, Q = indexed
    got = sqlrp.search(db, "pts_idx", "qs", "qid", top=5, candidates=30, metric=metric, rerank=rerank)
    ref = reference_search(idx.projection, X, ids, Q, np.arange(25), 8, 5, 30, metric, idx.layout.thresholds, rerank)
    assert list(got.columns) == ["query_id", "id", "rank", "distance"]
    assert len(got) == len(ref) == 25 * 5
    np.testing.assert_array_equal(
        got[["query_id", "id", "rank"]].to_numpy(), ref[["query_id", "id", "rank"]].to_numpy()
    )
    np.testing.assert_allclose(got["distance"].to_numpy(), ref["distance"].to_numpy(), rtol=1e-9, atol=1e-12)
    # not vacuous: the candidates cut the set (C = 30 of 400) and the nearest are truly near
    exact = np.sort(np.sqrt(((X[None, :, :] - Q[:, None, :]) ** 2).sum(axis=2)), axis=1)[:, :5]
    if metric == "euclidean" and rerank == "original":
        assert np.mean(np.isclose(got["distance"].to_numpy().reshape(25, 5), exact)) > 0.8


def test_exact_brute_force_is_exact(indexed):
    db, idx, X, ids, Q = indexed
    got = sqlrp.search(db, "pts_idx", "qs", "qid", top=4, exact=True)
    dist = np.sqrt(((X[None, :, :] - Q[:, None, :]) ** 2).sum(axis=2))
    order = np.lexsort((np.broadcast_to(ids, dist.shape), dist), axis=1)[:, :4]
    np.testing.assert_array_equal(got["id"].to_numpy().reshape(25, 4), ids[order])
    np.testing.assert_allclose(
        got["distance"].to_numpy().reshape(25, 4), np.take_along_axis(dist, order, 1), rtol=1e-12
    )
    assert got["rank"].tolist() == [1, 2, 3, 4] * 25


def test_stored_signatures_and_bands_equal_numpy(indexed):
    db, idx, X, ids, Q = indexed
    rows = db.fetchall('SELECT * FROM "pts_idx" ORDER BY "id"')
    order = np.argsort(ids)
    words = np.array([r[1:3] for r in rows], dtype=np.int64)
    expected = signatures(idx.projection, X[order], idx.layout.thresholds)
    np.testing.assert_array_equal(words, expected)
    np.testing.assert_allclose(np.array([r[3:] for r in rows]), sqlrp.transform(idx.projection, X[order]), rtol=1e-12)
    bands = db.fetchall(f'SELECT "band", "key", "id" FROM "pts_idx{BANDS_SUFFIX}" ORDER BY "id", "band"')
    keys = np.array([b[1] for b in bands]).reshape(400, 16)
    np.testing.assert_array_equal(keys, band_keys(expected, 8))
    assert (words < 0).any() and (words > 0).any()


def test_signatures_are_bit_identical_on_duckdb_and_postgres(duck, pg):
    X = clustered(300, 4)
    for db in (duck, pg):
        db.write_dataframe("pts", frame(X))
    sqlrp.create_projection(duck, "signs", "achlioptas", d=D, k=192, seed=9)
    sqlrp.copy_projection(duck, "signs", pg)
    indexes = [sqlrp.build_index(db, "pts", "id", "idx", projection="signs", band_bits=16) for db in (duck, pg)]
    got = [np.array(db.fetchall('SELECT * FROM "idx" ORDER BY "id"'), dtype=np.int64) for db in (duck, pg)]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0][:, 1:], signatures(indexes[0].projection, X, indexes[0].layout.thresholds))
    bands = [db.fetchall('SELECT * FROM "idx__bands" ORDER BY "band", "id"') for db in (duck, pg)]
    assert bands[0] == bands[1] and len(bands[0]) == 300 * 12


def test_incremental_indexes_only_new_ids(db):
    X = clustered(300, 5)
    db.write_dataframe("pts", frame(X[:200]))
    first = sqlrp.build_index(db, "pts", "id", "idx", bits=64, band_bits=16)
    db.insert_frame("pts", frame(X[200:], ids=np.arange(200, 300)))
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)  # twice: adds nothing
    rows = db.fetchall('SELECT * FROM "idx" ORDER BY "id"')
    assert [r[0] for r in rows] == list(range(300))
    # the centre stays the first build's: the new rows get the same thresholds
    np.testing.assert_array_equal(
        np.array([r[1:] for r in rows]), signatures(first.projection, X, first.layout.thresholds)
    )
    assert db.fetchall('SELECT count(*) FROM "idx__bands"')[0][0] == 300 * 4
    with pytest.raises(InvalidParameter, match="has 64 bits"):
        sqlrp.build_index(db, "pts", "id", "idx", bits=128, incremental=True)


def test_recall_on_held_out_digits(duck, digits):
    """Held-out digits, the defaults (256 bits, bands from the size): Recall@10 against exact k-NN."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(digits))
    X, Q = digits[order[:1500]], digits[order[1500:]]
    duck.write_dataframe("digits", frame(X))
    duck.write_dataframe("queries", frame(Q, "qid"))
    sqlrp.build_index(duck, "digits", "id", "digits_idx")
    got = sqlrp.search(duck, "digits_idx", "queries", "qid", top=10, candidates=100)
    dist = ((X[None, :, :] - Q[:, None, :]) ** 2).sum(axis=2)
    truth = np.argsort(dist, axis=1, kind="stable")[:, :10]
    found = got.groupby("query_id")["id"].apply(set)
    recall = np.mean([len(found.get(q, set()) & set(truth[q])) / 10 for q in range(len(Q))])
    assert recall >= 0.9, recall


def test_search_into_a_table(indexed):
    db, idx, X, ids, Q = indexed
    sqlrp.search(db, "pts_idx", "qs", "qid", top=3, candidates=20, into="hits")
    stored = db.query_df('SELECT * FROM "hits" ORDER BY "query_id", "rank"')
    direct = sqlrp.search(db, "pts_idx", "qs", "qid", top=3, candidates=20)
    np.testing.assert_array_equal(
        stored[["query_id", "id", "rank"]].to_numpy(), direct[["query_id", "id", "rank"]].to_numpy()
    )
    with pytest.raises(ProjectionExists, match="already exists"):
        sqlrp.search(db, "pts_idx", "qs", "qid", into="hits")
    sqlrp.search(db, "pts_idx", "qs", "qid", top=1, into="hits", replace=True)
    assert db.fetchall('SELECT count(*) FROM "hits"')[0][0] == 25


def test_hostile_names_are_quoted(db):
    X, Q = clustered(150, 6), clustered(10, 7)
    names = [f'f"{i}; DROP TABLE pts; --' for i in range(D)]
    db.write_dataframe('pts"; --', frame(X, 'i"d', names))
    db.write_dataframe("q's", frame(Q, "q id", names))
    idx = sqlrp.build_index(db, 'pts"; --', 'i"d', 'idx"; DROP TABLE x; --', bits=64, band_bits=8)
    got = sqlrp.search(db, 'idx"; DROP TABLE x; --', "q's", "q id", top=3, candidates=20)
    ref = reference_search(
        idx.projection, X, np.arange(150), Q, np.arange(10), 8, 3, 20, "euclidean", idx.layout.thresholds
    )
    np.testing.assert_array_equal(
        got[["query_id", "id", "rank"]].to_numpy(), ref[["query_id", "id", "rank"]].to_numpy()
    )
    assert db.fetchall('SELECT count(*) FROM "pts""; --"')[0][0] == 150
    assert 'idx"; DROP TABLE x; --' in sqlrp.list_indexes(db)["name"].tolist()
    sqlrp.drop_index(db, 'idx"; DROP TABLE x; --')
    assert sqlrp.list_indexes(db).empty


def test_array_layout(duck):
    both = clustered(210, 8)
    X, Q = both[:200], both[200:]
    duck.write_dataframe("arr", array_frame(X))
    qa = array_frame(Q).rename(columns={"id": "qid"})
    duck.write_dataframe("qarr", qa)
    idx = sqlrp.build_index(duck, "arr", "id", "aidx", bits=64, band_bits=8, layout="array", array_column="x")
    got = sqlrp.search(duck, "aidx", "qarr", "qid", top=3, candidates=20)
    ref = reference_search(
        idx.projection, X, np.arange(200), Q, np.arange(10), 8, 3, 20, "euclidean", idx.layout.thresholds
    )
    np.testing.assert_array_equal(
        got[["query_id", "id", "rank"]].to_numpy(), ref[["query_id", "id", "rank"]].to_numpy()
    )


def test_bad_input_gets_a_clear_error_and_leaves_nothing(duck):
    db = duck
    X = clustered(100, 10)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(clustered(5, 11), "qid"))
    with pytest.raises(InvalidParameter, match="multiple of 64"):
        sqlrp.build_index(db, "pts", "id", "idx", bits=100)
    with pytest.raises(InvalidParameter, match="band bits"):
        sqlrp.build_index(db, "pts", "id", "idx", bits=64, band_bits=6)
    with pytest.raises(InvalidParameter, match="not linear"):
        sqlrp.create_projection(db, "poly", "pk-rp", d=D, k=64, seed=0)
        sqlrp.build_index(db, "pts", "id", "idx", projection="poly")
    with pytest.raises(InvalidParameter, match="registry"):
        sqlrp.build_index(db, "pts", "id", "sqlrp_projection", bits=64)
    with pytest.raises(InvalidParameter, match="source table"):
        sqlrp.build_index(db, "pts", "id", "pts", bits=64)
    db.write_dataframe("dups", frame(X[:3], ids=[1, 1, 2]))
    with pytest.raises(InputError, match="unique"):
        sqlrp.build_index(db, "dups", "id", "idx", bits=64)
    db.write_dataframe("empty", frame(X[:0]))
    with pytest.raises(InputError, match="empty"):
        sqlrp.build_index(db, "empty", "id", "idx", bits=64)
    bad = frame(X[:5])
    bad.loc[2, "f3"] = np.nan
    db.write_dataframe("nan", bad)
    with pytest.raises(InputError, match="NaN|NULL"):
        sqlrp.build_index(db, "nan", "id", "idx", bits=64)
    assert sqlrp.list_indexes(db).empty and not db.table_exists("idx") and not db.table_exists("idx__bands")

    sqlrp.build_index(db, "pts", "id", "idx", bits=64, band_bits=8)
    with pytest.raises(ProjectionExists, match="replace"):
        sqlrp.build_index(db, "pts", "id", "idx", bits=64)
    with pytest.raises(IndexNotFound, match="no index named 'nope'"):
        sqlrp.search(db, "nope", "qs", "qid")
    for top in (0, -1, 2.5, True):
        with pytest.raises(InvalidParameter, match="top must be a positive integer"):
            sqlrp.search(db, "idx", "qs", "qid", top=top)
    with pytest.raises(InvalidParameter, match="at least top"):
        sqlrp.search(db, "idx", "qs", "qid", top=10, candidates=5)
    with pytest.raises(InvalidParameter, match="metric"):
        sqlrp.search(db, "idx", "qs", "qid", metric="cosine")
    with pytest.raises(InvalidParameter, match="no projected vectors"):
        sqlrp.search(db, "idx", "qs", "qid", rerank="vectors")
    db.write_dataframe("narrow", frame(clustered(5, 12, d=5), "qid"))
    with pytest.raises(InputError, match="d = 12 features .* 5 numeric columns"):
        sqlrp.search(db, "idx", "narrow", "qid")
    with pytest.raises(InputError, match="no table|not found|does not exist"):
        sqlrp.search(db, "idx", "missing", "qid")
    db.write_dataframe("_sqlrp_queries", frame(clustered(5, 13), "qid"))
    with pytest.raises(InvalidParameter, match="sub-queries"):
        sqlrp.search(db, "idx", "_sqlrp_queries", "qid")
    nan_q = frame(clustered(3, 14), "qid")
    nan_q.loc[1, "f0"] = np.nan
    db.write_dataframe("nanq", nan_q)
    with pytest.raises(InputError, match="NaN|NULL"):
        sqlrp.search(db, "idx", "nanq", "qid")


def test_engines_without_a_bit_count_refuse(tmp_path):
    db = sqlrp.connect(f"sqlite:///{tmp_path}/s.sqlite")
    db.write_dataframe("pts", frame(clustered(20, 15)))
    with pytest.raises(EngineLimit, match="sqlite.*bit count"):
        sqlrp.build_index(db, "pts", "id", "idx", bits=64)
    db.close()


def test_short_results_warn(duck):
    """Far-away queries share no band with any row: fewer than top rows, and a warning says so."""
    duck.write_dataframe("pts", frame(clustered(100, 16)))
    duck.write_dataframe("far", frame(-clustered(4, 17) * 50 + 7, "qid"))
    sqlrp.build_index(duck, "pts", "id", "idx", bits=64, band_bits=32, center=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = sqlrp.search(duck, "idx", "far", "qid", top=5, candidates=10)
    assert len(got) < 20
    assert any("fewer than top" in str(w.message) for w in caught)


def test_default_band_bits_follow_the_table_size():
    assert [default_band_bits(n) for n in (100, 1_500, 100_000, 1_000_000, 10**10)] == [4, 8, 16, 16, 32]


def test_cli_index_search_evaluate_and_drop(tmp_path, capsys):
    url = f"duckdb:///{tmp_path}/s.duckdb"
    db = sqlrp.connect(url)
    X = clustered(300, 18)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(clustered(8, 19), "qid"))
    db.close()
    assert main(["index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "idx", "--bits", "128"]) == 0
    search = ["search", "--db", url, "--index", "idx", "--query-table", "qs", "--query-id-column", "qid"]
    assert main([*search, "--top", "3", "--candidates", "50", "--into", "hits"]) == 0
    capsys.readouterr()
    assert main([*search, "--top", "3", "--candidates", "50"]) == 0
    printed = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    db = sqlrp.connect(url)
    stored = db.query_df('SELECT * FROM "hits" ORDER BY "query_id", "rank"')
    api = sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=50)
    db.close()
    assert printed[["query_id", "id", "rank"]].values.tolist() == api[["query_id", "id", "rank"]].values.tolist()
    assert stored[["query_id", "id", "rank"]].values.tolist() == api[["query_id", "id", "rank"]].values.tolist()
    out = tmp_path / "report"
    assert main(["evaluate", "--db", url, "--index", "idx", "--queries", "20", "--top", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Recall@5" in text and (out / "recall_vs_candidates.png").stat().st_size > 1000
    sweep = pd.read_csv(out / "search_metrics.csv")
    assert sweep["candidates"].is_monotonic_increasing and sweep["recall_at_5"].iloc[-1] == 1.0
    assert main([*search[:4], "nope", *search[5:]]) != 0
    assert "no index named 'nope'" in capsys.readouterr().err
    assert main([*search, "--top", "0"]) == 2
    assert main(["indexes", "list", "--db", url]) == 0 and "idx" in capsys.readouterr().out
    assert main(["indexes", "drop", "idx", "--db", url]) == 0
    db = sqlrp.connect(url)
    assert not db.table_exists("idx") and sqlrp.list_indexes(db).empty
    db.close()
