"""The formats ``project`` hands rows back in: pandas (the default), Arrow, polars, NumPy.

DuckDB hands its result over as Arrow without a pandas copy (``Backend.query_arrow``; streamed with
its Arrow reader by ``Backend.iter_arrow``), and polars reads Arrow without a copy; the other
engines go through pandas.  ``"numpy"`` gives ``(ids, Y)``: the key column and the ``n x k`` outputs.
Every format passes the same finiteness check as pandas (:func:`check_finite`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from ..backends import Backend
from ..core.errors import InvalidParameter, need
from ..core.layout import OUTPUT_FORMATS
from ..core.lazy import pd
from .checks import check_finite_rows, check_frame_outputs

if TYPE_CHECKING:  # the optional formats' types, named for readers and type checkers only
    import pandas
    import polars
    import pyarrow

#: what :func:`sqlrp.project` returns: the rows in the ``output_format`` asked (``numpy``: ``(ids, Y)``),
#: an iterator of such chunks (``chunk_rows``), the files written (``into`` a file) or ``None`` (``into``
#: a table)
Rows: TypeAlias = "pandas.DataFrame | pyarrow.Table | polars.DataFrame | tuple[np.ndarray, np.ndarray]"
Projected: TypeAlias = "Rows | Iterator[Rows] | list[Path] | None"

FORMATS = OUTPUT_FORMATS  # one list, where the option enters (sqlrp.core.layout)


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of :data:`FORMATS`, with its package importable."""
    if fmt not in FORMATS:
        raise InvalidParameter(f"output_format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt in ("arrow", "polars"):
        need("pyarrow", fmt, f"{fmt} output")
    if fmt == "polars":
        need("polars", "polars", "polars output")
    return fmt


def fetch(db: Backend, sql: str, fmt: str) -> Any:
    """The rows of ``sql`` in ``fmt``."""
    return db.query_df(sql) if fmt == "pandas" else convert(db.query_arrow(sql), fmt)


def fetch_chunks(db: Backend, sql: str, rows: int, fmt: str, columns: list[str]) -> Iterator[Any]:
    """The rows of ``sql`` in chunks of at most ``rows``, in ``fmt``; one empty chunk with the output's
    ``columns`` when there are no rows (an empty table still has a header)."""
    chunks = db.iter_chunks(sql, rows) if fmt == "pandas" else (convert(t, fmt) for t in db.iter_arrow(sql, rows))
    empty = True
    for chunk in chunks:
        empty = False
        yield chunk
    if empty:
        frame = pd.DataFrame({name: pd.Series(dtype=float) for name in columns})
        yield frame if fmt == "pandas" else convert(need("pyarrow", fmt, f"{fmt} output").Table.from_pandas(frame), fmt)


def convert(table: Any, fmt: str) -> Any:
    """A ``pyarrow.Table`` of ``key, outputs...`` as ``fmt`` (``arrow``, ``polars`` or ``numpy``)."""
    if fmt == "polars":
        import polars as pl

        return pl.from_arrow(table)
    return split_numpy(table) if fmt == "numpy" else table


def split_numpy(table: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, Y)``: the first column, and the others as one float64 matrix (an array output column:
    its arrays as rows)."""
    ids = table.column(0).to_numpy()
    rest = [table.column(i) for i in range(1, table.num_columns)]
    if len(rest) == 1 and hasattr(rest[0].type, "value_type"):  # one list column: array output
        values = rest[0].to_pylist()
        Y = np.array(values, dtype=np.float64) if values else np.empty((0, 0))
    else:
        Y = np.column_stack([c.to_numpy(zero_copy_only=False) for c in rest]).astype(np.float64, copy=False)
    return ids, Y


def check_finite(result: Any, key: str, fmt: str) -> Any:
    """``result`` if every projected value is finite, else the :func:`check_frame_outputs` error."""
    if fmt == "pandas":
        return check_frame_outputs(result, key)
    if fmt == "numpy":
        ids, Y = result
    else:
        table = result if fmt == "arrow" else result.to_arrow()
        ids, Y = split_numpy(table)
    check_finite_rows(ids, np.isfinite(Y).all(axis=1) if Y.size else np.ones(len(ids), dtype=bool))
    return result


def chunks_of(result: Any, rows: int, fmt: str) -> Iterator[Any]:
    """``result`` (in ``fmt``) cut into chunks of at most ``rows`` rows, in order."""
    total = len(result[0]) if fmt == "numpy" else (result.num_rows if fmt == "arrow" else len(result))
    for start in range(0, max(total, 1), rows):
        if fmt == "numpy":
            yield result[0][start : start + rows], result[1][start : start + rows]
        elif fmt == "pandas":
            yield result.iloc[start : start + rows]
        else:
            yield result.slice(start, rows)
