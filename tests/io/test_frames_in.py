"""A DataFrame (pandas, polars) or an Arrow table where a table name goes (issue 35): projected in the
database, equal to the NumPy reference, rows back in the frame's order, nothing left behind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.methods import make_projection, reference


def _frame(n: int = 15, d: int = 6, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(n, d)), columns=[f"f{j}" for j in range(d)])
    df.insert(0, "doc_id", [f"doc-{i}" for i in rng.permutation(n)])  # text ids, not in text order
    df.index = pd.Index(rng.permutation(n) + 1000, name="row")
    return df


@pytest.fixture(params=["duckdb", "sqlite"])
def conn(request, tmp_path):
    db = sqlrp.connect("duckdb://" if request.param == "duckdb" else f"sqlite:///{tmp_path / 'f.db'}")
    yield db
    db.close()


@pytest.mark.parametrize("method,params", [("achlioptas", {"s": 3}), ("p-rp", {"m": 2}), ("gaussian", {})])
def test_a_pandas_frame_is_projected_equal_to_numpy_in_its_own_order(conn, method, params):
    df = _frame()
    proj = make_projection(method, 6, 4, seed=5, **params)
    out = sqlrp.project(conn, df, "doc_id", proj)
    want = reference.transform(proj, df[[f"f{j}" for j in range(6)]].to_numpy())
    assert out["doc_id"].tolist() == df["doc_id"].tolist()
    assert out.index.equals(df.index)
    np.testing.assert_allclose(out[[f"p{j}" for j in range(4)]].to_numpy(), want, rtol=1e-9, atol=1e-12)


def test_a_new_projection_of_a_frame_is_stored_nowhere_and_nothing_is_left(conn):
    df = _frame()
    before = set(conn.table_names())
    out = sqlrp.project(conn, df, "doc_id", k=3, s=3, seed=2)
    want = reference.transform(make_projection("achlioptas", 6, 3, seed=2, s=3), df.iloc[:, 1:].to_numpy())
    np.testing.assert_allclose(out[["p0", "p1", "p2"]].to_numpy(), want, rtol=1e-9, atol=1e-12)
    assert set(conn.table_names()) == before  # no registry, no scratch table
    # asked again with other columns: a new projection, not the first one's d
    again = sqlrp.project(conn, df[["doc_id", "f0", "f1"]], "doc_id", k=2, s=3, seed=2)
    assert again.shape == (15, 3)


def test_a_named_projection_of_a_frame_is_stored(conn):
    sqlrp.project(conn, _frame(), "doc_id", k=3, save_as="mine")
    assert sqlrp.list_projections(conn)["name"].tolist() == ["mine"]


def test_arrow_and_polars_frames_and_their_outputs():
    pa = pytest.importorskip("pyarrow")
    pl = pytest.importorskip("polars")
    df = _frame()
    proj = make_projection("achlioptas", 6, 3, seed=1, s=3)
    want = reference.transform(proj, df.iloc[:, 1:].to_numpy())
    db = sqlrp.connect()
    table = sqlrp.project(db, pa.Table.from_pandas(df, preserve_index=False), "doc_id", proj, output_format="arrow")
    assert table.column("doc_id").to_pylist() == df["doc_id"].tolist()
    np.testing.assert_allclose(np.column_stack([table.column(f"p{j}") for j in range(3)]), want, rtol=1e-9)
    frame = sqlrp.project(db, pl.from_pandas(df), "doc_id", proj, output_format="polars")
    assert frame["doc_id"].to_list() == df["doc_id"].tolist()
    ids, Y = sqlrp.project(db, df, "doc_id", proj, output_format="numpy")
    assert ids.tolist() == df["doc_id"].tolist()
    np.testing.assert_allclose(Y, want, rtol=1e-9)


def test_a_frame_into_a_table_and_in_chunks(conn):
    df = _frame()
    proj = make_projection("achlioptas", 6, 3, seed=1, s=3)
    sqlrp.project(conn, df, "doc_id", proj, into="out")
    got = conn.query_df('SELECT * FROM "out"').set_index("doc_id").loc[df["doc_id"]]
    np.testing.assert_allclose(got.to_numpy(), reference.transform(proj, df.iloc[:, 1:].to_numpy()), rtol=1e-9)
    chunks = list(sqlrp.project(conn, df, "doc_id", proj, chunk_rows=4))
    assert sum(len(c) for c in chunks) == 15
    assert set(conn.table_names()) == {"out"}


def test_ids_of_any_type_come_back_as_given_in_the_frames_order(conn):
    """The rows are keyed in SQL by their position: ids the engine holds as another type (mixed
    objects, dates as text on SQLite) or repeated ids come back as the frame has them, in its order."""
    import datetime as dt

    P = make_projection("achlioptas", 2, 2, seed=1, s=3)
    X = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 1.0]])
    want = reference.transform(P, X)
    for ids in (
        np.array([10, "a7", 3], dtype=object),
        [dt.date(2020, 1, 3), dt.date(2020, 1, 1), dt.date(2020, 1, 2)],
        [5, 5, 1],
    ):
        df = pd.DataFrame({"id": ids, "x": X[:, 0], "y": X[:, 1]}, index=["r0", "r1", "r2"])
        out = sqlrp.project(conn, df, "id", P)
        assert list(out.index) == ["r0", "r1", "r2"] and list(out["id"]) == list(df["id"])
        np.testing.assert_allclose(out[["p0", "p1"]].to_numpy(), want, rtol=1e-12)


def test_pooled_and_long_frames_come_back_in_key_order(conn):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(9, 4))
    df = pd.DataFrame(X, columns=list("abcd"))
    df.insert(0, "id", [15, 2, 9, 1, 7, 3, 11, 4, 8])
    df["g"] = [3, 1, 3, 2, 1, 3, 2, 1, 2]
    P = make_projection("achlioptas", 4, 3, seed=1, s=3)
    pooled = sqlrp.project(conn, df, "id", P, group_column="g", columns=list("abcd"))
    assert pooled["g"].tolist() == [1, 2, 3]
    want = np.stack([reference.transform(P, X[df["g"].to_numpy() == g]).sum(axis=0) for g in (1, 2, 3)])
    np.testing.assert_allclose(pooled[["p0", "p1", "p2"]].to_numpy(), want, rtol=1e-9)
    long = pd.DataFrame([(i, f, X[i, f]) for i in range(9) for f in range(4)], columns=["id", "feature", "value"])
    out = sqlrp.project(conn, long, "id", P, layout="long")
    np.testing.assert_allclose(out.sort_values("id")[["p0", "p1", "p2"]].to_numpy(), reference.transform(P, X))


def test_frames_that_cannot_be_read_are_refused(conn):
    df = _frame()
    multi = df.set_axis(pd.MultiIndex.from_product([["a"], list(df.columns)]), axis=1)
    for bad in (multi, df.set_axis(range(7), axis=1)):
        with pytest.raises(InputError, match="column names, and the id column's, must be strings"):
            sqlrp.project(conn, bad, "doc_id", k=2)
    with pytest.raises(InputError, match="names a column twice"):
        sqlrp.project(conn, df.set_axis(["doc_id", "f0", "f0", "f2", "f3", "f4", "f5"], axis=1), "doc_id", k=2)
    with pytest.raises(InputError, match="no id column 'nope'"):
        sqlrp.project(conn, df, "nope", k=2)
    with pytest.raises(InvalidParameter, match="view of a DataFrame"):
        sqlrp.project(conn, df, "doc_id", k=2, into="v", view=True)
    bad = df.copy()
    bad.iloc[3, 2] = np.nan
    with pytest.raises(InputError, match="NULL or NaN"):
        sqlrp.project(conn, bad, "doc_id", k=2)
    assert conn.table_names() == []


def test_an_exploratory_projection_of_a_table_stores_nothing(conn):
    """Rows handed back to Python store no projection; the same call into a table stores it."""
    df = _frame()
    df["label"] = np.arange(15) % 3
    conn.write_dataframe("t", df)
    sqlrp.project(conn, "t", "doc_id", k=3)
    assert set(conn.table_names()) == {"t"}  # not even the registry
    sqlrp.project(conn, "t", "doc_id", k=3, columns=[f"f{j}" for j in range(6)])  # other columns: no clash
    sqlrp.project(conn, "t", "doc_id", k=3, s=3, into="out")
    assert sqlrp.list_projections(conn)["name"].tolist() == ["t_achlioptas_k3_seed0"]


def test_an_integer_column_beside_floats_is_named_when_read_as_a_feature(conn):
    df = _frame()
    df["label"] = np.arange(15) % 3
    conn.write_dataframe("t", df)
    with pytest.warns(UserWarning, match=r"integer column 'label' read as features beside floating-point") as seen:
        sqlrp.project(conn, "t", "doc_id", k=3)
    assert seen[0].filename == __file__  # points at the caller, not inside sqlrp
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sqlrp.project(conn, "t", "doc_id", k=3, columns=[f"f{j}" for j in range(6)])  # named: no warning
        conn.write_dataframe("counts", pd.DataFrame({"doc_id": range(5), "a": range(5), "b": range(5)}))
        sqlrp.project(conn, "counts", "doc_id", k=2)  # integers only (counts, pixels): no warning


def test_a_top_up_never_converts_ids_to_the_output_tables_type(conn):
    """Incremental projection inserts ids as the output table's key column holds them: DOUBLE ids into
    a BIGINT column would be rounded (1.5 and 2.5 both written as 2), so another type is refused."""
    conn.write_dataframe("t", pd.DataFrame({"id": [1, 2, 3], "a": [1.0, 2, 3], "b": [0.0, 1, 0]}))
    sqlrp.project(conn, "t", "id", k=2, s=3, into="out", save_as="rp")
    conn.write_dataframe("t2", pd.DataFrame({"id": [1.5, 2.5, 3.5], "a": [1.0, 2, 3], "b": [0.0, 1, 0]}))
    with pytest.raises(InputError, match="holds 'id' as .*, the input as .*: a top-up would convert the ids"):
        sqlrp.project(conn, "t2", "id", "rp", into="out", incremental=True)
    assert sorted(conn.query_df('SELECT id FROM "out"')["id"]) == [1, 2, 3]


def test_frames_in_the_other_functions_that_read_a_table(conn):
    """search, tune and evaluate read a frame for the call; what keeps a table's name (a plan, an
    index) says how to write the frame first; what is no table at all is named."""
    df = _frame(n=60)
    conn.write_dataframe("t", df)
    sqlrp.build_index(conn, "t", "doc_id", name="ix") if conn.dialect == "duckdb" else None
    before = set(conn.table_names())
    if conn.dialect == "duckdb":
        hits = sqlrp.search(conn, "ix", df.iloc[:5], "doc_id", top=3, candidates=60, probes=conn and 100 and 1)
        assert set(hits["query_id"]) == set(df["doc_id"].iloc[:5])
    tuned = sqlrp.tune(conn, df, "doc_id", sample=30, k=3, iterations=50, name="dt")
    assert tuned.name == "dt" or sqlrp.load_projection(conn, "dt").k == 3
    with pytest.raises(InvalidParameter, match="name the tuned projection"):
        sqlrp.tune(conn, df, "doc_id", sample=30, k=3, iterations=50)
    report = sqlrp.evaluate(conn, df, "doc_id", "dt", sample=40, queries=10, in_sql=False)
    assert report is not None
    for call in (lambda: sqlrp.plan(conn, df, "doc_id", k=2), lambda: sqlrp.build_index(conn, df, "doc_id", name="i2")):
        with pytest.raises(InputError, match="written first"):
            call()
    with pytest.raises(InputError, match="not a ndarray"):
        sqlrp.project(conn, df.to_numpy(), "doc_id", k=2)
    assert set(conn.table_names()) - before <= {"sqlrp_" + n for n in ("projection", "linear_entry", "linear_vector",
                                                                          "combiner_term", "combiner_factor",
                                                                          "pairs_entry", "index", "schema_version")}


def test_sqlite_draws_the_seeded_sample_duckdb_draws(tmp_path):
    """tune and evaluate sample ids by md5('<seed>:' || id): SQLite has no md5 of its own, so its
    backend gives it one, lower-case hex as DuckDB's -- the same rows on both."""
    from sqlrp.compiler import Source
    from sqlrp.evaluation.sql import sample_ids

    df = _frame(n=80)
    duck, lite = sqlrp.connect(), sqlrp.connect(f"sqlite:///{tmp_path / 's.db'}")
    for db in (duck, lite):
        db.write_dataframe("t", df)
    source = Source("t", "doc_id", "wide", tuple(f"f{j}" for j in range(6)))
    assert sample_ids(duck, source, 20, seed=3) == sample_ids(lite, source, 20, seed=3)
    assert sqlrp.tune(lite, "t", "doc_id", sample=30, k=3, iterations=20, name="dt").k == 3


def test_float32_columns_keep_their_value_when_written_to_postgres(pg):
    """A float32 column is written to PostgreSQL as the double it widens to: pandas' own text of a
    float32 (-0.0062582386) is another double than the float32's (-0.006258238572627306)."""
    values = np.array([-0.006258238572627306, 1 / 3, 3e-39], dtype=np.float32)
    pg.write_dataframe("f32", pd.DataFrame({"id": [0, 1, 2], "x": values}))
    got = [r[0] for r in pg.fetchall('SELECT x FROM "f32" ORDER BY id')]
    assert got == values.astype(np.float64).tolist()


def test_a_frames_bad_rows_are_named_by_its_own_ids(conn):
    df = pd.DataFrame({"doc": ["x", "y", "z"], "a": [1.0, np.nan, 2.0], "b": [1.0, 2.0, 3.0]})
    with pytest.raises(InputError, match=r"^the frame has NULL or NaN .*\(rows with id 'y'\)"):
        sqlrp.project(conn, df, "doc", k=2)


def test_a_frames_warnings_speak_of_the_frame_at_the_callers_line(conn):
    """sqlrp's warnings about a frame name "the frame", not the scratch table it was for the call,
    and point at the caller's line (found by the fuzzer: the integer-label warning named the scratch)."""
    df = pd.DataFrame({"id": [1, 2, 3], "a": [0.5, 1.5, 2.0], "label": [1, 0, 1]})
    with pytest.warns(UserWarning) as caught:
        sqlrp.project(conn, df, "id", k=2, s=1)
    texts = [str(w.message) for w in caught]
    assert any(t.startswith("the frame: integer column 'label'") for t in texts), texts
    assert not any("_sqlrp_frame" in t for t in texts), texts
    assert {w.filename for w in caught} == {__file__}
