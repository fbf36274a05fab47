"""DataFrame values on their way into a database, once for every backend.

Backends differ in the SQL type they give each kind of column and in how they bind a value; what a
column *holds* and which cells are missing is the same question everywhere, answered here:

- :func:`missing`: None, NaN of any float width, ``pd.NA``, ``pd.NaT`` (never a list or an array);
- :func:`value_kind`: a column's kind -- ``double``, ``bigint``, ``boolean``, ``timestamp``,
  ``array``, ``blob`` or ``text`` -- which each backend maps to its own type name;
- :func:`py`, :func:`column_values` and :func:`frame_rows`: cells as the plain Python values a
  DB-API driver binds.

And results on their way out: :func:`recut` and :func:`frames` cut a streamed result into DataFrames
of a given number of rows.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..core.lazy import pd

#: the kinds :func:`value_kind` returns
KINDS = ("double", "bigint", "boolean", "timestamp", "array", "blob", "text")


def is_array(value: Any) -> bool:
    """True for a list, tuple or NumPy array: a cell of an array column."""
    return isinstance(value, (list, tuple, np.ndarray))


def absent(value: Any) -> bool:
    """True for ``None``, ``pd.NA`` and ``pd.NaT``: a cell with no value (NaN is a value here)."""
    return value is None or value is pd.NA or value is pd.NaT


def is_nan(value: Any) -> bool:
    """True for a float NaN of any width (Python's float, ``np.float64``, ``np.float32`` ...)."""
    return isinstance(value, (float, np.floating)) and value != value


def missing(value: Any) -> bool:
    """True for a missing cell: ``None``, ``pd.NA``, ``pd.NaT`` or a NaN of any float width (as
    pandas' ``isna`` says of a scalar); never for a list or an array."""
    return absent(value) or is_nan(value)


def value_kind(series: pd.Series) -> str:
    """What the DataFrame column ``series`` holds, one of :data:`KINDS`.

    Numeric, boolean and datetime dtypes (NumPy's and pandas' masked ones) by their dtype; an
    object column by *every* value that is not :func:`missing`: ``array`` if any is a list or an
    array, ``boolean`` if all are booleans, ``bigint`` if all are integers (booleans count),
    ``double`` if all are numbers, ``blob`` if all are bytes, else ``text`` (so is a column with no
    value at all)."""
    kind = getattr(series.dtype, "kind", "O")
    if kind == "f":
        return "double"
    if kind in "iu":
        return "bigint"
    if kind == "b":
        return "boolean"
    if kind == "M":
        return "timestamp"
    if kind == "m":
        return "text"
    present = [v for v in series.tolist() if not missing(v)]
    if not present:
        return "text"
    if any(is_array(v) for v in present):
        return "array"
    if all(isinstance(v, (bool, np.bool_)) for v in present):
        return "boolean"
    if all(isinstance(v, (bool, int, np.bool_, np.integer)) for v in present):
        return "bigint"
    if all(isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)) for v in present):
        return "double"
    if all(isinstance(v, (bytes, bytearray, memoryview)) for v in present):
        return "blob"
    return "text"


def py(value: Any, dates_as_text: bool = False) -> Any:
    """``value`` as a plain Python value a driver binds: NumPy scalars as Python numbers, arrays and
    lists as lists (element by element), :func:`absent` cells as ``None``; NaN stays NaN.
    ``dates_as_text``: dates, times and timestamps as ISO text and time deltas as text (SQLite,
    which has no date type)."""
    if absent(value):
        return None
    if isinstance(value, np.ndarray):
        return [py(v, dates_as_text) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [py(v, dates_as_text) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if dates_as_text:
        if isinstance(value, datetime.datetime):  # pd.Timestamp too
            return value.isoformat(sep=" ")
        if isinstance(value, (datetime.date, datetime.time)):
            return value.isoformat()
        if isinstance(value, (datetime.timedelta, pd.Timedelta)):
            return str(pd.Timedelta(value))
    return value


def column_values(series: pd.Series, nan_as_null: bool = True, dates_as_text: bool = False) -> list[Any]:
    """The cells of ``series`` as Python values (:func:`py`), missing ones as ``None``.
    ``nan_as_null``: a NaN is ``None`` too (SQLite stores a NaN as NULL anyway); else it stays a
    float NaN, which engines with NaN store as such.  Integer and boolean columns without missing
    cells, and float columns, are converted by NumPy in one call."""
    kind = getattr(series.dtype, "kind", "O")
    nulls = series.isna().to_numpy()
    if kind in "iub" and not nulls.any():
        return series.to_numpy().tolist()
    if kind == "f":
        out = series.to_numpy(dtype=np.float64, na_value=np.nan).tolist()
        if nan_as_null or not isinstance(series.dtype, np.dtype):  # pandas' masked NA is NULL, not NaN
            for i in np.flatnonzero(nulls).tolist():
                out[i] = None
        return out
    drop = missing if nan_as_null else absent
    return [None if drop(v) else py(v, dates_as_text) for v in series.tolist()]


def kind_series(series: pd.Series, kind: str) -> pd.Series:
    """``series`` with its cells converted for a column of ``kind`` (:func:`value_kind`), for a
    driver that types a pandas column by its dtype: booleans and integers as they are where their
    dtype says so (integers without a missing cell as ``int64``), else as ``bool`` objects and pandas'
    ``Int64``; ``double`` as ``float64`` (missing: NaN); ``array`` cells as lists of floats; any other
    kind as text.  Missing cells are None."""
    if kind == "boolean":
        if getattr(series.dtype, "kind", "O") == "b":
            return series
        return pd.Series([None if missing(v) else bool(v) for v in series], dtype=object)
    if kind == "bigint":
        if getattr(series.dtype, "kind", "O") in "iu" and not series.isna().any():
            return series.astype(np.int64)
        return pd.Series(pd.array([None if missing(v) else int(v) for v in series], dtype="Int64"))
    if kind == "double":
        return pd.Series(column_values(series), dtype=np.float64)
    if kind == "array":
        return pd.Series([None if missing(v) else [float(x) for x in v] for v in series], dtype=object)
    return pd.Series([None if missing(v) else str(v) for v in series], dtype=object)


def frame_rows(df: pd.DataFrame, nan_as_null: bool = True, dates_as_text: bool = False) -> Iterator[tuple]:
    """The rows of ``df`` as tuples of Python values (:func:`column_values` of each column, converted
    before the first row is read), what ``executemany`` and bulk inserters take."""
    values = [column_values(df[c], nan_as_null, dates_as_text) for c in df.columns]
    return zip(*values, strict=True)


def frames(rows: Iterable[Any], names: list[str], size: int, empty: bool = False) -> Iterator[pd.DataFrame]:
    """``rows`` (a result's rows, as the driver streams them) as DataFrames of ``size`` rows with the
    columns ``names``, the last one shorter; ``empty``: one empty frame with the columns for no rows."""
    size = max(1, int(size))
    batch: list[tuple] = []
    sent = False
    for row in rows:
        batch.append(tuple(row))
        if len(batch) >= size:
            yield pd.DataFrame.from_records(batch, columns=names)
            batch, sent = [], True
    if batch or (empty and not sent):
        yield pd.DataFrame.from_records(batch, columns=names)


def recut(frames: Iterator[pd.DataFrame], rows: int) -> Iterator[pd.DataFrame]:
    """``frames`` (a result streamed in the driver's own chunks) re-cut into DataFrames of exactly
    ``rows`` rows, the last one shorter; empty chunks are skipped."""
    pending: list[pd.DataFrame] = []
    have = 0
    for chunk in frames:
        if not len(chunk):
            continue
        pending.append(chunk)
        have += len(chunk)
        while have >= rows:
            frame = pd.concat(pending, ignore_index=True) if len(pending) > 1 else pending[0]
            yield frame.iloc[:rows].reset_index(drop=True)
            rest = frame.iloc[rows:]
            pending, have = ([rest] if len(rest) else []), len(rest)
    if have:
        frame = pd.concat(pending, ignore_index=True) if len(pending) > 1 else pending[0]
        yield frame.reset_index(drop=True)


__all__ = [
    "KINDS",
    "absent",
    "column_values",
    "frame_rows",
    "frames",
    "is_array",
    "is_nan",
    "kind_series",
    "missing",
    "py",
    "recut",
    "value_kind",
]
