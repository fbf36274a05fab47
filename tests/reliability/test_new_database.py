"""Issue 42, item 2: a command that writes from a file into a DuckDB file that is not there yet makes it
(the registry with it); a command that fails leaves no new file; a command that only reads still refuses
a missing database file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main


@pytest.fixture
def parquet(tmp_path):
    """A wide Parquet file of 40 rows x 5 features, and its features."""
    X = np.random.default_rng(42).standard_normal((40, 5))
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(5)])
    frame.insert(0, "id", np.arange(40))
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path)
    return str(path), X


def _project(url: str, table: str, *more: str) -> list[str]:
    return ["project", "--db", url, "--table", table, "--id-column", "id", "--k", "3", "--seed", "5", *more]


def test_project_into_a_table_of_a_new_duckdb_file(tmp_path, parquet):
    table, X = parquet
    path = tmp_path / "new.duckdb"
    url = f"duckdb:///{path}"
    assert main(_project(url, table, "--projection", "rp3", "--into", "out")) == 0
    with sqlrp.connect(url) as db:
        out = db.query_df('SELECT * FROM "out" ORDER BY id')
        want = sqlrp.transform(sqlrp.load_projection(db, "rp3"), X)
        assert [row[0] for row in db.fetchall("SELECT name FROM sqlrp_projection")] == ["rp3"]
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want, rtol=1e-9)


@pytest.mark.parametrize(
    "more",
    [
        ("--columns", "f0,zz", "--into", "out"),  # no such column: refused before anything is written
        ("--k", "0", "--into", "out"),  # a bad option
        ("--projection", "rp3", "--method", "nonesuch", "--into", "out"),  # a usage error
    ],
)
def test_a_failed_write_leaves_no_new_file(tmp_path, parquet, more, capsys):
    table, _ = parquet
    path = tmp_path / "new.duckdb"
    assert main(_project(f"duckdb:///{path}", table, *more)) != 0
    assert "error" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]


def test_a_failure_after_the_registry_was_written_removes_the_new_file(tmp_path, parquet, capsys):
    """The projection is stored, then the output refused (an existing file): the new database goes too."""
    table, _ = parquet
    (tmp_path / "out.parquet").write_text("someone's file")
    path = tmp_path / "new.duckdb"
    assert main(_project(f"duckdb:///{path}", table, "--projection", "rp3", "--into", str(tmp_path / "out.parquet")))
    assert "already exist" in capsys.readouterr().err
    assert not path.exists() and not (tmp_path / "new.duckdb.wal").exists()
    assert (tmp_path / "out.parquet").read_text() == "someone's file"


def test_tune_and_index_make_a_new_file(tmp_path, parquet, capsys):
    table, X = parquet
    tuned = f"duckdb:///{tmp_path / 'tuned.duckdb'}"
    assert (
        main(
            ["tune", "--db", tuned, "--table", table, "--id-column", "id", "--k", "2"]
            + ["--sample", "30", "--iterations", "20", "--name", "dt"]
        )
        == 0
    )
    with sqlrp.connect(tuned) as db:
        assert sqlrp.load_projection(db, "dt").k == 2
    indexed = f"duckdb:///{tmp_path / 'indexed.duckdb'}"
    assert main(["index", "--db", indexed, "--table", table, "--id-column", "id", "--name", "ix"]) == 0
    with sqlrp.connect(indexed) as db:
        assert "ix" in db.table_names()
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv",
    [
        ["projections", "list"],
        ["projections", "show", "p"],
        ["search", "--index", "ix", "--query-table", "q", "--query-id-column", "id"],
        ["evaluate", "--table", "t", "--id-column", "id", "--projection", "p"],
        ["project", "--table", "t", "--id-column", "id", "--k", "2", "--into", "out"],  # a table cannot be there
    ],
)
@pytest.mark.parametrize("suffix", ["duckdb", "sqlite"])
def test_reading_commands_still_refuse_a_missing_file(tmp_path, argv, suffix, capsys):
    url = f"{suffix}:///{tmp_path / ('missing.' + suffix)}"
    assert main([*argv, "--db", url]) == 3
    err = capsys.readouterr().err
    assert "no database file" in err and "missing." + suffix in err
    assert not any(tmp_path.iterdir())
