"""The statement cache (issue 42, item 4; :mod:`sqlrp.start`, :mod:`sqlrp.cli.statement_cache`): the second
run of ``sqlrp project --projection NAME --into FILE`` on a DuckDB file runs from the first one's entry with
``import duckdb`` and the standard library, writes the same bytes, prints the same lines and exits with the
same status; whatever changed in between that its statements depend on sends it back to the full command,
whose result is then the one without the cache.  Real DuckDB files, the command in fresh interpreters."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sqlrp
from sqlrp import start
from sqlrp.cli import interrupt
from sqlrp.core import files, names
from testkit.statement_cache import K, make_db, outputs, project_argv, run, said

PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('LOADED', *[m for m in ('numpy', 'sqlglot', 'pandas', 'sqlrp.cli') "
    "if m in sys.modules], file=sys.stderr))"
)


def _loaded(done) -> list[str]:
    return [line.split()[1:] for line in done.stderr.splitlines() if line.startswith("LOADED")][-1]


@pytest.mark.parametrize("ending", ["parquet", "csv", "json"])
def test_the_second_run_is_the_cached_one_and_writes_the_same_bytes(tmp_path, ending):
    url, X = make_db(tmp_path)
    argv = project_argv(url, f"out.{ending}", "--replace")
    first = run(argv, tmp_path, script=PROBE)
    assert first.returncode == 0, first.stderr
    assert "statement cache: miss" in first.stderr and "numpy" in _loaded(first)
    full = outputs(tmp_path, f"out.{ending}")
    second = run(argv, tmp_path, script=PROBE)
    assert "statement cache: used" in second.stderr, second.stderr
    assert _loaded(second) == []  # import duckdb and the standard library only
    assert said(second)[:2] == said(first)[:2]
    assert [x for x in said(second)[2].splitlines() if not x.startswith("LOADED")] == [
        x for x in said(first)[2].splitlines() if not x.startswith("LOADED")
    ]
    assert outputs(tmp_path, f"out.{ending}") == full
    assert len(full) == 2
    # the values are the NumPy reference's
    with sqlrp.connect(url) as db:
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
    reader = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[ending]
    got = duckdb.sql(f"SELECT * EXCLUDE (id) FROM {reader}('{tmp_path / f'out.{ending}'}') ORDER BY id").fetchnumpy()
    got = np.column_stack([got[f"p{j}"] for j in range(K)])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def _cached(tmp_path: Path, *options: str) -> tuple[str, list[str]]:
    url, _ = make_db(tmp_path)
    argv = project_argv(url, "out.parquet", "--replace", *options)
    assert run(argv, tmp_path).returncode == 0
    assert "statement cache: used" in run(argv, tmp_path).stderr
    return url, argv


def _as_without_cache(tmp_path: Path, argv: list[str], reason: str) -> None:
    """The next run does not use the entry (``reason`` on the trace), and its status, lines and files are
    those of the command without the cache."""
    cached = run(argv, tmp_path)
    assert f"statement cache: {reason}" in cached.stderr, cached.stderr
    with_cache = (said(cached), outputs(tmp_path, "out.parquet"))
    alone = run(argv, tmp_path, cache="off")
    assert (said(alone), outputs(tmp_path, "out.parquet")) == with_cache


def _edit(url: str, *statements: str) -> None:
    con = duckdb.connect(url.removeprefix("duckdb:///"))
    for sql in statements:
        con.execute(sql)
    con.close()


def test_a_changed_column_type_falls_back(tmp_path):
    url, argv = _cached(tmp_path)
    _edit(url, "ALTER TABLE t ALTER f2 TYPE FLOAT")
    _as_without_cache(tmp_path, argv, "not used (the database changed)")


def test_a_new_column_falls_back(tmp_path):
    url, argv = _cached(tmp_path)
    _edit(url, "ALTER TABLE t ADD COLUMN f6 DOUBLE DEFAULT 1.5")
    _as_without_cache(tmp_path, argv, "not used (the database changed)")  # d = 7: the command refuses it


def test_a_replaced_projection_falls_back(tmp_path):
    url, argv = _cached(tmp_path)
    with sqlrp.connect(url) as db:
        sqlrp.drop_projection(db, "rp")
        sqlrp.create_projection(db, "rp", "gaussian", d=6, k=K, seed=5)
    _as_without_cache(tmp_path, argv, "not used (the database changed)")


def test_a_dropped_projection_falls_back_to_the_error(tmp_path):
    url, argv = _cached(tmp_path)
    with sqlrp.connect(url) as db:
        sqlrp.drop_projection(db, "rp")
    _as_without_cache(tmp_path, argv, "not used (the database changed)")
    assert run(argv, tmp_path, cache="off").returncode != 0


def test_a_tampered_matrix_falls_back(tmp_path):
    url, argv = _cached(tmp_path)
    _edit(url, "UPDATE sqlrp_linear_entry SET weight = weight * 2 WHERE vector = 0")
    _as_without_cache(tmp_path, argv, "not used (the database changed)")


def test_the_fingerprint_is_skipped_only_in_the_state_it_was_checked_in(tmp_path):
    """A fast run notes the database file's state in which the fingerprint held (``.seen``); the next run in
    that very state skips the fingerprint's queries; a note of another entry, or of another state, does not."""
    url, argv = _cached(tmp_path)  # the second run checked the fingerprint and noted the state
    assert "statement cache: used (the database as last checked)" in run(argv, tmp_path).stderr
    (seen,) = (tmp_path / "cache" / "statements").glob("*.seen")
    made, state = json.loads(seen.read_text())
    seen.write_text(json.dumps(["another entry", state]))
    assert "statement cache: used (fingerprint checked)" in run(argv, tmp_path).stderr
    assert json.loads(seen.read_text()) == [made, state]
    _edit(url, "ALTER TABLE t ALTER f4 TYPE FLOAT")  # a new state: the fingerprint is asked again, and fails
    _as_without_cache(tmp_path, argv, "not used (the database changed)")


def test_other_options_are_another_entry(tmp_path):
    url, argv = _cached(tmp_path)
    other = [*argv, "--prefix", "q"]
    first = run(other, tmp_path)
    assert "statement cache: miss" in first.stderr
    assert "statement cache: used" in run(other, tmp_path).stderr


def test_new_rows_are_read_by_the_cached_statements(tmp_path):
    """Rows are what the statement reads, not what it depends on: the entry is used, and its output is the
    command's on the new rows."""
    url, argv = _cached(tmp_path)
    _edit(url, "INSERT INTO t SELECT id + 100, f0, f1, f2, f3, f4, f5 FROM t")
    _as_without_cache(tmp_path, argv, "used")


def test_a_nan_in_the_input_is_the_commands_error(tmp_path):
    url, argv = _cached(tmp_path)
    _edit(url, "UPDATE t SET f3 = 'NaN'::DOUBLE WHERE id = 7")
    _as_without_cache(tmp_path, argv, "not used (")
    done = run(argv, tmp_path)
    assert done.returncode != 0 and "error:" in done.stderr and "7" in done.stderr


def test_an_existing_output_without_replace_is_the_commands_error(tmp_path):
    url, _ = make_db(tmp_path)
    argv = project_argv(url, "out.parquet")
    assert run(argv, tmp_path).returncode == 0
    (tmp_path / "out.parquet").unlink()
    (tmp_path / "out.parquet.sqlrp.json").unlink()
    assert "statement cache: used" in run(argv, tmp_path).stderr
    _as_without_cache(tmp_path, argv, "not used (the output exists)")
    assert run(argv, tmp_path, cache="off").returncode != 0


def test_a_corrupt_entry_is_a_miss_and_is_written_again(tmp_path):
    _, argv = _cached(tmp_path)
    (entry,) = (tmp_path / "cache" / "statements").glob("*.json")
    for damaged in ("{not json", json.dumps({"key": json.loads(entry.read_text())["key"], "program": 3})):
        entry.write_text(damaged)
        done = run(argv, tmp_path)
        assert re.search(r"statement cache: (miss|unusable entry)", done.stderr), done.stderr
        assert done.returncode == 0
        assert "statement cache: used" in run(argv, tmp_path).stderr


def test_off_is_never_recorded_nor_used(tmp_path):
    url, _ = make_db(tmp_path)
    argv = project_argv(url, "out.parquet", "--replace")
    run(argv, tmp_path, cache="off")
    assert not (tmp_path / "cache").exists()


def test_a_new_matrix_and_a_table_output_are_not_cached(tmp_path):
    url, _ = make_db(tmp_path)
    for argv in (
        ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "3", "--into", "n.parquet"],
        ["project", "--db", url, "--projection", "rp", "--table", "t", "--id-column", "id", "--into", "tab"],
    ):
        assert run(argv, tmp_path).returncode == 0
    assert not (tmp_path / "cache").exists()


def test_the_fast_paths_names_are_sqlrps_scratch_names(tmp_path):
    """A killed fast run's staging files and matrix tables are recognised as sqlrp's (the next writer sweeps
    them: :func:`sqlrp.core.files.sweep_staging`, :func:`sqlrp.core.names.orphaned`)."""
    entry = {
        "target": str(tmp_path / "out.parquet"),
        "program": {
            "staging": [".out.parquet.@STAMP@.tmp", ".out.parquet.@STAMP@.sqlrp.json"],
            "constants": {"w": [[1.0]]},
            "setup": [],
            "copy": "COPY (SELECT * FROM \"w\") TO 'x'",
            "cleanup": [],
        },
    }
    replay = start.Replay(entry, duckdb)
    for path in (replay.tmp, replay.tmp_definition):
        found = files._STAGING.match(path.name)
        assert found and found["output"] == "out.parquet" and int(found["pid"]) > 0
    assert names._SCRATCH.match(replay.names["w"])


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, None), ((1, 2, 3), (1, 2, 3)), ((1, 2, 3), None), (None, (1, 2, 3)), ((1, 2, 3), (4, 5, 6))],
)
def test_the_interrupt_line_is_the_commands(before, after):
    thing = interrupt.Thing("file 'out.parquet'", lambda db: None, before=before)
    assert start.compare("file 'out.parquet'", before, after) == interrupt._compare(thing, after)


def test_the_bound_matrix_holds_the_same_floats():
    """The temporary table the fast path makes for a bound matrix holds each float exactly (parameters, not
    decimal literals) and the types ``DuckDBBackend.bound`` registers (BIGINT, DOUBLE)."""
    rows = [[0.1, -1 / 3, 5e-324], [1.7976931348623157e308, -0.0, 0.7071067811865476]]
    con = duckdb.connect()
    con.execute(*start.matrix_table("m", rows))
    assert con.execute("SELECT * FROM m ORDER BY _r").fetchall() == [(r, *v) for r, v in enumerate(rows)]
    assert [
        t
        for _, t in con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'm'").fetchall()
    ] == [
        "BIGINT",
        "DOUBLE",
        "DOUBLE",
        "DOUBLE",
    ]


def test_import_sqlrp_is_lazy_and_whole_on_first_use():
    import subprocess
    import sys

    code = (
        "import sys, sqlrp\n"
        "print(sorted(m for m in ('numpy', 'sqlglot', 'sqlrp.api') if m in sys.modules))\n"
        "print(sqlrp.project.__module__, sqlrp.pipeline.outputs.__name__, sqlrp.need.__module__)\n"
        "from sqlrp import *\n"
        "print([n for n in sqlrp.__all__ if n not in globals()])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(sqlrp.__file__).parents[1]
    )
    assert done.stdout.splitlines() == ["[]", "sqlrp.api sqlrp.pipeline.outputs sqlrp.core.errors", "[]"], done.stderr


def test_ctrl_c_in_the_cached_run_leaves_nothing_and_says_so_in_one_line(tmp_path):
    """The entry recorded on a small table, then the table grown (rows are not in the fingerprint): the
    cached run is interrupted while DuckDB writes the staging file -- exit 130, the interrupt's one line as
    the command prints it, no output and no staging file; the input and the registry as they were."""
    import signal
    import subprocess
    import sys
    import time

    url = f"duckdb:///{tmp_path / 'big.duckdb'}"
    con = duckdb.connect(str(tmp_path / "big.duckdb"))
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, "
        + ", ".join(f"random() AS f{j}" for j in range(32))
        + " FROM range(500) r(i)"
    )
    con.close()
    with sqlrp.connect(url) as db:
        sqlrp.create_projection(db, "rp", "gaussian", d=32, k=512, seed=3)
    argv = project_argv(url, "out.parquet")
    assert run(argv, tmp_path).returncode == 0
    for name in ("out.parquet", "out.parquet.sqlrp.json"):
        (tmp_path / name).unlink()
    _edit(url, "INSERT INTO t SELECT id + 500 * k, t.* EXCLUDE (id) FROM t, range(1, 800) r(k)")
    before = duckdb.connect(str(tmp_path / "big.duckdb")).execute("SELECT count(*), sum(hash(x)) FROM t x").fetchall()
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SQLRP_")}
    env.update(PYTHONPATH=str(Path(sqlrp.__file__).parents[1]), SQLRP_CACHE_DIR=str(tmp_path / "cache"))
    env["SQLRP_STATEMENT_CACHE"] = "trace"
    proc = subprocess.Popen([sys.executable, "-m", "sqlrp", *argv], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not any(tmp_path.glob(".out.parquet.*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        assert proc.poll() is None, proc.stderr.read().decode()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = err.decode()
    assert proc.returncode == 130, err
    assert err == (  # no "statement cache:" line: the cached run it was
        "interrupted: the input table 't' is unchanged; file 'out.parquet' was not written; file "
        "'out.parquet.sqlrp.json' was not written; the registry is unchanged; no staging table or temporary "
        "file left\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("out", ".out"))) == []
    after = duckdb.connect(str(tmp_path / "big.duckdb")).execute("SELECT count(*), sum(hash(x)) FROM t x").fetchall()
    assert after == before


def test_a_run_on_the_arrow_route_stores_nothing(tmp_path):
    """The Arrow route (issue 44) writes without ``write_file``'s statements: nothing to replay, so the next
    run is the full command again; ``--route sql`` is stored and replayed as any other option."""
    url, _ = make_db(tmp_path)
    arrow = project_argv(url, "out.parquet", "--replace", "--route", "arrow")
    assert run(arrow, tmp_path).returncode == 0
    assert "statement cache: miss" in run(arrow, tmp_path).stderr
    sql = project_argv(url, "out.parquet", "--replace", "--route", "sql")
    assert run(sql, tmp_path).returncode == 0
    assert "statement cache: used" in run(sql, tmp_path).stderr
