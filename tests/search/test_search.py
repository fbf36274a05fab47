"""Similarity search (issues 23 and 26): indexes and searches on DuckDB and PostgreSQL give the
NumPy reference's lists, codes, candidates, ranks and distances; recall rises with the candidates
and the probes; an index notices when its table changed and refreshes to what a build on its
centroids gives; the exact brute force, the CLI, the evaluation, and the errors."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import EngineLimit, InputError, InvalidParameter, ProjectionExists
from sqlrp.search.index import IndexNotFound, StaleIndex, load_lists
from sqlrp.search.ivf import reference_codes
from sqlrp.search.reference import normalise, result_recall
from sqlrp.search.rotation import rotate
from testkit.frames import array_frame
from testkit.search_cases import D, clustered, embedding_like, frame, replay, same_ranks


def stored_words(db, table: str, idx) -> np.ndarray:  # noqa: ANN001
    """The index rows' code words (by id) as NumPy's 64-bit words, whatever the engine's word width
    (DuckDB keeps 128-bit ``INT128`` words: read as text, split in two)."""
    words = [f'CAST("w{w}" AS VARCHAR)' for w in range(idx.layout.words)]
    rows = db.fetchall(f'SELECT {", ".join(words)} FROM "{table}" ORDER BY "id"')
    per, count = idx.word_bits // 64, idx.bits // 64
    out = np.zeros((len(rows), count), dtype=np.uint64)
    for i, row in enumerate(rows):
        for w, text in enumerate(row):
            value = int(text) % (1 << idx.word_bits)
            for half in range(per):
                if w * per + half < count:
                    out[i, w * per + half] = (value >> (64 * half)) & ((1 << 64) - 1)
    return out.view(np.int64)


@pytest.fixture
def indexed(db):
    """An index over 400 rows whose ids are shuffled (ties are broken by id, not by row order)."""
    both = clustered(425, 1)  # queries from the same centres as the rows
    X, Q = both[:400], both[400:]
    ids = np.random.default_rng(3).permutation(400) * 7 + 5
    db.write_dataframe("pts", frame(X, ids=ids))
    db.write_dataframe("qs", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "pts", "id", "pts_idx", lists=16, bits=64)
    return db, idx, X, ids, Q


@pytest.mark.parametrize("metric", ["euclidean", "angular"])
def test_search_matches_the_numpy_reference(db, metric):
    both = clustered(425, 1)
    X, Q = both[:400], both[400:]
    ids = np.random.default_rng(3).permutation(400) * 7 + 5
    db.write_dataframe("pts", frame(X, ids=ids))
    db.write_dataframe("qs", frame(Q, "qid"))
    sqlrp.build_index(db, "pts", "id", "idx", lists=16, bits=64, metric=metric)
    got = sqlrp.search(db, "idx", "qs", "qid", top=5, candidates=30, probes=4)
    assert list(got.columns) == ["query_id", "id", "rank", "distance"]
    same_ranks(got, replay(db, "idx", X, ids, Q, np.arange(25), 5, 30, 4))
    # not vacuous: 4 of 16 lists and 30 candidates cut the set, and the nearest are truly near
    exact = sqlrp.search(db, "idx", "qs", "qid", top=5, exact=True)
    assert 0.8 < result_recall(got, exact) and len(got) == 125
    if metric == "angular":
        Xn, Qn = normalise(X), normalise(Q)
        cos = 1 - (Qn @ Xn.T)
        np.testing.assert_allclose(exact["distance"].to_numpy().reshape(25, 5), np.sort(cos, axis=1)[:, :5], atol=1e-12)


def test_stored_rows_equal_numpy(indexed):
    db, idx, X, ids, Q = indexed
    rows = db.query_df('SELECT * FROM "pts_idx" ORDER BY "id"')
    order = np.argsort(ids)
    lists = load_lists(db, idx)
    codes = reference_codes(X[order], lists, idx.signs, rotate(lists.leaves, idx.signs))
    np.testing.assert_array_equal(rows["list"].to_numpy(), codes.lists)
    np.testing.assert_array_equal(stored_words(db, "pts_idx", idx), codes.words)
    np.testing.assert_array_equal(rows["ones"].to_numpy(), codes.ones)
    np.testing.assert_array_equal(rows["nx"].to_numpy(), codes.nx)
    np.testing.assert_array_equal(rows["g"].to_numpy(), codes.g)
    np.testing.assert_array_equal(rows["tb"].to_numpy(), codes.tb)
    assert (codes.words < 0).any() and (codes.words > 0).any() and len(np.unique(codes.lists)) > 8
    stored = db.query_df('SELECT * FROM "pts_idx__lists" ORDER BY "list"')
    np.testing.assert_array_equal(stored[[f"t{j}" for j in range(64)]].to_numpy(), rotate(lists.leaves, idx.signs))


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


def indexed_embeddings(duck, seed: int):  # noqa: ANN001
    """2,000 embedding-like rows indexed in 20 lists as ``eidx``, 100 queries ``eq``, and their exact 10-NN."""
    both = embedding_like(2100, seed)
    X, Q = both[:2000], both[2000:]
    duck.write_dataframe("emb", frame(X))
    duck.write_dataframe("eq", frame(Q, "qid"))
    sqlrp.build_index(duck, "emb", "id", "eidx", lists=20)
    return X, Q, sqlrp.search(duck, "eidx", "eq", "qid", top=10, exact=True)


def test_recall_rises_with_candidates_and_probes(duck):
    """Embedding-like rows: recall never falls as C rises, nor as P rises once the re-rank has slack
    (C >= 4 top: with C = top, every row a wider probe adds competes for the same 10 slots on its
    estimate alone, and recall may dip), and reaches 1 when every list is probed and every row
    re-ranked."""
    X, Q, exact = indexed_embeddings(duck, 4)
    recalls = {}
    for probes in (2, 5, 20):
        for c in (10, 40, 160, 2000):
            got = sqlrp.search(duck, "eidx", "eq", "qid", top=10, candidates=c, probes=probes)
            recalls[probes, c] = result_recall(got, exact)
    for probes in (2, 5, 20):
        row = [recalls[probes, c] for c in (10, 40, 160, 2000)]
        assert row == sorted(row), (probes, row)
    for c in (40, 160, 2000):
        col_ = [recalls[p, c] for p in (2, 5, 20)]
        assert col_ == sorted(col_), (c, col_)
    assert recalls[20, 2000] == 1.0 and recalls[2, 10] < 0.9
    assert recalls[5, 160] > recalls[5, 10] + 0.1  # the codes' ranking is what C trades on


def test_codes_rank_better_than_chance(duck):
    """The estimate is worth having: the 40 best estimates in all 20 lists hold most true neighbours."""
    X, Q, exact = indexed_embeddings(duck, 5)
    got = sqlrp.search(duck, "eidx", "eq", "qid", top=10, candidates=40, probes=20)
    assert result_recall(got, exact) > 0.85  # 40 of 2,000 rows at random would find 2%
    same_ranks(got, replay(duck, "eidx", X, np.arange(2000), Q, np.arange(100), 10, 40, 20))


def test_recall_on_held_out_digits(duck, digits):
    """Held-out digits, the defaults: Recall@10 against exact k-NN."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(digits))
    X, Q = digits[order[:1500]], digits[order[1500:]]
    duck.write_dataframe("digits", frame(X))
    duck.write_dataframe("queries", frame(Q, "qid"))
    sqlrp.build_index(duck, "digits", "id", "digits_idx")
    got = sqlrp.search(duck, "digits_idx", "queries", "qid", top=10)
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
    sqlrp.build_index(db, 'pts"; --', 'i"d', 'idx"; DROP TABLE x; --', lists=6, bits=64)
    got = sqlrp.search(db, 'idx"; DROP TABLE x; --', "q's", "q id", top=3, candidates=20, probes=2)
    same_ranks(got, replay(db, 'idx"; DROP TABLE x; --', X, np.arange(150), Q, np.arange(10), 3, 20, 2))
    assert db.fetchall('SELECT count(*) FROM "pts""; --"')[0][0] == 150
    assert 'idx"; DROP TABLE x; --' in sqlrp.list_indexes(db)["name"].tolist()
    sqlrp.drop_index(db, 'idx"; DROP TABLE x; --')
    assert sqlrp.list_indexes(db).empty


GENERATED = [
    "id",
    "list",
    "w0",
    "g",
    "ones",
    "nx",
    "h",
    "_id",
    "_x0",
    "_qid",
    "_list",
    "_h",
    "_nx",
    "_y0",
    "_vec",
    "t0",
    "c0",
]


@pytest.mark.parametrize("id_name", GENERATED)
def test_id_columns_named_like_generated_columns(duck, id_name):
    """An id column (or a feature) named after a column the index or the search makes changes nothing."""
    X, Q = clustered(200, 20), clustered(10, 21)
    names = [f"f{i}" for i in range(D - 1)] + ["_x1" if id_name != "_x1" else "x1"]
    duck.write_dataframe("named", frame(X, id_name, names))
    duck.write_dataframe("qnamed", frame(Q, id_name, names))
    duck.write_dataframe("plain", frame(X))
    duck.write_dataframe("qplain", frame(Q, "qid"))
    sqlrp.build_index(duck, "named", id_name, "n_idx", lists=8, bits=64, seed=1)
    sqlrp.build_index(duck, "plain", "id", "p_idx", lists=8, bits=64, seed=1)
    assert duck.fetchall('SELECT sum("w0"), sum("nx") FROM "n_idx"') == duck.fetchall(
        'SELECT sum("w0"), sum("nx") FROM "p_idx"'
    )
    a = sqlrp.search(duck, "n_idx", "qnamed", id_name, top=5, candidates=20, probes=3)
    b = sqlrp.search(duck, "p_idx", "qplain", "qid", top=5, candidates=20, probes=3)
    pd.testing.assert_frame_equal(a, b)


def test_array_layout(duck):
    both = clustered(210, 8)
    X, Q = both[:200], both[200:]
    duck.write_dataframe("arr", array_frame(X))
    duck.write_dataframe("qarr", array_frame(Q).rename(columns={"id": "qid"}))
    sqlrp.build_index(duck, "arr", "id", "aidx", lists=8, bits=64, layout="array", array_column="x")
    got = sqlrp.search(duck, "aidx", "qarr", "qid", top=3, candidates=20, probes=3)
    same_ranks(got, replay(duck, "aidx", X, np.arange(200), Q, np.arange(10), 3, 20, 3))


def test_float_array_column_re_ranked_whole(duck):
    """A ``FLOAT[d]`` column (how embeddings are stored) is re-ranked by one cast of the column to
    ``DOUBLE[d]``, with the values element-by-element reading gives: the oracle's ranks and distances."""
    from sqlrp.dialects import get_dialect
    from sqlrp.search.lookup import _query_source
    from sqlrp.search.query import search_select

    both = embedding_like(330, 9, d=16).astype(np.float32).astype(np.float64)
    X, Q = both[:300], both[300:]
    duck.write_dataframe("farr", array_frame(X))
    duck.write_dataframe("fq", array_frame(Q).rename(columns={"id": "qid"}))
    for table in ("farr", "fq"):
        duck.execute(f"CREATE TABLE {table}_f AS SELECT * REPLACE (CAST(x AS FLOAT[16]) AS x) FROM {table}")
    idx = sqlrp.build_index(duck, "farr_f", "id", "fidx", lists=6, layout="array", array_column="x")
    got = sqlrp.search(duck, "fidx", "fq_f", "qid", top=5, candidates=30, probes=3)
    same_ranks(got, replay(duck, "fidx", X, np.arange(300), Q, np.arange(30), 5, 30, 3))
    dialect = get_dialect("duckdb")
    sql = dialect.render(search_select(idx.layout, _query_source(duck, idx, "fq_f", "qid", None, None), dialect))
    assert 'CAST("x" AS DOUBLE[16])' in sql


# ----------------------------------------------------------------------------------------------
# an index that knows its table (issue 26)


def _stale_warnings(fn):  # noqa: ANN001
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in caught if "changed since index" in str(w.message)]


CHANGES = {
    "delete": 'DELETE FROM "pts" WHERE "id" % 2 = 0',
    "update": 'UPDATE "pts" SET "f0" = "f0" + 40, "f3" = "f3" - 25 WHERE "id" % 3 = 0',
    "insert": 'INSERT INTO "pts" SELECT "id" + 1000, "f1", "f0", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", '
    '"f10", "f11" FROM "pts" WHERE "id" < 50',
    "duplicate": 'INSERT INTO "pts" SELECT * FROM "pts" WHERE "id" < 5',
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_changed_table_warns_and_a_refresh_matches_a_build(db, change):
    X, Q = clustered(300, 30), clustered(20, 31)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(Q, "qid"))
    sqlrp.build_index(db, "pts", "id", "idx", lists=8, bits=64)
    _, stale = _stale_warnings(lambda: sqlrp.search(db, "idx", "qs", "qid", top=5, candidates=20))
    assert stale == []
    db.execute(CHANGES[change])
    got, stale = _stale_warnings(lambda: sqlrp.search(db, "idx", "qs", "qid", top=10, candidates=60, probes=8))
    assert len(stale) == 1 and "incremental=True" in stale[0]
    now = db.query_df('SELECT * FROM "pts" ORDER BY "id"')
    assert set(got["id"]) <= set(now["id"])  # a deleted row is never returned
    live = now.drop_duplicates("id")
    truth = np.sqrt(((live[[f"f{i}" for i in range(D)]].to_numpy()[None] - Q[:, None]) ** 2).sum(axis=2))
    by_id = dict(zip(live["id"], range(len(live)), strict=True))
    np.testing.assert_allclose(
        got["distance"], [truth[q, by_id[i]] for q, i in zip(got["query_id"], got["id"], strict=True)]
    )
    with pytest.raises(StaleIndex, match="changed since"):
        sqlrp.search(db, "idx", "qs", "qid", strict=True)
    if change == "duplicate":
        with pytest.raises(InputError, match="unique"):
            sqlrp.build_index(db, "pts", "id", "idx", incremental=True)
        return
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)
    after, stale = _stale_warnings(lambda: sqlrp.search(db, "idx", "qs", "qid", top=5, candidates=20, probes=3))
    assert stale == []
    # the refreshed index holds exactly what a build on its centroids gives for the table as it is now
    idx = sqlrp.load_index(db, "idx")
    lists = load_lists(db, idx)
    Xnow = now[[f"f{i}" for i in range(D)]].to_numpy()
    codes = reference_codes(Xnow, lists, idx.signs, rotate(lists.leaves, idx.signs))
    rows = db.query_df('SELECT * FROM "idx" ORDER BY "id"')
    np.testing.assert_array_equal(rows["id"].to_numpy(), now["id"].to_numpy())
    np.testing.assert_array_equal(rows["list"].to_numpy(), codes.lists)
    np.testing.assert_array_equal(stored_words(db, "idx", idx), codes.words)
    np.testing.assert_array_equal(rows["nx"].to_numpy(), codes.nx)
    same_ranks(after, replay(db, "idx", Xnow, now["id"].to_numpy(), Q, np.arange(20), 5, 20, 3))


def test_a_recreated_table_warns(duck):
    duck.write_dataframe("pts", frame(clustered(200, 32)))
    duck.write_dataframe("qs", frame(clustered(5, 33), "qid"))
    sqlrp.build_index(duck, "pts", "id", "idx", lists=8, bits=64)
    duck.execute('DROP TABLE "pts"')
    duck.write_dataframe("pts", frame(clustered(200, 34)))  # same name, same ids, other rows
    _, stale = _stale_warnings(lambda: sqlrp.search(duck, "idx", "qs", "qid"))
    assert len(stale) == 1 and "some of them changed" in stale[0]


def test_refresh_twice_changes_nothing(db):
    db.write_dataframe("pts", frame(clustered(200, 35)))
    sqlrp.build_index(db, "pts", "id", "idx", lists=8, bits=64)
    before = db.query_df('SELECT * FROM "idx" ORDER BY "id"')
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)
    pd.testing.assert_frame_equal(db.query_df('SELECT * FROM "idx" ORDER BY "id"'), before)


# ----------------------------------------------------------------------------------------------
# errors


def test_bad_input_gets_a_clear_error_and_leaves_nothing(duck):
    db = duck
    X = clustered(100, 10)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(clustered(5, 11), "qid"))
    for bits in (100, 8, 32):
        with pytest.raises(InvalidParameter, match="power of two"):
            sqlrp.build_index(db, "pts", "id", "idx", bits=bits)
    for bad in ({"lists": 0}, {"probes": -1}, {"sample": 2.5}, {"metric": "cosine"}, {"seed": -3}):
        with pytest.raises(InvalidParameter):
            sqlrp.build_index(db, "pts", "id", "idx", **bad)
    with pytest.raises(InvalidParameter, match="registry"):
        sqlrp.build_index(db, "pts", "id", "sqlrp_projection")
    with pytest.raises(InvalidParameter, match="source table"):
        sqlrp.build_index(db, "pts", "id", "pts")
    db.write_dataframe("dups", frame(X[:3], ids=[1, 1, 2]))
    with pytest.raises(InputError, match="unique"):
        sqlrp.build_index(db, "dups", "id", "idx")
    db.write_dataframe("empty", frame(X[:0]))
    with pytest.raises(InputError, match="empty"):
        sqlrp.build_index(db, "empty", "id", "idx")
    bad = frame(X[:5])
    bad.loc[2, "f3"] = np.nan
    db.write_dataframe("nan", bad)
    with pytest.raises(InputError, match="NaN|NULL"):
        sqlrp.build_index(db, "nan", "id", "idx")
    assert sqlrp.list_indexes(db).empty
    assert not any(db.table_exists(t) for t in ("idx", "idx__lists", "idx__tops"))

    sqlrp.build_index(db, "pts", "id", "idx", lists=4, bits=64)
    with pytest.raises(ProjectionExists, match="replace"):
        sqlrp.build_index(db, "pts", "id", "idx")
    with pytest.raises(IndexNotFound, match="no index named 'nope'"):
        sqlrp.search(db, "nope", "qs", "qid")
    for top in (0, -1, 2.5, True):
        with pytest.raises(InvalidParameter, match="top must be a whole number >= 1"):
            sqlrp.search(db, "idx", "qs", "qid", top=top)
    with pytest.raises(InvalidParameter, match="at least top"):
        sqlrp.search(db, "idx", "qs", "qid", top=10, candidates=5)
    with pytest.raises(InvalidParameter, match="probes"):
        sqlrp.search(db, "idx", "qs", "qid", probes=5)  # 4 lists
    with pytest.raises(InvalidParameter, match="built for euclidean"):
        sqlrp.search(db, "idx", "qs", "qid", metric="angular")
    db.write_dataframe("narrow", frame(clustered(5, 12, d=5), "qid"))
    with pytest.raises(InputError, match="d = 12 features .* 5 numeric columns"):
        sqlrp.search(db, "idx", "narrow", "qid")
    with pytest.raises(InputError, match="no table|not found|does not exist"):
        sqlrp.search(db, "idx", "missing", "qid")
    db.write_dataframe("_sqlrp_q", frame(clustered(5, 13), "qid"))
    with pytest.raises(InvalidParameter, match="sub-queries"):
        sqlrp.search(db, "idx", "_sqlrp_q", "qid")
    nan_q = frame(clustered(3, 14), "qid")
    nan_q.loc[1, "f0"] = np.nan
    db.write_dataframe("nanq", nan_q)
    with pytest.raises(InputError, match="NaN|NULL"):
        sqlrp.search(db, "idx", "nanq", "qid")
    sqlrp.build_index(db, "pts", "id", "idx", lists=4, bits=64, replace=True)  # a rebuild in place
    assert sqlrp.list_indexes(db)["lists"].tolist() == [4]


def test_engines_without_a_bit_count_refuse(tmp_path):
    db = sqlrp.connect(f"sqlite:///{tmp_path}/s.sqlite")
    db.write_dataframe("pts", frame(clustered(20, 15)))
    with pytest.raises(EngineLimit, match="sqlite.*bit count"):
        sqlrp.build_index(db, "pts", "id", "idx")
    db.close()


def test_short_results_warn(duck):
    """Lists of 2-3 rows, one probed: fewer than top rows, and a warning says so."""
    duck.write_dataframe("pts", frame(clustered(40, 16)))
    duck.write_dataframe("qs", frame(clustered(4, 17), "qid"))
    sqlrp.build_index(duck, "pts", "id", "idx", lists=16, bits=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = sqlrp.search(duck, "idx", "qs", "qid", top=5, candidates=10, probes=1)
    assert len(got) < 20
    assert any("fewer than top" in str(w.message) for w in caught)


def test_cli_index_search_evaluate_and_drop(tmp_path, capsys):
    url = f"duckdb:///{tmp_path}/s.duckdb"
    db = sqlrp.connect(url)
    db.write_dataframe("pts", frame(clustered(300, 18)))
    db.write_dataframe("qs", frame(clustered(8, 19), "qid"))
    db.close()
    assert main(["index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "idx", "--lists", "10"]) == 0
    assert "10 lists" in capsys.readouterr().err
    search = ["search", "--db", url, "--index", "idx", "--query-table", "qs", "--query-id-column", "qid"]
    assert main([*search, "--top", "3", "--candidates", "50", "--probes", "4", "--into", "hits"]) == 0
    capsys.readouterr()
    assert main([*search, "--top", "3", "--candidates", "50", "--probes", "4"]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    db = sqlrp.connect(url)
    stored = db.query_df('SELECT * FROM "hits" ORDER BY "query_id", "rank"')
    api = sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=50, probes=4)
    db.execute('DELETE FROM "pts" WHERE "id" < 10')
    db.close()
    assert printed[["query_id", "id", "rank"]].values.tolist() == api[["query_id", "id", "rank"]].values.tolist()
    assert stored[["query_id", "id", "rank"]].values.tolist() == api[["query_id", "id", "rank"]].values.tolist()
    assert main([*search, "--strict"]) != 0
    assert "changed since index 'idx'" in capsys.readouterr().err
    assert main(["index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "idx", "--incremental"]) == 0
    assert main([*search, "--strict"]) == 0
    capsys.readouterr()
    out = tmp_path / "report"
    assert main(["evaluate", "--db", url, "--index", "idx", "--queries", "20", "--top", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Recall@5" in text and (out / "recall_vs_candidates.png").stat().st_size > 1000
    sweep = pd.read_csv(out / "search_metrics.csv")
    sweep = sweep[sweep["probes"] != "defaults"]  # the calibrated defaults' row, then the sweep
    assert sweep["recall_at_5"].is_monotonic_increasing and sweep["recall_at_5"].iloc[-1] == 1.0
    assert main([*search[:4], "nope", *search[5:]]) != 0
    assert "no index named 'nope'" in capsys.readouterr().err
    assert main([*search, "--top", "0"]) == 2
    assert main([*search, "--candidates", "abc"]) == 2
    assert main(["indexes", "list", "--db", url]) == 0 and "idx" in capsys.readouterr().out
    assert main(["indexes", "drop", "idx", "--db", url]) == 0
    db = sqlrp.connect(url)
    assert not db.table_exists("idx") and sqlrp.list_indexes(db).empty
    db.close()


def test_an_index_of_another_format_is_refused(duck):
    """An index whose rows lack what this version's estimate reads is refused with the rebuild line."""
    indexed_embeddings(duck, 7)
    older = """replace(params, '"format": 2', '"format": 1')"""
    duck.execute(f"UPDATE sqlrp_index SET params = {older} WHERE name = 'eidx'")
    with pytest.raises(IndexNotFound, match=r"rebuild it: index its table again with name='eidx' replace=True"):
        sqlrp.search(duck, "eidx", "eq", "qid", top=10)


def test_wide_code_words_equal_numpy(db):
    """256-bit codes of float rows: DuckDB's two INT128 words a row (PostgreSQL's four BIGINT) are
    NumPy's words bit for bit, sign bits included, and a search gives the oracle's ranks."""
    both = embedding_like(530, 8, d=40)
    X, Q = both[:500], both[500:]
    db.write_dataframe("wide_pts", frame(X))
    db.write_dataframe("wide_qs", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "wide_pts", "id", "widx", lists=6, bits=256)
    assert idx.bits == 256 and idx.word_bits == (128 if db.dialect == "duckdb" else 64)
    lists = load_lists(db, idx)
    codes = reference_codes(X, lists, idx.signs, rotate(lists.leaves, idx.signs))
    np.testing.assert_array_equal(stored_words(db, "widx", idx), codes.words)
    assert (codes.words[:, 1] < 0).any() and (codes.words[:, 3] < 0).any()  # both INT128 sign bits
    got = sqlrp.search(db, "widx", "wide_qs", "qid", top=5, candidates=25, probes=3)
    same_ranks(got, replay(db, "widx", X, np.arange(500), Q, np.arange(30), 5, 25, 3))
