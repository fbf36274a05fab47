"""Issue 31, fixed by class: one validation of every count (API, CLI, transformer), the in-memory paths
refuse overflow as the SQL path does, constant columns by their range under ``--standardize``, file
columns that do not parse as numbers, warnings as one line, and no database file made by a read."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import sqlrp
from sqlrp import api
from sqlrp.cli import main
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.demo import run_demo
from sqlrp.evaluation.metrics import Kernel
from sqlrp.methods import METHODS, make_projection
from sqlrp.pipeline.materialise import id_batches
from sqlrp.pipeline.sources import resolve_source
from sqlrp.registry.transfer import read_projection
from sqlrp.transformer import SQLRandomProjection
from testkit.frames import wide_frame

# ---- 1. one validation of every count, before any work ----


@pytest.fixture
def dbfile(tmp_path):
    """A DuckDB file with a 400 x 5 table ``t``, a stored projection ``rp`` and an index ``ix``."""
    url = f"duckdb:///{tmp_path}/p.duckdb"
    X = np.random.default_rng(0).normal(size=(400, 5))
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(X, list("abcde")))
        sqlrp.create_projection(db, "rp", "achlioptas", d=5, k=3, seed=1)
        sqlrp.build_index(db, "t", "id", "ix", lists=4)
    return url, X


PROJECT = ["project", "--table", "t", "--id-column", "id", "--k", "2"]
EVALUATE = ["evaluate", "--table", "t", "--id-column", "id", "--projection", "rp", "--sample", "50", "--queries", "10"]
TUNE = ["tune", "--table", "t", "--id-column", "id", "--k", "2"]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (PROJECT + ["--strategy", "mailman", "--block", "-1", "--into", "o"], "--block"),
        (PROJECT + ["--strategy", "mailman", "--block", "0", "--into", "o"], "--block"),
        (PROJECT + ["--strategy", "mailman", "--block", "7", "--into", "o"], "block = 7 is above 5"),
        (PROJECT + ["--chunk-rows", "0"], "--chunk-rows"),
        (PROJECT + ["--chunk-rows", "1.5"], "--chunk-rows"),
        (PROJECT + ["--batches", "0", "--into", "o"], "--batches"),
        (PROJECT + ["--m", "abc", "--method", "p-rp"], "--m"),
        (EVALUATE + ["--recall-k", "0"], "--recall-k"),
        (EVALUATE + ["--queries", "0"], "--queries"),
        (EVALUATE + ["--recall-k", "41"], "recall_k = 41 is above 40"),
        (EVALUATE + ["--ks", "abc"], "--ks"),
        (EVALUATE + ["--kernel-c", "nan"], "--kernel-c"),
        (PROJECT + ["--method", "pk-rp", "--c", "inf"], "--c"),
        (EVALUATE + ["--ks", "4,0"], "--ks"),
        (["evaluate", "--index", "ix", "--top", "0"], "--top"),
        (["evaluate", "--index", "ix", "--queries", "-3"], "--queries"),
        (TUNE + ["--sample", "-5"], "--sample"),
        (TUNE + ["--sample", "0"], "--sample"),
        (TUNE + ["--draws", "0", "--baseline", "best-of-n"], "--draws"),
        (TUNE + ["--iterations", "-1"], "--iterations"),
    ],
)
def test_bad_counts_are_one_line_usage_errors_before_any_work(dbfile, capsys, argv, option):
    url, _ = dbfile
    assert main([*argv, "--db", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and option in err, err
    assert "Traceback" not in err and "usage:" not in err
    with sqlrp.connect(url) as db:
        assert "o" not in db.table_names() and set(sqlrp.list_projections(db)["name"]) == {"rp"}


def test_demo_with_a_bad_k_makes_no_file(tmp_path, capsys):
    target = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(target), "--k", "abc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --k:") and err.count("\n") == 1 and not target.exists()
    with pytest.raises(InvalidParameter, match="ks"):
        run_demo(str(target), ks=[0], echo=lambda *_: None)
    assert not target.exists()


def test_a_negative_chunk_size_ends_at_once(dbfile):
    """It never ended (240 s on 400 rows): a subprocess, so that the old code fails by its timeout."""
    url, _ = dbfile
    run = subprocess.run(
        [sys.executable, "-m", "sqlrp", *PROJECT, "--db", url, "--chunk-rows", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--chunk-rows" in run.stderr and run.stdout == ""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "mailman", "block": -1}, "block must be a whole number >= 1, got -1"),
        ({"strategy": "mailman", "block": 2.0}, "block must be a whole number"),
        ({"strategy": "mailman", "block": 6}, "block = 6 is above 5"),
        ({"chunk_rows": 0}, "chunk_rows must be"),
        ({"chunk_rows": -1}, "chunk_rows must be"),
        ({"chunk_rows": True}, "chunk_rows must be"),
        ({"into": "o", "progress": 0}, "batches"),
        ({"d": 0}, "d must be a whole number >= 1"),
        ({"into": "o", "progress": 2.5}, "batches"),
    ],
)
def test_api_counts_are_checked_before_any_work(duck, options, message):
    duck.write_dataframe("t", wide_frame(np.ones((4, 5))))
    with pytest.raises(InvalidParameter, match=message):
        sqlrp.project(duck, "t", "id", method="achlioptas", k=3, **options)
    assert "o" not in duck.table_names()


def test_mailman_block_up_to_d_matches_numpy(duck):
    X = np.random.default_rng(1).normal(size=(30, 5))
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "m", "achlioptas", d=5, k=4, seed=2, s=1)
    for block in (1, 5):
        got = sqlrp.project(duck, "t", "id", "m", strategy="mailman", block=block).drop(columns="id").to_numpy()
        np.testing.assert_allclose(got, sqlrp.transform(proj, X), rtol=1e-9, atol=1e-12)
    with pytest.raises(InvalidParameter, match="block = 6 is above 5"):
        api.compile_projection(duck, api.plan(duck, "t", "id", "m"), strategy="mailman", block=6)


def test_compile_without_a_database_checks_the_block(capsys):
    argv = ["compile", "--table", "t", "--id-column", "id", "--columns", "a,b,c", "--k", "2", "--strategy", "mailman"]
    assert main([*argv, "--block", "4"]) == 2
    assert capsys.readouterr().err.startswith("error: block = 4 is above 3")
    assert main([*argv, "--block", "3"]) == 0
    assert "SELECT" in capsys.readouterr().out


def test_batches_are_capped_at_the_rows(duck):
    duck.write_dataframe("t", wide_frame(np.ones((40, 3))))
    assert len(id_batches(duck, resolve_source(duck, "t", "id"), 10_000)) == 40
    sqlrp.project(duck, "t", "id", k=2, into="o", progress=10_000)
    assert duck.fetchall('SELECT count(*) FROM "o"')[0][0] == 40


def test_api_evaluate_tune_and_search_counts(dbfile):
    url, _ = dbfile
    with sqlrp.connect(url) as db:
        for options, message in (
            ({"recall_k": 0}, "recall_k must be"),
            ({"queries": 0}, "queries must be"),
            ({"sample": -1}, "sample must be"),
            ({"sample": 2, "queries": 1, "recall_k": 1}, "sample must be a whole number >= 3"),
            ({"ks": ["abc"]}, "ks must be"),
            ({"ks": [4, -2]}, "ks must be"),
            ({"seed": -1}, "seed must be"),
            ({"kernel": Kernel(degree=2, c=float("nan"))}, "kernel constant c must be a finite number"),
        ):
            with pytest.raises(InvalidParameter, match=message):
                sqlrp.evaluate(db, "t", "id", "rp", **{"sample": 50, "queries": 10, **options})
        for options, message in (({"sample": 0}, "sample must be"), ({"sample": -5}, "sample must be")):
            with pytest.raises(InvalidParameter, match=message):
                sqlrp.tune(db, "t", "id", k=2, **options)
        for options, message in (
            ({"top": 0}, "top must be"),
            ({"queries": 0}, "queries must be"),
            ({"candidates": [10, 0]}, "candidates must be"),
        ):
            with pytest.raises(InvalidParameter, match=message):
                sqlrp.evaluate_search(db, "ix", **options)
        assert set(sqlrp.list_projections(db)["name"]) == {"rp"}


@pytest.mark.parametrize("n_components", [1.5, 2.0, "3", True, 0, -2])
def test_transformer_refuses_a_k_that_is_no_whole_number(n_components):
    with pytest.raises(InvalidParameter, match="n_components"):
        SQLRandomProjection(n_components).fit(np.ones((5, 4)))


def test_transformer_takes_numpy_integers():
    model = SQLRandomProjection(np.int64(3), random_state=0).fit(np.ones((5, 4)))
    assert model.n_components_ == 3


# ---- 2. every in-memory path refuses overflow as the SQL path does ----

HUGE = np.array([[1.0, 2.0, 3.0, 4.0], [1e300, 1e300, 1e300, 1e300], [1.7e308] * 4])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_in_memory_paths_refuse_overflow(method):
    proj = make_projection(method, 4, 4, seed=1, **({"gamma": 0.5} if method == "rff" else {}))  # "scale" reads a table
    frame = pd.DataFrame(HUGE, columns=list("abcd"), index=[10, 11, 12])
    paths = {
        "transform": lambda: sqlrp.transform(proj, HUGE),
        "transform_frame(array)": lambda: sqlrp.transform_frame(proj, HUGE),
        "transform_frame(frame)": lambda: sqlrp.transform_frame(proj, frame),
    }
    if isinstance(proj, sqlrp.Projection):
        paths["SQLRandomProjection"] = lambda: SQLRandomProjection(projection=proj).fit(HUGE[:1]).transform(HUGE)
    for name, call in paths.items():
        with pytest.raises(InputError, match=r"overflowed to infinity or NaN \(rows( with id)? .*2") as err:
            call()
        assert "nothing was returned" in str(err.value), name
    with pytest.raises(InputError, match=r"rows with id .*12"):
        sqlrp.transform_frame(proj, frame)
    np.testing.assert_allclose(sqlrp.transform(proj, HUGE[:1]), sqlrp.transform_frame(proj, HUGE[:1]))


def test_the_sql_path_and_the_in_memory_path_say_the_same(duck):
    X = np.ones((5, 4))
    X[3] = 1e308
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "a", "achlioptas", d=4, k=2, seed=0, s=1)
    with pytest.raises(InputError) as sql:
        sqlrp.project(duck, "t", "id", "a")
    with pytest.raises(InputError) as memory:
        sqlrp.transform_frame(proj, wide_frame(X).set_index("id"))
    assert str(sql.value).split(":")[0] == str(memory.value).split(":")[0]  # "... (rows with id 3)"


def test_float32_results_that_would_be_infinite_are_refused():
    model = SQLRandomProjection(2, s=1, random_state=0).fit(np.ones((3, 4)))
    X = np.full((2, 4), 3e38, dtype=np.float32)
    X[0] = 1.0
    with pytest.raises(InputError, match=r"\(rows 1\).*float32 outputs"):
        model.transform(X)
    with pytest.raises(InputError, match=r"\(rows 1\).*float32 outputs"):
        model.transform(sp.csr_matrix(X))
    big = np.vstack([np.ones(4), np.sign(model.components_.toarray()[0]) * 1e308])  # row 1 sums past 1.8e308
    for data in (big, sp.csr_matrix(big)):
        with pytest.raises(InputError, match=r"\(rows 1\).*float64 sums"):
            model.transform(data)
    assert model.transform(X[:1]).dtype == np.float32 and np.isfinite(model.transform(X[:1])).all()


def test_float32_outputs_beyond_its_range_are_the_engines_own_error_not_a_bare_transaction_error(db):
    """DuckDB's conversion error inside a transaction used to come back as ``TransactionContext Error:
    Current transaction is aborted`` (the relations of bound constants were unregistered in the aborted
    transaction); it is the engine's own error now, with what it means, and nothing is written."""
    from sqlrp.core.errors import one_line

    X = np.ones((3, 4))
    X[1] = 3e38
    db.write_dataframe("t", wide_frame(X))
    for options in ({}, {"into": "o"}):
        with pytest.raises(Exception) as err:
            sqlrp.project(db, "t", "id", k=2, s=1, dtype="float32", **options)
        assert "TransactionContext" not in str(err.value) and "float32" in one_line(err.value)
    assert "o" not in db.table_names()


# ---- 3. --standardize: constant columns by their range; moments that overflow refused ----


@pytest.mark.parametrize("method", ["achlioptas", "p-rp"])
def test_standardize_zeroes_constant_columns_on_every_engine(db, method):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1000, 4))
    X[:, 1] = 0.1  # PostgreSQL's stddev_pop: 5e-16, not 0
    X[:, 2] = 1e9 + 0.3
    db.write_dataframe("t", wide_frame(X))
    proj = make_projection(method, 4, 6, seed=2)
    got = sqlrp.project(db, "t", "id", proj, standardize=True).drop(columns="id").to_numpy()
    constant = X.max(axis=0) == X.min(axis=0)
    Z = np.where(constant, 0.0, (X - X.mean(axis=0)) / np.where(constant, 1.0, X.std(axis=0)))
    want = sqlrp.transform(proj, Z)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("url", ["sqlite://", "datafusion://"])
def test_standardize_on_engines_without_stddev_pop_or_with_it(url):
    """SQLite has no ``stddev_pop``: a two-pass variance (it failed with ``no such function``); the
    constant column is 0 on both."""
    pytest.importorskip("datafusion") if url.startswith("datafusion") else None
    rng = np.random.default_rng(6)
    X = rng.normal(size=(200, 4)) * 5 + 3
    X[:, 1] = 0.1
    X[:, 3] = 1e4 + rng.normal(size=200)  # E[x^2] - E[x]^2 would lose 8 digits here
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(X))
        proj = make_projection("achlioptas", 4, 5, seed=3, s=1)
        got = sqlrp.project(db, "t", "id", proj, standardize=True).drop(columns="id").to_numpy()
    constant = X.max(axis=0) == X.min(axis=0)
    Z = np.where(constant, 0.0, (X - X.mean(axis=0)) / np.where(constant, 1.0, X.std(axis=0)))
    want = sqlrp.transform(proj, Z)
    assert np.abs(want).max() > 1
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def test_standardize_refuses_moments_that_overflow(db):
    X = np.random.default_rng(4).normal(size=(20, 3))
    X[:, 0] *= 1e155
    db.write_dataframe("t", wide_frame(X, ["a", "b", "c"]))
    for call in (
        # s given: the data's kurtosis (s = auto) is another query (PostgreSQL raises on x^4 overflowing)
        lambda: sqlrp.project(db, "t", "id", k=2, s=3, standardize=True, into="o"),
        lambda: api.compile_projection(db, api.plan(db, "t", "id", k=2, s=3, standardize=True)),
    ):
        with pytest.raises(InputError, match=r"^standardize=True: the standard deviation of 'a' overflows float64"):
            call()
    assert "o" not in db.table_names()


def test_standardize_overflow_is_one_line_on_the_command_line(tmp_path, capsys):
    url = f"duckdb:///{tmp_path}/s.duckdb"
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(np.random.default_rng(5).normal(size=(10, 3)) * 1e155))
    assert main(["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2", "--standardize"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: --standardize: the standard deviation of 'f0'") and '"inf"' not in err


# ---- 4. a file column that does not parse as a number is an error, never dropped ----


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,a,b,c\n1,1.0,2.0,3.0\n2,4.0,oops,6.0\n3,7.0,8.0,9.0\n", "column 'b' .* first bad value is 'oops'"),
        ("id,a,b,c\n1,1.0,,3.0\n2,4.0,,6.0\n3,7.0,,9.0\n", "column 'b' .* is empty"),
        ("id,a,b,c\n1,1.0,,3.0\n2,4.0,x1,6.0\n3,7.0,5,9.0\n", "column 'b' .* first bad value is 'x1'"),
        ("id\ta\tb\n1\t1\t2\n2\t3\tn/a\n", "column 'b' .* first bad value is 'n/a'"),
        # every cell inf: DuckDB's CSV reader types the column DATE (the infinite date) -- found by the fuzzer
        ("id,a,b\n1,1.0,inf\n2,4.0,inf\n3,7.0,-inf\n", "column 'b' .* read as DATE, but every value in it is a number"),
    ],
)
def test_file_columns_that_are_not_numbers_are_errors(tmp_path, capsys, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    name = "m.tsv" if "\t" in text else "m.csv"
    (tmp_path / name).write_text(text)
    argv = ["project", "--table", name, "--id-column", "id", "--k", "2", "--into", "o.parquet"]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    with sqlrp.connect() as duck, pytest.raises(InputError, match=message):
        sqlrp.project(duck, str(tmp_path / name), "id", k=2)


def test_a_date_column_of_a_file_is_left_out_like_text(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("id,a,b,day\n1,1.0,2.0,2020-01-01\n2,4.0,5.0,infinity\n3,7.0,8.0,2021-03-04\n")
    with sqlrp.connect() as duck:
        sqlrp.project(duck, str(path), "id", k=2, s=1, into=str(tmp_path / "o.parquet"))
    assert read_projection(str(tmp_path / "o.parquet.sqlrp.json")).d == 2  # a and b; the dates left out


def test_json_values_that_are_not_numbers_are_errors(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"id":1,"a":1.0,"b":2.0}\n{"id":2,"a":4.0,"b":"oops"}\n{"id":3,"a":7.0,"b":8.0}\n')
    with sqlrp.connect() as duck, pytest.raises(InputError, match="column 'b' .*oops"):
        sqlrp.project(duck, str(path), "id", k=2)


def test_numbers_kept_as_text_in_a_parquet_file_are_an_error(tmp_path):
    path = tmp_path / "s.parquet"
    pd.DataFrame({"id": [1, 2, 3], "a": [1.0, 2.0, 3.0], "b": ["1.5", "2", None]}).to_parquet(path)
    with sqlrp.connect() as duck, pytest.raises(InputError, match="column 'b' .* holds numbers as text"):
        sqlrp.project(duck, str(path), "id", k=2)


def test_text_columns_of_a_file_are_left_out_and_the_run_says_which_were_read(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "n.csv").write_text("id,a,name,c\n1,1.0,x,3.0\n2,4.0,y,6.0\n3,7.0,z,9.0\n")
    assert main(["project", "--table", "n.csv", "--id-column", "id", "--k", "2", "--into", "o.parquet"]) == 0
    err = capsys.readouterr().err
    assert "reading 2 feature columns of 'n.csv': a, c" in err
    with sqlrp.connect() as duck:
        got = duck.query_df("SELECT * FROM 'o.parquet' ORDER BY id").drop(columns="id").to_numpy()
    stored = read_projection(str(tmp_path / "o.parquet.sqlrp.json"))
    assert stored.d == 2
    X = np.array([[1.0, 3.0], [4.0, 6.0], [7.0, 9.0]])
    np.testing.assert_allclose(got, sqlrp.transform(stored, X), rtol=1e-9)


# ---- 5. warnings are one line, like the errors ----


def test_warnings_print_as_one_line_without_a_source_location(dbfile, capsys):
    url, X = dbfile
    with sqlrp.connect(url) as db:
        db.write_dataframe("q", wide_frame(X[:3], list("abcde")))
        db.execute('INSERT INTO "t" SELECT "id" + 1000, "a", "b", "c", "d", "e" FROM "t" WHERE "id" < 5')
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        status = main(["search", "--db", url, "--index", "ix", "--query-table", "q", "--query-id-column", "id"])
    assert status == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    # the warning is one line; the search's note of its calibrated defaults is its own line, no warning
    warned = [line for line in lines if not line.startswith("search defaults of index")]
    assert warned and all(line.startswith("warning: ") for line in warned), err
    assert not any(".py:" in line or "UserWarning" in line for line in lines), err
    assert ".py:" not in err and "warnings.warn" not in err


# ---- 6. a read does not make a database file ----


@pytest.mark.parametrize("scheme", ["sqlite", "duckdb"])
def test_reading_a_missing_database_file_makes_no_file(tmp_path, scheme):
    path = tmp_path / f"missing.{'sqlite' if scheme == 'sqlite' else 'duckdb'}"
    db = sqlrp.connect(f"{scheme}:///{path}")
    for read in (
        lambda: sqlrp.list_projections(db),
        lambda: sqlrp.load_projection(db, "p"),
        lambda: sqlrp.drop_projection(db, "p"),
        lambda: sqlrp.copy_projection(db, "p", sqlrp.connect()),
        lambda: sqlrp.evaluate(db, "t", "id", "p"),
    ):
        with pytest.raises(InputError, match="no database file .*missing"):
            read()
    with pytest.raises(InputError, match="no table named 't'"):
        sqlrp.project(db, "t", "id", k=2)
    assert db.table_names() == [] and not path.exists()
    sqlrp.create_projection(db, "p", "achlioptas", d=3, k=2)  # a write makes it
    db.close()
    assert path.exists()
    with sqlrp.connect(f"{scheme}:///{path}") as again:
        assert list(sqlrp.list_projections(again)["name"]) == ["p"]
