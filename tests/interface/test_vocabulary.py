"""One vocabulary in errors, per interface (issue 35): a message is written once in the command line's
flags (``--replace``, ``--dtype=float64``); Python shows it in Python's words (``replace=True``,
``dtype='float64'``), the command line as written.  A mistyped file name with a database given is named
as a missing file first, and an ``into`` with a file ending sqlrp does not write is refused."""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import build_parser, main
from sqlrp.core.errors import SWITCHES, InvalidParameter, ProjectionNotFound, cli_words, python_words, warn_caller
from testkit.frames import wide_frame


@pytest.fixture
def url(tmp_path, monkeypatch):
    """A DuckDB file with a table ``t`` (id, f0..f5), ``emb.parquet`` beside it, run from its folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQLRP_DB", raising=False)
    frame = wide_frame(np.random.default_rng(3).normal(size=(40, 6)))
    frame.to_parquet(tmp_path / "emb.parquet")
    with sqlrp.connect(str(tmp_path / "v.duckdb")) as db:
        db.write_dataframe("t", frame)
    return f"duckdb:///{tmp_path / 'v.duckdb'}"


def _cli(capsys, *args: str) -> tuple[int, str]:
    """The status and the first line on stderr (an error is that one line)."""
    capsys.readouterr()
    status = main(list(args))
    err = capsys.readouterr().err
    assert status == 0 or err.count("\n") == 1, err
    return status, err.splitlines(keepends=True)[0]


def _python_only(message: str) -> None:
    assert "--" not in message, message


def _cli_only(message: str) -> None:
    assert "=True" not in message and "=False" not in message and " k=" not in message, message


def test_the_rendering_rule():
    assert python_words("pass --replace or choose another name") == "pass replace=True or choose another name"
    assert python_words("(--no-check)") == "(check=False)"
    assert python_words("use --dtype=float64, or scale the data first (--standardize).") == (
        "use dtype='float64', or scale the data first (standardize=True)."
    )
    assert python_words("name them with --columns; drop --k") == "name them with columns=; drop k="
    assert python_words("--kernel-modified, --no-sql, --chunk-rows, --candidates=40") == (
        "modified=True, in_sql=False, chunk_rows=, candidates=40"
    )
    assert python_words("--matrix=TABLE --to=NAME.parquet --schema='my s'") == (
        "matrix=TABLE to='NAME.parquet' schema='my s'"
    )
    assert python_words("SELECT 1 -- a comment, 3--4") == "SELECT 1 -- a comment, 3--4"  # no flag in them
    err = InvalidParameter("pass --replace")
    assert str(err) == "pass replace=True" and cli_words(err) == "pass --replace" and err.args == ("pass --replace",)
    missing = ProjectionNotFound("no stored projection 'p': give --k")
    assert str(missing) == "no stored projection 'p': give k=" and cli_words(missing).endswith("--k")


def test_the_switches_are_the_command_lines_flags():
    """:data:`SWITCHES` (``--x`` reads ``x=True`` in Python) is exactly the CLI's store_true /
    store_false options, by their dests."""

    def actions(parser: argparse.ArgumentParser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from actions(sub)
            else:
                yield action

    switch = (argparse._StoreTrueAction, argparse._StoreFalseAction)
    flags = {a.dest for a in actions(build_parser()) if isinstance(a, switch)}
    assert flags == SWITCHES


def test_an_existing_output_table_in_each_interfaces_words(url, capsys):
    with sqlrp.connect(url) as db:
        sqlrp.project(db, "t", "id", k=2, into="out")
        with pytest.raises(sqlrp.ProjectionExists) as python:
            sqlrp.project(db, "t", "id", k=2, into="out")
    assert str(python.value) == "table 'out' already exists; pass replace=True or choose another name"
    _python_only(str(python.value))
    status, err = _cli(capsys, "project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--into", "out")
    assert status == 3 and err == "error: table 'out' already exists; pass --replace or choose another name\n"
    _cli_only(err)


def test_a_stored_projection_with_another_k_in_each_interfaces_words(url, capsys):
    with sqlrp.connect(url) as db:
        sqlrp.create_projection(db, "p", d=6, k=3)
        with pytest.raises(InvalidParameter) as python:
            sqlrp.project(db, "t", "id", "p", k=4)
    assert str(python.value) == "stored projection 'p' has k = 3, not 4; drop k= or use another name"
    _python_only(str(python.value))
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--projection", "p", "--k", "4"]
    status, err = _cli(capsys, *args)
    assert status == 2 and err == "error: stored projection 'p' has k = 3, not 4; drop --k or use another name\n"
    _cli_only(err)


def test_a_warning_in_each_interfaces_words(url, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_caller("probe more lists (--probes) or rebuild with --replace")
    assert [str(w.message) for w in caught] == ["probe more lists (probes=) or rebuild with replace=True"]
    assert cli_words(caught[0].message) == "probe more lists (--probes) or rebuild with --replace"
    assert caught[0].filename == __file__  # still pointed at the caller
    with sqlrp.connect(url) as db:  # an integer key beside the features: a warning from deep inside sqlrp
        db.write_dataframe("mixed", wide_frame(np.ones((5, 3))).assign(year=np.arange(5, dtype=np.int64)))
        with pytest.warns(UserWarning, match=r"integer column 'year' read as features") as python:
            sqlrp.project(db, "mixed", "id", k=2)
    said = [str(w.message) for w in python if "integer column" in str(w.message)]
    assert said and "columns=" in said[0] and "(--" not in said[0]
    args = ["project", "--db", url, "--table", "mixed", "--id-column", "id", "--k", "2", "--into", "o"]
    status, err = _cli(capsys, *args)
    assert status == 0 and err.startswith("warning: ") and "(--columns)" in err
    _cli_only(err)


def test_a_mistyped_file_with_a_database_is_named_as_a_file(url, capsys):
    with sqlrp.connect(url) as db, pytest.raises(sqlrp.InputError) as python:
        sqlrp.project(db, "emb.parqet", "id", k=4)
    said = str(python.value)
    assert said.startswith("no file 'emb.parqet' (did you mean 'emb.parquet'?), and no table named 'emb.parqet'.")
    assert said.endswith("For a table in another schema, pass schema='emb' with table='parqet'.")
    _python_only(said)
    status, err = _cli(capsys, "project", "--db", url, "--table", "emb.parqet", "--id-column", "id", "--k", "4")
    assert status == 3 and err.startswith("error: no file 'emb.parqet' (did you mean 'emb.parquet'?), and no table")
    assert err.endswith("pass --schema=emb with --table=parqet.\n")
    _cli_only(err)
    with sqlrp.connect(url) as db:  # the real file is read, and a dotted name that is no file reads as before
        assert len(sqlrp.project(db, "emb.parquet", "id", k=4)) == 40
        with pytest.raises(sqlrp.InputError, match=r"^no table named 'v1\.2'\..* pass schema='v1' with table='2'\.$"):
            sqlrp.project(db, "v1.2", "id", k=4)


def test_an_output_with_a_file_ending_sqlrp_does_not_write_is_refused(url, capsys):
    said = "sqlrp writes .parquet, .csv or .json files, not '.xlsx'; name a table without a file ending"
    with sqlrp.connect(url) as db:
        with pytest.raises(InvalidParameter) as python:
            sqlrp.project(db, "t", "id", k=2, into="x.xlsx")
        assert str(python.value) == said
        with pytest.raises(InvalidParameter, match=r"not '\.gz'"):
            sqlrp.project(db, pd.DataFrame({"id": [1, 2], "a": [1.0, 2.0]}), "id", k=1, into="out.csv.gz")
        sqlrp.build_index(db, "t", "id", name="ix")
        with pytest.raises(InvalidParameter, match=r"not '\.xlsx'; name a table without a file ending"):
            sqlrp.search(db, "ix", "t", "id", top=2, into="n.xlsx")
        sqlrp.project(db, "t", "id", k=2, into="v1.2")  # a dot, but no file's ending: a table
        assert {"v1.2"} <= set(db.table_names()) and not {"x.xlsx", "n.xlsx", "out.csv.gz"} & set(db.table_names())
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--into", "x.xlsx"]
    status, err = _cli(capsys, *args)
    assert status == 2 and err == f"error: {said}\n"
    args = ["search", "--db", url, "--index", "ix", "--query-table", "t", "--query-id-column", "id", "--into", "n.xlsx"]
    status, err = _cli(capsys, *args)
    assert status == 2 and "not '.xlsx'; name a table without a file ending" in err
    with sqlrp.connect(url) as db:
        assert "x.xlsx" not in db.table_names() and "n.xlsx" not in db.table_names()


def test_the_help_of_s_says_what_auto_means_with_and_without_a_table(capsys):
    with pytest.raises(SystemExit):
        main(["create", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "auto from the data's kurtosis when projecting a table (at most sqrt(d)), sqrt(d) without one" in text
