"""The value and type helpers every backend shares (``sqlrp/backends/values.py``): which cells are
missing, what a DataFrame column holds, and the Python values a driver binds."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pytest

from sqlrp.backends.sqlite import SQLiteBackend
from sqlrp.backends.values import column_values, missing, py, recut, value_kind


@pytest.mark.parametrize(
    "value", [None, float("nan"), np.float64("nan"), np.float32("nan"), np.float16("nan"), pd.NA, pd.NaT]
)
def test_missing_cells(value):
    assert missing(value)


@pytest.mark.parametrize("value", [0, 0.0, np.float32(1.5), "", "nan", [np.nan], np.array([np.nan]), b""])
def test_present_cells(value):
    assert not missing(value)  # a list or an array is a cell, even one of NaNs


@pytest.mark.parametrize(
    ("values", "dtype", "kind"),
    [
        ([1.0, np.nan], None, "double"),
        ([1, 2], None, "bigint"),
        ([1, None], "Int64", "bigint"),
        ([True, False], None, "boolean"),
        ([True, None], "boolean", "boolean"),
        (pd.to_datetime(["2020-01-01", None]), None, "timestamp"),
        ([[1.0, 2.0], None], object, "array"),
        ([True, None, np.bool_(False)], object, "boolean"),
        ([1, np.int32(2), True, np.float32("nan")], object, "bigint"),
        ([1, 2.5, None], object, "double"),
        ([b"a", bytearray(b"b")], object, "blob"),
        (["a", 1], object, "text"),
        ([None, np.float32("nan")], object, "text"),  # nothing present
    ],
)
def test_value_kind(values, dtype, kind):
    assert value_kind(pd.Series(values, dtype=dtype)) == kind


def test_py_and_column_values():
    assert py(np.array([np.int64(1), 2])) == [1, 2] and type(py(np.float32(0.5))) is float
    assert py(pd.NA) is None and py(pd.NaT) is None
    assert py(pd.Timestamp("2020-01-02 03:04:05"), dates_as_text=True) == "2020-01-02 03:04:05"
    assert py(datetime.date(2020, 1, 2), dates_as_text=True) == "2020-01-02"
    assert py(datetime.timedelta(seconds=1), dates_as_text=True) == "0 days 00:00:01"
    floats = pd.Series([1.0, np.nan])
    assert column_values(floats) == [1.0, None]
    kept = column_values(floats, nan_as_null=False)
    assert kept[0] == 1.0 and np.isnan(kept[1])
    assert column_values(pd.Series([1.0, None], dtype="Float64"), nan_as_null=False) == [1.0, None]
    assert column_values(pd.Series([1, None], dtype="Int64")) == [1, None]
    objects = pd.Series(["a", np.float32("nan"), None, float("nan")], dtype=object)
    assert column_values(objects) == ["a", None, None, None]
    kept = column_values(objects, nan_as_null=False)  # NaN stays a float NaN, None is NULL
    assert kept[0] == "a" and np.isnan(kept[1]) and kept[2] is None and np.isnan(kept[3])


def test_recut():
    frames = [pd.DataFrame({"a": range(i, i + n)}) for i, n in ((0, 3), (3, 0), (3, 4), (7, 1))]
    sizes = [len(f) for f in recut(iter(frames), 3)]
    assert sizes == [3, 3, 2]
    assert pd.concat(recut(iter(frames), 3))["a"].tolist() == list(range(8))


def test_sqlite_float32_nan_is_missing():
    """A float32 NaN in an object column is a missing cell on SQLite as everywhere else: the column is
    typed by its other values (INTEGER here, REAL before: the NaN counted as a number) and holds NULL."""
    db = SQLiteBackend()
    db.write_dataframe("t", pd.DataFrame({"x": pd.Series([1, np.float32("nan"), 3], dtype=object)}))
    assert db.fetchall("SELECT type FROM pragma_table_info('t')") == [("INTEGER",)]
    assert db.fetchall("SELECT x FROM t ORDER BY rowid") == [(1,), (None,), (3,)]
    db.close()


def test_a_frame_out_of_index_order_is_written_row_by_row(db):
    """DuckDB and PostgreSQL: a shuffled index (``df.sample``) keeps each row's values together."""
    rng = np.random.default_rng(3)
    X = np.round(rng.uniform(-8, 8, (12, 3)), 2)
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    frame.insert(0, "id", np.arange(12, dtype=np.int64))
    frame["label"] = frame["id"].astype(str)
    db.write_dataframe("shuffled_rows", frame.sample(frac=1.0, random_state=1))
    back = db.query_df('SELECT * FROM "shuffled_rows" ORDER BY "id"')
    np.testing.assert_array_equal(back[["f0", "f1", "f2"]].to_numpy(dtype=float), X)
    assert back["label"].tolist() == frame["label"].tolist()
