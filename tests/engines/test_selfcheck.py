"""``sqlrp compile --check`` (:mod:`sqlrp.compiler.selfcheck`): one statement that runs the compiled
projection on a built-in fixture and compares it with NumPy's outputs.  It returns 'ok' on every
engine sqlrp executes, for every layout, method and strategy it takes there, and 'wrong' (never 'ok')
when the profile is deliberately wrong: 0-based arrays read as 1-based, two UNNESTs paired as a cross
product (Hyper's), an off-by-one scale."""

from __future__ import annotations

import dataclasses
import os

import duckdb
import numpy as np
import pytest
from sqlglot.dialects.duckdb import DuckDB

import sqlrp
from sqlrp.cli import main
from sqlrp.compiler import Output, Source, compile_sql
from sqlrp.compiler.selfcheck import check_sql, fixture
from sqlrp.core.errors import SqlrpError
from sqlrp.core.layout import Formulation
from sqlrp.dialects import get_dialect
from sqlrp.dialects.base import extend
from sqlrp.dialects.duckdb import DuckDBDialect
from sqlrp.methods import make_projection

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

WIDE = Source("t", "row id", "wide", ("f 0", "b", "c", "d", "e"))
LONG = Source("t", "row id", "long")
ARRAY = Source("t", "row id", "array", array_column="x")

#: (name, method, params, source, strategy, output)
CASES = [
    ("s1-inline", "achlioptas", {"s": 1}, WIDE, "inline", Output()),
    ("s1-pairs", "achlioptas", {"s": 1}, WIDE, "pairs", Output()),
    ("s3-mailman", "achlioptas", {"s": 3}, WIDE, "mailman", Output()),
    ("gaussian", "gaussian", {}, WIDE, "auto", Output()),
    ("p-rp", "p-rp", {"m": 4}, WIDE, "auto", Output()),
    ("pk-rp", "pk-rp", {"degree": 2}, WIDE, "auto", Output()),
    ("maclaurin", "maclaurin", {"degree": 2}, WIDE, "auto", Output()),
    ("craftmap", "craftmap", {}, WIDE, "auto", Output()),
    (
        "pooled-nulls",
        "achlioptas",
        {"s": 3},
        dataclasses.replace(WIDE, group_column="g", nulls="zero"),
        "auto",
        Output(),
    ),
    (
        "standardized",
        "achlioptas",
        {"s": 3},
        dataclasses.replace(WIDE, standardize=((1, 2, 3, 4, 5), (2, 0, 1, 4, 8))),
        "auto",
        Output(),
    ),
    ("long-join", "achlioptas", {"s": 3}, LONG, "join", Output()),
    ("long-lookup", "achlioptas", {"s": 3}, LONG, "lookup", Output()),
    ("long-pk-rp-nulls", "pk-rp", {"degree": 2}, dataclasses.replace(LONG, nulls="zero"), "auto", Output()),
    ("wide-unnested", "achlioptas", {"s": 3}, WIDE, "join", Output()),
    ("array", "achlioptas", {"s": 3}, ARRAY, "auto", Output()),
    ("array-kernel", "p-rp", {"m": 2}, ARRAY, "auto", Output()),
    ("array-output", "achlioptas", {"s": 3}, WIDE, "auto", Output("array", "p", "p")),
    ("float32", "achlioptas", {"s": 3}, WIDE, "auto", Output(dtype="float32")),
]


def verdicts(run, dialect) -> dict[str, tuple]:
    """Each case's (status, largest error) on the engine ``run`` (a statement -> rows); a case the
    profile refuses (before anything runs) is left out, so is one the engine refuses with an error."""
    out = {}
    for name, method, params, source, strategy, output in CASES:
        projection = make_projection(method, 5, 3, seed=3, **params)
        try:
            sql = check_sql(projection, source, dialect, output, Formulation("values", strategy))
        except SqlrpError:
            continue
        out[name] = tuple(run(sql)[0])
    return out


def all_ok(found: dict[str, tuple]) -> None:
    assert found, "no case compiled"
    wrong = {k: v for k, v in found.items() if v[0] != "ok"}
    assert not wrong, wrong
    assert all(float(v[1]) <= 1e-6 for v in found.values())


def test_the_fixture_exposes_array_base_and_pairing():
    X = fixture(5)
    # every feature differs from the next in each row (a shifted subscript reads another value) ...
    assert np.all(X[:3, 1:] != X[:3, :-1])
    # ... feature 0 holds integers, the last row zeros (NULLs under nulls="zero") and a non-zero
    assert np.all(X[:, 0] == np.round(X[:, 0])) and (X[3] == 0).any() and (X[3] != 0).any()


def test_ok_on_duckdb_for_every_case():
    found = verdicts(lambda sql: duckdb.sql(sql).fetchall(), "duckdb")
    assert len(found) == len(CASES)  # DuckDB takes every case
    all_ok(found)


def test_ok_on_sqlite():
    import sqlite3

    con = sqlite3.connect(":memory:")
    found = verdicts(lambda sql: con.execute(sql).fetchall(), "sqlite")
    assert {"s1-pairs", "long-join", "pooled-nulls", "craftmap"} <= set(found)
    all_ok(found)


def test_ok_on_postgres(pg):
    found = verdicts(pg.fetchall, "postgres")
    assert {"s1-pairs", "array", "long-lookup", "wide-unnested", "p-rp", "float32"} <= set(found)
    all_ok(found)


def test_ok_on_clickhouse():
    pytest.importorskip("chdb") if not IN_CI else None
    with sqlrp.connect("chdb://") as db:
        found = verdicts(db.fetchall, "clickhouse")
    assert {"s1-pairs", "array", "long-join"} <= set(found)
    all_ok(found)


def test_ok_on_datafusion():
    pytest.importorskip("datafusion") if not IN_CI else None
    with sqlrp.connect("datafusion://") as db:
        found = verdicts(db.fetchall, "datafusion")
    assert {"s1-pairs", "array", "long-lookup"} <= set(found)
    all_ok(found)


# ---- never 'ok' when the profile is wrong ----


class _ZeroBased(DuckDB):
    INDEX_OFFSET = 0  # the profile claims arrays start at 0 (Spark's, Daft's) on DuckDB, where they start at 1


def test_wrong_array_base_is_caught():
    wrong = DuckDBDialect()
    wrong.sqlglot = extend(_ZeroBased)
    for name in ("array", "array-kernel", "array-output"):  # literal subscripts (lookup's are computed)
        _, method, params, source, strategy, output = next(c for c in CASES if c[0] == name)
        projection = make_projection(method, 5, 3, seed=3, **params)
        sql = check_sql(projection, source, wrong, output, Formulation("values", strategy))
        try:
            rows = duckdb.sql(sql).fetchall()
        except duckdb.Error:
            continue  # refused by the engine: not 'ok' either
        assert rows[0][0] == "wrong", name


def test_a_wrong_scale_is_caught():
    projection = make_projection("achlioptas", 5, 3, seed=3, s=3)
    off = dataclasses.replace(projection, scale=projection.scale * (1 + 1e-6))
    sql = check_sql(projection, WIDE, "duckdb").replace(repr(projection.scale), repr(off.scale))
    assert duckdb.sql(sql).fetchall()[0][0] == "wrong"


def test_a_missing_or_doubled_row_is_caught():
    projection = make_projection("achlioptas", 5, 3, seed=3, s=3)
    sql = check_sql(projection, WIDE, "duckdb")
    assert duckdb.sql(sql).fetchall()[0][0] == "ok"
    # the projection reading one fixture row less, or every row twice
    fewer = sql.replace(
        'FROM "_sqlrp_fixture"', 'FROM (SELECT * FROM "_sqlrp_fixture" WHERE "row id" <> 2) AS "_sqlrp_fixture"'
    )
    assert duckdb.sql(fewer).fetchall()[0][0] == "wrong"
    twice = sql.replace(
        'FROM "_sqlrp_fixture"',
        'FROM (SELECT * FROM "_sqlrp_fixture" UNION ALL SELECT * FROM "_sqlrp_fixture") AS "_sqlrp_fixture"',
    )
    assert duckdb.sql(twice).fetchall()[0][0] == "wrong"


# ---- the command ----


def test_compile_check_prints_one_statement_that_runs(tmp_path, capsys):
    argv = ["compile", "--table", "t", "--id-column", "id", "--columns", "a,b,c,d", "--k", "3", "--s", "1", "--check"]
    assert main(argv) == 0
    sql = capsys.readouterr().out
    assert duckdb.sql(sql.rstrip().rstrip(";")).fetchall()[0][0] == "ok"
    # the same options without --check print the projection, which the check ran on its fixture
    assert main(argv[:-1]) == 0
    projection_sql = capsys.readouterr().out.rstrip().rstrip(";")
    assert " ".join(projection_sql.replace('"t"', '"_sqlrp_fixture"').split()) in " ".join(sql.split())
    # for a stored projection, a database table
    url = f"duckdb:///{tmp_path / 'w.db'}"
    with sqlrp.connect(url) as db:
        db.execute("CREATE TABLE t AS SELECT 1::BIGINT AS id, 0.5 AS a, 1.5 AS b")
    assert main(["compile", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--check"]) == 0
    with sqlrp.connect(url) as db:
        assert db.fetchall(capsys.readouterr().out.rstrip().rstrip(";"))[0][0] == "ok"


def test_portable_core_check_runs_on_duckdb_and_sqlite():
    import sqlite3

    projection = make_projection("pk-rp", 5, 3, seed=3, degree=2)
    for dialect in ("trino", "redshift", "databricks"):
        sql = check_sql(projection, WIDE, dialect)
        assert duckdb.sql(sql).fetchall()[0][0] == "ok", dialect
    assert sqlite3.connect(":memory:").execute(check_sql(projection, WIDE, "mysql")).fetchall()[0][0] == "ok"
    assert get_dialect("trino").portable_core and not get_dialect("duckdb").portable_core
    assert compile_sql(projection, WIDE, "trino")  # renders


def test_ok_on_spark():
    """Spark local[2] (slow to start: one session for this test)."""
    try:
        from sqlrp.backends.spark import SparkBackend

        db = SparkBackend.from_master("local[2]", conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"})
    except Exception as exc:  # noqa: BLE001 - any failure to start is reported the same way
        if IN_CI:
            pytest.fail(f"CI=true and Spark could not be started: {type(exc).__name__}: {exc}")
        pytest.skip(f"Spark unavailable: {exc}")
    try:
        found = verdicts(db.fetchall, "spark")
    finally:
        db.close()
    assert {"s1-inline", "array", "array-output", "long-join", "p-rp", "pooled-nulls"} <= set(found)
    all_ok(found)
