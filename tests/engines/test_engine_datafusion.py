"""Apache DataFusion (``datafusion://``, a ``SessionContext``): sqlrp's SQL runs there and matches the
NumPy reference to 1e-9 relative, or is refused with an error naming the engine.

The engine was added as ``docs/add-an-engine.md`` says: its dialect file, its backend file, this file
and its extra -- nothing else in sqlrp.  (a) the cross-engine matrix of ``engine_cases.py``; (b) every
method on every layout, stored and passed as an object (the matrix inlined), DT-RP included, and
the strategies each layout takes; (c) outputs: tables, views, replace, incremental, float32,
chunks, Arrow; (d) bad input; (e) what DataFusion refuses (search: no bit count); (f) ``connect()``
and the caller's session; (g) the registry, and the ``ALTER TABLE`` the backend does itself; plus the
backend's own contract (placeholders, types, errors).

Without datafusion the tests skip with the pip line, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.backends.datafusion import DataFusionBackend, DataFusionError, bind, column_info, literal
from sqlrp.cli import main
from sqlrp.core.errors import EXIT_ENGINE, EngineLimit, InputError, InvalidParameter, exit_status
from sqlrp.dialects import get_dialect
from testkit.engine_cases import (
    CASES,
    EVERY_METHOD,
    HOSTILE_ID,
    HOSTILE_TABLE,
    RTOL,
    Case,
    data,
    frame,
    run_case,
    use_registry,
)

PIP = "pip install 'sqlrp[datafusion]'"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# ----------------------------------------------------------------------------------------------
# fixtures


def need_datafusion() -> ModuleType:
    """datafusion, or skip with the pip line -- fail under ``CI=true``."""
    try:
        import datafusion
    except ImportError as exc:
        message = f"datafusion is not installed ({exc}): {PIP}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {message}")
        pytest.skip(message)
    return datafusion


@pytest.fixture
def dfb() -> Iterator[DataFusionBackend]:
    """A new session of its own."""
    need_datafusion()
    db = sqlrp.connect("datafusion://")
    assert isinstance(db, DataFusionBackend)
    yield db
    db.close()


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.abs(want).max(), 1e-300))


def matches(result: pd.DataFrame, projection: object, X: np.ndarray, id_name: str = "id") -> None:
    """``result`` (ids ``3 * row + 1``, as ``engine_cases.frame`` writes them) equals the reference."""
    result = result.sort_values(id_name)
    rows = (result[id_name].to_numpy(dtype=np.int64) - 1) // 3
    got = result.drop(columns=id_name)
    if got.shape[1] == 1 and got.iloc[:, 0].dtype.kind == "O":  # array output
        values = np.vstack([np.asarray(v, dtype=float) for v in got.iloc[:, 0]])
    else:
        values = got.to_numpy(dtype=float)
    assert rel_err(values, sqlrp.transform(projection, X)[rows]) <= RTOL


def test_missing_datafusion_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datafusion", None)  # import datafusion -> ImportError
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true and datafusion is not installed.*pip install"):
        need_datafusion()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match=r"pip install 'sqlrp\[datafusion\]'"):
        need_datafusion()


def test_missing_datafusion_in_connect_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datafusion", None)
    with pytest.raises(sqlrp.SqlrpError, match=r"pip install 'sqlrp\[datafusion\]'"):
        sqlrp.connect("datafusion://")


# ----------------------------------------------------------------------------------------------
# (a) the cross-engine matrix: everything runs


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_matrix(dfb, case):
    assert run_case(dfb, case, data()) == "ok"


# ----------------------------------------------------------------------------------------------
# (b) every method on every layout; DT-RP; the strategies

METHODS = EVERY_METHOD
LAYOUTS = ("wide", "array", "long")


def test_every_method_is_tested():
    from sqlrp.methods import METHODS as ALL

    assert set(METHODS) == set(ALL)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_and_layout(dfb, method, layout):
    """A stored projection, through the matrix's registry rows."""
    case = Case(f"{method}-{layout}", method=method, layout=layout, params=tuple(METHODS[method].items()), k=5)
    assert run_case(dfb, case, data(), tag=f" {method} {layout}") == "ok"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", ["achlioptas", "pk-rp", "craftmap"])
def test_projection_objects_inline_their_matrix(dfb, method, layout):
    """A projection passed as an object: its matrix is inlined (``matrix="values"``) or read from the
    registry rows it is written to (``auto``)."""
    X = data()
    dfb.write_dataframe("t", frame(X, layout, "id"), replace=True)
    p = sqlrp.make_projection(method, d=X.shape[1], k=5, seed=3, **METHODS[method])
    options = {"layout": layout, "array_column": "x"} if layout == "array" else {"layout": layout}
    for matrix in ("values", "auto"):
        matches(sqlrp.project(dfb, "t", "id", p, matrix=matrix, **options), p, X)


STRATEGIES = [
    ("wide", "inline", 3),
    ("wide", "mailman", 1),
    ("wide", "pairs", 3),
    ("wide", "join", 3),  # the wide table unnested (select_unnest)
    ("wide", "lookup", 3),
    ("array", "inline", 3),
    ("array", "pairs", 1),
    ("long", "join", 3),
    ("long", "lookup", 3),  # ARRAY_POSITION's UInt64 subscript, cast (dialects/datafusion.py)
]


@pytest.mark.parametrize(("layout", "strategy", "s"), STRATEGIES, ids=[f"{a}-{b}" for a, b, _ in STRATEGIES])
def test_strategies(dfb, layout, strategy, s):
    case = Case(f"{layout}-{strategy}", layout=layout, strategy=strategy, params=(("s", s),))
    assert run_case(dfb, case, data(), tag=f" {layout} {strategy}") == "ok"


def test_long_layout_lookup_renders_a_signed_subscript():
    """The PostgreSQL rendering failed on DataFusion ('Failed to coerce arguments to satisfy a call to
    array_element'): ARRAY_POSITION gives a UInt64, array_element takes an Int64."""
    p = sqlrp.make_projection("achlioptas", d=10, k=4, s=3, seed=1)
    source = sqlrp.Source(table="t", id_column="id", layout="long")
    postgres = sqlrp.compile_sql(p, source, dialect="postgres", strategy="lookup", pretty=False)
    datafusion = sqlrp.compile_sql(p, source, dialect="datafusion", strategy="lookup", pretty=False)
    assert '"_ss"[ARRAY_POSITION(' in postgres
    assert '"_ss"[CAST(ARRAY_POSITION("_vv", CAST(0 AS BIGINT)) AS BIGINT)]' in datafusion


def test_dt_rp(dfb):
    """DT-RP (``sqlrp.tune``): its sample is read from DataFusion, the tuned matrix is stored there
    and projects like any other."""
    X = data(rows=60)
    dfb.write_dataframe("t", frame(X, "wide", "id"), replace=True)
    tuned = sqlrp.tune(dfb, "t", "id", sample=40, k=4, iterations=200, name="dt")
    assert tuned.method == "dt-rp"
    matches(sqlrp.project(dfb, "t", "id", "dt"), sqlrp.load_projection(dfb, "dt"), X)


def test_digits(dfb):
    """The UCI digits (1,797 x 64), s = 1 on the wide table and the lookup pivot on the long one."""
    from sklearn.datasets import load_digits

    X = load_digits().data.astype(np.float64)
    for layout, strategy in (("wide", "inline"), ("long", "lookup")):
        dfb.write_dataframe("digits", frame(X, layout, "id"), replace=True)
        p = sqlrp.make_projection("achlioptas", d=64, k=16, s=1, seed=5)
        matches(sqlrp.project(dfb, "digits", "id", p, layout=layout, strategy=strategy), p, X)


# ----------------------------------------------------------------------------------------------
# (c) outputs


@pytest.fixture
def wide_table(dfb) -> np.ndarray:
    X = data()
    dfb.write_dataframe("w", frame(X, "wide", "id"), replace=True)
    sqlrp.create_projection(dfb, "p", "achlioptas", d=X.shape[1], k=4, s=3, seed=1)
    return X


def test_into_replace_and_incremental(dfb, wide_table):
    X = wide_table
    p = sqlrp.load_projection(dfb, "p")
    sqlrp.project(dfb, "w", "id", "p", into="out table")
    with pytest.raises(sqlrp.SqlrpError, match="exists"):
        sqlrp.project(dfb, "w", "id", "p", into="out table")
    sqlrp.project(dfb, "w", "id", "p", into="out table", replace=True)  # staged, then swapped in
    matches(dfb.query_df('SELECT * FROM "out table"'), p, X)
    dfb.execute('DELETE FROM "out table" WHERE id > 30')
    sqlrp.project(dfb, "w", "id", "p", into="out table", incremental=True)
    matches(dfb.query_df('SELECT * FROM "out table"'), p, X)
    assert not [t for t in dfb.table_names() if t.startswith("_sqlrp_")]  # no staging table left


def test_view(dfb, wide_table):
    sqlrp.project(dfb, "w", "id", "p", into="v", view=True)
    assert dfb.is_view("v") and not dfb.is_view("w")
    matches(dfb.query_df('SELECT * FROM "v"'), sqlrp.load_projection(dfb, "p"), wide_table)


def test_float32_chunks_and_arrow(dfb, wide_table):
    X, p = wide_table, "p"
    out = sqlrp.project(dfb, "w", "id", p, dtype="float32")
    assert all(t == np.float32 for t in out.drop(columns="id").dtypes)
    out = out.sort_values("id")
    want = sqlrp.transform(sqlrp.load_projection(dfb, p), X)[(out["id"].to_numpy() - 1) // 3]
    assert rel_err(out.drop(columns="id").to_numpy(dtype=np.float64), want) <= 2.0**-23  # float32 rounding
    chunks = list(sqlrp.project(dfb, "w", "id", p, chunk_rows=15))
    assert [len(c) for c in chunks] == [15, 15, 10]
    matches(pd.concat(chunks), sqlrp.load_projection(dfb, p), X)
    assert sqlrp.project(dfb, "w", "id", p, output_format="arrow").num_rows == len(X)


def test_array_output(dfb, wide_table):
    out = sqlrp.project(dfb, "w", "id", "p", output="array")
    matches(out, sqlrp.load_projection(dfb, "p"), wide_table)


# ----------------------------------------------------------------------------------------------
# (d) bad input


def test_null_nan_and_infinite_features_are_refused(dfb):
    X = data()
    for bad in (math.nan, math.inf, None):
        table = frame(X, "wide", "id").astype({"f 2": object})
        table.iloc[5, 3] = bad
        dfb.write_dataframe("bad", table, replace=True)
        with pytest.raises(InputError, match=r"NULL or NaN or infinite.*rows with id 16"):
            sqlrp.project(dfb, "bad", "id", method="achlioptas", k=3, seed=1)
    table = frame(X, "wide", "id")
    table.iloc[5, 3] = math.nan
    dfb.write_dataframe("bad", table, replace=True)
    Z = X.copy()
    Z[5, 2] = 0.0
    p = sqlrp.make_projection("achlioptas", d=X.shape[1], k=3, s=3, seed=1)
    matches(sqlrp.project(dfb, "bad", "id", p, nulls="zero"), p, Z)


def test_missing_table_and_column(dfb):
    dfb.write_dataframe("w", frame(data(), "wide", "id"))
    with pytest.raises(InputError, match=r"no table named 'nope'.*Tables here: w"):
        sqlrp.project(dfb, "nope", "id", method="achlioptas", k=3)
    with pytest.raises(InputError, match=r"no id column 'nope'"):
        sqlrp.project(dfb, "w", "nope", method="achlioptas", k=3)
    with pytest.raises(InputError, match=r"no table named 'elsewhere.w'"):
        dfb.columns("w", schema="elsewhere")


def test_hostile_names(dfb):
    """Quotes, a semicolon, a comment, a dot and unicode in table, column and output names; a NUL is
    refused (DataFusion would keep it, other engines cut the name there)."""
    X = data()
    table = frame(X, "wide", HOSTILE_ID)
    table.columns = [HOSTILE_ID] + [f'f"{i}; --' for i in range(X.shape[1])]
    dfb.write_dataframe(HOSTILE_TABLE, table)
    p = sqlrp.make_projection("achlioptas", d=X.shape[1], k=3, s=3, seed=1)
    sqlrp.project(dfb, HOSTILE_TABLE, HOSTILE_ID, p, into='out"; DROP TABLE w --', prefix='p"')
    out = dfb.query_df('SELECT * FROM "out""; DROP TABLE w --"')
    assert list(out.columns) == [HOSTILE_ID, 'p"0', 'p"1', 'p"2']
    matches(out, p, X, id_name=HOSTILE_ID)
    with pytest.raises(InvalidParameter, match="NUL"):
        sqlrp.project(dfb, HOSTILE_TABLE, HOSTILE_ID, p, into="a\x00b")


def test_quoted_names_are_exact(dfb):
    """``"Out"`` and ``"out"`` are two tables (``quoted_case_fold`` None, as on PostgreSQL)."""
    dfb.write_dataframe("Out", pd.DataFrame({"a": [1.0]}))
    dfb.write_dataframe("out", pd.DataFrame({"b": [2.0]}))
    assert [c.name for c in dfb.columns("Out")] == ["a"] and [c.name for c in dfb.columns("out")] == ["b"]
    assert not get_dialect("datafusion").same_identifier("Out", "out")


# ----------------------------------------------------------------------------------------------
# (e) what DataFusion refuses, naming it


def test_search_is_refused_without_a_bit_count(dfb, wide_table, capsys):
    with pytest.raises(EngineLimit, match=r"^datafusion: sqlrp knows no bit count"):
        sqlrp.build_index(dfb, "w", "id", "idx")
    assert main(["index", "--db", "datafusion://", "--table", "w", "--id-column", "id", "--name", "idx"]) == 4
    assert "datafusion: sqlrp knows no bit count" in capsys.readouterr().err


def test_a_file_url_is_refused():
    need_datafusion()
    with pytest.raises(InvalidParameter, match=r"datafusion: sqlrp runs DataFusion in memory.*use datafusion://"):
        sqlrp.connect("datafusion:///tmp/x.db")


# ----------------------------------------------------------------------------------------------
# (f) connect() and the caller's session


def test_connect_and_the_registration():
    datafusion = need_datafusion()
    db = sqlrp.connect("datafusion://")
    assert type(db) is DataFusionBackend and db.dialect == "datafusion" and db.owns_connection
    assert get_dialect("apache-datafusion") is get_dialect("datafusion")
    assert get_dialect("datafusion").keeps_registry and not get_dialect("datafusion").transactional
    rows = [r for r in sqlrp.backends.engines_table() if r["engine"] == "DataFusion"]
    assert rows and rows[0]["url"] == "datafusion://" and rows[0]["install"] == "pip install 'sqlrp[datafusion]'"
    sized = sqlrp.connect("datafusion://", threads=2, memory_limit="256MB")
    assert sized.fetchall(
        "SELECT value FROM information_schema.df_settings WHERE name = ?", ["datafusion.execution.target_partitions"]
    ) == [("2",)]
    assert isinstance(sqlrp.connect(datafusion.SessionContext()), DataFusionBackend)


def test_the_callers_session(dfb):
    """A ``SessionContext`` of the caller's: its tables are the input, and it stays usable."""
    datafusion = need_datafusion()
    X = data()
    ctx = datafusion.SessionContext()
    ctx.from_pandas(frame(X, "array", "id").assign(x=lambda f: f["x"].map(list)), name="mine")
    db = sqlrp.connect(ctx)
    assert not db.owns_connection and db.columns("mine")[1].element_type == "double"
    p = sqlrp.make_projection("pk-rp", d=X.shape[1], k=4, degree=2, t=2, seed=2)
    matches(sqlrp.project(db, "mine", "id", p, layout="array", array_column="x"), p, X)
    db.close()
    assert ctx.sql("SELECT count(*) AS n FROM mine").to_pydict() == {"n": [len(X)]}


# ----------------------------------------------------------------------------------------------
# (g) the registry


def test_the_registry(dfb):
    """Version 5 from nothing (its ADD COLUMNs done by the backend), every table written, read and
    deleted; a stored projection survives a failed save of another."""
    use_registry(dfb)
    assert dfb.fetchall("SELECT max(version) FROM sqlrp_schema_version")[0][0] == 5
    assert dfb.columns("sqlrp_index")[-1].name == "params" and dfb.columns("sqlrp_projection")[-1].name == "digest"
    row = dfb.fetchall("SELECT created_at FROM sqlrp_index WHERE name = 'idx'")[0][0]
    assert row is not None  # the DEFAULT survived the rebuild
    with pytest.raises(DataFusionError, match="non-nullable|null"):  # so did NOT NULL
        dfb.execute("INSERT INTO sqlrp_index (name) VALUES (NULL)")


def test_alter_table(dfb):
    dfb.execute("CREATE TABLE a (k INT NOT NULL, v DOUBLE DEFAULT 1.5)")
    dfb.execute("INSERT INTO a (k) VALUES (?)", [1])
    dfb.execute("ALTER TABLE a ADD COLUMN note TEXT")
    dfb.execute("INSERT INTO a (k, note) VALUES (?, ?)", [2, "x"])
    assert sorted(dfb.fetchall("SELECT k, v, note FROM a")) == [(1, 1.5, None), (2, 1.5, "x")]
    dfb.execute('ALTER TABLE a RENAME TO "B b"')
    assert "a" not in dfb.table_names() and len(dfb.fetchall('SELECT * FROM "B b"')) == 2
    dfb.execute('ALTER TABLE "B b" ADD COLUMN w INT DEFAULT 7')  # known by its new name
    assert dfb.fetchall('SELECT w FROM "B b"') == [(7,), (7,)]  # the rows there take the DEFAULT, as in PostgreSQL
    dfb.execute('INSERT INTO "B b" (k) VALUES (3)')
    assert dfb.fetchall('SELECT w FROM "B b" WHERE k = 3') == [(7,)]
    with pytest.raises(DataFusionError, match="NULL|null"):
        dfb.execute('INSERT INTO "B b" (k) VALUES (NULL)')
    with pytest.raises(DataFusionError, match="only RENAME TO and ADD COLUMN"):
        dfb.execute('ALTER TABLE "B b" DROP COLUMN w')


# ----------------------------------------------------------------------------------------------
# the backend's own contract


def test_placeholders_are_literals(dfb):
    assert bind("SELECT '?', \"?\", ? -- ?\n", [1]) == "SELECT '?', \"?\", (1) -- ?\n"
    assert bind("SELECT 1 -?", [-1]) == "SELECT 1 -(-1)"
    with pytest.raises(InvalidParameter, match="2 parameters for 1"):
        bind("SELECT ?", [1, 2])
    values = [None, True, 3, -2.5, math.nan, math.inf, -math.inf, "it's; -- \\", np.float32(0.5), np.int16(4)]
    row = dfb.fetchall("SELECT " + ", ".join(f"? AS c{i}" for i in range(len(values))), values)[0]
    assert row[:4] == (None, True, 3, -2.5) and math.isnan(row[4]) and row[5:8] == (math.inf, -math.inf, "it's; -- \\")
    assert row[8:] == (0.5, 4)
    assert literal("x'y") == "'x''y'"


def test_column_types(dfb):
    import pyarrow as pa

    assert column_info("a", pa.list_(pa.float32())).element_type == "float"
    assert column_info("a", pa.list_(pa.float64(), 3)).length == 3
    assert column_info("a", pa.decimal128(10, 2)).type == "decimal(10, 2)"
    dfb.write_dataframe(
        "t",
        pd.DataFrame(
            {"i": [1, 2], "f": [0.5, None], "s": ["a", None], "b": [True, False], "x": [[1.0, 2.0], [3.0, 4.0]]}
        ),
    )
    info = {c.name: c for c in dfb.columns("t")}
    assert info["i"].type == "bigint" and info["f"].numeric and not info["s"].numeric and info["x"].numeric_array
    assert dfb.fetchall("SELECT f, s FROM t ORDER BY i") == [(0.5, "a"), (None, None)]  # missing values are NULL


def test_engine_errors_are_the_engines(dfb):
    with pytest.raises(DataFusionError) as caught:
        dfb.execute("SELECT * FROM nowhere")
    assert exit_status(caught.value) == EXIT_ENGINE
    with pytest.raises(DataFusionError):
        dfb.fetchall("SELECT 1/0")


def test_compile_renders_for_datafusion(capsys):
    need_datafusion()
    assert (
        main(
            [
                "compile",
                "--dialect",
                "datafusion",
                "--table",
                "t",
                "--id-column",
                "id",
                "--layout",
                "long",
                "--d",
                "10",
                "--k",
                "3",
                "--seed",
                "1",
                "--strategy",
                "lookup",
            ]
        )
        == 0
    )
    sql = capsys.readouterr().out
    db = sqlrp.connect("datafusion://")
    db.write_dataframe("t", frame(data(), "long", "id"))
    assert len(db.query_df(sql.strip().rstrip(";"))) > 0
