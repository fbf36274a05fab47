"""``project``'s Arrow route (issue 44, :mod:`sqlrp.pipeline.arrow_route`): the linear sums by BLAS on batches
streamed from DuckDB, the rest by the compiled SQL -- against the NumPy reference (relative 1e-9) and the SQL
route (the same columns, types, order and values) for every destination, and the refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sqlrp
from sqlrp.backends.resources import MIB, Budget
from sqlrp.cli import main
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.core.layout import Target
from sqlrp.methods import reference
from sqlrp.methods.rff import WEIGHTS
from sqlrp.pipeline import arrow_route
from sqlrp.pipeline.progress import CommandBar
from testkit.frames import RTOL, array_frame, assert_parity, wide_frame


def _data(n: int = 60, d: int = 12, seed: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * rng.uniform(0.5, 3.0, d)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(float(np.max(np.abs(want))), 1e-300)
    assert got.shape == want.shape
    assert float(np.max(np.abs(got - want))) <= RTOL * scale


def _both(db, table: str, **options) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same projection by both routes (rows back, ordered by id)."""
    sql = sqlrp.project(db, table, "id", route="sql", **options)
    arrow = sqlrp.project(db, table, "id", route="arrow", **options)
    return sql, arrow


@pytest.mark.parametrize("kernel, weights", [*(("rbf", w) for w in WEIGHTS), ("laplacian", "gaussian")])
@pytest.mark.parametrize("layout", ["wide", "array"])
def test_arrow_route_matches_the_reference_and_the_sql_route(duck, layout, kernel, weights):
    X = _data()
    duck.write_dataframe("t", wide_frame(X) if layout == "wide" else array_frame(X))
    options = dict(layout=layout, method="rff", k=24, kernel=kernel, weights=weights, gamma=0.05, seed=3)
    sqlrp.project(duck, "t", "id", "z", **options)  # stored once: both routes read the same matrix
    sql, arrow = _both(duck, "t", projection="z", layout=layout)
    proj = sqlrp.load_projection(duck, "z")
    assert proj.function == "cos"
    assert_parity(arrow, proj, X)
    assert list(arrow.columns) == list(sql.columns) and (arrow.dtypes == sql.dtypes).all()
    np.testing.assert_array_equal(arrow["id"], sql["id"])
    _close(arrow.drop(columns="id").to_numpy(), sql.drop(columns="id").to_numpy())


@pytest.mark.parametrize(
    "options",
    [
        dict(method="gaussian", k=7),
        dict(method="achlioptas", k=9, s=3),
        dict(method="rff", k=10, weights="orthogonal", gamma=0.1, output="array"),
        dict(method="rff", k=10, weights="gaussian", gamma=0.1, dtype="float32"),
        dict(method="rff", k=10, weights="signs", gamma="scale", standardize=True),
        dict(method="p-rp", k=6, m=2),
        dict(method="p-rp", k=6, m=2, modified=True),  # squared features: the reference's sparse product
    ],
)
@pytest.mark.parametrize("dense", [True, False])
def test_other_methods_outputs_and_options(duck, options, dense, monkeypatch):
    """Linear and kernel methods, array and float32 outputs, a standardised input: as the SQL route; the sums
    by one BLAS product with the dense matrix, or (a matrix too large for that) by the reference's product."""
    if not dense:
        monkeypatch.setattr(arrow_route, "DENSE_ENTRIES", 1)
    X = _data(40, 6)
    duck.write_dataframe("t", wide_frame(X))
    sql, arrow = _both(duck, "t", **options, seed=1, store=False)
    assert list(arrow.columns) == list(sql.columns) and (arrow.dtypes == sql.dtypes).all()
    if options.get("output") == "array":
        got, want = np.stack(arrow.iloc[:, 1].to_numpy()), np.stack(sql.iloc[:, 1].to_numpy())
    else:
        got, want = arrow.drop(columns="id").to_numpy(float), sql.drop(columns="id").to_numpy(float)
    if options.get("dtype") == "float32":
        np.testing.assert_array_equal(got, want)  # both rounded once from the same doubles (or 1 ulp apart)
    else:
        _close(got, want)


def test_pooled_groups(duck):
    X = _data(30, 5)
    frame = wide_frame(X).assign(g=np.arange(30) % 4)
    duck.write_dataframe("t", frame)
    options = dict(group_column="g", method="rff", k=6, gamma=0.2, seed=2, store=False)
    sql = sqlrp.project(duck, "t", "id", route="sql", **options)
    arrow = sqlrp.project(duck, "t", "id", route="arrow", **options)
    assert list(arrow.columns) == list(sql.columns) == ["g", *[f"p{j}" for j in range(6)]]
    _close(arrow.drop(columns="g").to_numpy(), sql.drop(columns="g").to_numpy())


def test_a_table_larger_than_one_batch(duck, monkeypatch):
    """Several record batches (each at least 1,024 rows): every row once, in its place."""
    monkeypatch.setattr(arrow_route, "BATCH_BYTES", 1)
    X = _data(3500, 7, seed=9)
    assert arrow_route.batch_rows(7) == 1024 < len(X)
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "z", method="rff", d=7, k=16, gamma=0.3, seed=5)
    arrow = sqlrp.project(duck, "t", "id", "z", route="arrow")
    np.testing.assert_array_equal(arrow["id"], np.arange(3500))
    assert_parity(arrow, proj, X)
    sqlrp.project(duck, "t", "id", "z", route="arrow", into="out")
    table = duck.query_df("SELECT * FROM out ORDER BY id")
    assert_parity(table, proj, X)


def test_files_in_and_out(duck, tmp_path):
    """Parquet in, Parquet and CSV out: the same columns, types and values as the SQL route, the sidecar too,
    and no staging file left."""
    X = _data(80, 9).astype(np.float32)
    src = tmp_path / "in.parquet"
    wide_frame(X).to_parquet(src)
    proj = sqlrp.create_projection(None, None, method="rff", d=9, k=12, gamma=0.1, seed=7)
    for ending in ("parquet", "csv"):
        written = {}
        for route in ("sql", "arrow"):
            out = tmp_path / f"{route}.{ending}"
            files = sqlrp.project(duck, str(src), "id", proj, into=str(out), route=route)
            assert [f.name for f in files] == [out.name, f"{out.name}.sqlrp.json"]
            written[route] = out
        if ending == "parquet":
            sql, arrow = (pq.read_table(written[r]) for r in ("sql", "arrow"))
            # float32 in, float32 out, as the SQL route (the key's nullability aside: DuckDB marks it required
            # where the Parquet input's statistics say it has no NULL, which an Arrow stream does not carry)
            assert [(f.name, f.type) for f in arrow.schema] == [(f.name, f.type) for f in sql.schema]
            assert str(arrow.schema.field("p0").type) == "float"
            np.testing.assert_array_equal(arrow.column("id").to_numpy(), np.arange(80))
            want = reference.transform(proj, X.astype(np.float64))
            for table in (arrow, sql):  # each double rounded once to float32: within one float32 ulp of NumPy
                got = table.to_pandas().drop(columns="id").to_numpy(np.float64)
                np.testing.assert_allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0**-23)
        else:
            assert written["arrow"].read_text().splitlines()[0] == written["sql"].read_text().splitlines()[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            "in.parquet",
            *[f"{r}.{e}{s}" for r in ("sql", "arrow") for e in ("parquet", "csv") for s in ("", ".sqlrp.json")],
        ]
    )


def test_table_out_and_frames(duck):
    """A table (its column types as the SQL route's), a pandas frame in (its ids and index kept), Arrow out."""
    X = _data(25, 4)
    frame = wide_frame(X)
    frame.index = frame.index + 100
    proj = sqlrp.create_projection(None, None, method="rff", d=4, k=5, gamma=0.2, seed=1)
    for route in ("sql", "arrow"):
        sqlrp.project(duck, frame, "id", proj, into=f"out_{route}", route=route)
    types = {r: duck.fetchall(f"SELECT column_name, column_type FROM (DESCRIBE out_{r})") for r in ("sql", "arrow")}
    assert types["arrow"] == types["sql"]
    got = sqlrp.project(duck, frame, "id", proj, route="arrow")
    assert list(got.index) == list(frame.index)
    assert_parity(got, proj, X)
    table = sqlrp.project(duck, frame, "id", proj, route="arrow", output_format="arrow")
    assert table.column_names == ["id", *[f"p{j}" for j in range(5)]]


@pytest.mark.parametrize("strategy", ["auto", "inline"])
def test_nulls_as_the_sql_route(duck, strategy):
    """A NULL feature: refused in the same words (checked), read as 0 (``nulls="zero"``), or unchecked
    (``check=False``) whatever the SQL route's strategy makes of it (DuckDB's dense list_transform: 0; inline:
    NULL outputs where it enters)."""
    X = _data(20, 5)
    frame = wide_frame(X)
    frame.loc[[3, 11], "f2"] = None
    duck.write_dataframe("t", frame)
    proj = sqlrp.create_projection(duck, "z", method="rff", d=5, k=4, gamma=0.1, seed=0)
    errors = {}
    for route in ("sql", "arrow"):
        with pytest.raises(InputError) as caught:
            sqlrp.project(duck, "t", "id", "z", route=route, strategy=strategy)
        errors[route] = str(caught.value)
    assert errors["arrow"] == errors["sql"] and "3" in errors["sql"]
    zeroed = np.where(frame.isna().to_numpy()[:, 1:], 0.0, X)
    sql, arrow = _both(duck, "t", projection="z", nulls="zero", strategy=strategy)
    _close(arrow.drop(columns="id").to_numpy(), reference.transform(proj, zeroed))
    _close(arrow.drop(columns="id").to_numpy(), sql.drop(columns="id").to_numpy())
    sql, arrow = _both(duck, "t", projection="z", check=False, strategy=strategy)
    np.testing.assert_array_equal(arrow.isna().to_numpy(), sql.isna().to_numpy())
    assert arrow.isna().to_numpy().sum() == (2 * 4 if strategy == "inline" else 0)
    keep = ~sql.isna().any(axis=1)
    _close(arrow[keep].drop(columns="id").to_numpy(), sql[keep].drop(columns="id").to_numpy())


@pytest.mark.parametrize("method, strategy", [("achlioptas", "auto"), ("rff", "auto"), ("rff", "inline")])
def test_non_finite_features_as_the_sql_route(duck, method, strategy):
    """Unchecked, an infinite feature gives the outputs the SQL route's strategy gives: where it sums only the
    weights that are not 0, ``inf`` (BLAS alone would make ``0 * inf`` a NaN); DuckDB's dense rows: NaN."""
    X = _data(10, 6)
    X[4, 1] = np.inf
    duck.write_dataframe("t", wide_frame(X))
    sqlrp.create_projection(
        duck, "a", method=method, d=6, k=8, seed=2, **({"s": 3} if method == "achlioptas" else {"gamma": 0.1})
    )
    sql, arrow = _both(duck, "t", projection="a", check=False, strategy=strategy)
    np.testing.assert_array_equal(np.isnan(arrow.to_numpy(float)), np.isnan(sql.to_numpy(float)))
    np.testing.assert_array_equal(np.isinf(arrow.to_numpy(float)), np.isinf(sql.to_numpy(float)))
    keep = np.isfinite(sql.to_numpy(float))
    _close(arrow.to_numpy(float)[keep], sql.to_numpy(float)[keep])
    with pytest.raises(InputError) as caught:
        sqlrp.project(duck, "t", "id", "a", route="arrow")
    with pytest.raises(InputError) as expected:
        sqlrp.project(duck, "t", "id", "a", route="sql")
    assert str(caught.value) == str(expected.value)


def test_overflowing_outputs_are_refused_as_the_sql_route(duck):
    X = np.full((3, 8), 1.7e308)
    duck.write_dataframe("t", wide_frame(X))
    sqlrp.create_projection(duck, "g", method="achlioptas", d=8, k=8, s=1, seed=0)
    errors = {}
    for route in ("sql", "arrow"):
        with pytest.raises(InputError) as caught:
            sqlrp.project(duck, "t", "id", "g", route=route, into=f"o_{route}")
        errors[route] = str(caught.value).replace("o_arrow", "o_sql")
    assert errors["arrow"] == errors["sql"]
    assert not duck.table_exists("o_arrow")


def test_auto_takes_the_arrow_route_for_dense_matrices(duck, pg, monkeypatch):
    monkeypatch.setattr(arrow_route, "ARROW_WORK", 0)  # any work
    X = _data(20, 300)
    duck.write_dataframe("t", wide_frame(X))
    pg.write_dataframe("t", wide_frame(X))

    def route(db, **options) -> str:
        p = sqlrp.plan(db, "t", "id", store=False, k=16, seed=0, **options)
        return arrow_route.choose_route(db, p, Target(), False)

    assert route(duck, method="rff", gamma=0.1) == "arrow"
    assert route(duck, method="gaussian") == "arrow"
    assert route(duck, method="achlioptas", s="sqrt") == "sql"  # 1 in 17 weights: additions in SQL
    assert route(duck, method="achlioptas", s=3) == "sql"  # sparse signs stay SQL unless asked
    assert route(duck, method="rff", gamma=0.1, weights="signs") == "sql"
    assert route(pg, method="rff", gamma=0.1) == "sql"


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(method="rff", k=3, gamma=0.1, layout="long"), "long layout"),
        (dict(method="craftmap", k=3, up_k=8, degree=2), "composition"),
        (dict(method="rff", k=3, gamma=0.1, chunk_rows=5), "chunk_rows"),
        (dict(method="rff", k=3, gamma=0.1, into="v", view=True), "view"),
        (dict(method="rff", k=3, gamma=0.1, into="o", progress=2), "id-range statements"),
    ],
)
def test_arrow_refused_where_it_cannot_run(duck, options, words):
    X = _data(10, 3)
    duck.write_dataframe("t", wide_frame(X))
    if options.get("layout") == "long":
        duck.write_dataframe("t", pd.DataFrame({"id": [0, 0], "feature": [0, 2], "value": [1.0, 2.0]}), replace=True)
    with pytest.raises(InvalidParameter, match="route 'arrow'") as caught:
        sqlrp.project(duck, "t", "id", route="arrow", seed=0, store=False, **options)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert not duck.table_exists("o") and not duck.table_exists("v")


def test_arrow_refused_on_an_engine_out_of_process(pg):
    """Refused before any work: no projection stored, no table written."""
    pg.write_dataframe("t", wide_frame(_data(5, 3)))
    with pytest.raises(InvalidParameter, match="postgres runs outside this process") as caught:
        sqlrp.project(pg, "t", "id", method="rff", k=2, gamma=0.1, route="arrow", into="o")
    assert "\n" not in str(caught.value)
    assert not pg.table_exists("o") and sqlrp.list_projections(pg).empty


def test_route_checked_where_it_enters(duck):
    duck.write_dataframe("t", wide_frame(_data(5, 3)))
    with pytest.raises(InvalidParameter, match="route must be 'auto', 'sql' or 'arrow', got 'blas'"):
        sqlrp.project(duck, "t", "id", method="rff", k=2, route="blas")
    with pytest.raises(InvalidParameter, match="route must be"):
        sqlrp.fit(duck, "t", "id", "pca", k=1, route="blas")


def test_cli_route(tmp_path, capsys):
    src = tmp_path / "in.parquet"
    wide_frame(_data(30, 5)).to_parquet(src)
    base = ["project", "--input", str(src), "--id-column", "id", "--method", "rff", "--k", "4", "--gamma", "0.1"]
    for route in ("sql", "arrow", "auto"):
        assert main([*base, "--route", route, "--into", str(tmp_path / f"{route}.parquet")]) == 0
    tables = [pq.read_table(tmp_path / f"{r}.parquet").to_pandas() for r in ("sql", "arrow", "auto")]
    for other in tables[1:]:
        _close(other.drop(columns="id").to_numpy(), tables[0].drop(columns="id").to_numpy())
    assert main([*base, "--route", "blas"]) == 2
    assert "invalid choice: 'blas'" in capsys.readouterr().err


def test_progress_through_the_arrow_route(duck, tmp_path, monkeypatch):
    """The bar moves as the batches are read (the engine reports no progress through a Python stream)."""
    monkeypatch.setattr(arrow_route, "BATCH_BYTES", 1)
    moved: list[float] = []
    move = CommandBar.move
    monkeypatch.setattr(CommandBar, "move", lambda bar, at: (moved.append(at), move(bar, at))[1])  # the real bar
    X = _data(5000, 4)
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "z", method="rff", d=4, k=3, gamma=0.1, seed=0)
    for into in ("o", str(tmp_path / "o.parquet")):
        moved.clear()
        sqlrp.project(duck, "t", "id", "z", into=into, route="arrow", progress=True)
        within = sorted({round(at) for at in moved if 5 < at < 98})  # between planning and the statement's end
        assert len(within) >= 4 and moved[-1] == 100.0, moved
    assert_parity(duck.query_df("SELECT * FROM o ORDER BY id"), proj, X)


def test_auto_keeps_sql_for_little_work(duck, monkeypatch):
    """A dense matrix on a few rows: the Arrow route's fixed cost would outweigh the SQL it saves."""
    duck.write_dataframe("t", wide_frame(_data(20, 30)))
    p = sqlrp.plan(duck, "t", "id", store=False, k=16, seed=0, method="rff", gamma=0.1)
    assert p.source.rows == 20
    assert arrow_route.choose_route(duck, p, Target(), False) == "sql"  # 20 x 480 multiply-adds
    monkeypatch.setattr(arrow_route, "ARROW_WORK", 20 * 480)
    assert arrow_route.choose_route(duck, p, Target(), False) == "arrow"


def test_auto_keeps_sql_on_a_small_device(duck, monkeypatch):
    """Under a small-device budget the SQL route's scan is fitted to the memory (issue 42): ``auto`` keeps it;
    ``arrow`` asked for still runs."""
    monkeypatch.setattr(arrow_route, "ARROW_WORK", 0)
    duck.write_dataframe("t", wide_frame(_data(20, 30)))
    p = sqlrp.plan(duck, "t", "id", store=False, k=16, seed=0, method="rff", gamma=0.1)
    assert arrow_route.choose_route(duck, p, Target(), False) == "arrow"
    duck.budget = Budget(memory=512 * MIB, cpus=1, engine_memory=256 * MIB, threads=1)
    assert duck.budget.small
    assert arrow_route.choose_route(duck, p, Target(), False) == "sql"
    assert arrow_route.choose_route(duck, p, Target(route="arrow"), False) == "arrow"
