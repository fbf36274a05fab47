"""ClickHouse: sqlrp's SQL runs there and matches the NumPy reference to 1e-9 relative, or is refused
with an error naming the engine.

In process through chdb (``chdb://``), and through clickhouse-connect's client API -- the
``ClickHouseServerBackend`` code path -- with clickhouse-connect's own in-process (chdb) transport,
as no server runs here: the HTTP transport itself is untested.

(a) the cross-engine matrix of ``engine_cases.py``, on both; (b) digits-sized parity; (c) bad input;
(d) ``connect()``, wrapped connections, one database per process, a database folder; (e) the
registry; plus the backend's own contract (placeholders, types, frames, streaming) and the ClickHouse
behaviours the compiler relies on.

Without chdb the tests skip with the pip line, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.backends.clickhouse import ChdbBackend, ClickHouseServerBackend, bind, column_info, literal, sql_type
from sqlrp.compiler import Source, compile_sql, compile_statements
from sqlrp.core.errors import EngineLimit, InvalidParameter
from sqlrp.core.layout import Formulation, Target
from sqlrp.core.plan import Plan
from sqlrp.dialects import get_dialect
from sqlrp.pipeline.materialise import run
from sqlrp.registry.store import Registry, migration_files
from testkit.engine_cases import CASES, HOSTILE_ID, HOSTILE_TABLE, RTOL, data, frame, run_case

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PIP = "pip install 'sqlrp[clickhouse]'  (that is: pip install chdb clickhouse-connect)"

#: the matrix outcome per case where it is not "ok"
REFUSED = {"long-lookup"}  # no ARRAY_AGG(... ORDER BY ...) on ClickHouse: refused, naming the engine

# ----------------------------------------------------------------------------------------------
# fixtures


def need_chdb() -> ModuleType:
    """chdb, or skip with the pip line -- fail under ``CI=true``."""
    try:
        import chdb
    except ImportError as exc:
        message = f"chdb is not installed ({exc}): {PIP}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {message}")
        pytest.skip(message)
    return chdb


@pytest.fixture(scope="module")
def engine() -> Iterator[ChdbBackend]:
    """The connection that keeps chdb's in-memory engine up for the module (one engine per process)."""
    need_chdb()
    db = ChdbBackend(":memory:")
    yield db
    db.close()


@pytest.fixture
def ch(engine: ChdbBackend) -> Iterator[ChdbBackend]:
    """A connection of its own (its own session) in a fresh database, dropped afterwards."""
    db = ChdbBackend(":memory:")
    database = f"t_{uuid.uuid4().hex[:12]}"
    db.execute(f"CREATE DATABASE {database}")
    db.execute(f"USE {database}")
    yield db
    engine.execute(f"DROP DATABASE IF EXISTS {database}")
    db.close()


def client_backend(ch: ChdbBackend) -> ClickHouseServerBackend:
    """``ClickHouseServerBackend`` over a clickhouse-connect client in ``ch``'s database (the client's
    in-process chdb transport: the server backend's calls, without HTTP)."""
    try:
        import clickhouse_connect
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and clickhouse-connect is not installed ({exc}): {PIP}")
        pytest.skip(f"clickhouse-connect is not installed: {PIP}")
    database = ch.fetchall("SELECT currentDatabase()")[0][0]
    return ClickHouseServerBackend.wrap(clickhouse_connect.get_client(interface="chdb", database=database))


@pytest.fixture(params=["chdb", "clickhouse-connect"])
def any_ch(request: pytest.FixtureRequest, ch: ChdbBackend) -> ChdbBackend | ClickHouseServerBackend:
    """Each test that takes ``any_ch`` runs on both backends (same engine, same database)."""
    if request.param == "chdb":
        return ch
    return client_backend(ch)


def wide(X: np.ndarray, id_name: str = "id") -> pd.DataFrame:
    out = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    out.insert(0, id_name, np.arange(len(X), dtype=np.int64))
    return out


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.abs(want).max(), 1e-300))


# ----------------------------------------------------------------------------------------------
# CI: a missing chdb fails


def test_missing_chdb_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "chdb", None)  # import chdb -> ImportError
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true and chdb is not installed.*pip install"):
        need_chdb()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match=r"pip install 'sqlrp\[clickhouse\]'"):
        need_chdb()


def test_missing_chdb_in_connect_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "chdb", None)
    with pytest.raises(sqlrp.SqlrpError, match=r"pip install 'sqlrp\[clickhouse\]'"):
        sqlrp.connect("chdb://")


# ----------------------------------------------------------------------------------------------
# (a) the cross-engine matrix


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_matrix(any_ch, case) -> None:
    outcome = run_case(any_ch, case, data(), tag=f" {case.name}")
    assert outcome == ("refused" if case.name in REFUSED else "ok")


# ----------------------------------------------------------------------------------------------
# (b) digits-sized parity


@pytest.fixture
def digits_table(ch: ChdbBackend, digits: np.ndarray) -> np.ndarray:
    ch.write_dataframe("digits", wide(digits))
    return digits


@pytest.mark.parametrize("strategy", ["auto", "inline", "pairs", "mailman"])
@pytest.mark.parametrize("s", [3, 1])
def test_digits_parity(ch, digits_table, s, strategy) -> None:
    assert digits_table.shape == (1797, 64)
    proj = sqlrp.create_projection(ch, f"digits s{s}", "achlioptas", d=64, k=20, s=s, seed=5)
    out = sqlrp.project(ch, "digits", "id", f"digits s{s}", strategy=strategy)
    assert list(out["id"]) == list(range(1797))
    got = out.drop(columns="id").to_numpy(dtype=float)
    assert got.shape == (1797, 20)
    assert rel_err(got, sqlrp.transform(proj, digits_table)) <= RTOL


@pytest.mark.parametrize("layout", ["array", "long"])
def test_digits_parity_other_layouts(ch, digits, layout) -> None:
    ch.write_dataframe("digits", frame(digits, layout, id_name="id"))
    proj = sqlrp.create_projection(ch, "d3", "achlioptas", d=64, k=20, s=3, seed=5)
    kwargs = {"array_column": "x"} if layout == "array" else {}
    out = sqlrp.project(ch, "digits", "id", "d3", layout=layout, d=64, **kwargs)
    ids = out["id"].to_numpy() // 3  # frame() numbers rows 1, 4, 7, ...
    want = sqlrp.transform(proj, digits)[ids]
    assert len(out) == int(np.any(digits != 0, axis=1).sum())
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL


def quarters(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Multiples of 1/4 in [-2, 2), half of them 0: every sum of them is exact in a double."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-8, 8, size=(n, d)) / 4.0
    X[rng.random(X.shape) < 0.5] = 0.0
    return X


@pytest.mark.parametrize(
    ("method", "options"),
    [("achlioptas", {"k": 64, "s": 3}), ("pk-rp", {"k": 4, "degree": 2, "t": 2, "distribution": "gaussian"})],
)
@pytest.mark.parametrize("strategy", ["auto", "join"])
def test_long_inlined_matrix_within_the_plan_limit(ch, method, options, strategy) -> None:
    """189 x 500 long table, matrix inlined (an unstored projection): Achlioptas k = 64, s = 3 has
    10,667 non-zeros and failed with TOO_MANY_QUERY_PLAN_OPTIMIZATIONS while the matrix was a
    UNION ALL of one select per non-zero; as literal arrays under ARRAY JOIN it runs, exactly.
    PK-RP with Gaussian weights checks that non-integer weights travel exactly too."""
    X = quarters(189, 500)
    ch.write_dataframe("t", frame(X, "long", id_name="id"))
    proj = sqlrp.make_projection(method, 500, seed=1, **options)
    assert method != "achlioptas" or proj.linear.nnz > 2_500 * 4
    out = sqlrp.project(ch, "t", "id", proj, layout="long", strategy=strategy)
    assert "UNION" not in compile_sql(proj, Source("t", "id", "long"), "clickhouse", pretty=False)
    ids = out["id"].to_numpy() // 3  # frame() numbers rows 1, 4, 7, ...
    want = sqlrp.transform(proj, X)[ids]
    assert len(out) == 189
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL


def test_union_branches_over_the_plan_limit_are_refused_or_split(ch) -> None:
    """With the matrix as ``VALUES`` (one UNION ALL branch per non-zero on ClickHouse, the shape
    that failed), a statement with more branches than the plan-optimisation limit allows is
    refused before it runs, naming the engine and the setting, where it cannot be split (a kernel);
    a linear projection splits into blocks of outputs within it, and runs exactly."""
    dialect = copy.copy(get_dialect("clickhouse"))
    dialect.matrix_array_join = False
    source = Source("t", "id", "long")
    kernel = sqlrp.make_projection("pk-rp", 500, 8, seed=1, degree=2, t=2, s=3)
    assert kernel.linear.nnz > 2_500
    with pytest.raises(EngineLimit, match=r"clickhouse: .* UNION ALL branches.*query_plan_max_optimizations"):
        compile_sql(kernel, source, dialect, matrix="values", strategy="join", pretty=False)
    linear = sqlrp.make_projection("achlioptas", 500, 32, seed=1, s=3)
    assert linear.linear.nnz > 2_500
    X = quarters(30, 500)
    ch.write_dataframe("t", frame(X, "long", id_name="id"))
    planned = Plan(linear, source, how=Formulation(matrix="values", strategy="join"))
    statements = compile_statements(planned, dialect, Target(ordered=True), pretty=False)
    assert len(statements.setup) >= 2 and all(s.count("UNION ALL") < 2_500 for s in statements.setup)
    out = run(ch, statements, ch.query_df)
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), sqlrp.transform(linear, X)[out["id"] // 3]) <= RTOL


def test_digits_materialised_replaced_streamed(ch, digits_table) -> None:
    proj = sqlrp.create_projection(ch, "d3", "achlioptas", d=64, k=20, s=3, seed=5)
    want = sqlrp.transform(proj, digits_table)
    sqlrp.project(ch, "digits", "id", "d3", into="digits rp")
    sqlrp.project(ch, "digits", "id", "d3", into="digits rp", replace=True)
    table = ch.query_df('SELECT * FROM "digits rp" ORDER BY id')
    assert rel_err(table.drop(columns="id").to_numpy(dtype=float), want) <= RTOL
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        sqlrp.project(ch, "digits", "id", "d3", into="digits rp")
    chunks = list(sqlrp.project(ch, "digits", "id", "d3", chunk_rows=500))
    assert [len(c) for c in chunks] == [500, 500, 500, 297]
    streamed = pd.concat(chunks, ignore_index=True)
    assert rel_err(streamed.drop(columns="id").to_numpy(dtype=float), want) <= RTOL
    sqlrp.project(ch, "digits", "id", "d3", into="digits view", view=True)
    assert ch.is_view("digits view") and not ch.is_view("digits rp")
    sqlrp.project(ch, "digits", "id", "d3", into="digits view", view=True, replace=True)
    assert len(ch.query_df('SELECT * FROM "digits view"')) == 1797


def test_incremental_adds_only_new_ids(ch, digits_table) -> None:
    sqlrp.create_projection(ch, "d3", "achlioptas", d=64, k=20, s=3, seed=5)
    ch.write_dataframe("part", wide(digits_table[:1000]))
    sqlrp.project(ch, "part", "id", "d3", into="inc")
    ch.write_dataframe("part", wide(digits_table), replace=True)
    sqlrp.project(ch, "part", "id", "d3", into="inc", incremental=True)
    sqlrp.project(ch, "part", "id", "d3", into="inc", incremental=True)  # nothing new
    assert ch.fetchall("SELECT count(), uniqExact(id) FROM inc") == [(1797, 1797)]


def test_a_top_up_that_overflows_adds_nothing(ch) -> None:
    """No transactions here: the new rows are built and checked aside, then appended (issue 13, B2)."""
    from sqlrp.registry.store import Registry

    proj = sqlrp.make_projection("achlioptas", 3, 2, seed=1, s=1)
    proj.linear.weight[:] = 1.0  # every output adds all three features
    Registry(ch).save(proj, "ones")
    X = np.ones((6, 3))
    ch.write_dataframe("t", wide(X[:4]))
    sqlrp.project(ch, "t", "id", "ones", into="o")
    X[5] = 1e308  # finite, but 3e308 overflows to infinity (ClickHouse raises no error)
    ch.write_dataframe("t", wide(X), replace=True)
    with pytest.raises(sqlrp.InputError, match=r"overflowed.*rows with id 5"):
        sqlrp.project(ch, "t", "id", "ones", into="o", incremental=True)
    assert ch.fetchall("SELECT count() FROM o") == [(4,)]  # not one of the new rows
    assert not [t for t in ch.table_names() if t.startswith("_sqlrp")]
    X[5] = 1.0
    ch.write_dataframe("t", wide(X), replace=True)
    sqlrp.project(ch, "t", "id", "ones", into="o", incremental=True)
    got = ch.query_df("SELECT * FROM o ORDER BY id").drop(columns="id").to_numpy(dtype=float)
    assert rel_err(got, sqlrp.transform(proj, X)) <= RTOL


# ----------------------------------------------------------------------------------------------
# (c) bad input


def user_tables(db) -> set[str]:
    return {t for t in db.table_names() if not t.startswith("sqlrp_")}


def test_unknown_table(any_ch) -> None:
    any_ch.write_dataframe("present", wide(np.ones((2, 2))))
    with pytest.raises(sqlrp.InputError, match=r"no table named 'nope'\. Tables here: present"):
        sqlrp.project(any_ch, "nope", "id", k=3)
    with pytest.raises(sqlrp.InputError, match="no table named"):
        any_ch.columns("present", schema="no_such_database")


def test_unknown_columns(any_ch) -> None:
    any_ch.write_dataframe("t", wide(np.ones((3, 2))))
    with pytest.raises(sqlrp.InputError, match="no id column 'key'.*columns are: id, f0, f1"):
        sqlrp.project(any_ch, "t", "key", k=3)
    with pytest.raises(sqlrp.InputError, match="no feature column 'f9'"):
        sqlrp.project(any_ch, "t", "id", k=3, columns=["f0", "f9"])


def test_non_numeric_feature_column(any_ch) -> None:
    df = wide(np.ones((3, 2)))
    df["label"] = ["a", "b", "c"]
    any_ch.write_dataframe("t", df)
    with pytest.raises(sqlrp.InputError, match="column 'label' .* type String, not a number"):
        sqlrp.project(any_ch, "t", "id", k=3, columns=["f0", "label"])
    assert list(sqlrp.project(any_ch, "t", "id", k=2).columns) == ["id", "p0", "p1"]


def test_null_feature_is_refused_and_nothing_is_written(any_ch) -> None:
    X = np.arange(12, dtype=float).reshape(4, 3)
    df = wide(X)
    df["f1"] = df["f1"].astype(object)
    df.loc[2, "f1"] = None
    any_ch.write_dataframe("t", df)
    assert any_ch.fetchall("SELECT type FROM system.columns WHERE database = currentDatabase() AND name = 'f1'") == [
        ("Nullable(Float64)",)
    ]
    before = user_tables(any_ch)
    with pytest.raises(sqlrp.InputError, match=r"NULL or NaN .*id 2.*nulls='zero'"):
        sqlrp.project(any_ch, "t", "id", k=2, into="out")
    with pytest.raises(sqlrp.InputError, match=r"NULL or NaN .*id 2"):
        sqlrp.project(any_ch, "t", "id", k=2)
    assert user_tables(any_ch) == before
    # nulls="zero": NULL reads as 0
    out = sqlrp.project(any_ch, "t", "id", k=2, nulls="zero", projection="z", method="gaussian")
    X0 = X.copy()
    X0[2, 1] = 0.0
    want = sqlrp.transform(sqlrp.load_projection(any_ch, "z"), X0)
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL


def test_nan_feature_is_refused(ch) -> None:
    """A NaN stored in a Float64 column (SQL can write one; frames cannot, they load NaN as NULL).
    ClickHouse's ``nan = nan`` is false: the check needs ``isNaN`` (``ClickHouseDialect.is_nan``)."""
    ch.execute("CREATE TABLE t (id Int64, f0 Float64, f1 Float64, f2 Float64) ENGINE = MergeTree ORDER BY id")
    for i in range(4):
        ch.execute("INSERT INTO t VALUES (?, ?, ?, ?)", [i, 3.0 * i, float("nan") if i == 2 else 3.0 * i + 1, 1.0])
    assert ch.fetchall("SELECT isNaN(f1) FROM t ORDER BY id") == [(0,), (0,), (1,), (0,)]
    with pytest.raises(sqlrp.InputError, match=r"NULL or NaN .*id 2"):
        sqlrp.project(ch, "t", "id", k=2, method="gaussian")


def test_nan_in_a_frame_loads_as_null_and_is_refused(ch) -> None:
    X = np.arange(12, dtype=float).reshape(4, 3)
    X[2, 1] = np.nan
    ch.write_dataframe("t", wide(X))
    assert ch.fetchall("SELECT isNull(f1) FROM t ORDER BY id") == [(0,), (0,), (1,), (0,)]
    with pytest.raises(sqlrp.InputError, match=r"NULL or NaN .*id 2"):
        sqlrp.project(ch, "t", "id", k=2, method="gaussian")


def test_wrong_array_length(ch) -> None:
    df = pd.DataFrame({"id": [1, 2], "x": [np.ones(3), np.ones(2)]})
    ch.write_dataframe("t", df)
    with pytest.raises(sqlrp.InputError, match=r"length is not d = 3 \(rows with id 2\)"):
        sqlrp.project(ch, "t", "id", layout="array", array_column="x", k=2, d=3)


def test_null_array_cannot_be_loaded(ch) -> None:
    df = pd.DataFrame({"id": [1, 2], "x": [np.ones(3), None]})
    with pytest.raises(sqlrp.InputError, match="clickhouse: column 'x' .*arrays cannot be NULL"):
        ch.write_dataframe("t", df)
    assert "t" not in ch.table_names()


def test_stored_projection_of_another_d(ch) -> None:
    sqlrp.create_projection(ch, "d5", "achlioptas", d=5, k=2, s=1, seed=0)
    ch.write_dataframe("t", wide(np.ones((3, 4))))
    with pytest.raises(sqlrp.InputError, match="expects d = 5 features but table 't' gives 4"):
        sqlrp.project(ch, "t", "id", "d5")


def test_hostile_names_are_quoted(ch) -> None:
    names = ['we"ird', "semi;colon", "has space", "ünïcødé_表", "select", "Robert'); DROP TABLE t;--", "a`b", "back\\s"]
    X = np.random.default_rng(1).normal(size=(5, len(names)))
    df = pd.DataFrame(X, columns=names)
    df.insert(0, HOSTILE_ID, np.arange(5))
    ch.write_dataframe(HOSTILE_TABLE, df)
    assert [c.name for c in ch.columns(HOSTILE_TABLE)] == [HOSTILE_ID, *names]
    out = sqlrp.project(ch, HOSTILE_TABLE, HOSTILE_ID, "p ' ; --", method="gaussian", k=3, into="out ' \\ \"")
    assert out is None
    got = ch.query_df(f"SELECT * FROM {ch_quote('out ' + chr(39) + ' ' + chr(92) + ' ' + chr(34))} ORDER BY 1")
    want = sqlrp.transform(sqlrp.load_projection(ch, "p ' ; --"), X)
    assert rel_err(got.drop(columns=HOSTILE_ID).to_numpy(dtype=float), want) <= RTOL
    assert HOSTILE_TABLE in ch.table_names()


def ch_quote(name: str) -> str:
    from sqlrp.backends.clickhouse import quote

    return quote(name)


# ----------------------------------------------------------------------------------------------
# (d) connect(), wrapped connections, one database per process


def test_connect_chdb_url(engine) -> None:
    db = sqlrp.connect("chdb://")
    try:
        assert isinstance(db, ChdbBackend) and db.dialect == "clickhouse" and db.url == "chdb://"
        assert db.owns_connection and not db.transactional
        db.write_dataframe("connect_url_t", wide(np.arange(6.0).reshape(3, 2)))
        out = sqlrp.project(db, "connect_url_t", "id", method="gaussian", k=2, projection="connect_url_p")
        want = sqlrp.transform(sqlrp.load_projection(db, "connect_url_p"), np.arange(6.0).reshape(3, 2))
        assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL
        sqlrp.drop_projection(db, "connect_url_p")
        db.execute("DROP TABLE connect_url_t")
    finally:
        db.close()


def test_wrapped_chdb_connection(engine) -> None:
    import chdb

    conn = chdb.connect(":memory:")
    db = sqlrp.connect(conn)
    assert isinstance(db, ChdbBackend) and not db.owns_connection
    X = np.random.default_rng(2).integers(0, 16, (250, 8)).astype(float)
    db.write_dataframe("wrapped_t", wide(X))
    sqlrp.create_projection(db, "wrapped_p", "achlioptas", d=8, k=4, s=3, seed=1)
    want = sqlrp.transform(sqlrp.load_projection(db, "wrapped_p"), X)
    out = sqlrp.project(db, "wrapped_t", "id", "wrapped_p")
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL
    # streaming on the caller's connection: the stream runs on a second connection, so queries
    # between chunks do not end it
    chunks = []
    for chunk in sqlrp.project(db, "wrapped_t", "id", "wrapped_p", chunk_rows=60):
        chunks.append(chunk)
        assert db.fetchall("SELECT count() FROM wrapped_t") == [(250,)]
    assert [len(c) for c in chunks] == [60, 60, 60, 60, 10]
    streamed = pd.concat(chunks, ignore_index=True)
    assert rel_err(streamed.drop(columns="id").to_numpy(dtype=float), want) <= RTOL
    sqlrp.drop_projection(db, "wrapped_p")
    db.execute("DROP TABLE wrapped_t")
    db.close()
    assert "1" in str(conn.query("SELECT 1", "CSV"))  # the caller's connection is still open
    conn.close()


def test_streaming_in_another_database(ch) -> None:
    ch.write_dataframe("s", wide(np.arange(20.0).reshape(10, 2)))
    chunks = list(ch.iter_chunks("SELECT * FROM s ORDER BY id", rows=4))
    assert [len(c) for c in chunks] == [4, 4, 2]
    assert list(pd.concat(chunks)["id"]) == list(range(10))
    assert list(ch.iter_chunks("SELECT * FROM s WHERE id < 0", rows=4)) == []


def test_second_path_in_one_process_is_refused(engine, tmp_path: Path) -> None:
    with pytest.raises(InvalidParameter, match=r"clickhouse \(chdb\): .*':memory:'.*one database per process"):
        sqlrp.connect(f"chdb:///{tmp_path}/other")
    assert engine.fetchall("SELECT 1") == [(1,)]  # the open engine is unharmed


def test_database_folder_persists(tmp_path: Path) -> None:
    """``chdb:///path``: projections and tables survive closing and reopening (a process of its own:
    this one holds the in-memory engine)."""
    need_chdb()
    script = textwrap.dedent(
        f"""
        import numpy as np, pandas as pd, sqlrp
        url = "chdb:///{tmp_path}/db"
        X = np.arange(40.0).reshape(10, 4)
        db = sqlrp.connect(url)
        frame = pd.DataFrame(X, columns=list("abcd"))
        frame.insert(0, "id", np.arange(10))
        db.write_dataframe("t", frame)
        sqlrp.create_projection(db, "kept", "achlioptas", d=4, k=2, s=1, seed=3)
        db.close()
        db = sqlrp.connect(url)
        out = sqlrp.project(db, "t", "id", "kept")
        want = sqlrp.transform(sqlrp.load_projection(db, "kept"), X)
        assert np.abs(out.drop(columns="id").to_numpy() - want).max() <= 1e-9 * np.abs(want).max()
        try:
            sqlrp.connect("chdb://")
        except sqlrp.InvalidParameter as exc:
            assert "one database per process" in str(exc), exc
        else:
            raise AssertionError("a second path was opened")
        db.close()
        print("persisted", list(sqlrp.list_projections(sqlrp.connect(url))["name"]))
        """
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "persisted ['kept']" in done.stdout


class _FakeClient:
    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_server_url_becomes_client_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    clickhouse_connect = pytest.importorskip("clickhouse_connect")
    made: list[_FakeClient] = []

    def get_client(**kwargs: object) -> _FakeClient:
        made.append(_FakeClient(**kwargs))
        return made[-1]

    monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
    db = sqlrp.connect("clickhouse://alice:s3cr%40t@ch.example:8124/analytics?secure=true&max_threads=4")
    assert isinstance(db, ClickHouseServerBackend) and db.dialect == "clickhouse"
    assert made[0].kwargs == {
        "host": "ch.example",
        "port": 8124,
        "username": "alice",
        "password": "s3cr@t",
        "database": "analytics",
        "secure": True,
        "settings": {"prefer_column_name_to_alias": 1, "max_threads": "4"},  # sqlrp's session setting first
    }
    assert "s3cr" not in db.url and "ch.example" in db.url
    db.close()
    assert made[0].closed
    https = sqlrp.connect("clickhouse+https://ch.example/?compress=lz4&connect_timeout=0&verify=false")
    assert made[1].kwargs == {
        "host": "ch.example",
        "secure": True,
        "compress": "lz4",
        "connect_timeout": 0,
        "verify": False,
        "settings": {"prefer_column_name_to_alias": 1},
    }
    https.close()


# ----------------------------------------------------------------------------------------------
# (e) the registry


def test_migrations_apply_once(any_ch) -> None:
    registry = Registry(any_ch, migrate=False)
    assert registry.migrate() == [
        "0001_registry.sql",
        "0002_pairs_plan.sql",
        "0003_search_index.sql",
        "0004_index_params.sql",
        "0005_projection_digest.sql",
    ]
    assert registry.migrate() == []
    assert registry.version() == 5
    assert any_ch.fetchall("SELECT count(*) FROM sqlrp_schema_version") == [(5,)]
    assert [v for v, _, _ in migration_files("clickhouse")] == [v for v, _, _ in migration_files("duckdb")]
    engines = dict(
        any_ch.fetchall("SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name")
    )
    assert set(engines) >= {"sqlrp_projection", "sqlrp_linear_entry", "sqlrp_pairs_entry", "sqlrp_schema_version"}
    assert set(engines.values()) == {"MergeTree"}


@pytest.mark.parametrize("version", [2, 4])
def test_a_registry_made_by_earlier_releases_works(ch, version) -> None:
    """A ClickHouse registry made by the hand-written migrations of earlier releases (version 2: then
    upgraded by the rendered ones; version 4: given the digests of version 5)."""
    from testkit.engine_cases import build_by_hand, use_registry

    build_by_hand(ch, version)
    assert Registry(ch, migrate=False).migrate() == [f for _, f, _ in migration_files("clickhouse")][version:]
    use_registry(ch)


def test_save_list_load_drop(any_ch) -> None:
    p = sqlrp.create_projection(any_ch, "a name with 'quotes' \\ ?", "achlioptas", d=30, k=8, s=3, seed=4)
    sqlrp.create_projection(any_ch, "g", "gaussian", d=5, k=2, seed=None)
    listing = sqlrp.list_projections(any_ch)
    assert list(listing["name"]) == ["a name with 'quotes' \\ ?", "g"]
    row = listing.iloc[0]
    assert (row["method"], row["d"], row["k"], row["nnz"], row["seed"]) == ("achlioptas", 30, 8, p.linear.nnz, 4)
    assert pd.isna(listing.iloc[1]["seed"])
    assert isinstance(row["created_at"], (pd.Timestamp, np.datetime64)) or hasattr(row["created_at"], "year")
    loaded = sqlrp.load_projection(any_ch, "a name with 'quotes' \\ ?")
    assert loaded.params == {"s": 3.0, "s_requested": 3.0}
    assert np.array_equal(loaded.linear.dense(), p.linear.dense())
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        sqlrp.create_projection(any_ch, "g", "gaussian", d=5, k=2)
    sqlrp.create_projection(any_ch, "g", "gaussian", d=5, k=3, replace=True)
    assert sqlrp.load_projection(any_ch, "g").k == 3
    assert any_ch.fetchall("SELECT count() FROM sqlrp_projection WHERE name = 'g'") == [(1,)]
    sqlrp.drop_projection(any_ch, "g")
    with pytest.raises(sqlrp.ProjectionNotFound, match="no stored projection named 'g'.*Stored: a name"):
        sqlrp.load_projection(any_ch, "g")
    with pytest.raises(sqlrp.ProjectionNotFound):
        sqlrp.drop_projection(any_ch, "g")
    for table in ("sqlrp_linear_entry", "sqlrp_combiner_term", "sqlrp_combiner_factor"):
        assert any_ch.fetchall(f"SELECT count(*) FROM {table} WHERE projection = 'g'") == [(0,)]


def test_kernel_shaped_ir_round_trips(ch) -> None:
    from sqlrp.core.ir import Combiner, LinearStage, Projection

    lin = LinearStage(
        d=4,
        p=3,
        vector=[0, 0, 1, 2, 2],
        feature=[0, 3, 1, 2, 3],
        weight=[1, -1, 1, 1, -1],
        bias=[0.5, 0, 0],
        power=[1, 1, 2],
    )
    comb = Combiner(
        k=2,
        term_component=[0, 0, 1],
        term_weight=[1.0, -1.0, 2.0],
        factor_term=[0, 0, 1, 2],
        factor_vector=[0, 1, 2, 1],
    )
    proj = Projection("custom", lin, comb, scale=0.25, params={"note": "test"}, seed=None)
    Registry(ch).save(proj, "k")
    back = sqlrp.load_projection(ch, "k")
    X = np.random.default_rng(0).standard_normal((6, 4))
    assert np.allclose(sqlrp.transform(back, X), sqlrp.transform(proj, X), rtol=1e-12)
    ch.write_dataframe("t", wide(X))
    out = sqlrp.project(ch, "t", "id", "k")
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), sqlrp.transform(proj, X)) <= RTOL


def test_pairs_plan_is_stored_and_reused(ch, digits_table) -> None:
    proj = sqlrp.create_projection(ch, "d3", "achlioptas", d=64, k=20, s=3, seed=5)
    first = sqlrp.project(ch, "digits", "id", "d3", strategy="pairs")
    stored = ch.fetchall("SELECT count(), uniqExact(budget) FROM sqlrp_pairs_entry WHERE projection = 'd3'")
    assert stored[0][0] > 0 and stored[0][1] == 1
    second = sqlrp.project(ch, "digits", "id", "d3", strategy="pairs")
    assert ch.fetchall("SELECT count() FROM sqlrp_pairs_entry WHERE projection = 'd3'")[0][0] == stored[0][0]
    want = sqlrp.transform(proj, digits_table)
    for out in (first, second):
        assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL


def test_failed_save_leaves_nothing(ch, monkeypatch: pytest.MonkeyPatch) -> None:
    """No transactions: a save that fails half-way deletes what it wrote (store.py compensates)."""
    Registry(ch)
    real = ch.insert_frame

    def failing(table: str, df: pd.DataFrame) -> None:
        if table == "sqlrp_combiner_term":
            raise RuntimeError("disk full (simulated)")
        real(table, df)

    monkeypatch.setattr(ch, "insert_frame", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        sqlrp.create_projection(ch, "half", "achlioptas", d=10, k=3, s=1, seed=0)
    monkeypatch.undo()
    assert not Registry(ch).exists("half")
    for table in ("sqlrp_projection", "sqlrp_linear_entry", "sqlrp_combiner_term"):
        column = "name" if table == "sqlrp_projection" else "projection"
        assert ch.fetchall(f"SELECT count() FROM {table} WHERE {column} = 'half'") == [(0,)]


# ----------------------------------------------------------------------------------------------
# the backend's own contract


def test_bind_replaces_only_placeholders_outside_quotes() -> None:
    sql = "SELECT '?', \"a?\", `b?`, ? -- what?\n, ? /* ? */"
    assert bind(sql, ["x'y", None]) == "SELECT '?', \"a?\", `b?`, 'x''y' -- what?\n, NULL /* ? */"
    assert bind("SELECT 'it\\'s ?', ?", [1]) == "SELECT 'it\\'s ?', 1"
    assert bind("SELECT ?", None) == "SELECT ?"
    with pytest.raises(InvalidParameter, match=r"clickhouse: the statement has more \? placeholders than the 1"):
        bind("SELECT ?, ?", [1])
    with pytest.raises(InvalidParameter, match=r"clickhouse: 2 parameters for 1 \? placeholders"):
        bind("SELECT ?", [1, 2])


def test_literals_round_trip_exactly(ch) -> None:
    values = [
        "plain",
        "it's",
        "back\\slash \\' \\n",
        "new\nline\ttab",
        "Robert'); DROP TABLE t;--",
        "ünïcødé_表 ?",
        "",
        0,
        -1,
        2**63 - 1,
        -(2**63),
        True,
        None,
        np.int32(7),
        np.float64(0.1),
    ]
    row = ch.fetchall("SELECT " + ", ".join("?" for _ in values), values)[0]
    assert list(row) == [v.item() if isinstance(v, np.generic) else v for v in values]
    floats = np.random.default_rng(3).standard_normal(50) * 10.0 ** np.random.default_rng(4).integers(-300, 300, 50)
    got = ch.fetchall("SELECT " + ", ".join("?" for _ in floats), list(floats))[0]
    assert np.array_equal(np.array(got), floats)  # bit for bit
    special = ch.fetchall("SELECT ?, ?, ?, isNaN(?)", [float("inf"), float("-inf"), 5e-324, float("nan")])[0]
    assert special == (float("inf"), float("-inf"), 5e-324, 1)
    assert literal(float("nan")) == "nan" and literal(None) == "NULL" and literal(True) == "true"
    assert ch.fetchall("SELECT 5 -?, 5 -?", [-1, -0.5]) == [(6, 5.5)]  # not the comment "--1"


@pytest.mark.parametrize(
    "ch_type, numeric, numeric_array, sql",
    [
        ("Float64", True, False, "double"),
        ("Nullable(Float64)", True, False, "double"),
        ("Float32", True, False, "float"),
        ("LowCardinality(Nullable(Float64))", True, False, "double"),
        ("Int64", True, False, "bigint"),
        ("Int32", True, False, "integer"),
        ("UInt8", True, False, "utinyint"),
        ("UInt64", True, False, "ubigint"),
        ("Int128", True, False, "hugeint"),
        ("Decimal(10, 2)", True, False, "decimal(10, 2)"),
        ("Decimal64(4)", True, False, "decimal"),
        ("Array(Float64)", False, True, "double[]"),
        ("Array(Nullable(Int32))", False, True, "integer[]"),
        ("Array(String)", False, False, "String[]"),
        ("Array(Array(Float64))", False, False, "Array(Float64)[]"),
        ("String", False, False, "String"),
        ("LowCardinality(String)", False, False, "String"),
        ("Nullable(String)", False, False, "String"),
        ("Bool", False, False, "Bool"),
        ("DateTime", False, False, "DateTime"),
    ],
)
def test_column_types(ch_type: str, numeric: bool, numeric_array: bool, sql: str) -> None:
    info = column_info("c", ch_type)
    assert (info.numeric, info.numeric_array, info.type) == (numeric, numeric_array, sql)
    if not ch_type.startswith("Array"):
        assert sql_type(ch_type) == sql


def test_every_numeric_type_projects_exactly(ch) -> None:
    """Columns of every ClickHouse number type are features; the CAST to Nullable(Float64) reads
    them exactly (integers up to 2^53, Float32 widened, Decimal)."""
    types = ["Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Float32", "Float64"]
    types += ["Nullable(Float64)", "Decimal(18, 4)", "LowCardinality(Float64)"]
    defs = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
    ch.execute("SET allow_suspicious_low_cardinality_types = 1")
    ch.execute(f"CREATE TABLE typed (id Int64, label String, {defs}) ENGINE = MergeTree ORDER BY id")
    rng = np.random.default_rng(5)
    X = rng.integers(0, 100, (20, len(types))).astype(float)
    X[:, types.index("Float32")] = rng.integers(0, 2**20, 20) / 8.0  # exact in float32
    X[:, types.index("Decimal(18, 4)")] = rng.integers(0, 10**6, 20) / 10**4
    X[:, types.index("Int64")] = 2**53 - rng.integers(0, 100, 20)  # exact in a double
    rows = ", ".join(
        "(" + ", ".join([str(i), literal(f"row {i}")] + [repr(float(v)) for v in X[i]]) + ")" for i in range(len(X))
    )
    ch.execute(f"INSERT INTO typed VALUES {rows}")
    info = ch.columns("typed")
    assert [c.name for c in info if c.numeric] == ["id"] + [f"c{i}" for i in range(len(types))]
    out = sqlrp.project(ch, "typed", "id", "typed p", method="gaussian", k=4, seed=2)
    want = sqlrp.transform(sqlrp.load_projection(ch, "typed p"), X)
    assert rel_err(out.drop(columns="id").to_numpy(dtype=float), want) <= RTOL


def test_frames_round_trip(any_ch) -> None:
    df = pd.DataFrame(
        {
            "i": np.array([1, -2, 3], dtype=np.int64),
            "f": [0.1, np.nan, -np.inf],
            "n": pd.Series([1.5, None, 2.5], dtype=object),
            "ni": pd.array([1, None, 3], dtype="Int64"),
            "s": ["a", "b'\\", "ü"],
            "x": [np.array([1.0, 2.0]), np.array([]), np.array([np.nan])],
            "b": [True, False, True],
        }
    )
    any_ch.write_dataframe("frames", df)
    types = dict(
        any_ch.fetchall("SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = 'frames'")
    )
    assert types == {
        "i": "Int64",
        "f": "Nullable(Float64)",
        "n": "Nullable(Float64)",
        "ni": "Nullable(Int64)",
        "s": "String",
        "x": "Array(Float64)",
        "b": "Bool",
    }
    rows = any_ch.fetchall("SELECT i, f, isNaN(f), n, ni, s, x, b FROM frames ORDER BY i")
    assert rows[0] == (-2, None, None, None, None, "b'\\", [], False)  # NaN in a frame: missing, NULL
    assert rows[1] == (1, 0.1, 0, 1.5, 1, "a", [1.0, 2.0], True)
    assert rows[2][:6] == (3, -np.inf, 0, 2.5, 3, "ü") and np.isnan(rows[2][6][0])
    any_ch.insert_frame("frames", df.iloc[:1])
    assert any_ch.fetchall("SELECT count() FROM frames") == [(4,)]
    with pytest.raises(Exception, match="NULL"):  # a NULL for a non-Nullable column is an error, not 0
        any_ch.insert_frame("frames", pd.DataFrame({"i": pd.array([None], dtype="Int64")}))
    with pytest.raises(Exception, match="NULL"):
        any_ch.insert_frame("frames", pd.DataFrame({"i": [5], "b": pd.array([None], dtype="boolean")}))
    assert any_ch.fetchall("SELECT count() FROM frames") == [(4,)]
    strings = pd.Series(["p", None], dtype="string")  # pandas' string dtype: missing -> NULL
    any_ch.write_dataframe("strings", pd.DataFrame({"s": strings}))
    assert any_ch.fetchall("SELECT s FROM strings ORDER BY s") == [("p",), (None,)]
    empty = df.iloc[:0]
    any_ch.write_dataframe("empty", empty[["i", "f"]])
    assert any_ch.fetchall("SELECT count() FROM empty") == [(0,)]


def test_failed_replace_keeps_the_old_table(ch, monkeypatch: pytest.MonkeyPatch) -> None:
    ch.write_dataframe("keep", wide(np.ones((3, 2))))

    def fail(*args: object) -> None:
        raise RuntimeError("load failed (simulated)")

    monkeypatch.setattr(ch, "_insert_arrow", fail)
    with pytest.raises(RuntimeError, match="simulated"):
        ch.write_dataframe("keep", wide(np.zeros((5, 2))), replace=True)
    monkeypatch.undo()
    assert ch.fetchall("SELECT count(), sum(f0) FROM keep") == [(3, 3.0)]
    assert ch.table_names() == ["keep"]  # no staging table left
    with pytest.raises(Exception, match="already exists"):
        ch.write_dataframe("keep", wide(np.zeros((5, 2))))
    assert ch.table_names() == ["keep"]


def test_transaction_only_groups(ch) -> None:
    ch.write_dataframe("t", wide(np.ones((2, 1))))
    with pytest.raises(RuntimeError), ch.transaction():
        ch.execute("INSERT INTO t VALUES (?, ?)", [7, 2.0])
        raise RuntimeError
    assert ch.fetchall("SELECT count() FROM t") == [(3,)]  # no rollback: ClickHouse has no transactions


# ----------------------------------------------------------------------------------------------
# ClickHouse behaviours the compiler relies on (evidence for the dialect profile)


def test_clickhouse_semantics(ch) -> None:
    one = lambda sql: ch.fetchall(sql)[0]  # noqa: E731
    # sqlglot renders CAST(x AS DOUBLE) as CAST(x AS Nullable(Float64)): NULL stays NULL
    assert one("SELECT CAST(NULL AS Nullable(Float64)), toTypeName(CAST(toInt32(3) AS Nullable(Float64)))") == (
        None,
        "Nullable(Float64)",
    )
    with pytest.raises(Exception, match="Cannot convert NULL to a non-nullable type"):
        ch.fetchall("SELECT CAST(NULL AS Float64)")
    # ... and an unparsable string becomes NULL rather than an error
    assert one("SELECT CAST('abc' AS Nullable(Float64))") == (None,)
    # float overflow gives inf, inf - inf NaN; NaN compares unequal to itself (IEEE)
    assert one("SELECT 1e308 + 1e308, -1e308 - 1e308, isNaN((1e308 + 1e308) - (1e308 + 1e308))") == (
        np.inf,
        -np.inf,
        1,
    )
    assert one("SELECT CAST('NaN' AS Nullable(Float64)) = CAST('NaN' AS Nullable(Float64)), isNaN(nan)") == (0, 1)
    # integer literals take the smallest type; integer arithmetic wraps silently
    assert one("SELECT toTypeName(1), toTypeName(-1), toTypeName(300), toTypeName(2 * 3)") == (
        "UInt8",
        "Int8",
        "UInt16",
        "UInt16",
    )
    assert one("SELECT 4294967296 * 4294967296, toInt64(9223372036854775807) + 1") == (0, -(2**63))
    # arrays: 1-based, out of range reads 0 (not NULL)
    assert one("SELECT [1.5, 2.5][1], [1.5, 2.5][0], [1.5, 2.5][3]") == (1.5, 0.0, 0.0)
    # aggregates of no rows give 0 (count, sum, max), not NULL; of only NULLs, NULL
    assert one("SELECT count(), sum(x), max(x) FROM (SELECT toFloat64(number) AS x FROM numbers(3)) WHERE x > 9") == (
        0,
        0.0,
        0.0,
    )
    assert one("SELECT sum(x) FROM (SELECT CAST(NULL AS Nullable(Float64)) AS x)") == (None,)
    # LEFT JOIN fills non-matching rows with defaults unless join_use_nulls = 1
    join = "SELECT b.y FROM (SELECT 1 AS x) a LEFT JOIN (SELECT 2 AS x, 5.5 AS y) b ON a.x = b.x"
    assert one(join) == (0.0,)
    assert one(f"{join} SETTINGS join_use_nulls = 1") == (None,)
    # correlated subqueries work (store.list uses one); lightweight DELETE on MergeTree is immediate
    ch.execute("CREATE TABLE m (k String, v Int32) ENGINE = MergeTree ORDER BY k")
    ch.execute("INSERT INTO m VALUES ('a', 1), ('a', 2), ('b', 3)")
    assert ch.fetchall("SELECT o.k, (SELECT count() FROM m i WHERE i.k = o.k) FROM m o ORDER BY o.v") == [
        ("a", 2),
        ("a", 2),
        ("b", 1),
    ]
    ch.execute("DELETE FROM m WHERE k = ?", ["a"])
    assert ch.fetchall("SELECT count() FROM m") == [(1,)]
    # `projection` is a keyword in a CREATE TABLE column list (PROJECTION definitions)
    with pytest.raises(Exception, match="Syntax error"):
        ch.execute("CREATE TABLE kw (projection String, v Int32) ENGINE = MergeTree ORDER BY v")
    # information_schema needs currentDatabase(): there is no current_schema()
    with pytest.raises(Exception, match="current_schema"):
        ch.fetchall("SELECT current_schema()")


def test_input_check_past_max_query_size_is_cut_to_fit(ch: ChdbBackend) -> None:
    """The NULL/NaN check of every feature column was one statement; at d = 5,000 it was past ClickHouse's
    ``max_query_size`` (262,144 bytes: a raw syntax error).  Now it is cut into statements that fit, and
    still finds the row (issue 41).  The same size at a cost CI affords: 1,200 columns of 100-character
    names; the clean table's projection then matches NumPy's."""
    d = 1200
    X = np.random.default_rng(0).normal(size=(4, d))
    X[2, 1111] = np.nan
    frame = pd.DataFrame(X, columns=[f"{'a_rather_long_feature_name_' * 3}{i:019d}" for i in range(d)])
    frame.insert(0, "id", np.arange(4))
    ch.write_dataframe("wide_long_names", frame)
    with pytest.raises(sqlrp.InputError, match=r"in feature columns \(rows with id 2\)"):
        sqlrp.project(ch, "wide_long_names", "id", k=4)
    ch.write_dataframe("clean_long_names", frame.fillna(0.0))
    out = sqlrp.project(ch, "clean_long_names", "id", k=4, save_as="long_names_rp").sort_values("id")
    want = sqlrp.transform(sqlrp.load_projection(ch, "long_names_rp"), np.nan_to_num(X))
    got = out[[f"p{j}" for j in range(4)]].to_numpy()
    assert np.max(np.abs(got - want)) <= 1e-9 * np.abs(want).max()
