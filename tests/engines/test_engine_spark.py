"""Spark SQL, executed: the cross-engine matrix (``SMALL``), digits parity, the registry, bad input and
``connect()``, on ONE local[2] session for the whole test run (starting Spark takes 10-20 s).

Spark's session catalog takes table names of letters, digits and ``_`` only, so the matrix runs on a
plain table name (the hostile *column* names stay) and the hostile table name itself is checked to be
refused with an error naming the engine.  Under ``CI=true`` a Spark that cannot start fails the run.
"""

from __future__ import annotations

import os
import sys
import urllib.parse
from pathlib import Path

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # before the JVM starts: every Spark socket on loopback

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import MissingExtra
from sqlrp.registry.store import Registry, migration_files
from testkit.engine_cases import CASES, HOSTILE_ID, HOSTILE_TABLE, SMALL, Case, check, data, frame, run_case

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
TABLE = "spark_digits"  # the matrix's input table: a name Spark's catalog can hold
# spark_db, the one local[2] session of the whole run: tests/conftest.py


def _tag(case: Case) -> str:
    return "_" + case.name.replace("-", "_")


# ---- (a) the cross-engine matrix ----

#: run_case's output table is named "out <case>", which Spark's catalog refuses: those cases are
#: refused by name here and run again below with a name Spark can hold
REFUSED_BY_NAME = {c.name for c in SMALL if c.into}


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_matrix(spark_db, case):
    X = data()
    outcome = run_case(spark_db, case, X, table=TABLE, tag=_tag(case))
    assert outcome == ("refused" if case.name in REFUSED_BY_NAME else "ok")


@pytest.mark.parametrize("case", [c for c in SMALL if c.into], ids=lambda c: c.name)
def test_matrix_into_a_name_spark_can_hold(spark_db, case):
    """The materialising cases, into ``out_<case>``: ``CREATE TABLE AS`` on Spark, read back."""
    X = data()
    table, into, name = f"{TABLE}{_tag(case)}_v", f"out{_tag(case)}", f"proj {case.name} valid"
    spark_db.write_dataframe(table, frame(X, case.layout), replace=True)
    options = dict(layout=case.layout, method=case.method, k=case.k, seed=7, d=X.shape[1], strategy=case.strategy)
    if case.layout == "array":
        options["array_column"] = "x"
    assert sqlrp.project(spark_db, table, HOSTILE_ID, name, into=into, **options, **case.options()) is None
    check(spark_db.query_df(f"SELECT * FROM {into}"), sqlrp.load_projection(spark_db, name), X, case)


def test_hostile_table_name_is_refused_naming_spark(spark_db):
    with pytest.raises(sqlrp.InvalidParameter, match=r"^spark: .*letters, digits and _"):
        spark_db.write_dataframe(HOSTILE_TABLE, frame(data(), "wide"), replace=True)
    spark_db.write_dataframe(f"{TABLE}_names", frame(data(), "wide"), replace=True)
    with pytest.raises(sqlrp.SqlrpError, match=r"^spark: .out 1. cannot name a table"):
        sqlrp.project(spark_db, f"{TABLE}_names", HOSTILE_ID, k=3, s=3, seed=1, into="out 1")
    # Spark resolves names ignoring case (spark.sql.caseSensitive=false): the source in upper case is refused
    with pytest.raises(sqlrp.InvalidParameter, match="must not be the input table.*ignores case"):
        sqlrp.project(spark_db, f"{TABLE}_names", HOSTILE_ID, k=3, s=3, seed=1, into=f"{TABLE}_NAMES", replace=True)
    assert spark_db.table_exists(f"{TABLE}_names")


def test_lookup_is_refused_naming_spark(spark_db):
    """Outside ``SMALL``: ``lookup`` mixes 1-based ``ARRAY_POSITION`` with 0-based subscripts."""
    (case,) = [c for c in CASES if c.name == "long-lookup"]
    assert run_case(spark_db, case, data(), table=TABLE, tag=_tag(case)) == "refused"


# ---- (b) digits-sized parity ----


@pytest.fixture(scope="module")
def digits_table(spark_db):
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df.insert(0, "id", np.arange(len(X), dtype=np.int64))
    spark_db.write_dataframe("digits", df, replace=True)
    return X


def _close(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / np.abs(want).max())


def test_digits_parity(spark_db, digits_table):
    """1797 x 64 -> k = 20, s = 3: Spark's result equals sqlrp.transform to 1e-9 relative."""
    X = digits_table
    sqlrp.create_projection(spark_db, "digits20", "achlioptas", d=64, k=20, s=3, seed=5)
    result = sqlrp.project(spark_db, "digits", "id", "digits20")
    assert list(result["id"]) == list(range(len(X)))  # ORDER BY id kept
    want = sqlrp.transform(sqlrp.load_projection(spark_db, "digits20"), X)
    assert _close(result.drop(columns="id").to_numpy(), want) <= 1e-9


def test_digits_into_table_and_chunks(spark_db, digits_table):
    X = digits_table
    want = sqlrp.transform(sqlrp.create_projection(spark_db, "digits8", "achlioptas", d=64, k=8, s=3, seed=6), X)
    sqlrp.project(spark_db, "digits", "id", "digits8", into="digits_rp8")
    stored = spark_db.query_df("SELECT * FROM digits_rp8 ORDER BY id")
    assert _close(stored.drop(columns="id").to_numpy(), want) <= 1e-9
    chunks = list(sqlrp.project(spark_db, "digits", "id", "digits8", chunk_rows=500))
    assert [len(c) for c in chunks] == [500, 500, 500, 297]
    joined = pd.concat(chunks, ignore_index=True)
    assert list(joined["id"]) == list(range(len(X)))
    assert _close(joined.drop(columns="id").to_numpy(), want) <= 1e-9


def test_output_table_is_plain_parquet(spark_db, digits_table):
    """The output is Parquet without compression or dictionaries (``SparkDialect.table_properties``):
    read back from the table's own files, every column chunk is PLAIN-encoded and uncompressed."""
    import pyarrow.parquet as pq

    sqlrp.create_projection(spark_db, "digits_plain", "achlioptas", d=64, k=6, s=3, seed=8, replace=True)
    sqlrp.project(spark_db, "digits", "id", "digits_plain", into="digits_plain_rp", replace=True)
    rows = spark_db.fetchall("DESCRIBE TABLE EXTENDED digits_plain_rp")
    info = {r[0]: r[1] for r in rows}
    assert info["Provider"].lower() == "parquet"
    folder = Path(urllib.parse.urlparse(info["Location"]).path)
    files = sorted(folder.glob("*.parquet"))
    assert files
    chunks = 0
    for file in files:
        meta = pq.ParquetFile(file).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                assert column.compression == "UNCOMPRESSED"
                assert not any("DICTIONARY" in e for e in column.encodings), column.encodings
                chunks += 1
    assert chunks >= 7  # id and six outputs
    want = sqlrp.transform(sqlrp.load_projection(spark_db, "digits_plain"), digits_table)
    got = spark_db.query_df("SELECT * FROM digits_plain_rp ORDER BY id").drop(columns="id").to_numpy()
    assert _close(got, want) <= 1e-9


def test_digits_into_replace_and_views(spark_db, digits_table):
    """``replace=True`` over a table and over a view (``is_view`` from the catalog), and ``view=True``."""
    sqlrp.create_projection(spark_db, "digits4", "achlioptas", d=64, k=4, s=3, seed=7)
    sqlrp.project(spark_db, "digits", "id", "digits4", into="digits_rp4")
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        sqlrp.project(spark_db, "digits", "id", "digits4", into="digits_rp4")
    sqlrp.project(spark_db, "digits", "id", "digits4", into="digits_rp4", replace=True)
    assert spark_db.fetchall("SELECT count(*) FROM digits_rp4")[0][0] == len(digits_table)
    sqlrp.project(spark_db, "digits", "id", "digits4", into="digits_v4", view=True)
    assert spark_db.is_view("digits_v4") and not spark_db.is_view("digits_rp4") and not spark_db.is_view("nope")
    sqlrp.project(spark_db, "digits", "id", "digits4", into="digits_v4", replace=True)  # the view becomes a table
    assert not spark_db.is_view("digits_v4")
    want = sqlrp.transform(sqlrp.load_projection(spark_db, "digits4"), digits_table)
    got = spark_db.query_df("SELECT * FROM digits_v4 ORDER BY id").drop(columns="id").to_numpy()
    assert _close(got, want) <= 1e-9


def test_refused_output_name_leaves_no_staging_table(spark_db):
    """Refused before any work, naming the engine; nothing is left behind."""
    def staging() -> set[str]:
        return {n for n in spark_db.table_names() if n.startswith("_sqlrp_new_")}

    spark_db.write_dataframe(f"{TABLE}_stage", frame(data(), "wide"), replace=True)
    before = staging()  # other tests' refused names may have left some already
    with pytest.raises(sqlrp.SqlrpError, match="^spark: "):
        sqlrp.project(spark_db, f"{TABLE}_stage", HOSTILE_ID, k=3, s=3, seed=1, into="out 2")
    assert staging() == before


# ---- the registry ----


def test_registry_migrates_saves_loads_lists_drops(spark_db):
    reg = Registry(spark_db)  # migrated by the session already, or now
    assert reg.migrate() == []
    assert reg.version() == max(v for v, _, _ in migration_files("spark"))
    versions = spark_db.fetchall("SELECT version, name, applied_at FROM sqlrp_schema_version ORDER BY version")
    assert [v for v, _, _ in versions] == [v for v, _, _ in migration_files("spark")]
    assert all(applied is not None for _, _, applied in versions)  # DEFAULT current_timestamp works

    p = sqlrp.create_projection(spark_db, "reg 'quoted' name", "achlioptas", d=30, k=8, s=3, seed=4)
    sqlrp.create_projection(spark_db, "reg_g", "gaussian", d=5, k=2)
    listing = sqlrp.list_projections(spark_db).set_index("name")
    row = listing.loc["reg 'quoted' name"]
    assert (row["method"], row["d"], row["k"], row["nnz"], row["seed"]) == ("achlioptas", 30, 8, p.linear.nnz, 4)
    assert pd.notna(row["created_at"])
    loaded = sqlrp.load_projection(spark_db, "reg 'quoted' name")
    assert np.array_equal(loaded.linear.dense(), p.linear.dense())
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        sqlrp.create_projection(spark_db, "reg_g", "gaussian", d=5, k=2)
    sqlrp.create_projection(spark_db, "reg_g", "gaussian", d=5, k=3, replace=True)  # DELETE, emulated
    assert sqlrp.load_projection(spark_db, "reg_g").k == 3
    sqlrp.drop_projection(spark_db, "reg_g")
    with pytest.raises(sqlrp.ProjectionNotFound, match="no stored projection named 'reg_g'"):
        sqlrp.load_projection(spark_db, "reg_g")
    for table in ("sqlrp_projection", "sqlrp_linear_entry"):
        column = "name" if table == "sqlrp_projection" else "projection"
        assert spark_db.fetchall(f"SELECT count(*) FROM {table} WHERE {column} = ?", ["reg_g"])[0][0] == 0
    assert sqlrp.load_projection(spark_db, "reg 'quoted' name").k == 8  # the other projection is untouched


def test_a_registry_made_by_earlier_releases_is_upgraded(spark_db):
    """A Spark registry at version 2, made by the hand-written migrations of earlier releases, is
    upgraded by the rendered ones (``ALTER TABLE ... ADD COLUMN`` included) and works."""
    from sqlrp.registry.validate import StoredProjectionChanged
    from testkit.engine_cases import build_by_hand, use_registry

    for table in spark_db.table_names():
        if table.startswith("sqlrp_"):
            spark_db.execute(f"DROP TABLE IF EXISTS {table}")
    build_by_hand(spark_db, 2)
    assert Registry(spark_db, migrate=False).migrate() == [
        "0003_search_index.sql",
        "0004_index_params.sql",
        "0005_projection_digest.sql",
    ]
    use_registry(spark_db)
    spark_db.execute("DELETE FROM sqlrp_index")
    # an edit made outside sqlrp is refused (the digest), then accepted on purpose (its row written again)
    spark_db.execute("DELETE FROM sqlrp_linear_entry WHERE projection = 'pk' AND vector = 0")
    with pytest.raises(StoredProjectionChanged, match="'pk' was changed outside sqlrp"):
        sqlrp.load_projection(spark_db, "pk")
    assert sqlrp.accept_projection(spark_db, "pk").linear.nnz == sqlrp.load_projection(spark_db, "pk").linear.nnz
    assert spark_db.fetchall("SELECT count(*) FROM sqlrp_projection WHERE name = 'pk'") == [(1,)]
    sqlrp.drop_projection(spark_db, "pk")


def test_kernel_projection_round_trips(spark_db):
    """Bias, power and combiner rows (``sqlrp_linear_vector`` defaults included) survive Spark."""
    p = sqlrp.create_projection(spark_db, "reg_pk", "pk-rp", d=6, k=4, degree=2, t=2, seed=3)
    q = sqlrp.load_projection(spark_db, "reg_pk")
    X = data(rows=5, d=6)
    np.testing.assert_allclose(sqlrp.transform(q, X), sqlrp.transform(p, X), rtol=1e-12)


def test_delete_keeps_other_rows_and_nulls(spark_db):
    """``DELETE`` on a parquet table (which Spark refuses) is emulated: matching rows go, others --
    including rows where the condition is NULL -- stay."""
    spark_db.write_dataframe("del_t", pd.DataFrame({"a": ["x", "y", None, "x"], "b": [1, 2, 3, 4]}), replace=True)
    spark_db.execute("DELETE FROM del_t WHERE a = ?", ["x"])
    assert sorted(spark_db.fetchall("SELECT b FROM del_t")) == [(2,), (3,)]
    spark_db.execute("DELETE FROM del_t WHERE a = ?", ["nothing"])  # no match: nothing rewritten
    spark_db.execute("DELETE FROM del_t")
    assert spark_db.fetchall("SELECT count(*) FROM del_t") == [(0,)]
    assert "del_t" in spark_db.table_names() and not any(n.startswith("_sqlrp_keep") for n in spark_db.table_names())


# ---- the backend itself ----


def test_columns_types_and_frames(spark_db):
    df = pd.DataFrame(
        {"id": np.arange(3, dtype=np.int64), "v": [0.5, 1.5, np.nan], "x": [np.ones(2), np.zeros(2), [1.0, 2.0]]}
    )
    df["s"] = ["a", None, "c"]
    spark_db.write_dataframe("frame_t", df)
    info = {c.name: c for c in spark_db.columns("frame_t")}
    assert (info["id"].type, info["v"].type, info["s"].type) == ("bigint", "double", "string")
    assert info["id"].numeric and info["v"].numeric and not info["s"].numeric
    assert info["x"].type == "array<double>" and info["x"].element_type == "double" and info["x"].numeric_array
    with pytest.raises(Exception, match="already exists"):
        spark_db.write_dataframe("frame_t", df)
    spark_db.write_dataframe("frame_t", df.iloc[:2], replace=True)
    spark_db.insert_frame("frame_t", pd.DataFrame({"s": ["z"], "id": [9]}))  # by name; the rest NULL
    rows = spark_db.fetchall("SELECT id, v, s FROM frame_t ORDER BY id")
    assert rows == [(0, 0.5, "a"), (1, 1.5, None), (9, None, "z")]
    out = spark_db.query_df("SELECT id, x FROM frame_t WHERE id < 2 ORDER BY id")
    assert list(out.columns) == ["id", "x"] and list(out["x"][1]) == [0.0, 0.0]
    assert spark_db.fetchall("SELECT ? + ?, ?", [np.int64(2), 0.5, None]) == [(2.5, None)]
    spark_db.execute("SELECT count(*) FROM frame_t")  # a query through execute runs and returns nothing


# ---- (c) bad input ----


def test_unknown_table_and_column(spark_db):
    spark_db.write_dataframe("bad_t", pd.DataFrame({"id": [1, 2], "a": [1.0, 2.0], "s": ["u", "v"]}), replace=True)
    with pytest.raises(sqlrp.InputError, match=r"no table named 'no_such_table'.*Tables here: .*bad_t"):
        sqlrp.project(spark_db, "no_such_table", "id", k=4)
    with pytest.raises(sqlrp.InputError, match="no table named 'nope.t'"):
        spark_db.columns("t", schema="nope")
    with pytest.raises(sqlrp.InputError):
        sqlrp.project(spark_db, "bad_t", "id", k=2, columns=["a", "missing"])
    with pytest.raises(sqlrp.InputError):
        sqlrp.project(spark_db, "bad_t", "id", k=2, columns=["a", "s"])


def test_null_features_are_refused(spark_db):
    spark_db.write_dataframe("null_t", pd.DataFrame({"id": [1, 2], "a": [1.0, None], "b": [1.0, 2.0]}), replace=True)
    with pytest.raises(sqlrp.InputError, match="NULL"):
        sqlrp.project(spark_db, "null_t", "id", k=2, s=1, seed=1)
    got = sqlrp.project(spark_db, "null_t", "id", k=2, s=1, seed=1, nulls="zero")
    assert len(got) == 2


# ---- (d) connect() ----


def test_connect_session_and_local_master(spark_db):
    from sqlrp.backends.spark import SparkBackend

    spark_db.write_dataframe("connect_t", pd.DataFrame({"id": np.arange(5)}), replace=True)
    wrapped = sqlrp.connect(spark_db.spark)
    assert isinstance(wrapped, SparkBackend) and not wrapped.owns_connection and wrapped.dialect == "spark"
    assert wrapped.fetchall("SELECT count(*) FROM connect_t")[0][0] == 5
    wrapped.close()  # the caller's session: left running
    again = sqlrp.connect("local[2]")  # the running context of that master is used, not stopped
    assert isinstance(again, SparkBackend) and not again.owns_connection
    assert again.fetchall("SELECT 1") == [(1,)]
    again.close()
    with pytest.raises(sqlrp.InvalidParameter, match=r"spark: .*one per process"):
        sqlrp.connect("local[3]")
    assert spark_db.fetchall("SELECT 1") == [(1,)]


def test_missing_pyspark_names_the_extra(monkeypatch):
    from sqlrp.backends.spark import SparkBackend

    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(MissingExtra, match=r"pip install 'sqlrp\[spark\]'"):
        SparkBackend.from_master("local[2]")


def test_a_frame_out_of_index_order_is_written_row_by_row(spark_db):
    """A DataFrame whose index is shuffled (``df.sample``) keeps each row's values together: Spark's
    frame is built by position, never realigned on the index one column at a time."""
    rng = np.random.default_rng(3)
    X = np.round(rng.uniform(-8, 8, (12, 3)), 2)
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    frame.insert(0, "id", np.arange(12, dtype=np.int64))
    frame["even"] = frame["id"] % 2 == 0
    frame["label"] = frame["id"].astype(str)
    spark_db.write_dataframe("shuffled_rows", frame.sample(frac=1.0, random_state=1), replace=True)
    back = spark_db.query_df("SELECT * FROM shuffled_rows ORDER BY id")
    np.testing.assert_array_equal(back[["f0", "f1", "f2"]].to_numpy(dtype=float), X)
    assert back["even"].tolist() == frame["even"].tolist() and back["label"].tolist() == frame["label"].tolist()
