"""The portable core (:mod:`sqlrp.dialects.portable`): for an engine sqlrp does not execute, only
constructs whose meaning does not vary between engines are rendered, the rest is refused before
rendering, naming the construct and the way out.  Every method's wide layout then runs exactly on a
held-out engine (Daft, ``daft.sql``: 0-based lists, no VALUES; Polars' SQL) and on DuckDB and SQLite,
as does ``--dialect postgres`` (its fence is ``LIMIT ALL``); the self-check catches Daft's array base."""

from __future__ import annotations

import dataclasses
import os
import re
import sqlite3

import duckdb
import numpy as np
import pandas as pd
import pytest

from sqlrp.compiler import Output, Source, compile_sql
from sqlrp.compiler.selfcheck import check_sql
from sqlrp.core.errors import EngineLimit
from sqlrp.core.layout import Formulation
from sqlrp.dialects.portable import plain_decimal
from sqlrp.methods import make_projection, reference

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
COLUMNS = ("a", "b", "c", "d", "e")
WIDE = Source("t", "id", "wide", COLUMNS)
METHODS = [
    ("achlioptas", {"s": 1}),
    ("achlioptas", {"s": 3}),
    ("gaussian", {}),
    ("p-rp", {"m": 4}),
    ("pk-rp", {"degree": 2}),
    ("maclaurin", {"degree": 2}),
    ("cbp", {}),
    ("craftmap", {}),
]
#: dialects sqlrp does not execute, as a user would pick them
PORTABLE = ("trino", "redshift", "snowflake", "bigquery", "tsql", "mysql", "hive", "oracle")
#: an exponent literal, a fence, a subscript (not T-SQL's [quoted] names), UNNEST, VALUES, IF/IFF
VARYING = re.compile(r"\d[eE][-+]?\d|OFFSET|[\w\"`\]]\[|UNNEST|VALUES|\bIFF?\(", re.IGNORECASE)


def data() -> np.ndarray:
    return np.random.default_rng(4).standard_normal((25, 5))


def test_plain_decimals_are_exact():
    assert plain_decimal("1.6e-16") == "0.00000000000000016"
    assert plain_decimal("-2.5E+3") == "-2500"
    assert plain_decimal("0.27386127875258304") == "0.27386127875258304"
    with pytest.raises(EngineLimit, match="more than 38 digits"):
        plain_decimal("1e-40")


@pytest.mark.parametrize("dialect", PORTABLE)
def test_only_constructs_whose_meaning_does_not_vary(dialect):
    for method, params in METHODS:
        projection = make_projection(method, 5, 3, seed=1, **params)
        for strategy in ("auto", "pairs", "mailman"):
            try:
                sql = compile_sql(projection, WIDE, dialect, strategy=strategy)
            except Exception as exc:  # noqa: BLE001 - pairs/mailman need a sign matrix
                assert strategy != "auto", exc
                continue
            assert not VARYING.search(sql), (dialect, method, strategy, VARYING.search(sql))
    # a standardised table's tiny mean is a plain decimal, not 1.6e-16
    tiny = dataclasses.replace(WIDE, standardize=((1.6e-16, 0, 0, 0, 2.5e-7), (1, 1, 1, 1, 3e20)))
    sql = compile_sql(make_projection("achlioptas", 5, 3, seed=1, s=3), tiny, dialect)
    assert "0.00000000000000016" in sql and not VARYING.search(sql)


@pytest.mark.parametrize(
    ("source", "output", "strategy", "matrix", "construct", "way_out"),
    [
        (Source("t", "id", "array", array_column="x"), Output(), "auto", "values", "array layout", "layout='wide'"),
        (WIDE, Output("array", "p", "p"), "auto", "values", "array output", "output='wide'"),
        (WIDE, Output(), "join", "values", "cross product", "inline, pairs or mailman strategy (strategy=)"),
        (Source("t", "id", "long"), Output(), "lookup", "m.rp", "lookup", "strategy='join'"),
    ],
)
def test_everything_else_is_refused_naming_the_construct_and_the_way_out(
    source, output, strategy, matrix, construct, way_out
):
    projection = make_projection("achlioptas", 5, 3, seed=1, s=3)
    with pytest.raises(EngineLimit) as err:
        compile_sql(projection, source, "trino", output, strategy=strategy, matrix=matrix)
    message = str(err.value)
    assert message.startswith("trino: ") and construct in message and way_out in message
    assert "(dialect=: duckdb, " in message and "(check=True)" in message
    with pytest.raises(EngineLimit, match="redshift: .*VALUES relation.*matrix=TABLE"):
        compile_sql(projection, Source("t", "id", "long"), "redshift")


def test_the_long_layout_with_a_matrix_table_and_values_where_the_profile_has_them():
    projection = make_projection("achlioptas", 5, 3, seed=1, s=3)
    long = Source("t", "id", "long")
    assert "VALUES" not in compile_sql(projection, long, "redshift", matrix="rp.m")
    assert "VALUES" in compile_sql(projection, long, "trino", matrix="values")  # Trino's profile says so
    # no aggregate FILTER where sqlrp does not execute the engine: GlareDB parses it and ignores it
    assert "FILTER" not in compile_sql(projection, long, "trino", matrix="values").upper()
    assert "FILTER" in compile_sql(projection, long, "duckdb", matrix="values", strategy="join").upper()
    X = data()
    rows, cols = np.nonzero(X)
    con = duckdb.connect()
    con.register("f", pd.DataFrame({"id": rows, "feature": cols, "value": X[rows, cols]}))
    con.execute("CREATE TABLE t AS SELECT * FROM f; CREATE SCHEMA rp")
    lin = projection.linear
    con.register("m", pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight}))
    con.execute("CREATE TABLE rp.m AS SELECT * FROM m")
    got = con.execute(compile_sql(projection, long, "redshift", matrix="rp.m")).df().sort_values("id")
    assert np.allclose(got.drop(columns="id").to_numpy(), reference.transform(projection, X), rtol=1e-9)


def test_every_method_runs_exactly_on_duckdb_and_sqlite():
    X = data()
    frame = pd.DataFrame(X, columns=list(COLUMNS))
    frame.insert(0, "id", np.arange(len(X)))
    lite = sqlite3.connect(":memory:")
    frame.to_sql("t", lite, index=False)
    con = duckdb.connect()
    con.register("t", frame)
    for method, params in METHODS:
        projection = make_projection(method, 5, 3, seed=1, **params)
        want = reference.transform(projection, X)
        got = con.execute(compile_sql(projection, WIDE, "trino")).df().sort_values("id")
        assert np.allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12), method
        rows = np.array(lite.execute(compile_sql(projection, WIDE, "mysql").replace("`", '"')).fetchall())
        rows = rows[np.argsort(rows[:, 0])]
        assert np.allclose(rows[:, 1:], want, rtol=1e-9, atol=1e-12), method


def need_daft():
    try:
        import daft
    except ImportError as exc:  # held out: not an extra of sqlrp's; CI installs it (pip install daft)
        if IN_CI:
            pytest.fail(f"CI=true and daft is not installed ({exc}): pip install daft")
        pytest.skip(f"daft is not installed: {exc}")
    return daft


@pytest.mark.parametrize("dialect", ["trino", "redshift", "postgres"])
def test_every_method_runs_exactly_on_daft_a_held_out_engine(dialect):
    daft = need_daft()
    X = data()
    frame = pd.DataFrame(X, columns=list(COLUMNS))
    frame.insert(0, "id", np.arange(len(X)))
    table = daft.from_pandas(frame)
    for method, params in METHODS:
        projection = make_projection(method, 5, 3, seed=1, **params)
        for strategy in ("auto", "pairs"):
            try:
                sql = compile_sql(projection, WIDE, dialect, strategy=strategy)
            except Exception:  # noqa: BLE001 - pairs needs a sign matrix
                continue
            got = daft.sql(sql, t=table).to_pandas().sort_values("id")
            want = reference.transform(projection, X)
            assert np.allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12), (method, strategy)
            sql = check_sql(projection, WIDE, dialect, how=Formulation("values", strategy))
            status = daft.sql(sql).to_pandas()["sqlrp_check"]
            assert list(status) == ["ok"], (method, strategy)


def test_the_self_check_catches_dafts_array_base():
    daft = need_daft()
    projection = make_projection("achlioptas", 5, 3, seed=1, s=3)
    # DuckDB's profile (1-based lists) on Daft (0-based): the array layout's x[1] reads the second element
    sql = check_sql(projection, Source("t", "id", "array", array_column="x"), "duckdb")
    assert list(daft.sql(sql).to_pandas()["sqlrp_check"]) == ["wrong"]
    assert list(daft.sql(check_sql(projection, WIDE, "duckdb")).to_pandas()["sqlrp_check"]) == ["ok"]


@pytest.mark.parametrize("dialect", ["trino", "redshift", "postgres", "duckdb"])
def test_every_method_runs_exactly_on_polars_sql_another_held_out_engine(dialect):
    pl = pytest.importorskip("polars") if not IN_CI else __import__("polars")
    X = data()
    frame = pd.DataFrame(X, columns=list(COLUMNS))
    frame.insert(0, "id", np.arange(len(X)))
    table = pl.from_pandas(frame)
    for method, params in METHODS:
        projection = make_projection(method, 5, 3, seed=1, **params)
        sql = compile_sql(projection, WIDE, dialect)
        got = pl.SQLContext(t=table).execute(sql, eager=True).to_pandas().sort_values("id")
        want = reference.transform(projection, X)
        assert np.allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12), (dialect, method)
        status = pl.SQLContext().execute(check_sql(projection, WIDE, dialect), eager=True)["sqlrp_check"]
        assert status.to_list() == ["ok"], (dialect, method)
