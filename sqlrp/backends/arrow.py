"""Arrow on the way in and out, for the backends that move data as Arrow (ClickHouse, DataFusion).

- :func:`arrow_column`, :func:`arrow_table`, :func:`ipc_stream`, :func:`typed_stream`: a DataFrame as
  Arrow, each column typed by what it holds (:func:`~sqlrp.backends.values.value_kind`), pandas'
  missing values as NULL;
- :func:`arrow_rows`, :func:`recut_batches`: a result as rows of Python values, or re-cut into tables
  of a given number of rows;
- :func:`sql_type`, :func:`column_info`: Arrow types in the spelling
  :func:`~sqlrp.backends.base.is_numeric_type` reads.

pyarrow is imported inside the functions: importing this module needs no extra.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.lazy import pd
from .base import ColumnInfo
from .typenames import NUMBER_NAMES
from .values import missing, py, value_kind

if TYPE_CHECKING:
    import pyarrow as pa


def arrow_column(series: pd.Series, kind: str | None = None, unsigned: bool = False) -> pa.Array:
    """``series`` as an Arrow array for a column of ``kind`` (default :func:`value_kind`): ``double``
    as ``float64``, ``bigint`` as ``int64`` (``uint64`` for unsigned integers with ``unsigned``),
    ``boolean`` as ``bool``, ``timestamp`` as ``timestamp[us]``, ``array`` as ``list<double>``,
    ``blob`` as ``binary``, ``text`` as ``string`` (each cell's text).  pandas' missing values
    (NaN, None, ``pd.NA``, ``NaT``) are NULL, as DuckDB reads a frame; ``inf`` stays ``inf``."""
    import pyarrow as pa

    kind = kind or value_kind(series)
    dtype = series.dtype
    numpy = dtype.kind if isinstance(dtype, np.dtype) else ""
    if kind == "double" and numpy == "f":
        values = series.to_numpy(dtype=np.float64)
        nan = np.isnan(values)
        return pa.array(values, pa.float64(), mask=nan if nan.any() else None)
    if kind == "bigint" and (numpy == "i" or (numpy == "u" and unsigned)):
        return pa.array(series.to_numpy(dtype=np.uint64 if numpy == "u" else np.int64))
    if kind == "boolean" and numpy == "b":
        return pa.array(series.to_numpy(dtype=bool), pa.bool_())
    if kind == "timestamp" and numpy == "M":
        stamps = series.to_numpy(dtype="datetime64[us]")
        nat = np.isnat(stamps)
        return pa.array(stamps, pa.timestamp("us"), mask=nat if nat.any() else None)
    values = series.tolist()
    nulls = np.array([missing(v) for v in values], dtype=bool)

    def cells(convert: Any) -> list[Any]:
        return [None if m else convert(v) for v, m in zip(values, nulls, strict=True)]

    if kind == "double":
        return pa.array(cells(float), pa.float64())
    if kind == "bigint":
        return pa.array(cells(int), pa.uint64() if unsigned and getattr(dtype, "kind", "O") == "u" else pa.int64())
    if kind == "boolean":
        return pa.array(cells(bool), pa.bool_())
    if kind == "timestamp":
        stamps = series.to_numpy(dtype="datetime64[us]")
        return pa.array(stamps, pa.timestamp("us"), mask=nulls if nulls.any() else None)
    if kind == "array":
        return pa.array(cells(lambda v: np.asarray(v, dtype=np.float64).tolist()), pa.list_(pa.float64()))
    if kind == "blob":
        return pa.array(cells(bytes), pa.binary())
    return pa.array(cells(lambda v: str(py(v))), pa.string())


def arrow_table(df: pd.DataFrame, columns: list[pa.Array] | None = None) -> pa.Table:
    """``df`` as an Arrow table: ``columns`` (its columns made already), else :func:`arrow_column` of
    each; Arrow columns are named as the frame's (``str``)."""
    import pyarrow as pa

    if columns is None:
        columns = [arrow_column(df.iloc[:, i]) for i in range(df.shape[1])]
    return pa.Table.from_arrays(columns, names=[str(c) for c in df.columns]) if columns else pa.table({})


def ipc_stream(table: pa.Table) -> bytes:
    """``table`` as Arrow IPC stream bytes (ClickHouse's input format ``ArrowStream``)."""
    import pyarrow as pa

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def typed_stream(
    df: pd.DataFrame, kind: Callable[[pd.Series], str], column_type: Callable[[str, bool], str], unsigned: bool = False
) -> tuple[bytes, list[str]]:
    """``df`` as Arrow IPC stream bytes (:func:`ipc_stream`) and the engine's type of each column: a
    column is :func:`arrow_column` of ``kind(column)``, its type ``column_type(Arrow type name, has a NULL)``."""
    arrays = [arrow_column(df.iloc[:, i], kind(df.iloc[:, i]), unsigned) for i in range(df.shape[1])]
    return ipc_stream(arrow_table(df, arrays)), [column_type(str(a.type), bool(a.null_count)) for a in arrays]


def python_value(value: Any) -> Any:
    """An Arrow value as Python gives it, with nanosecond timestamps as ``datetime`` (not pandas')."""
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime(warn=False)
    return value


def arrow_rows(table: pa.Table) -> list[tuple]:
    """The rows of an Arrow table as tuples of Python values (NULL as None, lists as lists,
    timestamps as ``datetime``)."""
    columns = [[python_value(v) for v in column.to_pylist()] for column in table.columns]
    return list(zip(*columns, strict=True)) if columns else []


def recut_batches(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """Record ``batches`` (a result as the engine streams it) re-cut into tables of exactly ``rows``
    rows, the last one shorter; no table for no rows."""
    import pyarrow as pa

    rows = max(1, int(rows))
    pending: list[Any] = []
    have = 0
    for batch in batches:
        while len(batch):
            take = min(rows - have, len(batch))
            pending.append(batch.slice(0, take))
            have += take
            batch = batch.slice(take)
            if have == rows:
                yield pa.Table.from_batches(pending)
                pending, have = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def sql_type(arrow_type: pa.DataType) -> str:
    """An Arrow scalar type as sqlrp names it (``double``, ``bigint``, ``decimal(10, 2)`` ...); a type
    that is not a number keeps Arrow's name (``string_view``, ``bool``, ``timestamp[ns]``)."""
    import pyarrow as pa

    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision}, {arrow_type.scale})"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    return NUMBER_NAMES.get(str(arrow_type), str(arrow_type))


def column_info(name: str, arrow_type: pa.DataType) -> ColumnInfo:
    """A :class:`ColumnInfo` of a column of ``arrow_type``: lists (fixed-size ones with their length)
    by their element type, scalars by :func:`sql_type`."""
    import pyarrow as pa

    t = pa.types
    if (
        t.is_list(arrow_type)
        or t.is_large_list(arrow_type)
        or t.is_fixed_size_list(arrow_type)
        or (hasattr(t, "is_list_view") and (t.is_list_view(arrow_type) or t.is_large_list_view(arrow_type)))
    ):
        element = sql_type(arrow_type.value_type)
        length = arrow_type.list_size if t.is_fixed_size_list(arrow_type) else None
        return ColumnInfo(name, f"{element}[]", element_type=element, length=length)
    return ColumnInfo(name, sql_type(arrow_type))


__all__ = [
    "arrow_column",
    "arrow_rows",
    "arrow_table",
    "column_info",
    "ipc_stream",
    "python_value",
    "recut_batches",
    "sql_type",
    "typed_stream",
]
