"""Every option is checked once, where it enters, and every entry point shares that check (issue 41):
the same value is refused by all of them, in the same one line, before any work -- never refused by
one and taken by another (``block = 0`` was refused by ``project`` and taken by ``projected``)."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp import cli
from sqlrp.core.errors import InvalidParameter

BAD = [
    ({"strategy": "mailman", "block": 0}, "block must be a whole number >= 1"),
    ({"strategy": "mailman", "block": -3}, "block must be a whole number >= 1"),
    ({"strategy": "mailman", "block": 1.5}, "block must be a whole number >= 1"),
    ({"strategy": "mailman", "block": True}, "block must be a whole number >= 1"),
    ({"check": "no"}, "check must be True or False"),
    ({"matrix": ""}, "matrix must be a name"),
    ({"strategy": "in\x00line"}, "NUL character"),
]

DESTINATION_BAD = [
    ({"into": "out", "replace": True, "incremental": True}, "choose one"),
    ({"into": "out", "view": True, "incremental": True}, "cannot be topped up"),
    ({"replace": True}, "give it with"),
    ({"incremental": True}, "give it with"),
    ({"into": "out", "chunk_rows": 5}, "does not go with"),
    ({"chunk_rows": 0}, "chunk_rows must be a whole number >= 1"),
    ({"chunk_rows": 2**63}, "chunk_rows"),
    ({"chunk_rows": 2.0}, "chunk_rows must be a whole number >= 1"),
    ({"output_format": "excel"}, "output_format must be one of"),
    ({"into": "out.xlsx"}, "not '.xlsx'"),
    ({"into": "o\x00ut"}, "NUL character"),
    ({"into": "out", "replace": "yes"}, "replace must be True or False"),
]


@pytest.fixture()
def db():
    db = sqlrp.connect("duckdb://")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(20, 6)), columns=[f"x{i}" for i in range(6)])
    frame.insert(0, "id", np.arange(20))
    db.write_dataframe("t", frame)
    yield db
    db.close()


def _user_tables(db) -> set[str]:
    return {n for n in db.table_names() if not n.lower().startswith("sqlrp_")}


def _entries(db, options: dict):
    """Each Python entry point with ``options``; a callable per entry, named."""
    new = dict(method="achlioptas", k=3, seed=1)
    rest = {k: v for k, v in options.items() if k != "into"}
    into = options.get("into")
    frame = db.query_df("SELECT * FROM t")
    yield "project", lambda: sqlrp.project(db, "t", "id", into=into, **new, **rest)
    yield "project(frame)", lambda: sqlrp.project(db, frame, "id", into=into, **new, **rest)
    yield "projected().send", lambda: sqlrp.projected(db, "t", "id", **new).send(into, **rest)
    how = {k: v for k, v in rest.items() if k in ("strategy", "block", "check", "matrix")}
    if how == rest and into is None:
        yield "projected().df", lambda: sqlrp.projected(db, "t", "id", **new, **how).df()
        yield "projected().sql", lambda: sqlrp.projected(db, "t", "id", **new, **how).sql()


@pytest.mark.parametrize(("options", "message"), BAD + DESTINATION_BAD, ids=lambda v: repr(v)[:40])
def test_every_python_entry_refuses_alike(db, options: dict, message: str) -> None:
    before = _user_tables(db)
    for entry, call in _entries(db, options):
        with pytest.raises(InvalidParameter, match=message.replace("(", r"\(").replace("[", r"\[")) as info:
            result = call()
            if hasattr(result, "__next__"):
                next(result)
        assert "\n" not in str(info.value), entry
        assert _user_tables(db) == before, f"{entry} wrote a table although refused"


def _cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, err.getvalue()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--replace", "--incremental", "--into", "out"], "choose one"),
        (["--view", "--incremental", "--into", "out"], "cannot be topped up"),
        (["--replace"], "give it with"),
        (["--chunk-rows", "5", "--into", "out"], "does not go with"),
    ],
)
def test_the_cli_refuses_as_the_api(tmp_path, flags: list[str], message: str) -> None:
    url = f"duckdb:///{tmp_path}/x.duckdb"
    db = sqlrp.connect(url)
    db.write_dataframe("t", pd.DataFrame({"id": [1, 2, 3], "a": [1.0, 2.0, 3.0], "b": [0.5, 0.0, -1.0]}))
    db.close()
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", *flags]
    if "--chunk-rows" in flags and "--chunk-rows" not in {a.option_strings[0] for a in _project_actions()}:
        pytest.skip("the CLI has no --chunk-rows")
    status, err = _cli(args)
    assert status == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], err


def _project_actions():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return [a for a in sub.choices["project"]._actions if a.option_strings]


def test_replace_with_incremental_never_keeps_old_outputs(db) -> None:
    """The issue's instance: ``replace=True, incremental=True`` had ignored ``replace`` -- edited rows kept
    their old outputs.  Refused now, and the table is as it was."""
    sqlrp.project(db, "t", "id", "m", method="achlioptas", k=3, seed=1, into="out")
    before = db.query_df("SELECT * FROM out ORDER BY id")
    db.execute("UPDATE t SET x0 = x0 + 100 WHERE id < 5")
    with pytest.raises(InvalidParameter, match="choose one"):
        sqlrp.project(db, "t", "id", "m", into="out", replace=True, incremental=True)
    pd.testing.assert_frame_equal(db.query_df("SELECT * FROM out ORDER BY id"), before)
    sqlrp.project(db, "t", "id", "m", into="out", replace=True)  # the rebuild gives the edited rows' outputs
    X = db.query_df("SELECT * FROM t ORDER BY id").iloc[:, 1:].to_numpy()
    want = sqlrp.methods.reference.transform(sqlrp.load_projection(db, "m"), X)
    got = db.query_df("SELECT * FROM out ORDER BY id").iloc[:, 1:].to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rows", [None, 0, -1, 2**63, 1.5])
def test_chunks_needs_a_number_of_rows(db, rows) -> None:
    with pytest.raises(InvalidParameter):
        next(iter(sqlrp.projected(db, "t", "id", method="achlioptas", k=2).chunks(rows)))


@pytest.mark.parametrize("dialect", [5, 1.5, b"duckdb", ["duckdb"]])
def test_sql_needs_a_dialect_name(db, dialect) -> None:
    with pytest.raises(InvalidParameter, match="dialect must be"):
        sqlrp.projected(db, "t", "id", method="achlioptas", k=2).sql(dialect)


def test_the_in_memory_path_takes_no_sql_options() -> None:
    """The fuzzer's CI failure (issue 41): ``transform_frame`` has no strategy or block -- it runs the
    NumPy reference -- so a ``block = 0`` drawn for it is no option it takes; its numbers are the
    reference's."""
    p = sqlrp.create_projection(None, None, "gaussian", d=4, k=1, seed=0)
    X = np.arange(12, dtype=float).reshape(3, 4)
    np.testing.assert_allclose(sqlrp.transform_frame(p, X), sqlrp.methods.reference.transform(p, X))
