"""Every whole-number option of every command, given hostile values (issue 41): huge (10^20, 2^63, just
above its bound), negative, zero, fractional, exponent, text, empty.  The options are read off the parser
(:func:`sqlrp.cli.build_parser`: each whole-number option's argparse type carries its bound, ``limit``), so a
new option is fuzzed the day it is added.  Oracle: a value outside the option's range is refused with exit
status 2 and one ``error: argument --option`` line; a small value in range runs to success or one
``error:`` line; never a traceback, never a hang (an alarm stops a run that outlives its budget).

Plus one regression test per instance the issue lists."""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import sqlrp
from sqlrp import cli
from sqlrp.core.errors import InvalidParameter
from sqlrp.core.params import LIMITS
from testkit.fuzz_tables import fuzz_settings

#: the arguments that make each command run on the fixture (``{db}``, ``{dir}`` filled in)
BASE: dict[str, list[str]] = {
    "project": ["--db", "{db}", "--table", "t", "--id-column", "id", "--k", "2"],
    "compile": ["--db", "{db}", "--table", "t", "--id-column", "id", "--k", "2"],
    "create": ["--db", "{db}", "--name", "fz", "--d", "4", "--k", "2", "--replace"],
    "tune": ["--db", "{db}", "--table", "t", "--id-column", "id", "--k", "2", "--sample", "20", "--iterations", "5"]
    + ["--draws", "2", "--name", "tz", "--replace"],
    "evaluate": ["--db", "{db}", "--table", "t", "--id-column", "id", "--projection", "p", "--sample", "20"]
    + ["--queries", "5", "--recall-k", "2", "--no-sql"],
    "index": ["--db", "{db}", "--table", "t", "--id-column", "id", "--name", "ix2", "--replace", "--lists", "2"]
    + ["--calibration-queries", "0"],
    "search": ["--db", "{db}", "--index", "ix", "--query-table", "q", "--query-id-column", "id", "--top", "2"],
    "demo": ["--db", "{dir}/demo.duckdb"],
    "fit": ["--db", "{db}", "--table", "t", "--id-column", "id", "--k", "2", "--name", "fz3", "--replace"],
    "dbt": ["--project-dir", "{dir}/dbt", "--source", "raw.t", "--db", "{db}", "--id-column", "id", "--k", "2"]
    + ["--into", "fz", "--replace"],
}
#: commands whose run is too long for a fuzz example: only values argparse refuses are sent to them
NOT_RUN = {"demo"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def whole_number_options() -> list[tuple[str, str, str]]:
    """``(command, --option, limit)`` of every option whose argparse type is a bounded whole number."""
    found = []
    for command, sub in _subparsers(cli.build_parser()).items():
        for action in sub._actions:
            limit = getattr(action.type, "limit", None)
            if limit and action.option_strings:
                found.append((command, action.option_strings[-1], limit))
    return found


OPTIONS = whole_number_options()


def test_every_whole_number_option_is_bounded() -> None:
    """No option of the command line takes a whole number without a bound: its type is ``int``, or an
    unbounded check, nowhere (the fuzzer below finds the bounded ones by their ``limit``)."""
    unbounded = []
    for command, sub in _subparsers(cli.build_parser()).items():
        for action in sub._actions:
            name = getattr(action.type, "__name__", "")
            if action.type is int or (
                action.type is not None and "whole number" in name and not hasattr(action.type, "limit")
            ):
                unbounded.append((command, action.option_strings))
    assert not unbounded
    assert {o for _, o, _ in OPTIONS} >= {"--k", "--d", "--ks", "--kernel-degree", "--iterations", "--seed", "--top"}
    assert all(c in BASE for c, _, _ in OPTIONS), {c for c, _, _ in OPTIONS} - set(BASE)


def _hostile(limit: str) -> st.SearchStrategy[tuple[str, bool]]:
    """``(text, in_range)``: values outside the range of ``LIMITS[limit]`` (and malformed ones), or small
    ones inside it."""
    bound = LIMITS[limit]
    outside = st.one_of(
        st.sampled_from([10**20, 2**63, 2**64, 2**31, bound.upper + 1, bound.minimum - 1, -1, -(10**20)])
        .filter(lambda v: not bound.minimum <= v <= bound.upper)
        .map(str),
        st.integers(bound.upper + 1, 10**30).map(str),
        st.integers(-(10**12), bound.minimum - 1).map(str),
        st.sampled_from(
            ["1.5", "2.0", "1e3", "0x10", "abc", "", " ", "nan", "inf", "-0.5", "1,2", "٣", "1_000", "+", "--1"]
        ),
    )
    inside = st.integers(bound.minimum, min(bound.minimum + 2, bound.upper)).map(str)
    return st.one_of(outside.map(lambda t: (t, False)), inside.map(lambda t: (t, True)))


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory) -> tuple[str, Path]:
    """A DuckDB file with ``t`` (20 rows x 4 features), ``q`` (queries), a stored projection ``p`` and an
    index ``ix``; a dbt project beside it."""
    folder = tmp_path_factory.mktemp("cli_options")
    url = f"duckdb:///{folder}/f.duckdb"
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.normal(size=(20, 4)), columns=[f"f{i}" for i in range(4)])
    frame.insert(0, "id", np.arange(20))
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", frame)
        db.write_dataframe("q", frame.head(3))
        sqlrp.create_projection(db, "p", "achlioptas", d=4, k=2)
        sqlrp.build_index(db, "t", "id", "ix", lists=2, calibration_queries=0)
    (folder / "dbt").mkdir()  # a dbt project for `sqlrp dbt`
    (folder / "dbt" / "dbt_project.yml").write_text("name: fz\nprofile: fz\n")
    (folder / "dbt" / "profiles.yml").write_text("fz:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n")
    return url, folder


class _Alarm(Exception):
    pass


def _run(argv: list[str], seconds: int = 60) -> tuple[int, str]:
    """``sqlrp argv`` in this process: its status and stderr; a run past ``seconds`` is a hang (fails)."""

    def ring(*_: object) -> None:
        raise _Alarm(f"sqlrp {' '.join(argv)} ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = cli.main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return status, err.getvalue()


@fuzz_settings(30)
@given(data=st.data())
@example(data=None)  # the issue's instances, always: see the regression tests below
def test_fuzz_whole_number_options(fixture_db, data) -> None:
    if data is None:
        return
    url, folder = fixture_db
    command, option, limit = data.draw(st.sampled_from(OPTIONS), label="option")
    text, in_range = data.draw(_hostile(limit), label="value")
    if in_range and command in NOT_RUN:
        return
    base = [a.format(db=url, dir=folder) for a in BASE[command]]
    status, err = _run([command, *base, f"{option}={text}"])
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
    if not in_range:
        assert status == 2, (status, err)
        assert len(lines) == 1 and lines[0].startswith(f"error: argument {option}"), err
    else:
        assert status == 0 or (len(lines) == 1 and lines[0].startswith("error: ")), (status, err)


# ---- regression tests: the instances of issue 41 ----

ISSUE_41 = [
    ["project", "--d", "99999999999999999999"],
    ["tune", "--k", "99999999999999999999"],
    ["tune", "--k", "200000"],  # k's cap is 100,000
    ["tune", "--iterations", "99999999999999999999"],  # had no bound: ran until killed
    ["evaluate", "--ks", "99999999999999999999"],
    ["evaluate", "--kernel-degree", "99999999999999999999"],
]


@pytest.mark.parametrize("case", ISSUE_41, ids=[" ".join(c[:2]) for c in ISSUE_41])
def test_huge_numbers_are_usage_errors(fixture_db, case) -> None:
    url, folder = fixture_db
    command, option, value = case
    status, err = _run([command, *[a.format(db=url, dir=folder) for a in BASE[command]], option, value])
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: argument {option}: expected ") and "Traceback" not in err
    assert f"{LIMITS['k' if option == '--ks' else option[2:].replace('-', '_')].upper:,}" in err


def test_api_shares_the_bounds(fixture_db) -> None:
    """The API refuses what the CLI refuses, with the same bound: tune's k and iterations, evaluate's ks,
    a kernel's degree, a search's top."""
    url, _ = fixture_db
    with sqlrp.connect(url) as db:
        with pytest.raises(InvalidParameter, match="k = 200000 is above 100000"):
            sqlrp.tune(db, "t", "id", k=200_000, name="x")
        with pytest.raises(InvalidParameter, match="iterations = 100000000000000000000 is above"):
            sqlrp.tune(db, "t", "id", k=2, iterations=10**20, name="x")
        with pytest.raises(InvalidParameter, match="each of ks"):
            sqlrp.evaluate(db, "t", "id", "p", ks=[10**20])
        with pytest.raises(InvalidParameter, match="top (= 9223372036854775808 is above|must be at most 999,999)"):
            sqlrp.search(db, "ix", "q", "id", top=2**63)
        assert "x" not in set(sqlrp.list_projections(db)["name"])
    from sqlrp.evaluation.metrics import Kernel

    with pytest.raises(InvalidParameter, match="kernel degree = 100000000000000000000 is above 64"):
        Kernel(degree=10**20)


def test_db_url_with_a_backslash_or_nul_writes_no_file(tmp_path, monkeypatch) -> None:
    """``--db 'duckdb:///x\\0y'`` created and wrote the file ``x`` (DuckDB reads a backslash as a folder
    separator), exit 0; now one line, exit 2, no file.  A real NUL from the API: the same."""
    monkeypatch.chdir(tmp_path)
    status, err = _run(["create", "--db", "duckdb:///x\\0y", "--name", "a", "--d", "3", "--k", "2"])
    assert status == 2 and err.count("\n") == 1 and "backslash" in err, err
    with pytest.raises(InvalidParameter, match="NUL"):
        sqlrp.connect("duckdb:///x\x00y")
    with pytest.raises(InvalidParameter, match="NUL"):
        sqlrp.connect(str(tmp_path / "x\x00y.duckdb"))
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_file_given_to_duckdb_says_sqlite_url(tmp_path) -> None:
    """``--db duckdb:///file.sqlite`` tried to download DuckDB's sqlite extension; now: use sqlite:///."""
    path = tmp_path / "f.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE t (id INTEGER, a REAL)")
        con.commit()
    status, err = _run(["project", "--db", f"duckdb:///{path}", "--table", "t", "--id-column", "id", "--k", "2"])
    assert status == 2 and err.count("\n") == 1, err
    assert f"is a SQLite database, not a DuckDB one: open it with sqlite:///{path}" in err
