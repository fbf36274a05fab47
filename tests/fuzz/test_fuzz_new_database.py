"""Issue 42, item 2, as a class: any command, with options good or bad, against a database file that is not
there.  Oracle: the file exists afterwards exactly when the command succeeded and wrote something there
(a stored projection, a table, an index); a command that fails, is refused or only reads leaves the folder
as it was -- no empty database, no write-ahead log; a reading command is refused naming the missing file."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp import cli
from testkit.fuzz_tables import fuzz_settings

#: each command's arguments reading the Parquet file ``{src}`` (or nothing) into the database ``{db}``
COMMANDS: dict[str, list[str]] = {
    "project into a table": ["project", "--table", "{src}", "--id-column", "id", "--k", "2", "--into", "out"],
    "project into a file": ["project", "--table", "{src}", "--id-column", "id", "--k", "2", "--into", "{dir}/o.csv"],
    "project, stored": ["project", "--table", "{src}", "--id-column", "id", "--k", "2", "--projection", "rp"],
    "tune": ["tune", "--table", "{src}", "--id-column", "id", "--k", "2", "--sample", "20", "--iterations", "5"],
    "index": ["index", "--table", "{src}", "--id-column", "id", "--name", "ix", "--lists", "2"],
    "fit": ["fit", "--table", "{src}", "--id-column", "id", "--k", "2", "--name", "pc", "--no-progress"],
    "create": ["create", "--name", "c", "--d", "4", "--k", "2"],
    "projections list": ["projections", "list"],
    "search": ["search", "--index", "ix", "--query-table", "{src}", "--query-id-column", "id"],
    "evaluate": ["evaluate", "--table", "{src}", "--id-column", "id", "--projection", "rp"],
}
READING = {"projections list", "search", "evaluate"}

#: what may go wrong: nothing, an unknown column, a bad value, an output already there, a missing input
SPOILERS: dict[str, list[str]] = {
    "none": [],
    "unknown column": ["--columns", "f0,nope"],
    "NULL features": ["--columns", "f0,holes"],
    "existing output": [],
    "missing input": [],
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("src")
    rng = np.random.default_rng(9)
    frame = pd.DataFrame(rng.normal(size=(60, 4)), columns=[f"f{j}" for j in range(4)])
    frame.insert(0, "id", np.arange(60))
    frame["holes"] = np.where(np.arange(60) % 7 == 0, np.nan, 1.0)
    path = folder / "rows.parquet"
    frame.to_parquet(path)
    return path


def _argv(command: str, spoiler: str, src: Path, db: str, folder: Path) -> list[str]:
    argv = [a.format(src=src, dir=folder) for a in COMMANDS[command]] + ["--db", db]
    if command.startswith(("project", "tune", "index", "fit")):
        argv += SPOILERS[spoiler]
    if spoiler == "missing input" and "{src}" in " ".join(COMMANDS[command]):
        argv = [str(folder / "gone.parquet") if a == str(src) else a for a in argv]
    return argv


@fuzz_settings(24)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    spoiler=st.sampled_from(sorted(SPOILERS)),
    engine=st.sampled_from(["duckdb", "sqlite"]),
)
def test_a_new_database_file_only_when_a_write_committed(source, command, spoiler, engine):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / f"new.{engine}"
        if spoiler == "existing output":
            (folder / "o.csv").write_text("someone's")
        before = sorted(p.name for p in folder.iterdir())
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(_argv(command, spoiler, source, f"{engine}:///{path}", folder))
        after = sorted(p.name for p in folder.iterdir())
        if status != 0:
            assert after == before, (command, spoiler, after, err.getvalue())
            assert err.getvalue().splitlines()[-1].startswith("error: "), err.getvalue()
            if command in READING and spoiler == "none":
                assert "no database file" in err.getvalue()
            return
        assert command not in READING
        assert path.exists(), (command, spoiler)
        with sqlrp.connect(f"{engine}:///{path}") as db:  # what was written is there
            if command in ("project, stored", "project into a file", "create", "tune", "fit"):
                assert len(sqlrp.list_projections(db)) == 1
            if command == "project into a table":
                assert db.fetchall('SELECT COUNT(*) FROM "out"')[0][0] == 60
            if command == "index":
                assert sqlrp.load_index(db, "ix").lists == 2
        assert {p.name for p in folder.iterdir()} - set(before) - {"o.csv", "o.csv.sqlrp.json"} == {path.name}
