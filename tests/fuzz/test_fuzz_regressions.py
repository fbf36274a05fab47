"""Plain regression tests for the defects the differential fuzzer found (tests/fuzz/test_fuzz_project.py,
tests/fuzz/test_fuzz_index.py; issue 31).  Each fails on the code before its fix."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp import cli


def test_cli_array_output_prints_exact_floats(tmp_path) -> None:
    """``sqlrp project --output array`` to stdout printed NumPy's repr of each array (8 digits, no
    commas: ``[-0.19133204  0.67537395]``), losing precision with exit 0; now a JSON list of exact floats."""
    url = f"duckdb:///{tmp_path}/a.duckdb"
    X = np.array([[1.0, 3.0], [2.0, 4.0], [3.0, 5.0]]) / 7.0
    db = sqlrp.connect(url)
    db.write_dataframe("t", pd.DataFrame({"id": [1, 2, 3], "a": X[:, 0], "b": X[:, 1]}))
    db.close()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli.main(["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "2",
                           "--method", "gaussian", "--output", "array", "--projection", "g"])  # fmt: skip
    assert status == 0
    frame = pd.read_csv(io.StringIO(out.getvalue()))
    got = np.array([json.loads(v) for v in frame["p"]])
    db = sqlrp.connect(url)
    want = sqlrp.transform(sqlrp.load_projection(db, "g"), X)
    db.close()
    assert np.max(np.abs(got - want)) <= 1e-12 * np.abs(want).max()


def test_duckdb_error_in_a_bound_statement_is_not_masked() -> None:
    """A statement that fails with matrices bound (here: a float32 output of 1.4e284, out of FLOAT's
    range) raised DuckDB's ``TransactionException: Current transaction is aborted`` from the cleanup,
    hiding the real error; now the engine's own error comes through, and nothing is written."""
    import duckdb
    import pytest

    db = sqlrp.connect()
    db.write_dataframe("t", pd.DataFrame({"id": [1, 2], "a": [1.0, -2e284], "b": [1.0, 2.0]}))
    with pytest.raises(duckdb.Error) as caught:
        sqlrp.project(db, "t", "id", k=2, s=1, dtype="float32", into="o")
    assert "transaction is aborted" not in str(caught.value).lower(), caught.value
    assert "FLOAT" in str(caught.value)
    assert not db.table_exists("o")
    db.close()


def test_float32_outputs_below_reals_range_are_zero_on_postgres(pg) -> None:
    """``dtype="float32"`` on PostgreSQL raised ``value out of range: underflow`` for an output that
    rounds to 0 as a 4-byte float (here 1e-298), where NumPy's float32 gives 0; now it is 0, as a
    returned frame, a table and an array."""
    X = np.array([[1e-298, 0.0], [2.0, -1.0], [1e-50, 3e-47]])
    pg.write_dataframe("t", pd.DataFrame({"id": [1, 2, 3], "a": X[:, 0], "b": X[:, 1]}))
    sqlrp.create_projection(pg, "g", "gaussian", d=2, k=3, seed=2)
    want = sqlrp.transform(sqlrp.load_projection(pg, "g"), X).astype(np.float32).astype(np.float64)
    out = sqlrp.project(pg, "t", "id", "g", dtype="float32")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(dtype=float), want, rtol=1e-6, atol=1e-44)
    sqlrp.project(pg, "t", "id", "g", dtype="float32", into="o")
    got = pg.query_df("SELECT * FROM o ORDER BY id").drop(columns="id").to_numpy(dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-44)
    arrays = sqlrp.project(pg, "t", "id", "g", dtype="float32", output="array", prefix="v")
    np.testing.assert_allclose(np.vstack(arrays["v"].to_list()).astype(float), want, rtol=1e-6, atol=1e-44)


def test_a_degree_0_maclaurin_file_reads_back(tmp_path) -> None:
    """A Maclaurin map of degree 0 (the constant kernel; p = 0 random vectors) was written beside a
    projected file, and the file then refused: ``not a valid projection (p must be a positive whole
    number, got 0)``; it reads back, and gives the same numbers."""
    from sqlrp.registry.transfer import read_projection

    pd.DataFrame({"id": [1, 2], "a": [0.5, -1.0]}).to_parquet(tmp_path / "in.parquet")
    sqlrp.project(sqlrp.connect(), str(tmp_path / "in.parquet"), "id", None, method="maclaurin", k=1, degree=0,
                  into=str(tmp_path / "out.parquet"))  # fmt: skip
    back = read_projection(str(tmp_path / "out.parquet.sqlrp.json"))
    assert back.linear.p == 0
    out = pd.read_parquet(tmp_path / "out.parquet").sort_values("id")
    want = sqlrp.transform(back, np.array([[0.5], [-1.0]]))
    np.testing.assert_allclose(out[["p0"]].to_numpy(dtype=float), want, rtol=1e-12)


def test_clickhouse_id_column_named_like_an_internal_alias() -> None:
    """On ClickHouse an id column named ``_x0`` came out holding the first feature's values (the
    engine resolved the compiler's alias ``_x0`` in place of the column): wrong ids, exit 0."""
    import pytest

    pytest.importorskip("chdb")
    from sqlrp.backends.clickhouse import ChdbBackend

    db = ChdbBackend(":memory:")
    db.execute("CREATE DATABASE IF NOT EXISTS fuzz_alias")
    db.execute("USE fuzz_alias")
    try:
        db.write_dataframe("t", pd.DataFrame({"_x0": ["r3", "r5"], "a": [1.0, 2.0], "b": [3.0, 4.0]}), replace=True)
        out = sqlrp.project(db, "t", "_x0", "g", k=1, method="gaussian")
        assert list(out["_x0"]) == ["r3", "r5"]
        want = sqlrp.transform(sqlrp.load_projection(db, "g"), np.array([[1.0, 3.0], [2.0, 4.0]]))
        np.testing.assert_allclose(out[["p0"]].to_numpy(dtype=float), want, rtol=1e-12)
    finally:
        db.execute("DROP DATABASE IF EXISTS fuzz_alias")
        db.close()


def test_csv_output_with_spaces_around_a_column_name(tmp_path) -> None:
    """A projection written to CSV whose output column name ends in a space (``--prefix 'o"ut '``,
    array output) failed in the read-back check with DuckDB's ``Columns with names: "o"ut " do not
    exist in the CSV File`` (the reader trims a header's spaces); the file is written and checked."""
    import duckdb

    pd.DataFrame({"id": [1, 2], "a": [0.5, -1.0], "b": [2.0, 3.0]}).to_parquet(tmp_path / "in.parquet")
    for output, prefix in (("array", 'o"ut '), ("wide", "p ")):
        target = tmp_path / f"out_{output}.csv"
        sqlrp.project(sqlrp.connect(), str(tmp_path / "in.parquet"), "id", None, method="gaussian", k=2,
                      output=output, prefix=prefix, into=str(target))  # fmt: skip
        assert target.exists()
        rows = duckdb.connect().sql(f"SELECT count(*) FROM read_csv('{target}')").fetchall()
        assert rows == [(2,)]


def test_pairs_strategy_on_a_map_without_vectors_is_refused_cleanly() -> None:
    """``strategy="pairs"`` for a Maclaurin map of degree 0 (p = 0 vectors) raised NumPy's bare
    ``ValueError: need at least one array to concatenate`` from the pair planner; now a one-line
    :class:`sqlrp.InvalidParameter`, and ``auto`` projects it."""
    import pytest

    db = sqlrp.connect()
    db.write_dataframe("t", pd.DataFrame({"id": [1, 2], "a": [1.0, 2.0], "b": [3.0, 4.0]}))
    with pytest.raises(sqlrp.InvalidParameter, match="pairs"):
        sqlrp.project(db, "t", "id", "m", k=2, method="maclaurin", degree=0, strategy="pairs")
    out = sqlrp.project(db, "t", "id", "m", strategy="auto")
    want = sqlrp.transform(sqlrp.load_projection(db, "m"), np.array([[1.0, 3.0], [2.0, 4.0]]))
    np.testing.assert_allclose(out[["p0", "p1"]].to_numpy(dtype=float), want, rtol=1e-12)


def test_sqlite_overflow_into_a_table_is_refused() -> None:
    """On SQLite a kernel projection that overflows (inf - inf = NaN, which SQLite stores as NULL) was
    materialised with NULL outputs and exit 0: the output check looked for non-finite values only.
    Now a NULL output is refused as the overflow, and no table is left."""
    import pytest

    db = sqlrp.connect("sqlite://")
    db.write_dataframe("t", pd.DataFrame({"id": [1, 2], "a": [7.2e263, 1.0], "b": [1.0, 2.0], "c": [3.0, 1e-12]}))
    with pytest.raises(sqlrp.InputError, match="overflowed"):
        sqlrp.project(db, "t", "id", "pp", k=4, method="p-rp", m=2, s=1, strategy="pairs", into="o", seed=2)
    assert not db.table_exists("o")
    db.close()


@pytest.mark.parametrize("method,params", [("maclaurin", {"degree": 3, "c": 0.0}), ("achlioptas", {}), ("p-rp", {})])
@pytest.mark.parametrize("output", ["array", "wide"])
def test_infinite_feature_with_float32_outputs_is_refused_on_postgres(pg, method, params, output) -> None:
    """float32 outputs on PostgreSQL (whose underflow flush wraps the outputs) skipped the checks that
    ride along the projection's statement: +-inf features gave rows of +-inf, exit 0 (the fuzzer:
    maclaurin, degree 3, array output).  Now refused, naming the rows."""
    pg.execute('CREATE TABLE "p0" ("i""d" TEXT, "a" REAL, "b" BIGINT, "c" NUMERIC)')
    rows = [("r1", float("-inf"), 5241, 8.455048), ("r2", float("inf"), 582, -0.051003), ("r3", 0.0, 1600, 0.02617)]
    for row in rows:
        pg.execute('INSERT INTO "p0" VALUES (?, ?, ?, ?)', row)
    with pytest.raises(sqlrp.core.errors.SqlrpError, match="infinite values .* 'r1', 'r2'"):
        sqlrp.project(pg, "p0", 'i"d', None, columns=["a", "b", "c"], method=method, k=4, seed=0, nulls="zero",
                      output=output, dtype="float32", **params)  # fmt: skip
    assert pg.fetchall('SELECT count(*) FROM "p0"') == [(3,)]


def test_kurtosis_of_tiny_or_huge_values_warns_nothing() -> None:
    """``s = "auto"`` on features of about 1e-90 (a squared sum that underflows) or 1e300 (that overflow)
    printed NumPy's RuntimeWarnings (divide by zero, overflow) with a source location; no estimate is
    then ``None`` (the default sparsity), silently."""
    import warnings

    from sqlrp.methods.sparsity import kurtosis_of

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kurtosis_of(np.array([[1e-90, 2e-90], [3e-90, 1e-91], [0.0, 1e-89]])) is None
        assert kurtosis_of(np.array([[1e300, 2e300], [3e300, 1e299], [0.0, 1e300]])) is None


def test_the_oracle_matches_rows_that_share_an_id_by_a_perfect_matching() -> None:
    """The fuzzer's own false failure: rows sharing an id were matched greedily, so a row whose wide
    tolerance also fitted the near-0 value took it, and the near-0 row was left with no partner.
    Values of a P-RP run on five rows with id 0; the matching accepts them, and still refuses a
    wrong value."""
    from testkit.fuzz_oracle import Expected, compare

    Y = np.array([[-2e-7], [0.0], [0.0], [0.0], [0.0]])
    tol = np.array([[1e-11], [1e-11], [2.5e-7], [1e-11], [1e-11]])  # row 2: terms of size 225
    want = Expected(["0.0"] * 5, Y, tol)
    compare(want, [0] * 5, np.array([[-2e-7], [0.0], [0.0], [0.0], [0.0]]), "p-rp")  # passes
    with pytest.raises(AssertionError, match="got np.float64\\(0.0\\), NumPy np.float64\\(-2e-07\\)"):
        compare(want, [0] * 5, np.zeros((5, 1)), "p-rp")


@pytest.mark.parametrize("url", ["sqlite://", "duckdb://"])
def test_a_constant_feature_standardises_to_exactly_zero_on_every_engine(url):
    """Found by the fuzzer (SQLite, one row, a feature of 3.8e-299): the constant feature centred by
    its value as a literal, which SQLite parses 1 ulp off, gave -6.7e-316 where NumPy gives 0. A
    constant feature (max = min) is now the literal 0 itself."""
    import warnings

    db = sqlrp.connect(url)
    frame = pd.DataFrame({"id": [0], "x": [3.819618457649895e-299], "f1": [0.0], "a": [0], "f3": [0]})
    db.write_dataframe("src", frame)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the integer columns beside floats
        out = sqlrp.project(db, "src", "id", method="gaussian", k=3, seed=0, standardize=True)
    assert out.drop(columns="id").to_numpy().tolist() == [[0.0, 0.0, 0.0]]
    db.close()
