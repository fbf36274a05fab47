"""Issue 34: ``project`` reads the data once -- the input and output checks ride along the projection's
statement (DuckDB ``error()``, PostgreSQL a checked cast), ``s = auto`` comes from a bounded sample, the
output type follows the input's, and one progress bar covers the command."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.compiler import Source, compile_sql
from sqlrp.compiler.guard import MARKER, unused_features
from sqlrp.methods import reference
from sqlrp.methods.sparsity import SAMPLE_ROWS, kurtosis_of, sample_features, sample_kurtosis_of
from sqlrp.pipeline.moments import sample_kurtosis
from sqlrp.pipeline.sources import resolve_source
from testkit.frames import array_frame, wide_frame


def reads(db, table: str) -> list[str]:
    """Run-time log of the statements ``db`` runs that read ``table`` (its quoted name)."""
    log: list[str] = []
    for name in ("execute", "fetchall", "query_df", "execute_watched", "query_arrow"):
        original = getattr(db, name)

        def logged(sql, *args, _original=original, **kwargs):
            if f'"{table}"' in sql:
                log.append(sql)
            return _original(sql, *args, **kwargs)

        setattr(db, name, logged)
    return log


def full_reads(log: list[str]) -> list[str]:
    """The statements of ``log`` that may read the whole table: not the bounded sample (``<=`` the
    2,048th smallest id), not one row (``LIMIT 1``)."""
    return [sql for sql in log if f"LIMIT {SAMPLE_ROWS}" not in sql and "LIMIT 1" not in sql]


@pytest.mark.parametrize("strategy", ["auto", "inline", "pairs", "list_transform", "lookup"])
def test_one_read_of_the_table(db, strategy):
    """A new projection with the defaults (s = auto) into a table: one statement reads the whole
    table -- the projection, which checks as it goes -- where the kurtosis, the NULL check and the
    output check each read it before (4 reads)."""
    if strategy in ("list_transform", "lookup") and db.dialect != "duckdb":
        pytest.skip(f"{strategy} on a wide table is DuckDB's")
    X = np.random.default_rng(0).standard_normal((300, 24))
    db.write_dataframe("t", wide_frame(X))
    log = reads(db, "t")
    sqlrp.project(db, "t", "id", "rp", k=6, seed=1, into="o", strategy=strategy)
    assert len(full_reads(log)) == 1, full_reads(log)
    Y = db.query_df('SELECT * FROM "o" ORDER BY "id"').drop(columns="id").to_numpy()
    np.testing.assert_allclose(Y, reference.transform(sqlrp.load_projection(db, "rp"), X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("method", "params"), [("pk-rp", {}), ("maclaurin", {}), ("p-rp", {"m": 4})])
def test_kernels_read_their_input_once(db, method, params):
    """The kernel methods' products of sums propagate NULL/NaN as the sums do: one read, and a NaN
    still refused with its row."""
    X = np.random.default_rng(7).standard_normal((300, 12))
    db.write_dataframe("t", wide_frame(X))
    log = reads(db, "t")
    out = sqlrp.project(db, "t", "id", "kern", method=method, k=8, seed=3, strategy="inline", **params)
    assert len(full_reads(log)) == 1, full_reads(log)
    want = reference.transform(sqlrp.load_projection(db, "kern"), X)
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-9)
    X[120, 4] = np.nan
    db.write_dataframe("t2", wide_frame(X))
    with pytest.raises(sqlrp.InputError, match=r"rows with id 120"):
        sqlrp.project(db, "t2", "id", "kern", into="o", strategy="inline")


@pytest.mark.parametrize("bad", ["nan", "null", "inf"])
@pytest.mark.parametrize("strategy", ["inline", "pairs", "list_transform", "lookup"])
def test_bad_value_refused_from_inside_the_statement(db, bad, strategy):
    """A NULL, NaN or infinite feature stops the projection's own statement; the message is the
    separate check's, naming the row, and nothing is written."""
    if strategy in ("list_transform", "lookup") and db.dialect != "duckdb":
        pytest.skip(f"{strategy} on a wide table is DuckDB's")
    X = np.random.default_rng(1).standard_normal((200, 16))
    df = wide_frame(X)
    df["f5"] = df["f5"].astype(object)
    df.loc[37, "f5"] = {"nan": np.nan, "null": None, "inf": np.inf}[bad]
    db.write_dataframe("t", df)
    log = reads(db, "t")
    with pytest.raises(sqlrp.InputError, match=r"feature columns \(rows with id 37\)"):
        sqlrp.project(db, "t", "id", "rp", k=4, s=3, seed=2, into="o", strategy=strategy)
    assert any("CASE" in sql and MARKER in sql for sql in log)  # the guarded statement ran first
    with pytest.raises(sqlrp.InputError, match="no table named 'o'"):
        sqlrp.project(db, "o", "id", "rp")  # nothing written


def test_a_feature_no_output_reads_is_checked_too(duck):
    """k = 2 of d = 12 with s = 3 leaves features in no output's sum: the source relation checks them."""
    proj = sqlrp.create_projection(duck, "few", "achlioptas", d=12, k=2, s=3, seed=0)
    unused = unused_features(proj)
    assert len(unused) > 0
    X = np.random.default_rng(2).standard_normal((50, 12))
    X[9, unused[0]] = np.nan
    duck.write_dataframe("t", wide_frame(X))
    sql = compile_sql(proj, Source("t", "id", "wide", tuple(f"f{i}" for i in range(12))), "duckdb", guard=True)
    with pytest.raises(Exception, match=f"{MARKER}: row 9"):
        duck.fetchall(sql)
    with pytest.raises(sqlrp.InputError, match=r"rows with id 9"):
        sqlrp.project(duck, "t", "id", "few", into="o", strategy="inline")


def test_arrays_too_long_or_null_are_refused_in_the_statement(duck):
    X = np.random.default_rng(3).standard_normal((40, 6))
    df = array_frame(X)
    df.at[4, "x"] = np.ones(7)  # one element too many would be ignored by x[1..6]
    duck.write_dataframe("a", df)
    with pytest.raises(sqlrp.InputError, match=r"length is not d = 6.*id 4"):
        sqlrp.project(duck, "a", "id", k=3, s=3, layout="array", into="o", strategy="inline")
    sqlrp.project(duck, "a", "id", k=3, s=3, layout="array", into="o", strategy="inline", check=False)  # unchecked


def test_overflow_found_by_the_guard_gets_the_overflow_message(db):
    """Finite features whose sum overflows: the statement stops, the input is clean, so sqlrp projects
    again with the separate output check and reports the overflow as before (PostgreSQL raises its own
    error for a float overflow)."""
    proj = sqlrp.create_projection(db, "ones", "achlioptas", d=4, k=1, s=1, seed=0)
    X = np.ones((30, 4))
    X[7, proj.linear.feature] = 1.5e308 * np.sign(proj.linear.weight)  # every term adds: 6e308
    db.write_dataframe("t", wide_frame(X))
    with pytest.raises(Exception, match="overflow"):
        sqlrp.project(db, "t", "id", "ones", into="o", strategy="inline")
    with pytest.raises(sqlrp.InputError, match="no table named 'o'"):
        sqlrp.project(db, "o", "id", "ones")


def test_kurtosis_from_a_bounded_sample(db):
    """The sample is the 2,048 rows of smallest id and at most 64 evenly spaced features, on every
    layout and engine: its kurtosis equals NumPy's on the same rows and columns (the oracle), and the
    rows past the sample do not move it."""
    rng = np.random.default_rng(4)
    n, d = SAMPLE_ROWS + 500, 100
    X = rng.standard_normal((n, d))
    X[SAMPLE_ROWS:] = rng.standard_t(2.5, (n - SAMPLE_ROWS, d))  # heavy tails only past the sample
    want = sample_kurtosis_of(X)
    assert want == pytest.approx(kurtosis_of(X[:SAMPLE_ROWS][:, sample_features(d)]), rel=1e-12)
    assert abs(want - kurtosis_of(X)) > 0.1 * want  # the whole table would give another kappa
    frame = wide_frame(X).sample(frac=1.0, random_state=0)  # stored out of id order
    db.write_dataframe("w", frame)
    assert sample_kurtosis(db, resolve_source(db, "w", "id"), d) == pytest.approx(want, rel=1e-9)
    db.write_dataframe("a", array_frame(X))
    assert sample_kurtosis(db, resolve_source(db, "a", "id", layout="array"), d) == pytest.approx(want, rel=1e-9)
    rows, cols = np.nonzero(X[: SAMPLE_ROWS + 10])
    db.write_dataframe("l", pd.DataFrame({"id": rows, "feature": cols, "value": X[rows, cols]}))
    got = sample_kurtosis(db, resolve_source(db, "l", "id", layout="long"), d)
    assert got == pytest.approx(want, rel=1e-9)
    sqlrp.project(db, "w", "id", "auto", k=8, seed=0)
    assert sqlrp.load_projection(db, "auto").params["kurtosis"] == pytest.approx(want, rel=1e-9)


def test_float32_in_float32_out(db):
    """Output type follows input: float32 features give float32 outputs unless dtype says otherwise."""
    X = np.random.default_rng(5).standard_normal((100, 8)).astype(np.float32)
    db.write_dataframe("t32", wide_frame(X))
    real = ", ".join(f'CAST("f{i}" AS REAL) AS "f{i}"' for i in range(8))
    db.execute(f'CREATE TABLE "t32r" AS SELECT "id", {real} FROM "t32"')
    db.write_dataframe("t64", wide_frame(X.astype(np.float64)))
    sqlrp.project(db, "t32r", "id", "rp", k=4, s=3, seed=0, into="o32")
    sqlrp.project(db, "t32r", "id", "rp", into="o64", dtype="float64")
    sqlrp.project(db, "t64", "id", "rp", into="d64")
    kinds = {}
    for table in ("o32", "o64", "d64"):
        kinds[table] = {c.name: c.type.upper() for c in db.columns(table)}["p0"]
    assert kinds["o32"] in ("FLOAT", "REAL") and kinds["o64"] in ("DOUBLE", "DOUBLE PRECISION")
    assert kinds["d64"] == kinds["o64"]
    want = reference.transform(sqlrp.load_projection(db, "rp"), X.astype(np.float64))
    got = db.query_df('SELECT * FROM "o32" ORDER BY "id"').drop(columns="id").to_numpy(dtype=np.float64)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1.2e-7, atol=1e-7)


def test_one_bar_over_the_whole_command(duck, capsys):
    X = np.random.default_rng(6).standard_normal((500, 10))
    duck.write_dataframe("t", wide_frame(X))
    sqlrp.project(duck, "t", "id", k=4, into="o", progress=True)
    err = capsys.readouterr().err
    assert "planning" in err and "projecting into o" in err and "100%" in err
    assert err.index("planning") < err.index("projecting into o")
    assert duck.fetchall("SELECT current_setting('enable_progress_bar_print')")[0][0] is False  # DuckDB's own: off
