"""The in-memory path: a DataFrame or an array projected with the NumPy reference, the same numbers
as the SQL path, refused where the SQL path refuses (non-finite input, overflowing outputs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.errors import InputError
from ..core.ir import Composed, Projection
from ..core.lazy import pd
from ..methods import reference
from .frame_admit import admit
from .frame_columns import column_names


def transform_frame(
    projection: Projection | Composed, frame: Any, columns: Sequence[str] | None = None, prefix: str = "p"
) -> Any:
    """In-memory projection of a DataFrame with the NumPy reference (same numbers as the SQL path).
    ``frame`` may be pandas, polars or a ``pyarrow.Table`` (the result is of the same kind, columns
    ``{prefix}0 ..``), or a 2-D NumPy array or list of rows, features in order, as scikit-learn takes
    them (the result is an ``n x k`` array).  Wrong widths, missing columns and NULL/NaN/infinite
    values raise :class:`~sqlrp.core.errors.InputError` naming them, and so do rows whose projection
    overflows (the SQL path's error: :func:`sqlrp.methods.reference.check_outputs`).

    :param projection: the projection (:func:`sqlrp.load_projection`, :func:`sqlrp.create_projection`).
    :param frame: a pandas or polars DataFrame, a ``pyarrow.Table``, or a 2-D array or list of rows.
    :param columns: a frame's feature columns, in the projection's feature order (default: all its
        columns); not used for an array.
    :param prefix: the output columns' prefix (not used for an array).
    :returns: a frame of the input's kind with the columns ``{prefix}0 .. {prefix}{k-1}`` (pandas: the
        input's index), or an ``n x k`` float64 array for an array.
    """
    d = projection.d
    if isinstance(frame, (np.ndarray, list, tuple)):
        try:
            X = np.asarray(frame, dtype=float)
        except (TypeError, ValueError) as exc:
            raise InputError(f"transform_frame needs numbers in a 2-D array (n x d = {d}): {exc}") from None
        if X.ndim != 2 or X.shape[1] != d:
            raise InputError(f"the projection expects rows of d = {d} features; got an array of shape {X.shape}")
        _finite(X, np.arange(len(X)))
        return reference.transform(projection, X)
    kind = type(frame).__module__.split(".")[0]
    if not is_frame(frame):
        raise InputError(
            f"transform_frame takes a DataFrame (pandas, polars, pyarrow) or a 2-D array, not {type(frame).__name__}"
        )
    if columns is not None and not columns:
        columns = None
    names = column_names(frame)
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise InputError(
                f"the frame has no column {', '.join(map(repr, missing[:5]))}; its columns are: "
                f"{', '.join(map(str, names[:20]))}"
            )
    if len(columns if columns is not None else names) != d:
        given = len(columns if columns is not None else names)
        raise InputError(f"the projection expects d = {d} feature columns; {given} were given")
    # the columns read as the SQL path reads them (admit): decimals, float16, nullable and sparse columns alike
    admitted = admit(frame, None, {"columns": list(columns) if columns is not None else None}, every_column=True)
    X = admitted.matrix()
    index = frame.index if isinstance(frame, pd.DataFrame) else pd.RangeIndex(len(X))
    data = pd.DataFrame(index=index)
    _finite(X, data.index.to_numpy())
    Y = reference.transform(projection, X, labels=data.index.to_numpy())  # overflow refused as in SQL
    out = pd.DataFrame(Y, columns=[f"{prefix}{j}" for j in range(projection.k)])
    out.index = data.index
    if kind == "polars":
        import polars as pl

        return pl.from_pandas(out)
    if kind == "pyarrow":
        import pyarrow as pa

        return pa.Table.from_pandas(out, preserve_index=False)
    return out


def _finite(X: np.ndarray, labels: np.ndarray) -> None:
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        shown = ", ".join(map(repr, labels[bad][:5].tolist()))
        raise InputError(f"NULL, NaN or infinite features in rows {shown}: clean them first")


def is_frame(obj: Any) -> bool:
    """True for a pandas or polars DataFrame or a ``pyarrow.Table``: what ``project`` takes where a
    table name goes."""
    if isinstance(obj, str):
        return False
    module = type(obj).__module__.split(".")[0]
    return module in ("pandas", "polars", "pyarrow") and hasattr(obj, "columns")


def with_frame_ids(result: Any, key: str, ids: Any, id_column: str, frame: Any, fmt: str) -> Any:
    """``result`` (keyed by the positions column ``key``, in ``fmt``) in the frame's order, its key
    replaced by the frame's own ids (their dtype kept) under ``id_column``; a pandas result takes the
    frame's index."""
    if fmt == "numpy":
        got, Y = result
        order = np.argsort(np.asarray(got, dtype=np.int64), kind="stable")
        return ids.to_numpy()[np.asarray(got, dtype=np.int64)[order]], Y[order]
    if fmt == "pandas":
        out = result.sort_values(key, kind="stable").reset_index(drop=True)
        at = out[key].to_numpy(dtype=np.int64)
        out[key] = ids.iloc[at].to_numpy()
        out = out.rename(columns={key: id_column})
        out.index = frame.index[at] if isinstance(frame, pd.DataFrame) else pd.RangeIndex(len(out))
        return out
    table = result if fmt == "arrow" else result.to_arrow()
    import pyarrow as pa

    at = np.asarray(table.column(key).to_numpy(), dtype=np.int64)
    order = np.argsort(at, kind="stable")
    table = table.take(pa.array(order)).set_column(0, id_column, pa.array(ids.iloc[at[order]], from_pandas=True))
    if fmt == "arrow":
        return table
    import polars as pl

    return pl.from_arrow(table)


def table_name(table: Any) -> str:
    """``table`` if it is a table's name; a frame or anything else is an :class:`InputError` saying
    where a frame is read (``project``, ``tune``, ``evaluate``, ``search``) and how to keep one."""
    if isinstance(table, str):
        return table
    kind = type(table).__name__
    raise InputError(
        f"a {kind} is no table name here: sqlrp.project, tune, evaluate and search read a DataFrame or "
        "Arrow table for the call; anything that keeps the table's name (a plan, an index) needs it "
        "written first (db.write_dataframe(name, frame))"
        if is_frame(table)
        else f"the table must be a table name (or, for project, a DataFrame), not a {kind}"
    )
