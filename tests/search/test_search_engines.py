"""Similarity search on Spark (local[2]) and ClickHouse (chdb), issue 23 item 4: indexes built and
searched there give the NumPy oracle's lists, codes, candidates, ranks and distances (ids and ranks
equal, distances to 1e-9 relative), for both metrics, wide and array tables, integer data (every
sum exact) and float data (the rotation's butterflies are the same IEEE operations in the same
order, so the code bits are equal there too).

Neither engine has transactions: an index is written under a staging name and registered last, so a
build or refresh that fails -- a statement made to fail on the real engine by :class:`Failing` --
leaves the old index searchable and no staging table behind; a failure during the swap leaves no
index registered, never a half-written one.  The staleness check and the incremental refresh work
there.  SQLite, and every engine sqlrp knows no bit count for, refuse with the engine's name.

Under ``CI=true`` a missing Spark or chdb fails instead of skipping.
"""

from __future__ import annotations

import os
import re
import uuid
import warnings
from collections.abc import Iterator

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # before any JVM starts: Spark on loopback

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import EngineLimit
from sqlrp.dialects import get_dialect
from sqlrp.search.fresh import check_fresh
from sqlrp.search.index import IndexNotFound, StaleIndex, load_lists
from sqlrp.search.ivf import reference_codes
from sqlrp.search.reference import normalise, result_recall
from sqlrp.search.rotation import rotate
from testkit.frames import array_frame
from testkit.search_cases import clustered, embedding_like, frame, replay, same_ranks

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # as tests/conftest.py: small jobs, 2 cores
ENGINES = ["clickhouse", "spark"]


def _unavailable(what: str, exc: BaseException) -> None:
    if IN_CI:
        pytest.fail(f"CI=true and {what} is unavailable: {type(exc).__name__}: {exc}")
    pytest.skip(f"{what} unavailable (CI would fail here): {type(exc).__name__}: {exc}")


@pytest.fixture(scope="session")
def spark_session_db():
    """A local[2] session for the run (one SparkContext per process: shared with test_engine_spark
    when both run, each closing only the session it started)."""
    try:
        from sqlrp.backends.spark import SparkBackend

        db = SparkBackend.from_master("local[2]", conf={"spark.driver.extraJavaOptions": FAST_START})
        db.fetchall("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure to start is reported the same way
        _unavailable("Spark", exc)
    yield db
    db.close()


@pytest.fixture(scope="module")
def chdb_engine():
    """The connection that keeps chdb's in-memory engine up for the module (one engine per process)."""
    try:
        from sqlrp.backends.clickhouse import ChdbBackend

        db = ChdbBackend(":memory:")
    except Exception as exc:  # noqa: BLE001
        _unavailable("chdb (pip install 'sqlrp[clickhouse]')", exc)
    yield db
    db.close()


@pytest.fixture(params=ENGINES)
def engine_db(request) -> Iterator:
    """A fresh database (ClickHouse) or a fresh set of table names (Spark's one session)."""
    if request.param == "clickhouse":
        from sqlrp.backends.clickhouse import ChdbBackend

        engine = request.getfixturevalue("chdb_engine")
        db = ChdbBackend(":memory:")
        database = f"s_{uuid.uuid4().hex[:12]}"
        db.execute(f"CREATE DATABASE {database}")
        db.execute(f"USE {database}")
        yield db
        engine.execute(f"DROP DATABASE IF EXISTS {database}")
        db.close()
        return
    db = request.getfixturevalue("spark_session_db")
    before = set(db.table_names())
    registered = "sqlrp_index" in {t.lower() for t in before}  # an earlier test module made the registry
    indexes = set(sqlrp.list_indexes(db)["name"]) if registered else set()
    yield db
    if registered:  # the registry outlives the test: forget the indexes it made
        for name in set(sqlrp.list_indexes(db)["name"]) - indexes:
            sqlrp.drop_index(db, name)
    for table in set(db.table_names()) - before:  # the session outlives the test: drop what it made
        db.execute(f"DROP TABLE IF EXISTS `{table}`")


def _tables(db) -> set[str]:  # noqa: ANN001
    return {t.lower() for t in db.table_names()}


def _staging_left(db) -> list[str]:  # noqa: ANN001
    return sorted(t for t in _tables(db) if t.startswith("_sqlrp_"))


# ----------------------------------------------------------------------------------------------
# parity with the NumPy oracle


@pytest.mark.parametrize("metric", ["euclidean", "angular"])
def test_search_matches_the_numpy_reference(engine_db, metric):
    db = engine_db
    both = clustered(425, 1)
    X, Q = both[:400], both[400:]
    ids = np.random.default_rng(3).permutation(400) * 7 + 5  # ties are broken by id, not by row order
    db.write_dataframe("pts", frame(X, ids=ids))
    db.write_dataframe("qs", frame(Q, "qid"))
    sqlrp.build_index(db, "pts", "id", "idx", lists=16, bits=64, metric=metric)
    got = sqlrp.search(db, "idx", "qs", "qid", top=5, candidates=30, probes=4)
    assert list(got.columns) == ["query_id", "id", "rank", "distance"]
    same_ranks(got, replay(db, "idx", X, ids, Q, np.arange(25), 5, 30, 4))
    # not vacuous: 4 of 16 lists and 30 candidates cut the set, and what is found is truly near
    exact = sqlrp.search(db, "idx", "qs", "qid", top=5, exact=True)
    Xm, Qm = (normalise(X), normalise(Q)) if metric == "angular" else (X, Q)
    dist = ((Qm[:, None, :] - Xm[None, :, :]) ** 2).sum(axis=2)
    dist = dist / 2 if metric == "angular" else np.sqrt(dist)
    order = np.lexsort((np.broadcast_to(ids, dist.shape), dist), axis=1)[:, :5]
    np.testing.assert_array_equal(exact["id"].to_numpy().reshape(25, 5), ids[order])
    np.testing.assert_allclose(
        exact["distance"].to_numpy().reshape(25, 5), np.take_along_axis(dist, order, 1), rtol=1e-9, atol=1e-12
    )
    assert 0.8 < result_recall(got, exact) < 1.0 or len(got) == 125


def test_stored_codes_equal_numpy_on_float_data(engine_db):
    """Embedding-like floats: the stored lists and code words equal NumPy's bit for bit (the rotation
    is the same IEEE additions in the same order), ``nx`` and ``g`` to 1e-12 (sums of squares in
    another order), and a search gives the oracle's candidates and ranks."""
    db = engine_db
    both = embedding_like(620, 2, d=24)
    X, Q = both[:600], both[600:]
    db.write_dataframe("emb", frame(X))
    db.write_dataframe("eq", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "emb", "id", "eidx", lists=12, bits=128)
    rows = db.query_df("SELECT * FROM eidx ORDER BY id")
    lists = load_lists(db, idx)
    codes = reference_codes(X, lists, idx.signs, rotate(lists.leaves, idx.signs))
    np.testing.assert_array_equal(rows["list"].to_numpy(dtype=np.int64), codes.lists)
    np.testing.assert_array_equal(rows[["w0", "w1"]].to_numpy(dtype=np.int64), codes.words)
    np.testing.assert_array_equal(rows["ones"].to_numpy(dtype=np.int64), codes.ones)
    np.testing.assert_allclose(rows["nx"].to_numpy(dtype=np.float64), codes.nx, rtol=1e-12)
    np.testing.assert_allclose(rows["g"].to_numpy(dtype=np.float64), codes.g, rtol=1e-12)
    assert (codes.words < 0).any() and (codes.words > 0).any()  # the sign bit is exercised
    got = sqlrp.search(db, "eidx", "eq", "qid", top=10, candidates=40, probes=4)
    same_ranks(got, replay(db, "eidx", X, np.arange(600), Q, np.arange(20), 10, 40, 4))


def test_array_layout(engine_db):
    db = engine_db
    both = clustered(210, 8)
    X, Q = both[:200], both[200:]
    db.write_dataframe("arr", array_frame(X))
    db.write_dataframe("qarr", array_frame(Q).rename(columns={"id": "qid"}))
    sqlrp.build_index(db, "arr", "id", "aidx", lists=8, bits=64, layout="array", array_column="x")
    got = sqlrp.search(db, "aidx", "qarr", "qid", top=3, candidates=20, probes=3)
    same_ranks(got, replay(db, "aidx", X, np.arange(200), Q, np.arange(10), 3, 20, 3))


# ----------------------------------------------------------------------------------------------
# staleness, refresh, search into a table


def test_a_changed_table_warns_and_a_refresh_matches_a_build(engine_db):
    """Rows deleted, changed and added (the table rewritten): the staleness check warns (a strict
    search refuses); a refresh gives the
    codes NumPy computes on the index's centroids for the new rows, the warning stops, and the search
    matches the oracle again."""
    db = engine_db
    both = clustered(330, 22)
    X, Q = both[:300], both[300:]
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "pts", "id", "idx", lists=8, bits=64)
    keep = np.ones(300, dtype=bool)
    keep[::10] = False  # 30 rows deleted
    X2 = X.copy()
    X2[1::10] += 1  # 30 rows changed
    new = clustered(20, 23)
    X3 = np.concatenate([X2[keep], new])
    ids3 = np.concatenate([np.flatnonzero(keep), np.arange(1000, 1020)])
    db.write_dataframe("pts", frame(X3, ids=ids3), replace=True)
    with pytest.warns(UserWarning, match="changed since index 'idx'.*incremental=True"):  # what search checks first
        assert not check_fresh(db, idx)
    with pytest.raises(StaleIndex):
        sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=20, probes=2, strict=True)  # refused before the search
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)
    assert not _staging_left(db)
    rows = db.query_df("SELECT * FROM idx ORDER BY id")
    order = np.argsort(ids3)
    lists = load_lists(db, idx)
    codes = reference_codes(X3[order], lists, idx.signs, rotate(lists.leaves, idx.signs))
    np.testing.assert_array_equal(rows["id"].to_numpy(dtype=np.int64), ids3[order])
    np.testing.assert_array_equal(rows["list"].to_numpy(dtype=np.int64), codes.lists)
    np.testing.assert_array_equal(rows[["w0"]].to_numpy(dtype=np.int64), codes.words)
    np.testing.assert_array_equal(rows["nx"].to_numpy(dtype=np.float64), codes.nx)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fresh again: no warning
        got = sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=20, probes=2)
        assert check_fresh(db, sqlrp.load_index(db, "idx"))
    same_ranks(got, replay(db, "idx", X3, ids3, Q, np.arange(30), 3, 20, 2))
    sqlrp.build_index(db, "pts", "id", "idx", incremental=True)  # twice: nothing changes
    again = db.query_df("SELECT * FROM idx ORDER BY id")
    pd.testing.assert_frame_equal(again, rows)


def test_search_into_a_table(engine_db):
    db = engine_db
    db.write_dataframe("pts", frame(clustered(200, 30)))
    db.write_dataframe("qs", frame(clustered(6, 31), "qid"))
    sqlrp.build_index(db, "pts", "id", "idx", lists=6, bits=64)
    direct = sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=20, probes=2)
    sqlrp.search(db, "idx", "qs", "qid", top=3, candidates=20, probes=2, into="hits")
    stored = db.query_df("SELECT * FROM hits ORDER BY query_id, rank")
    np.testing.assert_array_equal(
        stored[["query_id", "id", "rank"]].to_numpy(dtype=np.int64),
        direct[["query_id", "id", "rank"]].to_numpy(dtype=np.int64),
    )
    with pytest.raises(sqlrp.core.errors.ProjectionExists, match="already exists"):
        sqlrp.search(db, "idx", "qs", "qid", into="hits")
    sqlrp.search(db, "idx", "qs", "qid", top=1, candidates=20, probes=2, into="hits", replace=True)
    assert db.fetchall("SELECT count(*) FROM hits")[0][0] == 6
    assert not _staging_left(db)


# ----------------------------------------------------------------------------------------------
# no half-written index: failures injected on the real engine


def failing(db, pattern: str):  # noqa: ANN001, ANN201
    """A backend on ``db``'s own connection whose statements matching ``pattern`` raise before they
    run (the engine is real; only the failure is placed)."""
    fail = re.compile(pattern, re.IGNORECASE | re.DOTALL)
    base = type(db)

    class Failing(base):  # type: ignore[misc, valid-type]
        def execute(self, sql, params=None):  # noqa: ANN001, ANN202
            if fail.search(sql):
                raise RuntimeError(f"injected failure before: {sql[:80]}")
            return base.execute(self, sql, params)

    clone = object.__new__(Failing)
    clone.__dict__.update(db.__dict__)
    clone.owns_connection = False
    return clone


def test_a_failed_rebuild_or_refresh_leaves_the_old_index(engine_db):
    db = engine_db
    X, Q = clustered(200, 40), clustered(8, 41)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(Q, "qid"))
    sqlrp.build_index(db, "pts", "id", "idx", lists=6, bits=64)
    before = db.query_df("SELECT * FROM idx ORDER BY id")
    tables = _tables(db)
    # the rows table of the new build fails: the old index is untouched and still answers
    with pytest.raises(RuntimeError, match="injected"):
        staging = r'^CREATE TABLE ["`]?_sqlrp_ix_\d+_[0-9a-f]{6}_[0-9a-f]{12}["`]? '  # scratch_name: pid, host
        sqlrp.build_index(failing(db, staging), "pts", "id", "idx", lists=5, bits=64, replace=True)
    assert _tables(db) == tables and not _staging_left(db)
    pd.testing.assert_frame_equal(db.query_df("SELECT * FROM idx ORDER BY id"), before)
    assert sqlrp.load_index(db, "idx").lists == 6
    # a refresh whose staging table fails: the index rows are as they were
    db.write_dataframe("pts", frame(np.concatenate([X, clustered(5, 42)])), replace=True)
    with pytest.raises(RuntimeError, match="injected"):
        sqlrp.build_index(failing(db, r"^CREATE TABLE \S*_sqlrp_new_"), "pts", "id", "idx", incremental=True)
    pd.testing.assert_frame_equal(db.query_df("SELECT * FROM idx ORDER BY id"), before)
    assert not _staging_left(db)
    # the swap fails after the old index was unregistered: no index at all, nothing half-built left
    with pytest.raises(RuntimeError, match="injected"):
        sqlrp.build_index(failing(db, r"RENAME.*__lists"), "pts", "id", "idx", lists=5, bits=64, replace=True)
    with pytest.raises(IndexNotFound):
        sqlrp.search(db, "idx", "qs", "qid", top=3)
    assert not _staging_left(db) and not {"idx", "idx__lists", "idx__tops"} & _tables(db)
    sqlrp.build_index(db, "pts", "id", "idx", lists=5, bits=64)  # the name is free for a new build
    assert sqlrp.list_indexes(db)["name"].tolist() == ["idx"]


# ----------------------------------------------------------------------------------------------
# refusals


def test_sqlite_refuses_with_the_engine_name(tmp_path):
    db = sqlrp.connect(f"sqlite:///{tmp_path}/s.sqlite")
    db.write_dataframe("pts", frame(clustered(20, 15)))
    db.write_dataframe("qs", frame(clustered(3, 16), "qid"))
    with pytest.raises(EngineLimit, match="^sqlite: .*bit count"):
        sqlrp.build_index(db, "pts", "id", "idx")
    with pytest.raises(EngineLimit, match="^sqlite: .*bit count"):
        sqlrp.search(db, "idx", "qs", "qid")
    assert sqlrp.list_indexes(db).empty and not db.table_exists("idx")
    db.close()


@pytest.mark.parametrize("name", ["oracle", "sqlite", "snowflake", "bigquery", "tsql", "mysql", "trino"])
def test_engines_without_a_known_bit_count_refuse(name):
    """The search's code arithmetic is refused, naming the engine, wherever sqlrp knows no bit count."""
    from sqlrp.compiler import col

    dialect = get_dialect(name)  # oracle: any sqlglot dialect sqlrp has no file for
    with pytest.raises(EngineLimit, match=f"^{dialect.name}: .*bit count"):
        dialect.popcount(col("w"))


def test_the_engines_that_search_count_all_64_bits(engine_db):
    """The bit count of a BIGINT counts its 64 bits, two's complement (the sign bit is a code bit),
    and the row hash sums without overflow: measured on the engine, as the search spells them."""
    from sqlglot import exp

    from sqlrp.compiler import col

    dialect = get_dialect(engine_db.dialect)
    big = exp.DataType.build("BIGINT")
    words = [exp.Cast(this=exp.Literal.number(v), to=big) for v in ("-1", "5")]
    words.append(
        exp.Cast(this=exp.Sub(this=exp.Literal.number(-(2**63 - 1)), expression=exp.Literal.number(1)), to=big)
    )
    counts = [dialect.popcount(w) for w in words]
    xor = dialect.popcount(exp.BitwiseXor(this=words[0].copy(), expression=words[1].copy()))
    assert engine_db.fetchall(dialect.render(exp.select(*counts, xor)))[0] == (64, 2, 1, 62)
    engine_db.write_dataframe("h", pd.DataFrame({"id": np.arange(5000, dtype=np.int64)}))
    total = exp.select(exp.Sum(this=dialect.row_hash([col("id")]))).from_("h")
    assert int(engine_db.fetchall(dialect.render(total))[0][0]) != 0  # 5,000 64-bit hashes: no overflow error


def test_the_same_index_as_duckdb(engine_db):
    """The same rows, seed and parameters give DuckDB's centroids and lists exactly (issue 33: the
    k-means sample is a slice of a seeded permutation of the id ranks, drawn alike by every engine;
    the old sample -- the smallest engine-specific row hash -- gave centroids up to 2.68 apart)."""
    X = embedding_like(500, 21, d=8)
    ids = np.random.default_rng(2).permutation(500) * 3 + 1
    duck = sqlrp.connect()
    for db in (engine_db, duck):
        db.write_dataframe("same_pts", frame(X, ids=ids))
    built = [
        sqlrp.build_index(db, "same_pts", "id", "same_idx", lists=8, bits=64, sample=200, calibration_queries=0)
        for db in (engine_db, duck)
    ]
    here, there = (load_lists(db, idx) for db, idx in zip((engine_db, duck), built, strict=True))
    np.testing.assert_array_equal(here.tops, there.tops)
    np.testing.assert_array_equal(here.leaves, there.leaves)
    np.testing.assert_array_equal(here.parent, there.parent)
    from sqlglot import exp

    from sqlrp.compiler import col

    query = exp.select(col("id"), col("list")).from_("same_idx").order_by(col("id"))
    lists = [db.query_df(db.sql_dialect.render(query)) for db in (engine_db, duck)]
    np.testing.assert_array_equal(lists[0].to_numpy(dtype=np.int64), lists[1].to_numpy(dtype=np.int64))
    duck.close()


def test_clickhouse_statements_beyond_its_default_limits(chdb_engine):
    """3,000 x 32 rows at 256 bits: the build's statement passes ClickHouse's default max_query_size
    (262,144 bytes; it failed at position 262,142) and max_ast_elements; the session's limits are raised,
    and the search equals the NumPy oracle."""
    from sqlrp.backends.clickhouse import ChdbBackend

    db = ChdbBackend(":memory:")
    database = f"s_{uuid.uuid4().hex[:12]}"
    db.execute(f"CREATE DATABASE {database}")
    db.execute(f"USE {database}")
    try:
        both = embedding_like(3020, 31, d=32)
        X, Q = both[:3000], both[3000:]
        db.write_dataframe("big", frame(X))
        db.write_dataframe("bq", frame(Q, "qid"))
        sqlrp.build_index(db, "big", "id", "bidx", bits=256, lists=20, calibration_queries=0)
        got = sqlrp.search(db, "bidx", "bq", "qid", top=5, candidates=40, probes=4)
        same_ranks(got, replay(db, "bidx", X, np.arange(3000), Q, np.arange(20), 5, 40, 4))
    finally:
        chdb_engine.execute(f"DROP DATABASE IF EXISTS {database}")
        db.close()
