"""The CLI mirrors the API; errors are one line with exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from testkit.frames import wide_frame


@pytest.fixture
def dbfile(tmp_path):
    path = tmp_path / "cli.duckdb"
    with sqlrp.connect(str(path)) as db:
        X = np.random.default_rng(2).standard_normal((20, 6))
        db.write_dataframe("my table", wide_frame(X))
    return f"duckdb:///{path}", X


def test_project_into_and_reuse(dbfile, capsys):
    url, X = dbfile
    args = [
        "project",
        "--db",
        url,
        "--table",
        "my table",
        "--id-column",
        "id",
        "--method",
        "achlioptas",
        "--k",
        "4",
        "--s",
        "3",
        "--seed",
        "7",
        "--projection",
        "p4",
        "--into",
        "out",
    ]
    assert main(args) == 0
    assert main(["projections", "list", "--db", url]) == 0
    assert "p4" in capsys.readouterr().out
    assert main(["projections", "show", "p4", "--db", url]) == 0
    shown = capsys.readouterr().out
    assert '"k": 4' in shown and '"seed": 7' in shown
    with sqlrp.connect(url) as db:
        out = db.query_df('SELECT * FROM "out" ORDER BY id')
        want = sqlrp.transform(sqlrp.load_projection(db, "p4"), X)
    assert np.allclose(out.drop(columns="id").to_numpy(), want, rtol=1e-9)
    # CSV to stdout with the stored projection
    assert main(["project", "--db", url, "--table", "my table", "--id-column", "id", "--projection", "p4"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert np.allclose(csv.drop(columns="id").to_numpy(), want, rtol=1e-9)


def test_compile_for_spark_without_database(capsys):
    assert (
        main(
            [
                "compile",
                "--table",
                "t`x",
                "--id-column",
                "id",
                "--columns",
                "a,b,c",
                "--k",
                "2",
                "--s",
                "1",
                "--dialect",
                "spark",
            ]
        )
        == 0
    )
    sql = capsys.readouterr().out
    assert "FROM `t``x`" in sql and sql.strip().endswith(";")
    assert sql.count("*") == 2  # one delayed scale factor per output; the rest is + and -


def test_compile_from_database_matches_execution(dbfile, capsys):
    url, X = dbfile
    assert (
        main(["compile", "--db", url, "--table", "my table", "--id-column", "id", "--k", "3", "--projection", "c3"])
        == 0
    )
    sql = capsys.readouterr().out
    with sqlrp.connect(url) as db:
        got = db.query_df(sql.rstrip().rstrip(";")).sort_values("id")
        want = sqlrp.transform(sqlrp.load_projection(db, "c3"), X)
    assert np.allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9)


def test_errors_are_one_line(dbfile, capsys):
    url, _ = dbfile
    # exit statuses by kind: 2 usage, 3 input, 4 engine (README, "Command line")
    assert main(["project", "--db", url, "--table", "nope", "--id-column", "id", "--k", "2"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: no table named 'nope'") and "Traceback" not in err
    assert main(["projections", "drop", "missing", "--db", url]) == 3
    assert main(["project", "--db", url, "--table", "my table", "--id-column", "id", "--k", "0"]) == 2
    capsys.readouterr()
    assert main(["project", "--db", url, "--table", "my table", "--id-column", "id", "--k", "2", "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --seed: expected a whole number from 0 to") and err.count("\n") == 1


@contextlib.contextmanager
def holding(code: str):
    """Another process that runs ``code`` (opening a database, taking a lock) and keeps it until the
    block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"{code}; import time; print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_database_errors_are_one_line_with_the_fix(dbfile, capsys):
    """A second process writing the same DuckDB file: the engine's multi-line error becomes one line,
    exit status 4 (engine)."""
    url, _ = dbfile
    with holding(f"import duckdb; c = duckdb.connect({url.removeprefix('duckdb:///')!r})"):
        assert main(["projections", "list", "--db", url]) == 4
        err = capsys.readouterr().err
        assert err.startswith("error: database: ") and err.count("\n") == 1
        assert "another process has this DuckDB file open" in err


def test_create_and_drop(dbfile, capsys):
    url, _ = dbfile
    assert main(["create", "--db", url, "--name", "c", "--d", "6", "--k", "3", "--s", "1"]) == 0
    assert '"nnz": 18' in capsys.readouterr().out
    assert main(["projections", "drop", "c", "--db", url]) == 0
    assert main(["migrate", "--db", url]) == 0
    assert "up to date" in capsys.readouterr().out


def test_demo_runs_and_reports_near_the_floor(tmp_path, capsys):
    from sqlrp.demo import run_demo

    report = run_demo(str(tmp_path / "demo.duckdb"), ks=(40, 160), seeds=(0, 1), echo=lambda *_: None)
    assert list(report["k"]) == [40, 160]
    ratio = report["mean_distortion"] / report["jl_floor"]
    assert ((ratio > 0.8) & (ratio < 1.3)).all(), report


def test_same_projection_on_duckdb_and_postgres_through_the_cli(tmp_path, pg_url, capsys):
    """The check a new user does: one stored projection, copied to PostgreSQL, same output."""
    from sklearn.datasets import load_wine

    X = load_wine().data
    duck_url = f"duckdb:///{tmp_path / 'w.duckdb'}"
    schema = "cli_copy"
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {schema}")
    pg = f"{pg_url}?options=-csearch_path%3D{schema}"
    for url in (duck_url, pg):
        with sqlrp.connect(url) as db:
            db.write_dataframe("Wine Table", wide_frame(X, [f"Col {i}" for i in range(X.shape[1])]))
    base = ["--table", "Wine Table", "--id-column", "id"]
    assert main(["project", "--db", duck_url, *base, "--k", "160", "--projection", "w160", "--into", "o"]) == 0
    assert main(["projections", "copy", "w160", "--db", duck_url, "--to", pg]) == 0
    assert main(["project", "--db", pg, *base, "--projection", "w160", "--into", "o"]) == 0
    frames = []
    for url in (duck_url, pg):
        with sqlrp.connect(url) as db:
            frames.append(db.query_df('SELECT * FROM "o" ORDER BY id').drop(columns="id").to_numpy(dtype=float))
    assert np.max(np.abs(frames[0] - frames[1])) <= 1e-9 * np.abs(frames[0]).max()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_schema_hint(dbfile, capsys):
    url, _ = dbfile
    assert main(["project", "--db", url, "--table", "main.my table", "--id-column", "id", "--k", "2"]) == 3
    assert "pass --schema=main with --table='my table'." in capsys.readouterr().err


def test_the_readme_shows_what_compile_prints(capsys):
    """The compiled example in the README is this command's output, output lines verbatim."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    command = "sqlrp compile --table t --id-column id --columns a,b,c --k 2 --s 1"
    assert command in readme
    assert main(command.split()[1:]) == 0
    printed = capsys.readouterr().out
    outputs = [line for line in printed.splitlines() if ' AS "p' in line]
    assert len(outputs) == 2
    for line in outputs:
        assert line in readme


@pytest.mark.parametrize("where", ["file", "/proc/sqlrp-report", "nul"])
def test_evaluate_out_that_cannot_be_written_is_one_line(dbfile, capsys, tmp_path, where):
    url, _ = dbfile
    out = {"file": str(tmp_path / "a-file"), "nul": str(tmp_path / "a\x00b")}.get(where, where)
    (tmp_path / "a-file").write_text("not a folder")
    assert main(["create", "--db", url, "--name", "e4", "--d", "6", "--k", "4"]) == 0
    capsys.readouterr()
    args = ["evaluate", "--db", url, "--table", "my table", "--id-column", "id", "--projection", "e4"]
    status = main([*args, "--sample", "15", "--queries", "5", "--out", out])
    err = capsys.readouterr().err
    assert status in (2, 3) and err.startswith("error: ") and err.count("\n") == 1, err
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_evaluate_unknown_label_column_is_an_input_error(dbfile, capsys):
    url, _ = dbfile
    assert main(["create", "--db", url, "--name", "l4", "--d", "6", "--k", "4"]) == 0
    capsys.readouterr()
    args = ["evaluate", "--db", url, "--table", "my table", "--id-column", "id", "--projection", "l4"]
    assert main([*args, "--sample", "15", "--queries", "5", "--label-column", "nope"]) == 3
    assert "no column 'nope' for --label-column" in capsys.readouterr().err


# ---- conventions (issue 14) ----


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"sqlrp {sqlrp.__version__}"


def test_projections_list_formats(dbfile, capsys):
    import json

    url, _ = dbfile
    long_name = "a projection with a rather long name that a table would wrap"
    assert main(["create", "--db", url, "--name", long_name, "--d", "6", "--k", "3", "--seed", "123456789"]) == 0
    assert main(["create", "--db", url, "--name", "p", "--d", "6", "--k", "3", "--method", "pk-rp"]) == 0
    capsys.readouterr()
    assert main(["projections", "list", "--db", url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and max(map(len, table)) <= 100, table
    assert main(["projections", "list", "--db", url, "--format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["name"] for r in records} == {long_name, "p"}
    assert next(r for r in records if r["name"] == long_name)["params"]["s"] > 1  # an object, not a string
    assert main(["projections", "list", "--db", url, "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert set(frame["name"]) == {long_name, "p"} and list(frame.columns[:4]) == ["name", "method", "d", "k"]


def test_empty_result_prints_its_header(dbfile, capsys):
    url, _ = dbfile
    with sqlrp.connect(url) as db:
        db.execute('CREATE TABLE "empty" AS SELECT * FROM "my table" WHERE "id" < 0')
    assert main(["project", "--db", url, "--table", "empty", "--id-column", "id", "--k", "3", "--s", "1"]) == 0
    assert capsys.readouterr().out.strip() == "id,p0,p1,p2"


def test_progress_bar_only_on_a_terminal(dbfile, capsys):
    """Under pytest stderr is not a terminal: no bar unless --progress asks for one."""
    url, _ = dbfile
    base = ["project", "--db", url, "--table", "my table", "--id-column", "id", "--k", "3", "--s", "1"]
    assert main([*base, "--into", "quiet"]) == 0
    assert "%" not in capsys.readouterr().err
    assert main([*base, "--into", "loud", "--progress"]) == 0
    assert "projecting into loud" in capsys.readouterr().err


def test_evaluate_leaves_the_label_out_of_the_features(dbfile, capsys):
    """Without --columns, the label column is not taken for a feature (it used to give d = 7 for 6)."""
    url, X = dbfile
    with sqlrp.connect(url) as db:
        frame = wide_frame(X)
        frame["label"] = np.arange(len(X)) % 2
        db.write_dataframe("labelled", frame)
    assert main(["create", "--db", url, "--name", "e6", "--d", "6", "--k", "3", "--s", "1"]) == 0
    args = ["evaluate", "--db", url, "--table", "labelled", "--id-column", "id", "--projection", "e6"]
    assert main([*args, "--sample", "20", "--queries", "5", "--label-column", "label", "--no-sql"]) == 0
    assert "accuracy_projected" in capsys.readouterr().out


def test_engine_error_hints(tmp_path, capsys):
    """The hints for a locked SQLite file and an unreachable server: one line, exit status 4."""
    import socket
    import sqlite3

    path = tmp_path / "w.sqlite"
    with sqlite3.connect(path) as con:
        con.execute('CREATE TABLE "t" ("id" INTEGER, "a" REAL, "b" REAL)')
        con.execute('INSERT INTO "t" VALUES (1, 1.0, 2.0)')
    lock = f"import sqlite3; c = sqlite3.connect({str(path)!r}, isolation_level=None); c.execute('BEGIN EXCLUSIVE')"
    with holding(lock):
        url = f"sqlite:///{path}"
        assert main(["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--into", "o"]) == 4
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "another connection is writing this SQLite file" in err, err
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["projections", "list", "--db", f"postgresql://nobody@127.0.0.1:{port}/db"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not reachable" in err, err


def test_small_device_settings_reach_duckdb(tmp_path, capsys):
    spill = tmp_path / "spill 'dir'"
    db = sqlrp.connect(str(tmp_path / "s.duckdb"), threads=1, memory_limit="200MB", temp_directory=str(spill))
    got = db.fetchall("SELECT current_setting('threads'), current_setting('temp_directory')")[0]
    assert got == (1, str(spill))
    db.write_dataframe("t", wide_frame(np.ones((5, 3))))
    db.close()
    url = f"duckdb:///{tmp_path / 's.duckdb'}"
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--s", "1"]
    assert main([*args, "--threads", "1", "--memory-limit", "200MB", "--temp-directory", str(spill)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6


def test_the_cli_and_the_python_api_mirror_each_other():
    """Every command and action of the command line has its function in ``sqlrp`` (``cli.MIRROR``),
    and every function of ``sqlrp`` that works on a database is reached from the command line."""
    from sqlrp.cli import MIRROR, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = set()
    for name, command in sub.choices.items():
        action = next((a for a in command._actions if a.dest == "action"), None)
        commands |= {f"{name} {choice}" for choice in action.choices} if action else {name}
    assert commands | {"evaluate --index"} == set(MIRROR)
    assert all(name in sqlrp.__all__ and callable(getattr(sqlrp, name)) for name in MIRROR.values())
    python_only = {
        "connect",
        "plan",
        "projected",
        "compile_sql",
        "compile_select",
        "make_projection",
        "transform",
        "transform_frame",
        "expected_distortion",
        "johnson_lindenstrauss_min_dim",
    }
    functions = {n for n in sqlrp.__all__ if n[0].islower()} - python_only
    assert functions == set(MIRROR.values())


def test_indexes_show_and_the_python_mirrors(tmp_path, capsys):
    url = f"duckdb:///{tmp_path / 'm.db'}"
    assert main(["migrate", "--db", url]) == 0
    with sqlrp.connect(url) as db:
        assert sqlrp.migrate(db) == []  # up to date: the CLI's migrate ran the same function
        db.write_dataframe("t", wide_frame(np.random.default_rng(1).normal(size=(300, 6))))
        sqlrp.build_index(db, "t", "id", name="ix")
        proj = sqlrp.create_projection(db, "p", d=6, k=3, s=3)
        out = tmp_path / "p.parquet"
        sqlrp.export_projection(db, "p", out)
        back = sqlrp.import_projection(db, out, name="p2")
        np.testing.assert_array_equal(back.linear.weight, proj.linear.weight)
    capsys.readouterr()
    assert main(["indexes", "show", "ix", "--db", url]) == 0
    shown = capsys.readouterr().out
    assert "index 'ix'" in shown and "table 't', id column 'id', d = 6" in shown
    with pytest.raises(SystemExit) as usage:
        main(["indexes", "show", "--db", url])
    assert usage.value.code == 2 and "indexes show needs a NAME" in capsys.readouterr().err


def test_every_command_and_option_is_described_with_examples_and_defaults(capsys):
    """Each command has a description and examples; each of its options and positionals a help text;
    a default is shown; index offers no option it never uses (the long layout)."""
    from sqlrp.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        assert command.description and "examples:\n  sqlrp " + name in command.epilog, name
        for action in command._actions:
            assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    text = capsys.readouterr().out
    assert "--feature-column" not in text and "long" not in text.split("--layout")[1].split("--")[0]
    assert "(default: wide)" in " ".join(text.split()) and "examples:" in text
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    assert "(default: 4000)" in " ".join(capsys.readouterr().out.split())


def test_a_mistyped_file_or_an_unknown_output_ending_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQLRP_DB", raising=False)
    (tmp_path / "emb.parquet").write_bytes(b"")
    assert main(["project", "--table", "emb.parqet", "--id-column", "id", "--k", "2", "--into", "o.parquet"]) == 3
    assert "no file 'emb.parqet' (did you mean 'emb.parquet'?)" in capsys.readouterr().err
    pd.DataFrame({"id": [1, 2], "a": [1.0, 2.0]}).to_csv(tmp_path / "in.csv", index=False)
    assert main(["project", "--table", "in.csv", "--id-column", "id", "--k", "2", "--into", "x.xlsx"]) == 2
    said = "sqlrp writes .parquet, .csv or .json files, not '.xlsx'; with --db URL it writes a table"
    assert said in capsys.readouterr().err
    assert not (tmp_path / "x.xlsx").exists()
