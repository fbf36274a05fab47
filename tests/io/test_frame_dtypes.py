"""Every dtype of a DataFrame, an Arrow table or a polars frame read once, the same way on every engine
(issue 41; :mod:`sqlrp.pipeline.frame_columns`, :func:`sqlrp.pipeline.frames.admit`): one regression test
per instance the issue lists, each failing on the code before.  The class is fuzzed in
tests/fuzz/test_fuzz_frames.py."""

from __future__ import annotations

import decimal
import os
import warnings

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.errors import InputError
from sqlrp.methods import make_projection, reference

pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")

ENGINES = ["duckdb", "sqlite", "postgres", "chdb", "datafusion"]


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path):
    if request.param == "postgres":
        yield request.getfixturevalue("pg")
        return
    if request.param in ("chdb", "datafusion") and not os.environ.get("CI"):
        pytest.importorskip(request.param)
    url = {"duckdb": "duckdb://", "sqlite": f"sqlite:///{tmp_path / 'f.db'}"}.get(request.param, f"{request.param}://")
    db = sqlrp.connect(url)
    yield db
    db.close()


def _projected(db, frame, d: int, k: int = 2, **options) -> np.ndarray:
    """``frame`` projected by a new projection (k, s = 3, seed 4) checked to be of ``d`` features."""
    out = sqlrp.project(db, frame, "id", k=k, s=3, seed=4, **options)
    return out[[f"p{j}" for j in range(k)]].to_numpy(dtype=float)


def _want(X: np.ndarray, k: int = 2) -> np.ndarray:
    return reference.transform(make_projection("achlioptas", X.shape[1], k, seed=4, s=3), X)


def test_decimal_columns_of_arrow_and_polars_are_features_on_every_engine(engine):
    """Silently wrong #2: a decimal column of an Arrow table or a polars frame was dropped from the
    features on PostgreSQL, chdb and DataFusion (``features used (d): 1 of 2``), kept on DuckDB; now a
    feature everywhere, each value the double nearest it."""
    cells = [decimal.Decimal("0.1"), decimal.Decimal("12345678.0001"), decimal.Decimal("-3.3333")]
    a = [0.5, 1.5, -2.0]
    X = np.column_stack([a, [float(v) for v in cells]])
    table = pa.table({"id": [1, 2, 3], "a": a, "dec": pa.array(cells, pa.decimal128(14, 4))})
    frame = pl.DataFrame({"id": [1, 2, 3], "a": a, "dec": pl.Series(cells, dtype=pl.Decimal(14, 4))})
    for given in (table, frame):
        np.testing.assert_allclose(_projected(engine, given, 2), _want(X), rtol=1e-12)


def test_uint64_above_int64_is_the_double_numpy_reads_on_every_engine(engine):
    """A ``uint64`` above 2**63 - 1 overflowed (SQLite, DataFusion: ``OverflowError``; PostgreSQL: out
    of range for bigint); now the double nearest it, as NumPy reads it, on every engine."""
    u = np.array([2**63 + 5, 1, 2**64 - 1], dtype=np.uint64)
    df = pd.DataFrame({"id": [1, 2, 3], "a": [0.5, 1.5, -2.0], "u": u})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the integer column beside a float one
        got = _projected(engine, df, 2)
    np.testing.assert_allclose(got, _want(df[["a", "u"]].to_numpy(dtype=float)), rtol=1e-12)


def test_nullable_integers_with_na_are_null_on_every_engine(engine):
    """A nullable ``Int64`` with ``pd.NA`` was written to PostgreSQL as the text ``NaN`` (``invalid input
    syntax for type bigint``); now NULL everywhere, read as 0 with ``nulls='zero'`` and refused without."""
    df = pd.DataFrame({"id": [1, 2, 3], "n": pd.array([4, None, 6], dtype="Int64"), "b": [1, 2, 3]})
    np.testing.assert_allclose(_projected(engine, df, 2, nulls="zero"), _want(np.array([[4, 1], [0, 2], [6, 3]])))
    with pytest.raises(InputError, match=r"^the frame has NULL or NaN .*\(rows with id 2\)"):
        _projected(engine, df, 2)


def test_names_that_differ_only_in_case_are_two_features(engine):
    """Columns ``a`` and ``A``: SQLite raised ``duplicate column name``, and DuckDB read ``a`` twice
    (``A`` became ``A_1``) without a word; now two features with their own values everywhere."""
    df = pd.DataFrame({"id": [1, 2, 3], "a": [1.0, 2.0, 3.0], "A": [10.0, -20.0, 30.5]})
    np.testing.assert_allclose(_projected(engine, df, 2), _want(df[["a", "A"]].to_numpy()), rtol=1e-12)


def test_float16_sparse_and_dictionary_columns_are_numbers_on_every_engine(engine):
    """Arrow ``float16`` (DuckDB: ``Unsupported Internal Arrow Type``), a pandas sparse column (DuckDB:
    ``Data type 'Sparse[float64, nan]' not recognized``, PostgreSQL: ``AttributeError``) and a
    dictionary-encoded column of numbers: read as the numbers they hold, on every engine."""
    half = np.array([0.5, -1.25, 2048.0], dtype=np.float16)
    table = pa.table({"id": [1, 2, 3], "h": pa.array(half), "dd": pa.array([1.0, 2.0, 1.0]).dictionary_encode()})
    np.testing.assert_allclose(_projected(engine, table, 2), _want(np.column_stack([half, [1.0, 2.0, 1.0]])))
    sparse = pd.DataFrame({"id": [1, 2, 3], "a": [0.5, 1.0, 2.0], "sp": pd.arrays.SparseArray([0.0, 0.0, 3.5])})
    np.testing.assert_allclose(_projected(engine, sparse, 2), _want(np.array([[0.5, 0], [1, 0], [2, 3.5]])))


def test_a_complex_column_is_refused_naming_it_and_its_dtype(engine):
    """A complex column: DuckDB ``Data type 'complex128' not recognized``, SQLite and PostgreSQL driver
    errors, chdb and DataFusion dropped it; now one line, on every engine and in ``transform_frame``."""
    df = pd.DataFrame({"id": [1, 2], "a": [0.5, 1.0], "c": np.array([1 + 1j, 2 - 1j])})
    with pytest.raises(InputError, match=r"^column 'c' of the frame holds complex numbers \(complex128\)"):
        _projected(engine, df, 2)
    with pytest.raises(InputError, match=r"^column 'c' of the frame holds complex numbers"):
        sqlrp.transform_frame(make_projection("achlioptas", 2, 2, seed=1), df[["a", "c"]])
    np.testing.assert_allclose(_projected(engine, df, 1, exclude=["c"]), _want(np.array([[0.5], [1.0]])))


def test_decimal_and_struct_ids(engine):
    """Decimal ids come back as the frame has them; sent to the engine (``into=``) they are integers of
    64 bits exactly or refused; struct ids are refused in one line (a driver error on SQLite and
    PostgreSQL before)."""
    X = np.array([[0.5, 1.0], [1.5, -1.0]])
    ids = [decimal.Decimal("1.25"), decimal.Decimal("2.50")]
    table = pa.table({"id": pa.array(ids, pa.decimal128(6, 2)), "a": X[:, 0], "b": X[:, 1]})
    out = sqlrp.project(engine, table, "id", k=2, s=3, seed=4)
    assert out["id"].tolist() == ids
    np.testing.assert_allclose(out[["p0", "p1"]].to_numpy(), _want(X))
    with pytest.raises(InputError, match="is decimal128\\(6, 2\\) with fractional or out-of-range values"):
        sqlrp.project(engine, table, "id", k=2, s=3, seed=4, into="o")
    whole = table.set_column(0, "id", pa.array([decimal.Decimal(7), decimal.Decimal(9)], pa.decimal128(6, 0)))
    sqlrp.project(engine, whole, "id", k=2, s=3, seed=4, into="o")
    got = engine.query_df('SELECT * FROM "o"').sort_values("id")
    assert [int(v) for v in got["id"]] == [7, 9]
    np.testing.assert_allclose(got[["p0", "p1"]].to_numpy(dtype=float), _want(X))
    struct = pa.table({"id": pa.array([{"k": 1}, {"k": 2}]), "a": X[:, 0], "b": X[:, 1]})
    with pytest.raises(InputError, match=r"^column 'id' of the frame holds nested fields .*: an id is"):
        sqlrp.project(engine, struct, "id", k=2)


def test_a_nan_id_in_tune_and_evaluate_is_refused_in_one_line(duck):
    """``tune`` and ``evaluate`` of a frame with a NaN id ended in ``KeyError: nan``."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.normal(size=(30, 3)), columns=["a", "b", "c"])
    df.insert(0, "id", np.arange(30, dtype=float))
    sqlrp.tune(duck, df, "id", k=2, name="t", iterations=5, sample=30)
    df.loc[4, "id"] = np.nan
    for call in (
        lambda: sqlrp.tune(duck, df, "id", k=2, name="t2", iterations=5, sample=30),
        lambda: sqlrp.evaluate(duck, df, "id", "t", sample=30, queries=5, in_sql=False),
    ):
        with pytest.raises(InputError, match=r"^the frame's id column 'id' has missing values"):
            call()


def test_errors_of_tune_evaluate_and_search_name_the_frame(duck):
    """Errors about a frame in ``tune``, ``evaluate`` and ``search`` named it ``_sqlrp_frame_<hex>``, the
    scratch table it was for the call; now "the frame"."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    df.insert(0, "id", range(40))
    duck.write_dataframe("t", df)
    sqlrp.build_index(duck, "t", "id", name="ix")
    sqlrp.tune(duck, "t", "id", k=2, name="tuned", iterations=5, sample=40)
    bad = df.copy()
    bad.loc[3, "a"] = np.nan
    calls = {
        "tune": lambda: sqlrp.tune(duck, bad, "id", k=2, name="t2", iterations=5, sample=40),
        "evaluate": lambda: sqlrp.evaluate(duck, bad, "id", "tuned", sample=40, queries=5),
        "search": lambda: sqlrp.search(duck, "ix", df[["id", "a", "b"]], "id", top=2),
    }
    for what, call in calls.items():
        with pytest.raises(InputError) as caught:
            call()
        assert "_sqlrp_frame" not in str(caught.value) and "the frame" in str(caught.value), (what, caught.value)


def test_exclude_on_a_frame_narrows_its_features(duck):
    """``exclude=`` on a frame said "give it without columns=" though no columns were given (the frame's
    features were filled in before the option was checked); now it leaves the column out."""
    df = pd.DataFrame({"id": [1, 2, 3], "a": [0.5, 1.0, 2.0], "b": [1.0, -1.0, 0.0], "label": [0, 1, 0]})
    np.testing.assert_allclose(_projected(duck, df, 2, exclude=["label"]), _want(df[["a", "b"]].to_numpy()))
    with pytest.raises(sqlrp.InvalidParameter, match="give it without columns="):
        _projected(duck, df, 1, exclude=["label"], columns=["a"])


def test_an_arrow_nan_is_refused_and_a_missing_value_is_null_on_every_engine(engine):
    """pandas' NaN is its missing value (NULL: ``nulls='zero'`` reads it as 0); an Arrow or polars NaN is a
    NaN, refused -- on SQLite, which stores a NaN as NULL, it used to be read as 0 -- and PostgreSQL, which
    stored pandas' NaN as a NaN, refused ``nulls='zero'``."""
    X = np.array([[1.0, 1.0], [0.0, 2.0]])
    pandas = pd.DataFrame({"id": [1, 2], "a": [1.0, np.nan], "b": [1.0, 2.0]})
    np.testing.assert_allclose(_projected(engine, pandas, 2, nulls="zero"), _want(X))
    arrow = pa.table({"id": [1, 2], "a": [1.0, float("nan")], "b": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"^the frame has NaN values in feature columns \(rows with id 2\)"):
        _projected(engine, arrow, 2, nulls="zero")
    nulls = pa.table({"id": [1, 2], "a": pa.array([1.0, None]), "b": [1.0, 2.0]})
    np.testing.assert_allclose(_projected(engine, nulls, 2, nulls="zero"), _want(X))
