"""Every SQL path equals the NumPy reference on the same stored matrix (relative 1e-9)."""

from __future__ import annotations

import numpy as np
import pytest

import sqlrp
from testkit.frames import RTOL, array_frame, assert_parity, long_frame, wide_frame


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 25)) * rng.uniform(0.1, 50, 25)
    X[rng.random(X.shape) < 0.3] = 0.0  # some zeros: the long layout stores non-zeros only
    X[7] = 0.0  # an all-zero row
    return X


@pytest.mark.parametrize("s", [1, 3, "auto"])
@pytest.mark.parametrize("layout", ["wide", "long", "array"])
def test_achlioptas_parity(db, data, layout, s):
    frame = {"wide": wide_frame, "long": long_frame, "array": array_frame}[layout](data)
    db.write_dataframe("t", frame)
    out = sqlrp.project(db, "t", "id", "proj", layout=layout, k=12, s=s, seed=5, d=data.shape[1])
    proj = sqlrp.load_projection(db, "proj")
    if layout == "long":  # ids with no stored non-zero have no row
        assert set(out["id"]) == set(np.unique(frame["id"]))
    else:
        assert list(out["id"]) == list(range(len(data)))
    assert_parity(out, proj, data)


@pytest.mark.parametrize("layout", ["wide", "long", "array"])
def test_gaussian_parity(db, data, layout):
    frame = {"wide": wide_frame, "long": long_frame, "array": array_frame}[layout](data)
    db.write_dataframe("t", frame)
    out = sqlrp.project(db, "t", "id", "g", layout=layout, method="gaussian", k=7, seed=1, d=data.shape[1])
    assert_parity(out, sqlrp.load_projection(db, "g"), data)


def test_array_output_and_materialised_table(db, data):
    db.write_dataframe("t", wide_frame(data))
    sqlrp.project(db, "t", "id", "p", k=9, s=3, into="out_arr", output="array", prefix="vec")
    sqlrp.project(db, "t", "id", "p", into="out_view", view=True)
    proj = sqlrp.load_projection(db, "p")
    arr = db.query_df("SELECT id, vec FROM out_arr ORDER BY id")
    got = np.vstack([np.asarray(v, dtype=float) for v in arr["vec"]])
    want = sqlrp.transform(proj, data)
    assert np.max(np.abs(got - want)) <= RTOL * np.abs(want).max()
    assert_parity(db.query_df("SELECT * FROM out_view ORDER BY id"), proj, data)


def test_stored_matrix_is_the_source_of_truth(db, data):
    """Loading gives back the identical matrix; projecting with a loaded matrix equals the original."""
    db.write_dataframe("t", wide_frame(data))
    original = sqlrp.create_projection(db, "m", "achlioptas", d=25, k=11, s=3, seed=9)
    loaded = sqlrp.load_projection(db, "m")
    assert np.array_equal(original.linear.dense(), loaded.linear.dense())
    assert loaded.scale == original.scale and loaded.d == 25 and loaded.k == 11
    assert_parity(sqlrp.project(db, "t", "id", "m"), original, data)


def test_duckdb_and_postgres_agree(duck, pg, data):
    proj = sqlrp.make_projection("achlioptas", 25, 10, seed=3, s=3)
    outs = []
    for db in (duck, pg):
        db.write_dataframe("t", wide_frame(data))
        outs.append(sqlrp.project(db, "t", "id", proj).drop(columns="id").to_numpy(dtype=float))
    assert np.max(np.abs(outs[0] - outs[1])) <= RTOL * np.abs(outs[0]).max()


def test_integer_and_decimal_columns(db):
    X = np.arange(40).reshape(8, 5)
    db.write_dataframe("ints", wide_frame(X.astype(np.int64)))
    out = sqlrp.project(db, "ints", "id", "i", k=4, s=1, seed=0)
    assert_parity(out, sqlrp.load_projection(db, "i"), X.astype(float))


def test_transformer_matches_sql(db, data):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    db.write_dataframe("t", wide_frame(data))
    sqlrp.create_projection(db, "tr", "achlioptas", d=25, k=6, seed=2)
    model = sqlrp.SQLRandomProjection(projection=sqlrp.load_projection(db, "tr"), prefix="p")
    pipe = make_pipeline(FunctionTransformer(), model)
    Y = pipe.fit_transform(data)
    sql = sqlrp.project(db, "t", "id", "tr")
    assert np.max(np.abs(sql.drop(columns="id").to_numpy() - Y)) <= RTOL * np.abs(Y).max()
    assert list(model.get_feature_names_out()) == list(sql.columns[1:])
