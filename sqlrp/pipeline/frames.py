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


def transform_frame(
    projection: Projection | Composed, frame: Any, columns: Sequence[str] | None = None, prefix: str = "p"
) -> Any:
    """In-memory projection of a DataFrame with the NumPy reference (same numbers as the SQL path).
    ``frame`` may be pandas, polars or a ``pyarrow.Table`` (the result is of the same kind, columns
    ``{prefix}0 ..``), or a 2-D NumPy array or list of rows, features in order, as scikit-learn takes
    them (the result is an ``n x k`` array).  Wrong widths, missing columns and NULL/NaN/infinite
    values raise :class:`~sqlrp.core.errors.InputError` naming them, and so do rows whose projection
    overflows (the SQL path's error: :func:`sqlrp.methods.reference.check_outputs`)."""
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
    if not isinstance(frame, pd.DataFrame) and not hasattr(frame, "to_pandas"):
        raise InputError(
            f"transform_frame takes a DataFrame (pandas, polars, pyarrow) or a 2-D array, not {type(frame).__name__}"
        )
    data = frame if isinstance(frame, pd.DataFrame) else frame.to_pandas()  # polars, pyarrow
    cols = list(columns) if columns else list(data.columns)
    missing = [c for c in cols if c not in data.columns]
    if missing:
        raise InputError(
            f"the frame has no column {', '.join(map(repr, missing[:5]))}; its columns are: "
            f"{', '.join(map(str, list(data.columns)[:20]))}"
        )
    if len(cols) != d:
        raise InputError(f"the projection expects d = {d} feature columns; {len(cols)} were given")
    try:
        X = data[cols].to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"the feature columns must be numeric: {exc}") from None
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


def frame_ids(frame: Any, id_column: str) -> np.ndarray:
    """The values of ``frame``'s id column, checked: present, no NULL, no duplicate (the rows come
    back in the frame's order, matched by id)."""
    data = frame if isinstance(frame, pd.DataFrame) else frame.to_pandas()
    if id_column not in data.columns:
        raise InputError(
            f"the frame has no id column {id_column!r}; its columns are: {', '.join(map(str, list(data.columns)[:20]))}"
        )
    ids = data[id_column]
    if ids.isna().any():
        raise InputError(f"the frame's id column {id_column!r} has missing values: every row needs an id")
    if ids.duplicated().any():
        shown = ", ".join(map(repr, ids[ids.duplicated()].unique()[:5].tolist()))
        raise InputError(f"the frame's id column {id_column!r} repeats ids ({shown}): ids must be unique")
    return ids.to_numpy()


def in_frame_order(result: Any, frame: Any, ids: np.ndarray, fmt: str) -> Any:
    """``result`` (rows keyed by id in its first column, in ``fmt``) in the order of ``frame``'s rows;
    a pandas result takes the frame's index too."""
    positions = pd.Index(ids)
    if fmt == "numpy":
        got, Y = result
        order = np.argsort(positions.get_indexer(got), kind="stable")
        return got[order], Y[order]
    if fmt == "pandas":
        key = result.columns[0]
        order = np.argsort(positions.get_indexer(result[key].to_numpy()), kind="stable")
        out = result.iloc[order].reset_index(drop=True)
        if isinstance(frame, pd.DataFrame) and len(out) == len(frame):
            out.index = frame.index
        return out
    table = result if fmt == "arrow" else result.to_arrow()
    order = np.argsort(positions.get_indexer(table.column(0).to_numpy()), kind="stable")
    return result.take(order) if fmt == "arrow" else result[order.tolist()]
