"""``sqlrp compile`` renders the matrix it is given -- a stored projection, an exported file, a
warehouse table with the projection it came from -- with or without ``--db`` (issue 32), and the
Engines guide's warehouse recipe runs as written."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.registry.transfer import read_projection
from testkit.frames import long_frame, wide_frame

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "engines.md"


def recipe() -> list[list[str]]:
    """The commands of the guide's warehouse recipe, as written."""
    text = GUIDE.read_text()
    block = text[text.index("### The warehouse recipe") :].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split()[1:] for line in block.strip().splitlines() if line.startswith("sqlrp ")]


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """``w.db`` holding ``rp40`` (d = 64, k = 40, s = 3, seed 1), and 30 sparse rows of 64 features."""
    monkeypatch.chdir(tmp_path)
    with sqlrp.connect("duckdb:///w.db") as db:
        sqlrp.create_projection(db, "rp40", "achlioptas", d=64, k=40, s=3, seed=1)
        projection = sqlrp.load_projection(db, "rp40")
    X = np.random.default_rng(5).standard_normal((30, 64))
    X[X < 0.3] = 0.0
    return projection, X


def compiled(argv: list[str], capsys) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_the_guides_recipe_runs_as_written_and_on_a_second_engine(stored, capsys):
    projection, X = stored
    export, compile_ = recipe()
    assert export[0] == "projections" and compile_[0] == "compile" and "--db" not in compile_
    compiled(export, capsys)
    sql = compiled(compile_, capsys)
    assert repr(projection.scale) in sql  # the stored scale (the seed-0 default would be sqrt(8/40))
    # the warehouse: the events table and the matrix bulk-loaded from the exported file, as named
    con = duckdb.connect()
    con.register("frame", long_frame(X))
    con.execute("CREATE TABLE events AS SELECT * FROM frame")
    con.execute("ATTACH ':memory:' AS WAREHOUSE; CREATE SCHEMA WAREHOUSE.RP")
    con.execute("CREATE TABLE WAREHOUSE.RP.RP40 AS SELECT * FROM 'rp40.parquet'")
    got = con.execute(sql.rstrip().rstrip(";")).df().sort_values("ID")
    want = sqlrp.transform(read_projection("rp40.parquet"), X)
    assert np.allclose(got.drop(columns="ID").to_numpy(), want, rtol=1e-9, atol=1e-12)
    assert np.allclose(want, sqlrp.transform(projection, X), rtol=0, atol=0)
    # the stored projection with --db, the table in the warehouse only (it said "no table named 'events'")
    with_db = compiled([*compile_[:-4], "--projection", "rp40", "--db", "duckdb:///w.db", *compile_[-2:]], capsys)
    assert with_db == sql


@pytest.mark.parametrize("ending", ["parquet", "csv", "sqlrp.json"])
def test_an_exported_file_is_rendered_without_a_database_on_sqlite(stored, capsys, ending):
    projection, X = stored
    compiled(["projections", "export", "rp40", "--to", f"rp40.{ending}", "--db", "duckdb:///w.db"], capsys)
    columns = ",".join(f"f{i}" for i in range(64))
    argv = ["compile", "--dialect", "sqlite", "--table", "t", "--id-column", "id", "--projection", f"rp40.{ending}"]
    sql = compiled([*argv, "--columns", columns], capsys)
    con = sqlite3.connect(":memory:")
    wide_frame(X).to_sql("t", con, index=False)
    got = np.array(con.execute(sql).fetchall())
    got = got[np.argsort(got[:, 0])]
    assert np.allclose(got[:, 1:], sqlrp.transform(projection, X), rtol=1e-9, atol=1e-12)
    # the long layout, the matrix inlined
    sql = compiled([*argv, "--layout", "long"], capsys)
    long_frame(X).to_sql("t", con, index=False, if_exists="replace")
    got = np.array(con.execute(sql).fetchall())
    got = got[np.argsort(got[:, 0])]
    assert np.allclose(got[:, 1:], sqlrp.transform(projection, X), rtol=1e-9, atol=1e-12)


def test_options_of_a_new_matrix_must_agree_with_the_given_one(stored, capsys):
    compiled(["projections", "export", "rp40", "--to", "rp40.parquet", "--db", "duckdb:///w.db"], capsys)
    base = ["compile", "--table", "events", "--layout", "long", "--id-column", "id"]
    # agreeing options are accepted
    compiled([*base, "--projection", "rp40.parquet", "--d", "64", "--k", "40", "--seed", "1", "--s", "3"], capsys)
    for flag, value in [("--k", "20"), ("--d", "63"), ("--seed", "0"), ("--s", "1"), ("--method", "gaussian")]:
        for given in (["--projection", "rp40.parquet"], ["--projection", "rp40", "--db", "duckdb:///w.db"]):
            assert main([*base, *given, flag, value]) == 2
            err = capsys.readouterr().err
            assert flag in err and "describe another matrix" in err and err.count("\n") == 1
    # a warehouse table without the projection it came from; a stored name without a database
    assert main([*base, "--k", "40", "--d", "64", "--matrix", "WAREHOUSE.RP.RP40"]) == 2
    assert "its scale and shape are not in that table" in capsys.readouterr().err
    assert main([*base, "--projection", "rp40"]) == 2
    assert re.search(r"no projection file .* give --db", capsys.readouterr().err)


def test_a_missing_table_in_the_same_engine_is_still_an_error(stored, capsys):
    argv = ["compile", "--table", "events", "--layout", "long", "--id-column", "id", "--projection", "rp40"]
    assert main([*argv, "--db", "duckdb:///w.db"]) == 3
    assert "no table named 'events'" in capsys.readouterr().err


def test_a_new_matrix_for_a_table_elsewhere_and_no_matrix_table_for_it(stored, capsys):
    base = ["compile", "--dialect", "trino", "--table", "events", "--id-column", "id", "--db", "duckdb:///w.db"]
    # a new matrix (no --projection) for a table that is not in --db: drawn as without --db, seed 0
    with_db = compiled([*base, "--columns", "a,b,c", "--k", "2"], capsys)
    assert with_db == compiled([*base[:-2], "--columns", "a,b,c", "--k", "2"], capsys)
    # a stored name that is not there, for a table elsewhere; a new matrix joined from a warehouse table
    assert main([*base, "--layout", "long", "--projection", "nope"]) == 2
    assert "no stored projection 'nope'" in capsys.readouterr().err
    assert main([*base, "--layout", "long", "--k", "2", "--d", "3", "--matrix", "w.m"]) == 2
    assert "its scale and shape are not in that table" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", ["auto", "inline", "list_transform", "pairs"])
def test_printed_sql_refuses_a_null_feature_where_the_engine_can_raise(stored, capsys, strategy):
    """The SQL ``compile`` prints for DuckDB carries project's in-query checks: a NULL feature is an
    error naming the row, not NULL outputs or a NULL read as 0 (``list_transform`` sums skip NULLs)."""
    projection, X = stored
    with sqlrp.connect("duckdb:///w.db") as db:
        db.write_dataframe("t", wide_frame(X))
    args = ["compile", "--db", "duckdb:///w.db", "--projection", "rp40", "--table", "t", "--id-column", "id"]
    sql = compiled([*args, "--strategy", strategy], capsys)
    con = duckdb.connect("w.db")
    clean = con.execute(sql).df().sort_values("id")
    np.testing.assert_allclose(clean.drop(columns="id").to_numpy(), sqlrp.transform(projection, X), rtol=1e-9)
    con.execute('UPDATE t SET "f3" = NULL WHERE id = 7')
    with pytest.raises(duckdb.Error, match="sqlrp input check: row 7"):
        con.execute(sql).fetchall()
    con.close()


def test_printed_sql_that_cannot_check_its_input_says_so(stored, capsys):
    projection, X = stored
    with sqlrp.connect("duckdb:///w.db") as db:
        frame = wide_frame(X)
        frame["g"] = np.arange(30) % 3
        db.write_dataframe("t", frame)
    args = ["compile", "--db", "duckdb:///w.db", "--projection", "rp40", "--table", "t", "--id-column", "id"]
    cols = ["--columns", ",".join(f"f{i}" for i in range(64))]
    assert main([*args, *cols, "--group-column", "g"]) == 0
    assert "duckdb: this SQL does not check its input" in capsys.readouterr().err
    assert main([*args, *cols, "--dialect", "trino"]) == 0
    assert "trino: this SQL does not check its input" in capsys.readouterr().err
    assert main([*args, *cols, "--dialect", "trino", "--nulls", "zero"]) == 0
    assert "does not check" not in capsys.readouterr().err


def test_a_d_other_than_the_columns_is_refused(capsys):
    """`--columns a,b --d 3` drew a matrix of d = 2 without a word (found by sqlrp dbt's tests)."""
    args = ["compile", "--table", "t", "--id-column", "id", "--columns", "a,b", "--k", "2"]
    assert main([*args, "--d", "3"]) == 2
    assert "--d 3 but --columns names 2 features" in capsys.readouterr().err
    assert main([*args, "--d", "2"]) == 0
