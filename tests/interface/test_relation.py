"""``sqlrp.projected``: a lazy projection whose destinations are methods (DuckDB's relation).  Every
destination gives the NumPy reference's values on the same matrix; nothing runs, and nothing is
stored, before a destination is called."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.methods.reference import transform
from testkit.frames import wide_frame


@pytest.fixture
def table(duck):
    X = np.random.default_rng(5).normal(size=(40, 7))
    duck.write_dataframe("t", wide_frame(X))
    return duck, X


def test_every_destination_gives_the_reference_values(table, tmp_path):
    db, X = table
    proj = sqlrp.make_projection("achlioptas", 7, 4, seed=2, s=3)
    want = transform(proj, X)
    rel = sqlrp.projected(db, "t", "id", proj)
    cols = [f"p{i}" for i in range(4)]
    np.testing.assert_allclose(rel.df()[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    ids, Y = rel.numpy()
    assert list(ids) == list(range(40))
    np.testing.assert_allclose(Y, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.column_stack([rel.arrow()[c].to_numpy() for c in cols]), want, rtol=1e-9, atol=1e-12)
    chunks = list(rel.chunks(15))
    assert [len(c) for c in chunks] == [15, 15, 10]
    np.testing.assert_allclose(pd.concat(chunks)[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    rel.to_table("t_rp")
    got = db.query_df('SELECT * FROM "t_rp" ORDER BY "id"')
    np.testing.assert_allclose(got[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    rel.to_view("t_rp_view")
    got = db.query_df('SELECT * FROM "t_rp_view" ORDER BY "id"')
    np.testing.assert_allclose(got[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    written = rel.to_file(tmp_path / "rp.parquet")
    assert any(str(f).endswith("rp.parquet") for f in written)
    got = pd.read_parquet(tmp_path / "rp.parquet").sort_values("id")
    np.testing.assert_allclose(got[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    got = db.query_df(rel.sql())  # the SQL for the database's own engine runs and gives the same values
    np.testing.assert_allclose(got.sort_values("id")[cols].to_numpy(), want, rtol=1e-9, atol=1e-12)
    assert "SELECT" in rel.sql("spark").upper()


def test_a_new_projection_is_drawn_alike_by_every_destination_and_stored_only_where_project_stores_it(table):
    db, X = table
    rel = sqlrp.projected(db, "t", "id", k=3, seed=4, s=1)
    first, second = rel.df(), rel.df()
    pd.testing.assert_frame_equal(first, second)
    assert "CREATE" not in rel.sql().upper() and len(sqlrp.list_projections(db)) == 0  # exploratory: nothing stored
    rel.to_table("t3")
    assert len(sqlrp.list_projections(db)) == 1  # as project(into=...) stores it
    stored = sqlrp.load_projection(db, sqlrp.list_projections(db)["name"][0])
    np.testing.assert_allclose(first[["p0", "p1", "p2"]].to_numpy(), transform(stored, X), rtol=1e-9, atol=1e-12)


def test_nothing_runs_before_a_destination_and_the_destinations_are_the_methods(duck):
    rel = sqlrp.projected(duck, "no_such_table", "id", k=2)  # lazy: no error yet
    with pytest.raises(sqlrp.InputError, match="no_such_table"):
        rel.df()
    with pytest.raises(sqlrp.InvalidParameter, match="takes no chunk_rows, into"):
        sqlrp.projected(duck, "t", "id", k=2, into="x", chunk_rows=3)
    with pytest.raises(sqlrp.InvalidParameter, match="to_file writes .parquet"):
        rel.to_file("out.xlsx")
    frame = wide_frame(np.ones((3, 2)))
    with pytest.raises(sqlrp.InvalidParameter, match="DataFrame has no name"):
        sqlrp.projected(duck, frame, "id", k=2).sql()
    ids, Y = sqlrp.projected(duck, frame, "id", sqlrp.make_projection("achlioptas", 2, 2, seed=0, s=1)).numpy()
    assert list(ids) == [0, 1, 2] and Y.shape == (3, 2)
