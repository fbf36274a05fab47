"""What each column of a DataFrame is to sqlrp, decided once where a frame enters (issue 41).

A pandas or polars DataFrame or a ``pyarrow.Table`` reaches a projection through five paths
(``project``, ``tune``, ``evaluate``, ``search``, ``transform_frame``) and seven engines, each of which
used to read the frame's dtypes its own way: a decimal column was a feature on DuckDB and dropped on
PostgreSQL, a ``uint64`` wrapped or overflowed, an ``Int64`` with ``pd.NA`` was the text ``NaN``.
:func:`read_columns` reads every column once, by its own library's dtype, into a :class:`FrameColumn`
whose ``kind`` says what it is, and whose engine values are the same plain types on every engine:

- ``number``: integers (``int8`` .. ``int64``, unsigned, pandas' nullable ``Int64`` ...), floats
  (``float16`` widened exactly to ``float32``, ``float32``, ``float64``, nullable ``Float64``) and
  decimals (each value the double nearest it, ``float(Decimal)``, as the NumPy reference reads it);
  a sparse column densified (exactly), dictionary and categorical columns of numbers decoded.  Its
  engine values are ``int64``, ``float32`` or ``float64`` without a missing cell, or pandas' masked
  ``Int64`` / ``Float64`` whose ``NA`` every engine writes as NULL (``nulls=`` then decides).  A
  ``uint64`` above 2**63 - 1 fits no engine's BIGINT: it is read as the double nearest it, as NumPy
  reads it.  pandas' float NaN is its missing value (NULL); an Arrow or polars NaN is a NaN, which
  :func:`nan_rows` names.
- ``array``: lists of numbers (the array layout);
- ``text``, ``bool``, ``time`` (dates, times, timestamps), ``duration``, ``binary``, ``empty`` (no
  value at all): not numbers, left out of the default features, refused as named features;
- ``complex``, ``struct`` (structs, maps, dicts), ``mixed`` (numbers and text in one object column),
  ``other``: refused wherever they would be read, named with their dtype.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.values import is_array, missing
from ..core.lazy import pd

#: the largest value of a signed 64-bit integer, every engine's BIGINT
INT64_MAX = 2**63 - 1
#: kinds that are no number but a value an engine holds: left out of the default features
NOT_NUMBERS = ("text", "bool", "time", "duration", "binary", "empty")
#: kinds no engine reads as a number or a key
REFUSED = ("complex", "struct", "mixed", "other")


@dataclasses.dataclass
class FrameColumn:
    """One column of a frame as sqlrp reads it.

    :param name: its name.
    :param dtype: its dtype as the user's library names it (``decimal128(10, 2)``, ``Sparse[float64, nan]``).
    :param kind: ``number``, ``array``, one of :data:`NOT_NUMBERS` or one of :data:`REFUSED`.
    :param integer: a number column of integers (the integer-beside-floats warning); its engine values
        are ``int64`` unless ``above_int64``.
    :param values: ``number``: the engine values (``int64``, ``float32``, ``float64``, masked ``Int64`` /
        ``Float64``); ``array``: lists of floats (``None`` for a missing list); else ``None``.
    :param nan: ``number``: the rows holding a NaN (not a missing value), as a boolean mask, or ``None``.
    :param raw: the column as pandas holds it (ids, groups, labels), exactly, or a function making it
        (an Arrow column is converted only where it is read so): :meth:`given`.
    :param note: why a refused column is refused, when its dtype does not say it.
    :param decimal: a number column of decimals (each read as the double nearest it).
    :param above_int64: integers outside the signed 64 bits (a ``uint64`` above 2**63 - 1), read as the
        doubles nearest them.
    """

    name: str
    dtype: str
    kind: str
    integer: bool = False
    values: Any = None
    nan: Any = None
    raw: Any = None
    note: str = ""
    decimal: bool = False
    above_int64: bool = False

    def given(self) -> Any:
        """The column as pandas holds it (:attr:`raw`, made on the first call)."""
        if callable(self.raw):
            self.raw = self.raw()
        return self.raw

    def refusal(self) -> str:
        """``column 'c' of the frame holds complex numbers (complex128)``: what this column is, in words."""
        what = {
            "text": "text",
            "bool": "booleans",
            "time": "dates or times",
            "duration": "durations",
            "binary": "bytes",
            "empty": "no value at all",
            "complex": "complex numbers",
            "struct": "nested fields",
            "mixed": "numbers mixed with text",
            "array": "a list per row",
            "number": "numbers",
            "other": "values sqlrp does not read",
        }[self.kind]
        note = f", {self.note}" if self.note else ""
        advice = {
            "complex": " -- sqlrp projects real numbers: split it into a real and an imaginary column",
            "struct": " -- give its fields as columns of their own",
        }.get(self.kind, "")
        return f"column {self.name!r} of the frame holds {what} ({self.dtype}{note}){advice}"


# ---- pandas ----


def _masked(values: np.ndarray, missing: np.ndarray, integer: bool) -> Any:
    """``values`` as engine values: plain NumPy without a missing cell, else pandas' masked array."""
    if not missing.any():
        return pd.Series(values, copy=False)
    if integer:
        return pd.Series(pd.arrays.IntegerArray(values.astype(np.int64), missing.copy()))
    return pd.Series(pd.arrays.FloatingArray(values.astype(np.float64), missing.copy()))


def _integers(values: np.ndarray, missing: np.ndarray) -> tuple[Any, bool]:
    """Integer ``values`` (any width, signed or not) as engine values: ``int64`` where every value fits,
    else (a ``uint64`` above 2**63 - 1) the doubles nearest them; and whether they stayed integers."""
    if values.dtype.kind == "u" and values.dtype.itemsize == 8 and (values[~missing] > INT64_MAX).any():
        return _masked(values.astype(np.float64), missing, False), False
    return _masked(values.astype(np.int64), missing, True), True


def _floats(values: np.ndarray, missing: np.ndarray) -> tuple[Any, np.ndarray]:
    """Float ``values`` as engine values (``float16`` widened exactly to ``float32``) and the rows that
    hold a NaN that is no missing cell."""
    if values.dtype.itemsize < 4:
        values = values.astype(np.float32)
    nan = np.isnan(values) & ~missing
    if missing.any():
        return _masked(values.astype(np.float64), missing, False), nan
    return pd.Series(values, copy=False), nan


def _number(name: str, dtype: str, values: Any, missing: np.ndarray, raw: Any) -> FrameColumn:
    """A column of NumPy numbers (``values``, with its ``missing`` cells) as a :class:`FrameColumn`."""
    values = np.asarray(values)
    if values.dtype.kind in "iu":
        engine, integer = _integers(values, missing)
        return FrameColumn(name, dtype, "number", True, engine, None, raw, above_int64=not integer)
    if values.dtype.kind == "f":
        engine, nan = _floats(values, missing)
        return FrameColumn(name, dtype, "number", False, engine, nan if nan.any() else None, raw)
    if values.dtype.kind == "c":
        return FrameColumn(name, dtype, "complex", raw=raw)
    if values.dtype.kind == "b":
        return FrameColumn(name, dtype, "bool", raw=raw)
    return FrameColumn(name, dtype, "other", raw=raw)


def _pandas_column(name: str, series: Any) -> FrameColumn:
    """A pandas column as a :class:`FrameColumn`, by its dtype (an object column by its values)."""
    dtype = series.dtype
    shown = str(dtype)
    series = series.reset_index(drop=True)
    if isinstance(dtype, pd.SparseDtype):  # densified: every cell as it reads, exactly
        dense = _pandas_column(name, series.sparse.to_dense())
        dense.dtype = shown
        return dense
    if isinstance(dtype, pd.ArrowDtype):
        import pyarrow as pa

        return _arrow_column(name, pa.chunked_array(series.array.__arrow_array__()), shown, series)
    if isinstance(dtype, pd.CategoricalDtype):  # its values, decoded
        decoded = _object_column(name, series.astype(object).where(series.notna(), None))
        decoded.dtype, decoded.raw = shown, series
        return decoded
    kind = getattr(dtype, "kind", "O")
    if kind in "iufcb" and not isinstance(dtype, pd.StringDtype):
        missing = series.isna().to_numpy()
        if isinstance(dtype, np.dtype):
            values = series.to_numpy()
        else:  # a masked dtype (Int64, Float64, boolean): its values under the mask
            values = series.array._data  # noqa: SLF001 - pandas' masked arrays keep values and mask apart
        if kind == "f" and isinstance(dtype, np.dtype):
            missing = np.isnan(values)  # pandas' NaN is its missing value
        return _number(name, shown, values, missing, series)
    if kind == "M":
        return FrameColumn(name, shown, "time", raw=series)
    if kind == "m":
        return FrameColumn(name, shown, "duration", raw=series)
    return _object_column(name, series)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, decimal.Decimal, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


#: pandas' ``infer_dtype`` of an object column -> its kind, where one kind of value fills it (numbers, lists,
#: structs and mixes are read value by value)
_INFERRED = {
    "string": "text", "empty": "empty", "boolean": "bool", "bytes": "binary", "datetime64": "time",
    "datetime": "time", "date": "time", "time": "time", "timedelta": "duration", "timedelta64": "duration",
    "period": "other", "interval": "other", "complex": "complex",
}  # fmt: skip


def _object_column(name: str, series: Any) -> FrameColumn:
    """An object (or string, period, interval ...) column, by every value that is not missing."""
    shown = str(series.dtype)
    kind = _INFERRED.get(pd.api.types.infer_dtype(series, skipna=True))
    if kind is not None:  # one kind of value throughout, as pandas tells in C: text, dates ...
        return FrameColumn(name, shown, kind, raw=series)
    values = series.tolist()
    absent = np.array([missing(v) for v in values], dtype=bool)
    present = [v for v, m in zip(values, absent, strict=True) if not m]
    if not present:
        return FrameColumn(name, shown, "empty", raw=series)
    if all(isinstance(v, str) for v in present):
        return FrameColumn(name, shown, "text", raw=series)
    if all(isinstance(v, (bool, np.bool_)) for v in present):
        return FrameColumn(name, shown, "bool", raw=series)
    if all(_is_number(v) for v in present):
        kinds = {"decimal" if isinstance(v, decimal.Decimal) else "float" if isinstance(v, (float, np.floating))
                 else "int" for v in present}  # fmt: skip
        if kinds == {"int"} and all(-INT64_MAX - 1 <= int(v) <= INT64_MAX for v in present):
            ints = np.array([0 if m else int(v) for v, m in zip(values, absent, strict=True)], dtype=np.int64)
            return FrameColumn(name, shown, "number", True, _masked(ints, absent, True), None, series)
        with np.errstate(over="ignore"):
            floats = np.array([0.0 if m else float(v) for v, m in zip(values, absent, strict=True)], dtype=np.float64)
        nan = np.isnan(floats) & ~absent  # Decimal('NaN')
        engine = _masked(floats, absent, False)
        return FrameColumn(
            name,
            shown,
            "number",
            False,
            engine,
            nan if nan.any() else None,
            series,
            decimal="decimal" in kinds,
            above_int64=kinds == {"int"},
        )
    if all(isinstance(v, (complex, np.complexfloating)) or _is_number(v) for v in present):
        return FrameColumn(name, shown, "complex", raw=series)
    if all(is_array(v) for v in present):
        return _array_column(name, shown, values, absent, series)
    if all(isinstance(v, dict) for v in present):
        return FrameColumn(name, shown, "struct", raw=series)
    if all(isinstance(v, (bytes, bytearray, memoryview)) for v in present):
        return FrameColumn(name, shown, "binary", raw=series)
    if all(isinstance(v, (datetime.date, datetime.time, pd.Timestamp)) for v in present):
        return FrameColumn(name, shown, "time", raw=series)
    numbers = [v for v in present if _is_number(v)]
    texts = [v for v in present if isinstance(v, str)]
    if numbers and texts:
        return FrameColumn(name, shown, "mixed", raw=series, note=f"{numbers[0]!r} beside {texts[0]!r}")
    return FrameColumn(name, shown, "other", raw=series, note=f"values such as {type(present[0]).__name__}")


def _array_column(name: str, shown: str, values: list, absent: np.ndarray, raw: Any) -> FrameColumn:
    """A column of lists: ``array`` if every element is a real number or missing (each as a float, a
    missing one as NaN), else ``other``."""
    rows: list[Any] = []
    for v, m in zip(values, absent, strict=True):
        if m:
            rows.append(None)
            continue
        items = v.tolist() if isinstance(v, np.ndarray) else list(v)
        if not all(missing(x) or _is_number(x) for x in items):
            bad = next(x for x in items if not (missing(x) or _is_number(x)))
            return FrameColumn(name, shown, "other", raw=raw, note=f"a list holding {type(bad).__name__} values")
        rows.append([None if missing(x) else float(x) for x in items])
    return FrameColumn(name, shown, "array", values=pd.Series(rows, dtype=object), raw=raw)


# ---- Arrow (and polars, through Arrow) ----


def _arrow_column(name: str, array: Any, shown: str | None = None, raw: Any = None) -> FrameColumn:
    """An Arrow column (a ``ChunkedArray``) as a :class:`FrameColumn`, by its Arrow type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.types
    kind_of = array.type
    shown = shown or str(kind_of)
    if isinstance(kind_of, pa.ExtensionType):
        array = pa.chunked_array([c.storage for c in array.chunks], kind_of.storage_type)
        kind_of = array.type
    if t.is_dictionary(kind_of):  # its values, decoded
        array = pa.chunked_array([c.dictionary_decode() for c in array.chunks], kind_of.value_type)
        kind_of = array.type

    def pandas() -> Any:
        return raw if raw is not None else array.to_pandas()

    missing = (
        np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool) if len(array) else np.zeros(0, bool)
    )
    if t.is_integer(kind_of) or t.is_floating(kind_of):
        zero = pa.scalar(0, kind_of) if not t.is_floating(kind_of) else pa.scalar(0.0, kind_of)
        filled = array.fill_null(zero) if array.null_count else array
        values = filled.to_numpy() if len(filled) else np.zeros(0, kind_of.to_pandas_dtype())
        column = _number(name, shown, values, missing, None)
        column.raw = pandas
        return column
    if t.is_decimal(kind_of):
        with np.errstate(over="ignore"):
            floats = np.array([0.0 if v is None else float(v) for v in array.to_pylist()], dtype=np.float64)
        return FrameColumn(name, shown, "number", False, _masked(floats, missing, False), None, pandas, decimal=True)
    if t.is_boolean(kind_of):
        return FrameColumn(name, shown, "bool", raw=pandas)
    if (
        t.is_string(kind_of)
        or t.is_large_string(kind_of)
        or (hasattr(t, "is_string_view") and t.is_string_view(kind_of))
    ):
        return FrameColumn(name, shown, "text", raw=pandas)
    if t.is_temporal(kind_of) and not t.is_duration(kind_of) and not t.is_interval(kind_of):
        return FrameColumn(name, shown, "time", raw=pandas)
    if t.is_duration(kind_of) or t.is_interval(kind_of):
        return FrameColumn(name, shown, "duration", raw=pandas)
    if t.is_binary(kind_of) or t.is_large_binary(kind_of) or t.is_fixed_size_binary(kind_of):
        return FrameColumn(name, shown, "binary", raw=pandas)
    if t.is_null(kind_of):
        return FrameColumn(name, shown, "empty", raw=pandas)
    if t.is_struct(kind_of) or t.is_map(kind_of):
        return FrameColumn(name, shown, "struct", raw=pandas)
    if _is_list(kind_of):
        element = kind_of.value_type
        if not (t.is_integer(element) or t.is_floating(element) or t.is_decimal(element) or t.is_null(element)):
            return FrameColumn(name, shown, "other", raw=pandas, note=f"a list of {element}")
        flat = pc.list_flatten(array) if len(array) else pa.array([], element)
        cast = flat.cast(pa.float64()) if not t.is_decimal(element) else None
        rows: list[Any] = []
        at = 0
        items = cast.to_pylist() if cast is not None else [None if v is None else float(v) for v in flat.to_pylist()]
        lengths = pc.list_value_length(array).to_pylist()
        for n in lengths:
            if n is None:
                rows.append(None)
                continue
            rows.append(items[at : at + n])
            at += n
        return FrameColumn(name, shown, "array", values=pd.Series(rows, dtype=object), raw=pandas)
    return FrameColumn(name, shown, "other", raw=pandas)


def _is_list(arrow_type: Any) -> bool:
    import pyarrow as pa

    t = pa.types
    return bool(
        t.is_list(arrow_type)
        or t.is_large_list(arrow_type)
        or t.is_fixed_size_list(arrow_type)
        or (hasattr(t, "is_list_view") and (t.is_list_view(arrow_type) or t.is_large_list_view(arrow_type)))
    )


# ---- a frame ----


def column_names(frame: Any) -> list[Any]:
    """The frame's column names in order (pandas, polars, pyarrow)."""
    return list(frame.column_names if hasattr(frame, "column_names") else frame.columns)


def read_columns(frame: Any, names: Sequence[str]) -> dict[str, FrameColumn]:
    """The columns ``names`` of ``frame`` (pandas, polars or a ``pyarrow.Table`` / ``RecordBatch``) as
    :class:`FrameColumn` s, each read by its own library's dtype."""
    module = type(frame).__module__.split(".")[0]
    out: dict[str, FrameColumn] = {}
    for name in names:
        if module == "pandas":
            out[name] = _pandas_column(name, frame[name])
        elif module == "pyarrow":
            import pyarrow as pa

            column = frame.column(name)
            out[name] = _arrow_column(
                name, column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
            )
        else:  # polars, through Arrow
            series = frame.get_column(name)
            try:
                arrow = series.to_arrow()
            except Exception as exc:  # noqa: BLE001 - polars' Object columns have no Arrow form
                out[name] = FrameColumn(name, str(series.dtype), "other", note=type(exc).__name__)
                continue
            import pyarrow as pa

            chunked = arrow if isinstance(arrow, pa.ChunkedArray) else pa.chunked_array([arrow])
            out[name] = _arrow_column(name, chunked, str(series.dtype))
    return out


def nan_rows(columns: Sequence[FrameColumn]) -> np.ndarray | None:
    """The rows where some of ``columns`` holds a NaN that is no missing value (an Arrow or polars NaN, a
    ``Decimal('NaN')``), as a boolean mask, or ``None`` if none does."""
    masks = [c.nan for c in columns if c.nan is not None]
    if not masks:
        return None
    return np.logical_or.reduce(masks)
