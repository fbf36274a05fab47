"""The long layout's input and the matrix it joins, never silently wrong (issue 41): a feature index that
is not an integer in [0, d), a NULL id or a NULL group is refused in one line on every engine that runs
the long layout; a matrix table (``--matrix TABLE``) is used with the projection it was exported from
and only where it holds that projection's matrix, or refused -- never joined with another projection's
scale, and never left unread without a word."""

from __future__ import annotations

import io
import re
import uuid

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from testkit.frames import long_frame, wide_frame

ENGINES = ["duckdb", "sqlite", "postgres", "clickhouse", "datafusion"]


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    """A fresh database on each engine that runs the long layout."""
    name = request.param
    if name == "postgres":
        yield name, request.getfixturevalue("pg")
        return
    if name == "clickhouse":
        pytest.importorskip("chdb")
        from sqlrp.backends.clickhouse import ChdbBackend

        db = ChdbBackend(":memory:")
        database = f"ll_{uuid.uuid4().hex[:10]}"
        db.execute(f"CREATE DATABASE {database}")
        db.execute(f"USE {database}")
        try:
            yield name, db
        finally:
            db.execute(f"DROP DATABASE IF EXISTS {database}")
            db.close()
        return
    if name == "datafusion":
        pytest.importorskip("datafusion")
    url = {"duckdb": "duckdb://", "sqlite": f"sqlite:///{tmp_path}/l.sqlite", "datafusion": "datafusion://"}[name]
    db = sqlrp.connect(url)
    try:
        yield name, db
    finally:
        db.close()


PROJECTION = dict(method="achlioptas", d=4, k=3, seed=5)


def put(engine: tuple, name: str, frame: pd.DataFrame) -> None:
    """``frame`` as the table ``name``, its missing cells NULL: PostgreSQL's ``write_dataframe`` stores a
    float NaN as NaN and a missing text as 'nan', so there the rows are inserted one by one."""
    kind, db = engine
    if kind != "postgres":
        db.write_dataframe(name, frame)
        return

    def sql_type(values: pd.Series) -> str:
        if pd.api.types.is_integer_dtype(values):
            return "BIGINT"
        return "TEXT" if any(isinstance(v, str) for v in values) else "DOUBLE PRECISION"

    types = {c: sql_type(frame[c]) for c in frame.columns}
    db.execute(f'CREATE TABLE "{name}" ({", ".join(f"{c} {t}" for c, t in types.items())})')
    marks = ", ".join("?" for _ in types)
    for row in frame.itertuples(index=False):
        db.execute(f'INSERT INTO "{name}" VALUES ({marks})', [None if pd.isna(v) else v for v in row])


def _projection():
    return sqlrp.create_projection(None, None, **PROJECTION)


@pytest.mark.parametrize(
    "feature, why",
    [
        ([0, 1.4], "a fractional index (CAST read 1.4 as feature 1)"),
        ([0, 2.5], "a half index (rounded to 2 or 3 by the engine's cast)"),
        ([0, -1], "a negative index"),
        ([0, 4], "an index = d"),
        ([0, 1e30], "an index no integer type holds"),
        ([0, None], "a NULL index"),
    ],
)
def test_a_feature_index_that_is_no_integer_in_range_is_refused_naming_the_row(engine, feature, why):
    name, db = engine
    put(engine, "l", pd.DataFrame({"id": [7, 7], "feature": feature, "value": [1.0, 2.0]}))
    for nulls in ("error", "zero"):
        with pytest.raises(sqlrp.InputError, match=r"feature indexes \('feature'\).*\[0, 4\) \(rows with id 7\)"):
            sqlrp.project(db, "l", "id", _projection(), layout="long", nulls=nulls)


def test_integral_float_indexes_and_duplicates_project_as_numpy_sums(engine):
    """Indexes stored as doubles (2.0) are integers; duplicate (id, feature) rows are summed, and a NULL
    value under nulls='zero' is 0 (docs: the long layout)."""
    name, db = engine
    rows = {"id": [1, 1, 1, 2, 2], "feature": [0.0, 2.0, 2.0, 3.0, 1.0], "value": [1.5, 2.0, -0.25, 4.0, None]}
    put(engine, "l", pd.DataFrame(rows))
    X = np.array([[1.5, 0, 1.75, 0], [0, 0, 0, 4.0]])
    p = _projection()
    with pytest.raises(sqlrp.InputError, match=r"NULL/NaN/infinite values in 'value' \(rows with id 2\)"):
        sqlrp.project(db, "l", "id", p, layout="long")
    out = sqlrp.project(db, "l", "id", p, layout="long", nulls="zero").sort_values("id")
    assert out["id"].tolist() == [1, 2]
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), sqlrp.transform(p, X), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("ids", [[1.0, None, None], ["a", None, None]], ids=["number", "text"])
def test_a_null_id_in_the_long_layout_is_refused_not_summed_into_one_row(engine, ids):
    name, db = engine
    put(engine, "l", pd.DataFrame({"id": ids, "feature": [0, 1, 2], "value": [1.0, 2.0, 3.0]}))
    for nulls in ("error", "zero"):
        with pytest.raises(sqlrp.InputError, match=r"2 row\(s\) with a NULL or NaN id \('id'\).*into one output row"):
            sqlrp.project(db, "l", "id", _projection(), layout="long", nulls=nulls)


@pytest.mark.parametrize("layout", ["long", "wide"])
def test_a_null_group_is_refused_not_pooled_into_one_row(engine, layout):
    name, db = engine
    X = np.arange(12, dtype=float).reshape(3, 4) + 1
    frame = long_frame(X) if layout == "long" else wide_frame(X)
    groups = {0: 10.0, 1: None, 2: None}
    frame["g"] = [groups[i] for i in frame["id"]]
    put(engine, "t", frame)
    with pytest.raises(sqlrp.InputError, match=r"with a NULL or NaN group \('g'; rows with id [12]"):
        sqlrp.project(db, "t", "id", _projection(), layout=layout, group_column="g")


def test_d_of_a_long_table_whose_largest_index_is_infinite_is_refused_in_one_line(duck):
    duck.write_dataframe("l", pd.DataFrame({"id": [1, 1], "feature": [0.0, np.inf], "value": [1.0, 2.0]}))
    with pytest.raises(sqlrp.InputError, match="largest feature index is inf"):
        sqlrp.project(duck, "l", "id", layout="long", k=3)


# ---- the matrix table ----


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """``w.db``: a long table ``ev`` (6 rows of 64 sparse features), ``rp16`` (s = 3, seed 1) stored and
    exported to ``rp16.parquet``, and that export loaded as the table ``mt``; also ``mq``, another
    projection's matrix of the same shape, and ``w``, the rows in the wide layout."""
    monkeypatch.chdir(tmp_path)
    X = np.random.default_rng(1).normal(size=(6, 64))
    X[X < 0.5] = 0.0
    with sqlrp.connect("duckdb:///w.db") as db:
        db.write_dataframe("ev", long_frame(X))
        db.write_dataframe("w", wide_frame(X))
        sqlrp.create_projection(db, "rp16", "achlioptas", d=64, k=16, s=3, seed=1)
        projection = sqlrp.load_projection(db, "rp16")
        other = sqlrp.create_projection(None, None, "achlioptas", d=64, k=16, s=3, seed=2)
        lin = other.linear
        db.write_dataframe("mq", pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight}))
    assert main(["projections", "export", "rp16", "--to", "rp16.parquet", "--db", "duckdb:///w.db"]) == 0
    with sqlrp.connect("duckdb:///w.db") as db:
        db.execute("CREATE TABLE mt AS SELECT * FROM 'rp16.parquet'")
    return projection, X


def _cli_refused(argv: list[str], capsys, pattern: str) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.search(pattern, lines[0]), lines[0]


def test_a_matrix_table_without_its_projection_is_refused_by_every_entry(warehouse, capsys):
    """It was joined with the scale of a new matrix drawn for the call (every output x 1.1547 for an
    exported s = 3 matrix); ``compile`` refused the same options."""
    projection, X = warehouse
    new = ["--layout", "long", "--matrix", "mt", "--d", "64", "--k", "16"]
    for command in ("project", "compile"):
        argv = [command, "--db", "duckdb:///w.db", "--table", "ev", "--id-column", "id", *new]
        _cli_refused(argv, capsys, r"--matrix=mt joins a matrix loaded in the warehouse.*give --projection=FILE")
    with sqlrp.connect("duckdb:///w.db") as db:
        for call in (
            lambda: sqlrp.project(db, "ev", "id", layout="long", matrix="mt", d=64, k=16),
            lambda: sqlrp.project(db, "ev", "id", "new_name", layout="long", matrix="mt", d=64, k=16, into="o"),
            lambda: sqlrp.projected(db, "ev", "id", layout="long", matrix="mt", d=64, k=16).sql(),
            lambda: sqlrp.projected(db, "ev", "id", layout="long", matrix="mt", d=64, k=16).df(),
            lambda: sqlrp.project(db, long_frame(X), "id", layout="long", matrix="mt", d=64, k=16),
        ):
            with pytest.raises(sqlrp.InvalidParameter, match="matrix='mt' joins a matrix loaded in the warehouse"):
                call()
        assert not db.table_exists("o") and not sqlrp.list_projections(db)["name"].eq("new_name").any()


def test_a_matrix_table_with_its_projection_gives_numpys_numbers(warehouse, capsys):
    projection, X = warehouse
    want = sqlrp.transform(projection, X)
    argv = ["project", "--db", "duckdb:///w.db", "--table", "ev", "--id-column", "id", "--layout", "long"]
    for given in ("rp16.parquet", "rp16"):
        assert main([*argv, "--matrix", "mt", "--projection", given]) == 0
        out = pd.read_csv(io.StringIO(capsys.readouterr().out)).sort_values("id")
        np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want[out["id"]], rtol=1e-9, atol=1e-12)
    with sqlrp.connect("duckdb:///w.db") as db:
        out = sqlrp.project(db, "w", "id", projection, matrix="mt", strategy="join")  # a wide table unnested
        np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12)


def test_a_matrix_table_of_another_projection_or_none_is_refused_in_one_line(warehouse, capsys):
    projection, X = warehouse
    argv = ["project", "--db", "duckdb:///w.db", "--table", "ev", "--id-column", "id", "--layout", "long"]
    _cli_refused(
        [*argv, "--projection", "rp16", "--matrix", "mq"],
        capsys,
        r"matrix table 'mq' does not hold the matrix of projection 'rp16' \(",
    )
    _cli_refused([*argv, "--projection", "rp16", "--matrix", "NOSUCH"], capsys, r"--matrix='NOSUCH': no such table")
    compile_ = ["compile", *argv[1:], "--projection", "rp16"]
    _cli_refused([*compile_, "--matrix", "mq"], capsys, r"matrix table 'mq' does not hold the matrix")
    with sqlrp.connect("duckdb:///w.db") as db:
        db.execute("CREATE TABLE stale AS SELECT * FROM mt WHERE vector < 15")  # a partial load
        db.execute("CREATE TABLE flipped AS SELECT vector, feature, -weight AS weight FROM mt")
        db.execute("CREATE TABLE cols AS SELECT vector, feature AS f, weight FROM mt")
        for table, pattern in (
            ("stale", "does not hold the matrix.*entries"),
            ("flipped", "does not hold the matrix.*sum of weights"),
            ("cols", "has no column 'feature'"),
        ):
            with pytest.raises(sqlrp.InputError, match=pattern):
                sqlrp.project(db, "ev", "id", projection, layout="long", matrix=table)


def test_a_matrix_table_the_sql_would_not_read_is_refused(warehouse, capsys):
    """``--matrix NOSUCH`` on a wide projection inlining its weights was ignored."""
    projection, X = warehouse
    argv = ["project", "--db", "duckdb:///w.db", "--table", "w", "--id-column", "id", "--projection", "rp16"]
    for strategy in ("inline", "auto"):
        _cli_refused(
            [*argv, "--matrix", "NOSUCH", "--strategy", strategy],
            capsys,
            r"--matrix='NOSUCH' is read only by the join and lookup strategies",
        )
    with sqlrp.connect("duckdb:///w.db") as db:
        with pytest.raises(sqlrp.InvalidParameter, match="read only by the join and lookup strategies"):
            sqlrp.project(db, "w", "id", "rp16", matrix="mt", strategy="inline")
        craft = sqlrp.create_projection(None, None, "craftmap", d=64, k=8, seed=1)
        with pytest.raises(sqlrp.InvalidParameter, match="composition of two"):
            sqlrp.project(db, "ev", "id", craft, layout="long", matrix="mt")
    with pytest.raises(sqlrp.InvalidParameter, match="read only by the join and lookup strategies"):
        sqlrp.compile_sql(projection, sqlrp.Source("w", "id", columns=[f"f{i}" for i in range(64)]), "spark",
                          matrix="mt", strategy="inline")  # fmt: skip


def test_the_registry_rows_of_another_projection_under_the_name_are_never_joined(duck):
    """A projection object named like another one stored here: ``matrix="registry"`` joined the stored
    weights with the object's scale; ``auto`` (same count of entries) did too.  Now: refused, and
    ``auto`` inlines the object's own matrix."""
    X = np.arange(24, dtype=float).reshape(3, 8) + 1
    duck.write_dataframe("l", long_frame(X))
    sqlrp.create_projection(duck, "rp", "achlioptas", d=8, k=4, s=1, seed=7)
    mine = sqlrp.create_projection(None, "rp", "achlioptas", d=8, k=4, s=1, seed=5)  # dense: same count
    other = "(the registry's rows of projection 'rp' hold another matrix|stored projection 'rp' is not the projection)"
    with pytest.raises(sqlrp.InputError, match=other):
        sqlrp.project(duck, "l", "id", mine, layout="long", matrix="registry")
    out = sqlrp.project(duck, "l", "id", mine, layout="long")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), sqlrp.transform(mine, X), rtol=1e-9)
    elsewhere = sqlrp.create_projection(None, "not_here", "achlioptas", d=8, k=4, s=1, seed=5)
    with pytest.raises(sqlrp.SqlrpError, match="(holds no matrix for|no stored projection named)"):
        sqlrp.project(duck, "l", "id", elsewhere, layout="long", matrix="registry")


@pytest.mark.parametrize("matrix", ["values", "registry"])
def test_an_id_whose_features_no_output_reads_keeps_its_row_of_zeros(engine, matrix):
    """Found by tests/fuzz/test_fuzz_long.py: a feature without a non-zero in any output (k = 1, s = 3)
    joined no matrix entry, and an id holding only such features lost its row (NumPy's is 0)."""
    name, db = engine
    p = sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=1, s=3, seed=1)
    unread = sorted(set(range(6)) - set(p.linear.feature.tolist()))
    read = int(p.linear.feature[0])
    assert unread, "the fixture needs a feature no output reads"
    frame = pd.DataFrame({"id": [1, 2, 2], "feature": [unread[0], unread[-1], read], "value": [5.0, 1.0, 2.0]})
    put(engine, "l", frame)
    X = np.zeros((2, 6))
    X[0, unread[0]], X[1, unread[-1]], X[1, read] = 5.0, 1.0, 2.0
    strategies = ["join"] if name in ("sqlite", "clickhouse") else ["join", "lookup"]
    for strategy in strategies:
        out = sqlrp.project(db, "l", "id", "rp", layout="long", matrix=matrix, strategy=strategy).sort_values("id")
        assert out["id"].tolist() == [1, 2], strategy
        np.testing.assert_allclose(out.drop(columns="id").to_numpy(), sqlrp.transform(p, X), rtol=1e-12)
