"""Option combinations through every entry point (issue 41): ``into`` x ``replace`` x ``incremental`` x
``view`` x ``chunk_rows`` x ``matrix`` x ``block``, drawn by hypothesis, given to ``sqlrp.project`` (a table
and a DataFrame), ``sqlrp.projected(...).send`` and the CLI on the same DuckDB file.

The oracle: every entry point decides alike -- all refuse (one line, sqlrp's own error; the CLI exit
status 2-4) or all run -- and what runs gives the NumPy reference of the stored matrix: the rows handed
back, or the table written (an incremental run adds the new ids and keeps the old rows as they were).
A refusal leaves the database as it was.  Budget: :func:`testkit.fuzz_tables.fuzz_settings`.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp import cli
from sqlrp.methods import reference
from testkit.fuzz_tables import fuzz_settings

ENTRIES = ("project", "project_frame", "send", "cli")


@st.composite
def combinations(draw: st.DrawFn) -> dict:
    return dict(
        into=draw(st.sampled_from([None, None, "out", "out", "out.parquet"])),
        existing=draw(st.booleans()),  # "out" holds the projection of the first rows already
        replace=draw(st.booleans()),
        incremental=draw(st.booleans()),
        view=draw(st.integers(0, 4)) == 4,
        chunk_rows=draw(st.sampled_from([None, None, None, 1, 3, 0, -1])),
        matrix=draw(st.sampled_from(["auto", "auto", "registry", "values"])),
        strategy=draw(st.sampled_from(["auto", "inline", "mailman"])),
        block=draw(st.sampled_from([None, None, 1, 2, 0, -2])),
    )


def _setup(folder: Path, existing: bool) -> tuple[str, np.ndarray, np.ndarray]:
    url = f"duckdb:///{folder}/o.duckdb"
    rng = np.random.default_rng(7)
    X = rng.normal(size=(9, 4)) * 10
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame.insert(0, "id", np.arange(9))
    db = sqlrp.connect(url)
    try:
        db.write_dataframe("t", frame)
        sqlrp.create_projection(db, "m", "achlioptas", d=4, k=3, seed=1, s=1)
        if existing:
            db.execute("CREATE TABLE early AS SELECT * FROM t WHERE id < 4")
            sqlrp.project(db, "early", "id", "m", into="out")
            db.execute("DROP TABLE early")
        Y = reference.transform(sqlrp.load_projection(db, "m"), X)
    finally:
        db.close()
    return url, X, Y


def _options(c: dict) -> dict:
    keys = ("replace", "incremental", "view", "chunk_rows", "matrix", "strategy", "block")
    return {key: c[key] for key in keys if c[key] is not None and c[key] is not False}  # 0 is given: 0 == False


def _cli_args(url: str, c: dict) -> list[str]:
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--projection", "m"]
    if c["into"]:
        args += ["--into", str(c["into"])]
    for flag in ("replace", "incremental", "view"):
        if c[flag]:
            args.append(f"--{flag}")
    for name in ("chunk_rows", "block"):
        if c[name] is not None:
            args += [f"--{name.replace('_', '-')}", str(c[name])]
    return [*args, "--matrix", c["matrix"], "--strategy", c["strategy"]]


def _run(entry: str, url: str, folder: Path, c: dict) -> tuple[str, object]:
    """``("refused", first line)`` or ``("ok", rows)``: the rows handed back or written, by id."""
    into = c["into"]
    if into == "out.parquet":
        into = str(folder / "out.parquet")
    options = _options(c)
    if entry == "cli":
        out, err = io.StringIO(), io.StringIO()
        args = _cli_args(url, {**c, "into": into})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(args)
        if status != 0:
            lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
            assert status in (2, 3, 4) and len(lines) == 1, (args, status, err.getvalue())
            return "refused", lines[0]
        if into is None:
            return "ok", pd.read_csv(io.StringIO(out.getvalue()))
        return "ok", _written(url, into)
    db = sqlrp.connect(url)
    try:
        try:
            if entry == "send":
                result = sqlrp.projected(db, "t", "id", "m", **{k: v for k, v in options.items() if k in _HOW}).send(
                    into, **{k: v for k, v in options.items() if k not in _HOW}
                )
            else:
                table = db.query_df("SELECT * FROM t") if entry == "project_frame" else "t"
                result = sqlrp.project(db, table, "id", "m", into=into, **options)
            if result is not None and not isinstance(result, pd.DataFrame):
                chunks = list(result)
                result = pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()
        except sqlrp.SqlrpError as exc:
            assert "\n" not in str(exc).strip(), (entry, c, str(exc))
            return "refused", str(exc)
    finally:
        db.close()
    return "ok", (result if into is None else _written(url, into))


_HOW = ("matrix", "strategy", "block", "check")


def _written(url: str, into: str) -> pd.DataFrame:
    if into.endswith(".parquet"):
        import duckdb

        return duckdb.sql(f"SELECT * FROM read_parquet('{into}')").df()
    db = sqlrp.connect(url)
    try:
        return db.query_df('SELECT * FROM "out"')
    finally:
        db.close()


def _state(url: str, folder: Path) -> tuple:
    db = sqlrp.connect(url)
    try:
        names = tuple(sorted(db.table_names()))
        out = db.query_df('SELECT * FROM "out" ORDER BY id').to_dict("list") if db.table_exists("out") else None
    finally:
        db.close()
    return names, repr(out), tuple(sorted(p.name for p in folder.iterdir() if p.name != "o.duckdb.wal"))


@fuzz_settings(10)
@given(c=combinations(), data=st.data())
def test_option_combinations_decide_alike(c: dict, data: st.DataObject) -> None:
    outcomes = {}
    entries = data.draw(st.permutations(ENTRIES))
    for entry in entries:
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            url, X, Y = _setup(folder, c["existing"])
            before = _state(url, folder)
            kind, value = _run(entry, url, folder, c)
            outcomes[entry] = kind
            if kind == "refused":
                assert _state(url, folder) == before, f"{entry} {c}: refused, yet the database changed"
                continue
            rows = value.sort_values("id").reset_index(drop=True)
            got = rows.iloc[:, 1:].to_numpy(dtype=float)
            ids = rows["id"].to_numpy()
            if c["incremental"] and c["existing"] and c["into"] == "out":  # the first rows kept, the rest added
                assert list(ids) == list(range(9)), (entry, c, ids)
            np.testing.assert_allclose(got, Y[ids], rtol=1e-9, atol=1e-9, err_msg=f"{entry} {c}")
    assert len(set(outcomes.values())) == 1, f"the entry points decided differently on {c}: {outcomes}"


def test_chunk_rows_0_is_refused_by_every_entry_alike(tmp_path) -> None:
    """Found by a longer run (SQLRP_FUZZ_EXAMPLES=40): the harness had dropped ``chunk_rows=0`` for the API
    (``0 in (None, False)`` is true in Python) while the CLI was given it; every entry refuses it."""
    c = dict(into="out", existing=True, replace=True, incremental=False, view=False, chunk_rows=0, matrix="auto",
             strategy="auto", block=1)  # fmt: skip
    for entry in ENTRIES:
        folder = tmp_path / entry
        folder.mkdir()
        url, _, _ = _setup(folder, c["existing"])
        assert _run(entry, url, folder, c)[0] == "refused", entry
