"""Nothing lost, nothing duplicated: names an engine would truncate, registry tables as outputs,
concurrent writers (top-ups, migrations, stored names) on a real PostgreSQL server."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import psycopg
import pytest

import sqlrp
from sqlrp.core.errors import EngineLimit, InvalidParameter, ProjectionExists
from sqlrp.registry.store import Registry
from testkit.frames import wide_frame

WORKERS = 8


def _schema_url(pg_url: str) -> tuple[str, str]:
    """A fresh, empty schema on the test server and a URL whose search_path is that schema."""
    schema = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    return schema, f"{pg_url}{sep}options=-csearch_path%3D{schema}"


def _drop_schema(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn"))


# ---- names the engine would truncate, registry tables ----


def test_postgres_refuses_output_names_it_would_truncate(pg):
    X = np.random.default_rng(0).normal(size=(20, 6))
    pg.write_dataframe("t", wide_frame(X))
    first = "a" * 63 + "_one"  # 67 bytes: PostgreSQL would keep "a" * 63
    with pytest.raises(EngineLimit, match=r"postgres: .*67 bytes.*63"):
        sqlrp.project(pg, "t", "id", method="achlioptas", k=4, seed=1, into=first)
    assert "a" * 63 not in pg.table_names()
    # counted in bytes: 32 two-byte letters are 64 bytes
    with pytest.raises(EngineLimit, match="64 bytes"):
        sqlrp.project(pg, "t", "id", method="achlioptas", k=4, seed=1, into="é" * 32)
    sqlrp.project(pg, "t", "id", method="achlioptas", k=4, seed=1, into="a" * 63)  # 63 bytes is fine
    assert len(pg.fetchall(f'SELECT * FROM "{"a" * 63}"')) == 20


def test_postgres_refuses_a_prefix_whose_output_names_it_would_truncate(pg):
    X = np.random.default_rng(0).normal(size=(20, 6))
    pg.write_dataframe("t", wide_frame(X))
    # p * 62 + "10" is 64 bytes: it would be truncated into p * 62 + "1", a duplicate column
    with pytest.raises(EngineLimit, match="output column name"):
        sqlrp.project(pg, "t", "id", method="achlioptas", k=11, seed=1, into="o", prefix="p" * 62)
    assert "o" not in pg.table_names()
    # and in SQL compiled for PostgreSQL without running it
    projection = sqlrp.make_projection("achlioptas", 6, 11, seed=1)
    source = sqlrp.Source("t", "id", "wide", tuple(f"f{i}" for i in range(6)))
    with pytest.raises(EngineLimit, match="postgres"):
        sqlrp.compile_sql(projection, source, "postgres", sqlrp.Output(prefix="p" * 62))
    assert "p" * 62 + "10" in sqlrp.compile_sql(projection, source, "duckdb", sqlrp.Output(prefix="p" * 62))


@pytest.mark.parametrize("name", ["sqlrp_linear_entry", "sqlrp_projection", "SQLRP_SCHEMA_VERSION"])
def test_registry_tables_are_never_outputs(db, name):
    X = np.random.default_rng(0).normal(size=(20, 6))
    db.write_dataframe("t", wide_frame(X))
    sqlrp.create_projection(db, "keep", "achlioptas", d=6, k=4, seed=1)
    with pytest.raises(InvalidParameter, match="registry"):
        sqlrp.project(db, "t", "id", "keep", into=name, replace=True)
    assert [r.name for r in sqlrp.list_projections(db).itertuples()] == ["keep"]
    np.testing.assert_array_equal(
        sqlrp.load_projection(db, "keep").linear.weight, sqlrp.make_projection("achlioptas", 6, 4, seed=1).linear.weight
    )


def test_output_column_repeating_the_key_is_refused(duck):
    X = np.random.default_rng(0).normal(size=(20, 6))
    duck.write_dataframe("t", wide_frame(X, id_name="p0"))
    with pytest.raises(InvalidParameter, match="would appear twice"):
        sqlrp.project(duck, "t", "p0", method="achlioptas", k=4, seed=1, into="o")


# ---- incremental top-ups ----


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_incremental_adds_each_missing_id_once(engine, request):
    db = request.getfixturevalue("duck" if engine == "duckdb" else "pg")
    X = np.random.default_rng(1).normal(size=(300, 8))
    frame = wide_frame(X)
    db.write_dataframe("t", frame.iloc[:200])
    sqlrp.create_projection(db, "rp", "achlioptas", d=8, k=5, seed=2)
    sqlrp.project(db, "t", "id", "rp", into="o", incremental=True)
    db.insert_frame("t", frame.iloc[200:])
    sqlrp.project(db, "t", "id", "rp", into="o", incremental=True)
    sqlrp.project(db, "t", "id", "rp", into="o", incremental=True)  # nothing left to add
    got = db.query_df('SELECT * FROM "o" ORDER BY "id"')
    assert got["id"].tolist() == list(range(300))
    want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
    np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12)


def test_incremental_plan_is_an_anti_join_on_postgres(pg):
    """NOT IN (sub-query) is a sub-plan PostgreSQL runs per row once the ids outgrow work_mem (issue
    13, C1: still running after 150 s); the top-up's filter must plan as a hash anti-join."""
    from sqlrp.compiler import table_ref
    from sqlrp.dialects import get_dialect
    from sqlrp.pipeline.destinations import not_yet_projected as _not_yet_projected

    pg.execute('CREATE TABLE "t" AS SELECT g AS "id", g * 1.0 AS "f0" FROM generate_series(1, 1000) g')
    pg.execute('CREATE TABLE "o" AS SELECT g AS "id" FROM generate_series(1, 500) g')
    source = sqlrp.Source("t", "id", "wide", ("f0",))
    dialect = get_dialect("postgres")
    fresh = _not_yet_projected(dialect, source, "o")
    query = dialect.render(sqlrp.compiler.exp.select("*").from_(table_ref(source)).where(fresh.row_filter))
    plan = "\n".join(r[0] for r in pg.fetchall(f"EXPLAIN {query}"))
    assert "Anti Join" in plan and "SubPlan" not in plan, plan
    assert pg.fetchall(f"SELECT count(*) FROM ({query}) q")[0][0] == 500


def _at(start: float) -> None:
    """Wait until ``start`` (every worker has imported and connected by then: they race for real)."""
    time.sleep(max(0.0, start - time.time()))


def _top_up(url: str, start: float) -> str:
    db = sqlrp.connect(url)
    _at(start)
    try:
        sqlrp.project(db, "t", "id", "rp", into="o", incremental=True)
        return "ok"
    except sqlrp.SqlrpError as exc:
        return f"error: {exc}"
    finally:
        db.close()


def test_concurrent_incremental_writers_add_each_id_exactly_once(pg_url):
    schema, url = _schema_url(pg_url)
    try:
        db = sqlrp.connect(url)
        X = np.random.default_rng(3).normal(size=(3000, 16))
        db.write_dataframe("t", wide_frame(X))
        sqlrp.create_projection(db, "rp", "achlioptas", d=16, k=6, seed=4)
        with _pool() as pool:
            results = list(pool.map(_top_up, [url] * WORKERS, [time.time() + 8] * WORKERS))
        assert results == ["ok"] * WORKERS
        ids = [r[0] for r in db.fetchall('SELECT "id" FROM "o" ORDER BY "id"')]
        assert ids == list(range(3000))  # 3,000 rows for 3,000 ids: none twice, none missing
        got = db.query_df('SELECT * FROM "o" ORDER BY "id"').drop(columns="id").to_numpy()
        np.testing.assert_allclose(got, sqlrp.transform(sqlrp.load_projection(db, "rp"), X), rtol=1e-9)
        db.close()
    finally:
        _drop_schema(pg_url, schema)


# ---- migrations and stored names under concurrency ----


def _first_use(url: str, name: str, start: float) -> str:
    """Connect to a fresh database (which runs the migrations) and store a projection."""
    _at(start)
    db = sqlrp.connect(url)
    try:
        sqlrp.create_projection(db, name, "achlioptas", d=10, k=4, seed=7)
        return "stored"
    except ProjectionExists as exc:
        return f"exists: {exc}"
    except Exception as exc:  # noqa: BLE001 - a raw error is what the test must not see
        return f"raw {type(exc).__name__}: {exc}"
    finally:
        db.close()


def test_processes_migrating_a_fresh_database_at_once_all_succeed(pg_url):
    schema, url = _schema_url(pg_url)
    try:
        names = [f"rp{i}" for i in range(WORKERS)]
        with _pool() as pool:
            results = list(pool.map(_first_use, [url] * WORKERS, names, [time.time() + 8] * WORKERS))
        assert results == ["stored"] * WORKERS
        db = sqlrp.connect(url)
        assert sorted(sqlrp.list_projections(db)["name"]) == names
        db.close()
    finally:
        _drop_schema(pg_url, schema)


def test_processes_storing_one_name_at_once_exactly_one_wins(pg_url):
    schema, url = _schema_url(pg_url)
    try:
        sqlrp.connect(url).close()  # migrated: the race is on the name alone
        with _pool() as pool:
            results = list(pool.map(_first_use, [url] * WORKERS, ["same"] * WORKERS, [time.time() + 8] * WORKERS))
        assert results.count("stored") == 1, results
        losers = [r for r in results if r != "stored"]
        assert all(r.startswith("exists: a projection named 'same' already exists") for r in losers), losers
        db = sqlrp.connect(url)
        stored = db.fetchall("SELECT count(*) FROM sqlrp_linear_entry")[0][0]
        assert stored == sqlrp.load_projection(db, "same").linear.nnz  # one copy of the matrix
        db.close()
    finally:
        _drop_schema(pg_url, schema)


# ---- non-finite input and output ----


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_infinite_features_are_refused(db, value):
    X = np.random.default_rng(5).normal(size=(30, 6))
    X[7, 2] = value
    db.write_dataframe("t", wide_frame(X))
    with pytest.raises(sqlrp.core.errors.InputError, match=r"infinite.*rows with id 7"):
        sqlrp.project(db, "t", "id", method="achlioptas", k=4, seed=1, into="o")
    assert "o" not in db.table_names()


def test_overflowing_outputs_are_refused_and_nothing_is_written(duck):
    """Finite features whose sum overflows: DuckDB gives infinity without an error (issue 13, B2)."""
    X = np.ones((10, 3))
    X[4] = 1e308
    duck.write_dataframe("t", wide_frame(X))
    duck.write_dataframe("o", wide_frame(np.zeros((2, 2))))  # an older output, kept by a failed replace
    proj = sqlrp.make_projection("achlioptas", 3, 2, seed=1, s=1)
    proj.linear.weight[:] = 1.0  # every output adds all three features: 3e308 overflows
    Registry(duck).save(proj, "ones")
    with pytest.raises(sqlrp.core.errors.InputError, match=r"overflowed.*rows with id 4"):
        sqlrp.project(duck, "t", "id", "ones", into="o", replace=True)
    assert duck.fetchall('SELECT count(*) FROM "o"')[0][0] == 2  # the old table, untouched
    with pytest.raises(sqlrp.core.errors.InputError, match="overflowed"):
        sqlrp.project(duck, "t", "id", "ones")
    with pytest.raises(sqlrp.core.errors.InputError, match="overflowed"):
        list(sqlrp.project(duck, "t", "id", "ones", chunk_rows=3))
    sqlrp.project(duck, "t", "id", "ones", into="o2", check=False)  # asked not to check: written as computed
    assert np.isinf(duck.fetchall('SELECT "p0" FROM "o2" WHERE "id" = 4')[0][0])


def test_overflowing_array_outputs_are_refused_and_nothing_is_written(db):
    """The same check for outputs written as one array column, read element by element."""
    X = np.ones((10, 3))
    X[4] = 1e308
    db.write_dataframe("t", wide_frame(X))
    proj = sqlrp.make_projection("achlioptas", 3, 2, seed=1, s=1)
    proj.linear.weight[:] = 1.0
    Registry(db).save(proj, "ones")
    if db.dialect == "postgres":  # PostgreSQL raises on the overflow itself
        import psycopg

        with pytest.raises(psycopg.errors.NumericValueOutOfRange, match="out of range"):
            sqlrp.project(db, "t", "id", "ones", into="o", output="array")
    else:
        with pytest.raises(sqlrp.core.errors.InputError, match=r"overflowed.*rows with id 4"):
            sqlrp.project(db, "t", "id", "ones", into="o", output="array")
    assert "o" not in db.table_names()
    X[4] = 1.0  # finite again: the same projection is written, and equals NumPy
    db.write_dataframe("t", wide_frame(X), replace=True)
    sqlrp.project(db, "t", "id", "ones", into="o", output="array")
    got = np.array([list(v) for v in db.query_df('SELECT "p" FROM "o" ORDER BY "id"')["p"]])
    np.testing.assert_allclose(got, sqlrp.transform(proj, X), rtol=1e-12)


# ---- stored parameters, default names, bounds ----


def test_a_seed_that_disagrees_with_the_stored_one_is_refused(duck):
    X = np.random.default_rng(6).normal(size=(20, 6))
    duck.write_dataframe("t", wide_frame(X))
    sqlrp.create_projection(duck, "rp", "achlioptas", d=6, k=3, seed=5)
    with pytest.raises(InvalidParameter, match=r"seed = 5, not 6"):
        sqlrp.project(duck, "t", "id", "rp", seed=6)
    same = sqlrp.project(duck, "t", "id", "rp", seed=5)  # agreeing, or not given: the stored matrix
    np.testing.assert_allclose(
        same.drop(columns="id").to_numpy(), sqlrp.project(duck, "t", "id", "rp").drop(columns="id").to_numpy()
    )


def test_default_names_differ_when_parameters_differ(duck):
    X = np.random.default_rng(7).normal(size=(20, 5))
    duck.write_dataframe("t", wide_frame(X))
    sqlrp.project(duck, "t", "id", method="pk-rp", k=4, degree=2, seed=3, into="two")
    sqlrp.project(duck, "t", "id", method="pk-rp", k=4, degree=3, seed=3, into="three")
    names = sorted(sqlrp.list_projections(duck)["name"])
    assert len(names) == 2 and names[0] == "t_pk-rp_k4_seed3" and names[1].startswith("t_pk-rp_k4_seed3_")
    sqlrp.project(duck, "t", "id", method="pk-rp", k=4, degree=3, seed=3, into="again")  # reused, not a third
    assert len(sqlrp.list_projections(duck)) == 2
    two, three, again = (duck.query_df(f'SELECT * FROM "{n}" ORDER BY id') for n in ("two", "three", "again"))
    pd_testing = pytest.importorskip("pandas").testing
    pd_testing.assert_frame_equal(three, again)
    for degree, got in ((2, two), (3, three)):
        want = sqlrp.transform(sqlrp.make_projection("pk-rp", 5, 4, seed=3, degree=degree), X)
        np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k": 1_000_000}, "k = 1000000 is above"),
        ({"k": 2_147_483_648}, "above"),
        ({"k": 4, "seed": -1}, "seed must be"),
        ({"k": 4, "seed": 2**63}, "seed must be"),
        ({"k": 4.5}, "whole number"),
    ],
)
def test_nonsense_sizes_and_seeds_are_refused_up_front(duck, options, message):
    duck.write_dataframe("t", wide_frame(np.ones((3, 4))))
    with pytest.raises(InvalidParameter, match=message):
        sqlrp.project(duck, "t", "id", method="achlioptas", into="o", **options)
    assert "o" not in duck.table_names() and sqlrp.list_projections(duck).empty


# ---- issue 26: one clear line where a traceback was ----


def test_transform_frame_takes_arrays_and_names_missing_columns():
    import numpy as np
    import pandas as pd

    import sqlrp

    p = sqlrp.create_projection(None, "m", "achlioptas", d=4, k=3, seed=1)
    X = np.arange(12.0).reshape(3, 4)
    expected = sqlrp.transform(p, X)
    np.testing.assert_array_equal(sqlrp.transform_frame(p, X), expected)
    np.testing.assert_array_equal(sqlrp.transform_frame(p, X.tolist()), expected)
    frame = pd.DataFrame(X, columns=list("abcd"))
    np.testing.assert_array_equal(sqlrp.transform_frame(p, frame).to_numpy(), expected)
    with pytest.raises(sqlrp.InputError, match="no column 'zz'"):
        sqlrp.transform_frame(p, frame, columns=["a", "b", "c", "zz"])
    with pytest.raises(sqlrp.InputError, match="d = 4"):
        sqlrp.transform_frame(p, np.ones((2, 3)))
    with pytest.raises(sqlrp.InputError, match="NaN"):
        sqlrp.transform_frame(p, np.array([[1.0, 2.0, np.nan, 4.0]]))
    with pytest.raises(sqlrp.InputError, match="2-D array"):
        sqlrp.transform_frame(p, "not data")


def test_read_commands_do_not_create_database_files(tmp_path, capsys):
    from sqlrp.cli import main

    missing = tmp_path / "missing.sqlite"
    assert main(["project", "--db", f"sqlite:///{missing}", "--table", "t", "--id-column", "id", "--k", "2"]) == 3
    assert "no database file" in capsys.readouterr().err and not missing.exists()
    for url in (f"duckdb:///{tmp_path}/none.duckdb", f"sqlite:///{missing}"):
        assert main(["projections", "list", "--db", url]) == 3
    assert not any(tmp_path.iterdir())
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    assert main(["projections", "list", "--db", f"chdb:///{text}"]) == 3
    assert "must name a folder" in capsys.readouterr().err
    assert (
        main(
            ["create", "--db", f"sqlite:///{missing}", "--name", "p", "--method", "achlioptas", "--d", "3", "--k", "2"]
        )
        == 0
    )
    assert missing.exists()


def test_evaluate_index_with_nonsense_candidates_is_one_line(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    import sqlrp
    from sqlrp.cli import main

    url = f"duckdb:///{tmp_path}/s.duckdb"
    db = sqlrp.connect(url)
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(60, 4)), columns=list("abcd"))
    frame.insert(0, "id", np.arange(60))
    db.write_dataframe("pts", frame)
    sqlrp.build_index(db, "pts", "id", "idx", lists=4)
    db.close()
    for bad in ("abc", ",", "10,-5", "0"):
        assert main(["evaluate", "--db", url, "--index", "idx", "--candidates", bad]) == 2
        err = capsys.readouterr().err
        assert "--candidates takes comma-separated positive whole numbers" in err and "Traceback" not in err
