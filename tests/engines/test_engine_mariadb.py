"""MariaDB 10.11 through the SQLAlchemy backend (PyMySQL), on a real server the test setup starts
(``testkit/mariadbserver.py``; fixtures ``maria_url`` and ``maria`` in ``tests/conftest.py``).

What runs there today is compared with the NumPy reference to 1e-9: the wide layout (inline, mailman,
pairs; pooled by a group), the long layout joining a loaded matrix table, and the SQL ``sqlrp compile
--dialect mysql`` prints.  Issue 41's MariaDB instances each have a regression test: zeros read as NaN
by the input check, a NaN frame ending in a driver traceback, statements over the server's
``max_allowed_packet``, and text keys merged by the default collation (``utf8mb4_general_ci``).
The registry kept on MariaDB, and all that stands on it (issue 45): ``test_engine_mariadb_registry.py``.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import sqlrp
from sqlrp.cli import main
from sqlrp.compiler import compile_statements
from sqlrp.core.errors import EngineLimit
from sqlrp.dialects import get_dialect
from sqlrp.dialects.mysql import MAX_TABLE_COLUMNS, PACKET_HEADROOM, exact_keys
from sqlrp.methods import make_projection, reference
from testkit.frames import wide_frame

RTOL = 1e-9

#: ids a case- and accent-insensitive, PAD SPACE collation takes for one: three groups of look-alikes
CONFUSABLE = ["a", "A", "a ", "b", "é", "e", "E ", "", " ", "ß", "s"]


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(got - want).max()) <= RTOL * scale


def by_id(frame: pd.DataFrame, ids: list, key: str = "id") -> np.ndarray:
    """The output rows in the order of ``ids``: each id exactly once (a merged or doubled id fails)."""
    assert sorted(frame[key].tolist()) == sorted(ids), frame[key].tolist()
    return frame.set_index(key).loc[ids].to_numpy(dtype=float)


def long_rows(ids: list[str], X: np.ndarray) -> pd.DataFrame:
    rows, cols = np.nonzero(X)
    return pd.DataFrame({"id": np.array(ids, dtype=object)[rows], "feature": cols, "value": X[rows, cols]})


def matrix_frame(projection) -> pd.DataFrame:
    lin = projection.linear
    return pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight})


def printed(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue().rstrip().rstrip(";")


# ---- the server and the profile ----------------------------------------------------------------


def test_the_server_is_what_the_profile_says(maria):
    """The facts the MySQL profile rests on, measured on the server the tests start."""
    assert maria.dialect == "mysql" and not maria.transactional
    assert maria.fetchall("SELECT CAST('NaN' AS DOUBLE)")[0][0] == 0.0  # no NaN: the cast is 0
    assert maria.fetchall("SELECT @@collation_database")[0][0] == "utf8mb4_general_ci"
    assert maria.fetchall("SELECT 'a' = 'A ', 'e' = 'é'")[0] == (1, 1)  # merged by the default collation
    packet = maria.fetchall("SELECT @@max_allowed_packet")[0][0]
    assert packet == 16 * 1024 * 1024  # MariaDB's default
    assert maria.sql_dialect.max_statement_bytes == packet - PACKET_HEADROOM
    profile = get_dialect("mariadb")
    assert profile.name == "mysql" and profile.max_columns == 1017 and not profile.holds_nan
    assert profile.max_statement_bytes == 16 * 1024 * 1024 - PACKET_HEADROOM


# ---- NaN: the engine has none -------------------------------------------------------------------


def test_a_clean_table_with_zeros_passes_the_input_check(maria):
    """The check compared every feature with CAST('NaN' AS DOUBLE), which MariaDB reads as 0: every
    clean table with a zero "had NaN values", and --nulls zero failed the same way."""
    X = np.random.default_rng(1).normal(size=(30, 8))
    X[X < 0.2] = 0.0
    maria.write_dataframe("t", wide_frame(X))
    options = dict(method="achlioptas", k=6, seed=1, s=3)
    projection = sqlrp.plan(maria, "t", "id", store=False, **options).projection
    for nulls in ("error", "zero"):
        out = sqlrp.project(maria, "t", "id", nulls=nulls, **options)
        close(by_id(out, list(range(30))), reference.transform(projection, X))
    # the long layout's check too (a matrix table)
    maria.write_dataframe("lt", long_rows([str(i) for i in range(30)], X).assign(value=lambda f: f["value"] * 0))
    maria.write_dataframe("m", matrix_frame(projection))
    out = sqlrp.project(maria, "lt", "id", projection, layout="long", matrix="m", d=8, store=False)
    assert np.all(out.drop(columns="id").to_numpy() == 0.0)


def test_a_null_is_still_found_and_read_as_zero_on_request(maria):
    X = np.random.default_rng(2).normal(size=(10, 4))
    maria.write_dataframe("t", wide_frame(X))
    maria.execute("UPDATE `t` SET `f2` = NULL WHERE `id` = 7")
    with pytest.raises(sqlrp.InputError, match=r"NULL.*rows with id 7"):
        sqlrp.project(maria, "t", "id", k=3, seed=1)
    options = dict(method="gaussian", k=3, seed=1)
    projection = sqlrp.plan(maria, "t", "id", store=False, **options).projection
    X[7, 2] = 0.0
    close(by_id(sqlrp.project(maria, "t", "id", nulls="zero", **options), list(range(10))),
          reference.transform(projection, X))  # fmt: skip


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_frame_with_nan_or_infinity_is_refused_in_one_line_before_anything_is_written(maria, bad):
    X = np.random.default_rng(3).normal(size=(5, 3))
    X[3, 1] = bad
    frame = wide_frame(X)
    with pytest.raises(sqlrp.InputError, match=r"column 'f1' holds .*inf|column 'f1' holds nan") as caught:
        maria.write_dataframe("t", frame)
    assert "\n" not in str(caught.value) and "mysql stores no NaN or infinity" in str(caught.value)
    assert "t" not in maria.table_names()  # nothing was created
    # the frame itself: "the frame", not a scratch table's name (a pandas NaN is a missing value, as on
    # every engine: nulls='zero' reads it as 0; an infinity is refused whatever nulls says)
    with pytest.raises(sqlrp.InputError, match=r"^the frame"):
        sqlrp.project(maria, frame, "id", k=2, seed=1)
    if np.isnan(bad):
        p = sqlrp.create_projection(None, None, "achlioptas", d=3, k=2, seed=1)
        out = sqlrp.project(maria, frame, "id", p, nulls="zero")
        X[3, 1] = 0.0
        close(out.iloc[:, 1:].to_numpy(), reference.transform(p, X))
    else:
        with pytest.raises(sqlrp.InputError, match=r"^the frame"):
            sqlrp.project(maria, frame, "id", k=2, seed=1, nulls="zero")
    assert [n for n in maria.table_names() if not n.startswith("sqlrp_")] == []
    # an object column too, and NULL (None) is not refused
    mixed = pd.DataFrame({"id": [1, 2], "x": [1.5, None]}, dtype=object)
    maria.write_dataframe("ok", mixed)
    assert maria.fetchall("SELECT COUNT(*) FROM `ok` WHERE `x` IS NULL")[0][0] == 1
    with pytest.raises(sqlrp.InputError, match="column 'x' holds nan"):
        maria.insert_frame("ok", pd.DataFrame({"id": [3], "x": [float("nan")]}, dtype=object))
    assert maria.fetchall("SELECT COUNT(*) FROM `ok`")[0][0] == 2


def test_engines_without_nan_test_only_for_infinity():
    """The class of the zeros-as-NaN defect: where a DOUBLE holds no NaN (MySQL, MariaDB; SQL Server,
    where CAST('NaN' AS FLOAT) is an error) the check does not compare with 'NaN' at all."""
    from sqlglot import exp

    for name in ("mysql", "mariadb", "tsql"):
        profile = get_dialect(name)
        assert not profile.holds_nan
        sql = profile.render(exp.select("*").from_("t").where(profile.not_finite(exp.column("x"))))
        assert "NaN" not in sql and "1.7976931348623157" in sql, sql
    for name in ("duckdb", "postgres"):
        assert "'NaN'" in get_dialect(name).render(get_dialect(name).not_finite(exp.column("x")))


# ---- statement size: the server's max_allowed_packet ----------------------------------------------


@contextlib.contextmanager
def packet_limit(maria_url: str, database: str, limit: int):
    """A new connection to ``database`` while the server's ``max_allowed_packet`` is ``limit`` bytes
    (the connection reads it on connect), then 16 MiB again."""
    admin = sa.create_engine(maria_url)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"SET GLOBAL max_allowed_packet = {limit}")
    try:
        db = sqlrp.connect(f"{maria_url}/{database}")
        try:
            yield db
        finally:
            db.close()
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql("SET GLOBAL max_allowed_packet = 16777216")
        admin.dispose()


def test_statements_stay_within_the_servers_packet_and_keys_join_exactly(maria, maria_url):
    """A dense 100 x 100 matrix inlined is about 300 KB of SQL: over a 256 KiB packet the server drops
    the connection ("server has gone away").  The connection reads the limit and the compiler splits
    the statement into staged blocks joined on the key -- here text ids that the default collation
    would join each with its look-alikes."""
    ids = [f"r{i}" for i in range(8)] + CONFUSABLE
    X = np.random.default_rng(4).normal(size=(len(ids), 100))
    frame = wide_frame(X)
    frame["id"] = ids
    maria.write_dataframe("big", frame)
    limit = 256 * 1024
    with packet_limit(maria_url, maria.fetchall("SELECT DATABASE()")[0][0], limit) as db:
        assert db.sql_dialect.max_statement_bytes == limit - PACKET_HEADROOM
        options = dict(method="gaussian", k=100, seed=1)
        plan = sqlrp.plan(db, "big", "id", store=False, **options)
        assert len(compile_statements(plan, get_dialect("duckdb")).main) > limit  # one statement would not fit
        statements = compile_statements(plan, db.sql_dialect)
        assert statements.setup and all(len(s) <= limit for s in [*statements.setup, statements.main])
        out = sqlrp.project(db, "big", "id", strategy="inline", **options)
        close(by_id(out, ids), reference.transform(plan.projection, X))
        assert db.table_names() == ["big"]  # the staged blocks are gone
        with pytest.raises(EngineLimit, match=r"^mysql: the statement is 300,009 bytes.*262,144.*max_allowed"):
            db.fetchall("SELECT '" + "x" * 300_000 + "'")
        assert db.fetchall("SELECT 1") == [(1,)]  # the connection is still there


def test_an_output_table_wider_than_an_innodb_row_is_refused_before_it_runs(maria):
    """1,005 outputs and the key passed the 1,017-column limit, then the server refused the table with
    "Row size too large (> 8126)" as a driver traceback; now refused in one line, naming the limit.  The
    widest table that fits (994 outputs and a text key) is written, and rows come back at any width."""
    X = np.random.default_rng(9).normal(size=(4, 3))
    frame = wide_frame(X)
    frame["id"] = ["a", "A", "a ", "b"]
    maria.write_dataframe("t", frame)
    for k, fits in ((MAX_TABLE_COLUMNS - 1, True), (MAX_TABLE_COLUMNS, False)):
        projection = make_projection("achlioptas", 3, k, seed=1, s=1)
        want = reference.transform(projection, X)
        if fits:
            sqlrp.project(maria, "t", "id", projection, into="t_rp", store=False)
            close(by_id(maria.query_df("SELECT * FROM `t_rp`"), ["a", "A", "a ", "b"]), want)
        else:
            with pytest.raises(EngineLimit, match=rf"^mysql: a table of {k + 1:,} columns does not fit an InnoDB row"):
                sqlrp.project(maria, "t", "id", projection, into="t_wide", store=False)
            assert "t_wide" not in maria.table_names()
            close(by_id(sqlrp.project(maria, "t", "id", projection, store=False), ["a", "A", "a ", "b"]), want)


# ---- text keys under the default collation ------------------------------------------------------


@pytest.fixture
def exported(tmp_path, monkeypatch):
    """A projection file (d = 6, k = 5, Achlioptas s = 3, seed 2) and its matrix, as a warehouse user
    has them (``sqlrp projections export``)."""
    monkeypatch.chdir(tmp_path)
    with sqlrp.connect("duckdb:///w.db") as duck:
        projection = sqlrp.create_projection(duck, "rp", "achlioptas", d=6, k=5, s=3, seed=2)
    assert main(["projections", "export", "rp", "--to", "rp.parquet", "--db", "duckdb:///w.db"]) == 0
    return projection


def test_compiled_long_layout_keeps_text_ids_apart(maria, exported):
    """Issue 41, silently wrong #9: the long layout's GROUP BY merged 'a', 'A' and 'a ' (3 of 6 rows,
    summed).  The SQL ``compile --dialect mysql`` prints, run on MariaDB, equals NumPy."""
    projection = exported
    X = np.random.default_rng(5).normal(size=(len(CONFUSABLE), 6))
    maria.write_dataframe("events", long_rows(CONFUSABLE, X))
    maria.write_dataframe("rp40", pd.read_parquet("rp.parquet"))
    sql = printed(["compile", "--dialect", "mysql", "--table", "events", "--layout", "long", "--id-column", "id",
                   "--projection", "rp.parquet", "--matrix", "rp40"])  # fmt: skip
    assert "CAST(`s`.`_id` AS BINARY)" in sql
    out = maria.query_df(sql)
    close(by_id(out, CONFUSABLE), reference.transform(projection, X))
    # the same SQL without the byte comparison merges them: the test can fail
    merged = maria.query_df(sql.replace("CAST(`s`.`_id` AS BINARY),", "").replace(",\n  CAST(`_id` AS BINARY)", ""))
    assert len(merged) < len(CONFUSABLE)


def test_compiled_wide_layout_pools_text_groups_apart(maria, exported):
    """The wide layout has no GROUP BY of its own but pools by --group-column: one output row per
    group exactly as NumPy keys them."""
    projection = exported
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 6))
    frame = wide_frame(X)
    groups = np.array([CONFUSABLE[i % len(CONFUSABLE)] for i in range(30)], dtype=object)
    frame["grp"] = groups
    maria.write_dataframe("t", frame)
    columns = ",".join(f"f{i}" for i in range(6))
    sql = printed(["compile", "--dialect", "mysql", "--table", "t", "--id-column", "id", "--columns", columns,
                   "--group-column", "grp", "--projection", "rp.parquet"])  # fmt: skip
    keys = sorted(set(CONFUSABLE))
    want = reference.transform(projection, X, groups=groups)  # one row per key, keys sorted
    close(by_id(maria.query_df(sql), keys, "grp"), want)


def test_an_incremental_top_up_adds_ids_that_only_look_alike(maria):
    """The top-up projects the ids not yet in the output (``NOT EXISTS (... WHERE done.id = t.id)``):
    under the collation 'A' and 'a ' were "already there" once 'a' was, and were never written."""
    projection = make_projection("achlioptas", 3, 2, seed=1, s=1)
    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 0.5, 0.25]])
    ids = ["a", "A", "a ", "b"]
    frame = wide_frame(X)
    frame["id"] = ids
    maria.write_dataframe("t", frame.iloc[:1])
    sqlrp.project(maria, "t", "id", projection, into="t_rp", store=False)
    maria.insert_frame("t", frame.iloc[1:])
    sqlrp.project(maria, "t", "id", projection, into="t_rp", incremental=True, store=False)
    close(by_id(maria.query_df("SELECT * FROM `t_rp`"), ids), reference.transform(projection, X))


def test_exact_keys_rewrites_only_keys_and_once():
    """Group keys, equalities of same-named columns and COUNT(DISTINCT) gain their bytes; a feature
    join (m.feature = s._f) and literals do not; rendering twice changes nothing."""
    import sqlglot

    statement = sqlglot.parse_one(
        "SELECT s.id, COUNT(DISTINCT s.id) FROM s JOIN m ON m.feature = s.f JOIN b ON b.id = s.id "
        "WHERE s.x = 1 GROUP BY s.id, m.vector",
        read="mysql",
    )
    profile = get_dialect("mysql")
    once = profile.render(statement)
    assert profile.render(statement) == once and exact_keys(statement) is statement
    assert "GROUP BY s.id, CAST(s.id AS BINARY), m.vector, CAST(m.vector AS BINARY)" in once
    assert "(b.id = s.id AND CAST(b.id AS BINARY) = CAST(s.id AS BINARY))" in once
    assert "COUNT(DISTINCT s.id, CAST(s.id AS BINARY))" in once
    assert "ON m.feature = s.f JOIN" in once and "WHERE s.x = 1" in once


# ---- parity: what runs on MariaDB today ----------------------------------------------------------

METHODS = [("achlioptas", {"s": 3}), ("achlioptas", {"s": 1}), ("gaussian", {}), ("cbp", {})]


@pytest.mark.parametrize("method,params", METHODS, ids=[f"{m}-{p}" for m, p in METHODS])
def test_wide_layout_matches_numpy(maria, method, params):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 12)) * 10
    X[rng.random(X.shape) < 0.3] = 0.0
    frame = wide_frame(X)
    frame["grp"] = np.arange(40) % 3
    maria.write_dataframe("t", frame)
    columns = [f"f{i}" for i in range(12)]
    options = dict(method=method, k=9, seed=3, columns=columns, **params)
    projection = sqlrp.plan(maria, "t", "id", store=False, **options).projection
    want = reference.transform(projection, X)
    signs = projection.linear.is_signs and projection.linear.power is None
    for strategy in ["inline", "auto", *(["mailman", "pairs"] if signs else [])]:
        close(by_id(sqlrp.project(maria, "t", "id", strategy=strategy, **options), list(range(40))), want)
        pooled = sqlrp.project(maria, "t", "id", strategy=strategy, group_column="grp", **options)
        close(by_id(pooled, [0, 1, 2], "grp"), reference.transform(projection, X, groups=frame["grp"].to_numpy()))
    # a table (the projection given, not stored), and chunks streamed
    sqlrp.project(maria, "t", "id", projection, into="t_rp", store=False, columns=columns)
    close(by_id(maria.query_df("SELECT * FROM `t_rp`"), list(range(40))), want)
    chunks = list(sqlrp.project(maria, "t", "id", chunk_rows=16, **options))
    assert [len(c) for c in chunks] == [16, 16, 8]
    close(by_id(pd.concat(chunks), list(range(40))), want)


@pytest.mark.parametrize("method,params", METHODS, ids=[f"{m}-{p}" for m, p in METHODS])
def test_long_layout_matches_numpy(maria, method, params):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(25, 10))
    X[rng.random(X.shape) < 0.5] = 0.0
    X[3] = 0.0  # a row without entries has no output row (as NumPy's rows of a long table)
    ids = [f"id{i}" for i in range(25)]
    maria.write_dataframe("lt", long_rows(ids, X))
    projection = make_projection(method, 10, 7, seed=4, **params)
    maria.write_dataframe("m", matrix_frame(projection))
    out = sqlrp.project(maria, "lt", "id", projection, layout="long", matrix="m", d=10, store=False)
    present = [i for i in range(25) if X[i].any()]
    close(by_id(out, [ids[i] for i in present]), reference.transform(projection, X)[present])
