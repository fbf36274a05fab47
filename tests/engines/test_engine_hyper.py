"""Tableau Hyper (``hyper://``, a ``.hyper`` file, a ``tableauhyperapi.Connection``): sqlrp's SQL runs
there and matches the NumPy reference to 1e-9 relative, or is refused with an error naming the
engine (issue 32).

Added as ``docs/add-an-engine.md`` says: its dialect file, its backend file, this file and its extra.
(a) the cross-engine matrix of ``engine_cases.py``; (b) every method on the wide and long layouts and
the strategies; (c) outputs: tables, views, replace, incremental, float32, chunks; (d) bad input;
(e) what Hyper refuses (arrays, search), and what its SQL needs that PostgreSQL's does not (no
fence, INT subscripts, no lockstep UNNEST); (f) ``connect()``; (g) the registry; (h) the self-check,
which passes here and catches a profile that pairs UNNESTs in lockstep; plus the backend's contract.

Without tableauhyperapi the tests skip with the pip line, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.compiler import Output, Source, compile_sql
from sqlrp.compiler.selfcheck import check_sql
from sqlrp.core.errors import EXIT_ENGINE, EngineLimit, InputError, InvalidParameter, exit_status
from sqlrp.core.layout import Formulation
from sqlrp.dialects import get_dialect
from sqlrp.methods import make_projection
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

PIP = "pip install 'sqlrp[hyper]'"


def need_hyper():
    try:
        import tableauhyperapi
    except ImportError as exc:
        message = f"tableauhyperapi is not installed ({exc}): {PIP}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {message}")
        pytest.skip(message)
    return tableauhyperapi


@pytest.fixture
def hy() -> Iterator:
    need_hyper()
    db = sqlrp.connect("hyper://")
    yield db
    db.close()


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.abs(want).max(), 1e-300))


def matches(result: pd.DataFrame, projection: object, X: np.ndarray, id_name: str = "id") -> None:
    result = result.sort_values(id_name)
    rows = (result[id_name].to_numpy(dtype=np.int64) - 1) // 3
    got = result.drop(columns=id_name).to_numpy(dtype=float)
    assert rel_err(got, sqlrp.transform(projection, X)[rows]) <= RTOL


def test_missing_hyper_skips_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.setitem(sys.modules, "tableauhyperapi", None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true and tableauhyperapi is not installed"):
        need_hyper()
    with pytest.raises(sqlrp.SqlrpError, match=r"pip install 'sqlrp\[hyper\]'"):
        sqlrp.connect("hyper://")


# ---- (a) the cross-engine matrix ----


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_matrix(hy, case):
    expected = "refused" if case.layout == "array" or case.output == "array" else "ok"
    assert run_case(hy, case, data()) == expected


# ---- (b) every method, both layouts Hyper takes, the strategies ----

METHODS = EVERY_METHOD


def test_every_method_is_tested():
    from sqlrp.methods import METHODS as ALL

    assert set(METHODS) == set(ALL)


@pytest.mark.parametrize("layout", ["wide", "long"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_and_layout(hy, method, layout):
    case = Case(f"{method}-{layout}", method=method, layout=layout, params=tuple(METHODS[method].items()), k=5)
    assert run_case(hy, case, data(), tag=f" {method} {layout}") == "ok"


@pytest.mark.parametrize(
    ("layout", "strategy", "s"),
    [("wide", "inline", 3), ("wide", "pairs", 1), ("wide", "mailman", 1), ("long", "join", 3), ("long", "lookup", 3)],
)
def test_strategies(hy, layout, strategy, s):
    case = Case(f"{layout}-{strategy}", layout=layout, params=(("s", s),), strategy=strategy)
    assert run_case(hy, case, data(), tag=f" {strategy}") == "ok"


def test_what_hypers_sql_needs_that_postgresqls_does_not():
    """No fence (PostgreSQL's ``LIMIT ALL`` is harmless here, its earlier ``OFFSET CAST('0' AS BIGINT)``
    was refused), INT subscripts (``ARRAY_POSITION`` is BIGINT), ``DOUBLE PRECISION``, and no wide table
    unnested (two UNNESTs are a cross product)."""
    kernel = make_projection("p-rp", 6, 3, seed=1, m=2)
    wide = Source("t", "id", "wide", tuple(f"f{i}" for i in range(6)))
    assert "LIMIT ALL" in compile_sql(kernel, wide, "postgres") and "LIMIT" not in compile_sql(kernel, wide, "hyper")
    assert "OFFSET" not in compile_sql(kernel, wide, "postgres")
    lookup = compile_sql(
        make_projection("achlioptas", 6, 3, seed=1, s=3), Source("t", "id", "long"), "hyper", strategy="lookup"
    )
    assert "AS INT)]" in lookup and "DOUBLE PRECISION" in lookup and "AS DOUBLE)" not in lookup
    with pytest.raises(EngineLimit, match="^hyper: the join strategy on a wide table .* lockstep"):
        compile_sql(kernel, wide, "hyper", strategy="join")


# ---- (c) outputs ----


@pytest.fixture
def wide_table(hy) -> np.ndarray:
    X = data()
    hy.write_dataframe("w", frame(X, "wide", "id"), replace=True)
    sqlrp.create_projection(hy, "p", "achlioptas", d=X.shape[1], k=4, s=3, seed=1)
    return X


def test_into_replace_and_incremental(hy, wide_table):
    X = wide_table
    p = sqlrp.load_projection(hy, "p")
    sqlrp.project(hy, "w", "id", "p", into="out table")
    with pytest.raises(sqlrp.SqlrpError, match="exists"):
        sqlrp.project(hy, "w", "id", "p", into="out table")
    sqlrp.project(hy, "w", "id", "p", into="out table", replace=True)  # staged, then swapped in
    matches(hy.query_df('SELECT * FROM "out table"'), p, X)
    hy.execute('DELETE FROM "out table" WHERE id > 30')
    sqlrp.project(hy, "w", "id", "p", into="out table", incremental=True)
    matches(hy.query_df('SELECT * FROM "out table"'), p, X)
    assert not [t for t in hy.table_names() if t.startswith("_sqlrp_")]  # no staging table left


def test_float32_and_chunks(hy, wide_table):
    X = wide_table
    out = sqlrp.project(hy, "w", "id", "p", dtype="float32").sort_values("id")
    want = sqlrp.transform(sqlrp.load_projection(hy, "p"), X)[(out["id"].to_numpy() - 1) // 3]
    got = out.drop(columns="id").to_numpy(dtype=np.float64)
    assert rel_err(got, want) <= 2.0**-23 and rel_err(got, want) > 0  # rounded to 4 bytes, and only that
    chunks = list(sqlrp.project(hy, "w", "id", "p", chunk_rows=15))
    assert [len(c) for c in chunks] == [15, 15, 10]
    matches(pd.concat(chunks), sqlrp.load_projection(hy, "p"), X)


def test_array_output_and_layout_are_refused_naming_hyper(hy, wide_table):
    with pytest.raises(EngineLimit, match="^hyper: array output"):
        sqlrp.project(hy, "w", "id", "p", output="array")
    with pytest.raises(EngineLimit, match="^hyper: column 'x' holds lists"):
        hy.write_dataframe("a", frame(data(), "array", "id"))
    assert "a" not in hy.table_names()


# ---- (d) bad input ----


def test_null_nan_and_infinite_features_are_refused(hy):
    X = data()
    for bad in (math.nan, math.inf, None):
        table = frame(X, "wide", "id").astype({"f 2": object})
        table.iloc[5, 3] = bad
        hy.write_dataframe("bad", table, replace=True)
        with pytest.raises(InputError, match=r"NULL or NaN or infinite.*rows with id 16"):
            sqlrp.project(hy, "bad", "id", method="achlioptas", k=3, seed=1)
    Z = X.copy()
    Z[5, 2] = 0.0
    p = sqlrp.make_projection("achlioptas", d=X.shape[1], k=3, s=3, seed=1)
    matches(sqlrp.project(hy, "bad", "id", p, nulls="zero"), p, Z)


def test_missing_table_and_hostile_names(hy):
    X = data()
    with pytest.raises(InputError, match=r"no table named 'nope'"):
        sqlrp.project(hy, "nope", "id", method="achlioptas", k=3)
    with pytest.raises(InputError, match=r"no table named 'elsewhere.w'"):
        hy.columns("w", schema="elsewhere")
    table = frame(X, "wide", HOSTILE_ID)
    table.columns = [HOSTILE_ID] + [f'f"{i}; --' for i in range(X.shape[1])]
    hy.write_dataframe(HOSTILE_TABLE, table)
    p = sqlrp.make_projection("achlioptas", d=X.shape[1], k=3, s=3, seed=1)
    sqlrp.project(hy, HOSTILE_TABLE, HOSTILE_ID, p, into='out"; DROP TABLE w --', prefix='p"')
    out = hy.query_df('SELECT * FROM "out""; DROP TABLE w --"')
    assert list(out.columns) == [HOSTILE_ID, 'p"0', 'p"1', 'p"2']
    matches(out, p, X, id_name=HOSTILE_ID)


# ---- (e) refusals ----


def test_search_is_refused_naming_hyper(hy, wide_table):
    with pytest.raises(EngineLimit, match=r"^hyper: sqlrp knows no"):
        sqlrp.build_index(hy, "w", "id", "idx")


# ---- (f) connect() ----


def test_connect_a_file_a_url_and_the_callers_connection(tmp_path):
    api = need_hyper()
    path = tmp_path / "x.hyper"
    with sqlrp.connect(str(path)) as db:
        assert db.dialect == "hyper" and db.owns_connection
        db.write_dataframe("t", frame(data(), "wide", "id"))
    with sqlrp.connect(f"hyper:///{path}") as db:  # the same file, its table kept
        assert "t" in db.table_names()
    rows = [r for r in sqlrp.backends.engines_table() if r["engine"] == "Tableau Hyper"]
    assert rows and rows[0]["install"] == PIP
    assert get_dialect("tableau-hyper") is get_dialect("hyper") and get_dialect("hyper").keeps_registry
    with api.HyperProcess(
        telemetry=api.Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU, parameters={"log_config": ""}
    ) as hp:
        with api.Connection(hp.endpoint, str(path)) as con:
            db = sqlrp.connect(con)
            assert not db.owns_connection
            p = sqlrp.make_projection("achlioptas", d=10, k=3, s=3, seed=1)
            matches(sqlrp.project(db, "t", "id", p), p, data())
            db.close()
            assert con.execute_scalar_query('SELECT count(*) FROM "t"') == 40  # still open


# ---- (g) the registry ----


def test_the_registry(hy):
    use_registry(hy)
    assert hy.fetchall("SELECT max(version) FROM sqlrp_schema_version")[0][0] >= 4


# ---- (h) the self-check ----


SELF_CHECK_CASES = [
    ("wide", "achlioptas", {"s": 1}, "pairs"),
    ("wide", "p-rp", {"m": 2}, "auto"),
    ("wide", "craftmap", {}, "auto"),
    ("long", "achlioptas", {"s": 3}, "lookup"),
    ("long", "pk-rp", {"degree": 2}, "join"),
]


def test_the_self_check_passes_on_hyper(hy):
    for layout, method, params, strategy in SELF_CHECK_CASES:
        source = Source("t", "id", layout, tuple("abcde") if layout == "wide" else ())
        projection = make_projection(method, 5, 3, seed=2, **params)
        sql = check_sql(projection, source, "hyper", Output(), Formulation("values", strategy))
        assert hy.fetchall(sql)[0][0] == "ok", (layout, method, strategy)


def test_the_self_check_catches_unnest_as_a_cross_product(hy):
    """A Hyper profile claiming PostgreSQL's lockstep UNNEST: the wide table unnested by the join and
    lookup strategies reads every feature with every value -- 'wrong', never 'ok'."""
    wrong = get_dialect("hyper").__class__()
    wrong.select_unnest = True
    source = Source("t", "id", "wide", tuple("abcde"))
    for strategy in ("join", "lookup"):
        projection = make_projection("achlioptas", 5, 3, seed=2, s=3)
        sql = check_sql(projection, source, wrong, Output(), Formulation("values", strategy))
        assert hy.fetchall(sql)[0][0] == "wrong", strategy


def test_compile_for_hyper_and_check(capsys):
    need_hyper()
    argv = [
        "compile",
        "--dialect",
        "hyper",
        "--table",
        "t",
        "--id-column",
        "id",
        "--layout",
        "long",
        "--k",
        "3",
        "--d",
        "5",
        "--check",
    ]
    assert main(argv) == 0
    with sqlrp.connect("hyper://") as db:
        assert db.fetchall(capsys.readouterr().out.rstrip().rstrip(";"))[0][0] == "ok"


# ---- the backend's contract ----


def test_placeholders_are_literals(hy):
    from sqlrp.backends.hyper import bind

    assert bind("SELECT '?', \"?\", ? -- ?\n", [1]) == "SELECT '?', \"?\", (1) -- ?\n"
    with pytest.raises(InvalidParameter, match="hyper: 2 parameters for 1"):
        bind("SELECT ?", [1, 2])
    values = [None, True, 3, -2.5, math.nan, math.inf, "it's; -- \\", np.float32(0.5), np.int16(4)]
    row = hy.fetchall("SELECT " + ", ".join(f"? AS c{i}" for i in range(len(values))), values)[0]
    assert row[:4] == (None, True, 3, -2.5) and math.isnan(row[4]) and row[5:] == (math.inf, "it's; -- \\", 0.5, 4)


def test_column_types_and_errors(hy):
    hy.write_dataframe("t", pd.DataFrame({"i": [1, 2], "f": [0.5, None], "s": ["a", None], "b": [True, False]}))
    info = {c.name: c for c in hy.columns("t")}
    assert info["i"].type == "bigint" and info["f"].numeric and not info["s"].numeric
    assert hy.fetchall("SELECT f, s FROM t ORDER BY i") == [(0.5, "a"), (None, None)]
    with pytest.raises(Exception) as caught:
        hy.execute("SELECT * FROM nowhere")
    assert exit_status(caught.value) == EXIT_ENGINE


def test_demo_on_a_hyper_file_says_what_it_wrote(tmp_path):
    need_hyper()
    from sqlrp.demo import run_demo

    lines: list[str] = []
    path = tmp_path / "x.hyper"
    run_demo(str(path), ks=(20,), seeds=(0,), echo=lines.append)
    assert lines[0].endswith(f"-> Tableau Hyper hyper:///{path}") and "DuckDB" not in "".join(lines)
    assert "wrote the tables digits, digits_rp_k20 and 1 stored projections" in lines[-1]
    with sqlrp.connect(str(path)) as db:
        assert {"digits", "digits_rp_k20"} <= set(db.table_names())


def test_tableau_is_hyper_not_the_calculation_language():
    projection = make_projection("achlioptas", 3, 2, seed=1, s=1)
    sql = compile_sql(projection, Source("t", "id", "wide", ("a", "b", "c")), "tableau")
    assert '"a"' in sql and "[a]" not in sql and get_dialect("tableau").name == "hyper"


def test_postgres_sql_on_hyper(hy):
    """The SQL of ``--dialect postgres`` run on Hyper: its fence (``LIMIT ALL``) runs there, so every
    method's wide layout is right (the check says 'ok', the numbers match); a wide table unnested by the
    forced join/lookup strategies (lockstep in PostgreSQL, a cross product in Hyper) is never 'ok'
    (issue 32: sums 36x off, exit 0)."""
    source = Source("t", "id", "wide", tuple("abcde"))
    X = data(d=5)
    hy.write_dataframe("t", frame(X, "wide", "id").set_axis(["id", *"abcde"], axis=1))
    for method, params in METHODS.items():
        projection = make_projection(method, 5, 3, seed=2, **params)
        assert hy.fetchall(check_sql(projection, source, "postgres"))[0][0] == "ok", method
        matches(hy.query_df(compile_sql(projection, source, "postgres")), projection, X)
    for method, params, strategy in [("achlioptas", {"s": 3}, "join"), ("achlioptas", {"s": 3}, "lookup")]:
        projection = make_projection(method, 5, 3, seed=2, **params)
        sql = check_sql(projection, source, "postgres", Output(), Formulation("values", strategy))
        try:
            status = hy.fetchall(sql)[0][0]
        except Exception as exc:  # noqa: BLE001 - Hyper's own refusal
            assert exit_status(exc) == EXIT_ENGINE
            continue
        assert status == "wrong", (method, strategy)
