"""The in-memory path: a DataFrame or an array projected with the NumPy reference, the same numbers
as the SQL path, refused where the SQL path refuses (non-finite input, overflowing outputs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.errors import InputError, InvalidParameter, warn_caller
from ..core.ir import Composed, Projection
from ..core.layout import LAYOUTS, NULL_MODES
from ..core.lazy import pd
from ..methods import reference
from .frame_columns import INT64_MAX, FrameColumn, column_names, nan_rows, read_columns


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


#: the options of :class:`~sqlrp.core.layout.SourceOptions` a frame decides itself (:func:`admit`): the
#: engine is told its features by name, never left to find them by its own reading of the dtypes
FRAME_DECIDES = ("layout", "columns", "array_column", "feature_column", "value_column", "exclude", "group_column")
#: where a key column of a frame may come from: what an engine holds in one column
KEY_KINDS = ("number", "text", "time", "bool", "binary", "mixed")


@dataclasses.dataclass
class Admitted:
    """A frame as every engine reads it (:func:`admit`): the same columns, of the same plain types, with
    the features named.

    :param frame: the pandas DataFrame the engine gets (a ``RangeIndex``).
    :param id_column: the column the engine keys rows by: the positions' (``key``) or the frame's id.
    :param key: the positions' column (rows keyed by position, their ids put back after), or ``None``.
    :param ids: the frame's own ids as pandas holds them (their dtype kept), in row order; ``None``
        without an id column.
    :param source: the source options the engine is given (layout, features by name, group, nulls).
    :param names: the engine's name of a column -> the frame's, where a feature was renamed (names that
        differ only in case, which DuckDB and SQLite read as one).
    :param features: the wide layout's feature columns, in order.
    """

    frame: Any
    id_column: str
    key: str | None
    ids: Any
    source: dict[str, Any]
    names: dict[str, str]
    features: list[FrameColumn]

    def matrix(self) -> np.ndarray:
        """The features as an ``n x d`` float64 array, a missing cell as NaN (the NumPy path)."""
        if not self.features:
            return np.zeros((len(self.frame), 0))
        return np.column_stack([c.values.to_numpy(dtype=np.float64, na_value=np.nan) for c in self.features]).astype(
            np.float64
        )


def _labels(ids: Any, frame: Any, rows: np.ndarray) -> str:
    """Up to five rows named by the frame's ids (else its index, else positions)."""
    if ids is not None:
        shown = ids.to_numpy()[rows][:5].tolist()
        what = "rows with id"
    elif isinstance(frame, pd.DataFrame):
        shown = np.asarray(frame.index)[rows][:5].tolist()
        what = "rows"
    else:
        shown = rows[:5].tolist()
        what = "rows at positions"
    return f"{what} {', '.join(map(repr, shown))}"


def _check_names(frame: Any, strings: bool = True) -> list[Any]:
    """The frame's column names, checked: each once, and (``strings``: for an engine) strings."""
    if not (isinstance(frame, pd.DataFrame) or hasattr(frame, "to_pandas") or hasattr(frame, "to_arrow")):
        raise InputError(f"a {type(frame).__name__} is no table: collect it into a DataFrame first")
    if type(frame).__name__ in ("LazyFrame", "DataFrameGroupBy"):
        raise InputError(f"a {type(frame).__name__} is no table: collect it into a DataFrame first")
    names = column_names(frame)
    if strings and not all(isinstance(c, str) for c in names):
        raise InputError(
            "a frame's column names, and the id column's, must be strings (a MultiIndex or numbered columns: "
            "rename them first)"
        )
    if len(set(names)) != len(names):
        twice = sorted({str(c) for c in names if names.count(c) > 1})[:5]
        raise InputError(f"the frame names a column twice: {twice}")
    return names


def _need(names: list[str], name: Any, what: str) -> str:
    if not isinstance(name, str) or name not in names:
        raise InputError(f"the frame has no {what} column {name!r}; its columns are: {', '.join(names[:20])}")
    return name


def _id_values(column: FrameColumn, to_engine: bool) -> Any:
    """The id column's values as the engine gets them; refused where an id cannot be one."""
    missing = column.given().isna().to_numpy() if column.given() is not None else np.zeros(0, bool)
    if column.nan is not None:
        missing = missing | column.nan
    if column.kind == "number" and column.values is not None and column.values.isna().any():
        missing = missing | column.values.isna().to_numpy()
    if missing.any():
        raise InputError(
            f"the frame's id column {column.name!r} has missing values (NULL or NaN): every row needs an id"
        )
    if column.kind not in KEY_KINDS:
        raise InputError(f"{column.refusal()}: an id is an integer, a number, a text, a date or time, or bytes")
    if not to_engine:
        return None
    if column.kind == "mixed":
        raise InputError(f"{column.refusal()}: an engine holds one type of id per column; cast the ids to text first")
    if column.kind != "number":
        return column.given().reset_index(drop=True)
    if column.decimal:  # exact or refused: integers of 64 bits
        values = column.given().tolist()
        if all(v == v.to_integral_value() and -INT64_MAX - 1 <= int(v) <= INT64_MAX for v in values):
            return pd.Series(np.array([int(v) for v in values], dtype=np.int64))
        raise InputError(
            f"the frame's id column {column.name!r} is {column.dtype} with fractional or out-of-range values, "
            "which no engine keys exactly: cast the ids to integers or text first"
        )
    if column.above_int64:  # a uint64 above 2**63 - 1
        raise InputError(
            f"the frame's id column {column.name!r} is {column.dtype} with values above 2**63 - 1, which no "
            "engine's BIGINT holds: cast the ids to text first"
        )
    return column.values.astype(np.int64) if column.integer else column.values


def _key_values(column: FrameColumn, role: str) -> Any:
    """A group or label column's values as the engine gets them."""
    if column.kind not in KEY_KINDS or column.kind == "mixed":
        raise InputError(f"{column.refusal()}: the {role} column must be an integer, a number, a text or a date")
    return column.values if column.kind == "number" else column.given().reset_index(drop=True)


def _fresh(base: str, taken: set[str]) -> str:
    """``base``, or with a number after it, whose case-folded form is not in ``taken``."""
    return next(f"{base}{i or ''}" for i in range(len(taken) + 2) if f"{base}{i or ''}".casefold() not in taken)


def admit(  # noqa: PLR0912, PLR0915 - one decision per column role, in one place
    frame: Any,
    id_column: str | None,
    options: Mapping[str, Any],
    *,
    by_position: bool = False,
    keep: Sequence[str | None] = (),
    every_column: bool = False,
) -> Admitted:
    """``frame`` (pandas, polars, ``pyarrow.Table``) as every engine reads it: each column decided once,
    by its own library's dtype (:func:`~sqlrp.pipeline.frame_columns.read_columns`) -- the id, the
    group and ``keep`` columns (a label) as the engine holds them, the features (``options``' layout,
    ``columns``, ``exclude``, ``array_column``, ``feature_column``, ``value_column``) as numbers, named;
    anything else left out.  A column that cannot be what it is asked to be is refused in one line
    naming it and its dtype; so are a missing id, and a NaN (not a missing value) in a feature.

    :param frame: the frame.
    :param id_column: its id column (``None``: no id, ``transform_frame``).
    :param options: the call's options (those of :data:`FRAME_DECIDES`, ``nulls``, ``schema``, ``catalog``
        are read).
    :param by_position: rows keyed by their position (``Admitted.key``), the frame's ids not sent.
    :param keep: more columns the engine gets as they are (``evaluate``'s label).
    :param every_column: the NumPy path (``transform_frame``): no engine frame is made, column names
        need not be strings, and the default features are every column, each of which must be a
        number; else every number column but the keys, the rest left out.
    """
    names = _check_names(frame, strings=not every_column)
    for option in ("schema", "catalog"):
        if options.get(option) is not None:
            raise InvalidParameter(
                f"--{option} says where a table is; a frame is read for the call: give it without --{option}"
            )
    layout = options.get("layout") or "wide"
    if layout not in LAYOUTS:
        raise InvalidParameter(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    nulls = options.get("nulls") or "error"
    if nulls not in NULL_MODES:
        raise InvalidParameter(f"nulls must be 'error' or 'zero', got {nulls!r}")
    if id_column is not None:
        if not isinstance(id_column, str):
            raise InputError("a frame's column names, and the id column's, must be strings")
        if id_column not in names:
            raise InputError(f"the frame has no id column {id_column!r}; its columns are: {', '.join(names[:20])}")
    group = options.get("group_column")
    if group is not None:
        _need(names, group, "group")
    kept = [_need(names, c, "label") for c in keep if c is not None]
    keys = [c for c in (id_column, group, *kept) if c is not None]
    columns = list(options.get("columns") or ())
    exclude = list(options.get("exclude") or ())
    for c in exclude:
        _need(names, c, "excluded")
    if exclude and (layout != "wide" or columns):
        raise InvalidParameter("--exclude narrows the wide layout's default features: give it without --columns")
    if layout == "wide" and columns:
        dupes = sorted({c for c in columns if columns.count(c) > 1})
        if dupes:
            raise InputError(f"feature columns listed twice: {dupes}")
        for c in columns:
            if c in keys:
                role = "id" if c == id_column else "group" if c == group else "label"
                raise InputError(f"{c!r} is the {role} column; it cannot be a feature too")
            _need(names, c, "feature")
        wanted = columns
    elif layout == "wide":
        wanted = [c for c in names if c not in keys and c not in exclude]
    elif layout == "array":
        given = options.get("array_column")
        wanted = [_need(names, given, "array")] if given is not None else [c for c in names if c not in keys]
    else:
        wanted = [
            _need(names, options.get("feature_column") or "feature", "feature"),
            _need(names, options.get("value_column") or "value", "value"),
        ]
    read = read_columns(frame, list(dict.fromkeys([*keys, *wanted])))
    ids = read[id_column].given().reset_index(drop=True) if id_column is not None else None
    id_values = _id_values(read[id_column], not by_position) if id_column is not None else None

    source: dict[str, Any] = {"layout": layout, "group_column": group, "nulls": nulls}
    features: list[FrameColumn] = []
    sent: list[FrameColumn] = []  # the feature-side columns, in order
    if layout == "wide":
        if columns or every_column:
            for c in wanted:
                if read[c].kind != "number":
                    raise InputError(
                        f"{read[c].refusal()}, not numbers: leave it out of --columns, or cast it"
                        if columns
                        else f"{read[c].refusal()}, not numbers: every column is a feature unless --columns names them"
                    )
            features = [read[c] for c in wanted]
        else:
            unread = [read[c] for c in wanted if read[c].kind in ("complex", "mixed")]
            if unread:
                raise InputError(
                    f"{unread[0].refusal()}: it cannot be read as a feature; leave it out (--exclude) "
                    "or name the feature columns (--columns)"
                )
            features = [read[c] for c in wanted if read[c].kind == "number"]
            integers = [c.name for c in features if c.integer]
            if integers and len(integers) < len(features):
                shown = ", ".join(map(repr, integers[:5])) + (", ..." if len(integers) > 5 else "")
                warn_caller(
                    f"the frame: integer {'columns' if len(integers) > 1 else 'column'} {shown} read as features "
                    "beside floating-point ones; leave such a label or key out (--exclude) or name the features "
                    "(--columns)"
                )
            if not features:
                arrays = [c for c in wanted if read[c].kind == "array"]
                if len(arrays) == 1:
                    layout, source["layout"] = "array", "array"
                    sent = [read[arrays[0]]]
                elif arrays:
                    raise InputError(
                        f"the frame has no numeric feature columns besides the id, but {len(arrays)} numeric array "
                        f"columns ({', '.join(arrays[:10])}): choose one with --layout=array and --array-column=NAME"
                    )
                else:
                    raise InputError(
                        "the frame has no numeric feature columns besides the id; name them with --columns"
                    )
        sent = sent or features
    elif layout == "array":
        arrays = [c for c in wanted if read[c].kind == "array"]
        if options.get("array_column") is not None:
            if not arrays:
                raise InputError(f"{read[wanted[0]].refusal()}, not a list of numbers per row")
        elif len(arrays) != 1:
            raise InputError(f"the frame: name the array column with --array-column (numeric arrays: {arrays})")
        sent = [read[arrays[0]]]
    else:
        for c in wanted:
            if read[c].kind != "number":
                role = "feature index" if c == wanted[0] else "value"
                raise InputError(f"{read[c].refusal()}, not numbers: the long layout's {role}s are numbers")
        sent = [read[c] for c in wanted]
    nan = nan_rows(sent)
    if nan is not None:
        raise InputError(
            f"the frame has NaN values in feature columns ({_labels(ids, frame, np.flatnonzero(nan))}): clean the "
            "data first (--nulls=zero reads a missing value as 0, not a NaN)"
        )
    if every_column:  # the NumPy path: no engine frame
        return Admitted(pd.DataFrame(), "", None, None, source, {}, features)

    # the engine's columns: the keys by their names, the features renamed where names differ only in case
    taken: set[str] = set()
    out: dict[str, Any] = {}
    names_back: dict[str, str] = {}
    key = None
    if by_position:
        key = _fresh("_sqlrp_row", {n.casefold() for n in names})
        out[key] = pd.Series(np.arange(len(read[wanted[0]].given()) if wanted else len(ids), dtype=np.int64))
        taken.add(key.casefold())
    for c, values in [(id_column, id_values), (group, None), *[(k, None) for k in kept]]:
        if c is None or (c == id_column and by_position) or c in out:
            continue
        if c.casefold() in taken:
            clash = next(n for n in out if n.casefold() == c.casefold())
            raise InputError(
                f"the frame's columns {clash!r} and {c!r} differ only in case, which DuckDB and SQLite read as one "
                "name: rename one"
            )
        out[c] = values if values is not None else _key_values(read[c], "group" if c == group else "label")
        taken.add(c.casefold())
    every = {n.casefold() for n in names} | taken
    engine_names = []
    for column in sent:
        name = column.name
        if name.casefold() in taken:
            name = _fresh("_sqlrp_c", every | taken)
            names_back[name] = column.name
        taken.add(name.casefold())
        out[name] = column.values.reset_index(drop=True)
        engine_names.append(name)
    if layout == "wide":
        source["columns"] = engine_names
    elif layout == "array":
        source["array_column"] = engine_names[0]
    else:
        source["feature_column"], source["value_column"] = engine_names
    engine = pd.DataFrame(out, copy=False) if out else pd.DataFrame(index=pd.RangeIndex(0))
    return Admitted(engine, key or id_column or "", key, ids, source, names_back, features)


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
