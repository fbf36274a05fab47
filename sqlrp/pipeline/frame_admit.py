"""A frame admitted: every column of a pandas or polars DataFrame or a ``pyarrow.Table`` given its role
once, where the frame enters (issue 41) -- the id, the group, a label, the features -- and the frame
the engine gets made of them alone, of plain types (:mod:`.frame_columns`), its features named.

Every engine then reads the same features as the same numbers: a column the engine would read its own
way (a decimal, a ``uint64``, a nullable integer) or not at all (``float16``, sparse, complex) never
reaches it as the user's dtype.  Used by ``project`` (:func:`sqlrp.pipeline.running.run_frame`), ``tune``,
``evaluate`` and ``search`` (:func:`sqlrp.pipeline.frame_table.frame_input`) and ``transform_frame``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.errors import InputError, InvalidParameter, warn_caller
from ..core.layout import LAYOUTS, NULL_MODES
from ..core.lazy import pd
from .frame_columns import INT64_MAX, FrameColumn, column_names, nan_rows, read_columns

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


def _checked_options(options: Mapping[str, Any]) -> tuple[str, str]:
    """The layout and ``nulls`` of ``options``, checked; ``schema`` and ``catalog`` refused."""
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
    return layout, nulls


def _wanted(names: list[str], keys: list[str], roles: dict[str, str], layout: str, options: Mapping) -> list[str]:
    """The columns that may hold the features: those named (checked), else every column but the keys
    and ``exclude`` (wide), the array column or every candidate (array), the feature and value columns
    (long)."""
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
                raise InputError(f"{c!r} is the {roles[c]} column; it cannot be a feature too")
            _need(names, c, "feature")
        return columns
    if layout == "wide":
        return [c for c in names if c not in keys and c not in exclude]
    if layout == "array":
        given = options.get("array_column")
        return [_need(names, given, "array")] if given is not None else [c for c in names if c not in keys]
    return [
        _need(names, options.get("feature_column") or "feature", "feature"),
        _need(names, options.get("value_column") or "value", "value"),
    ]


def _default_features(read: dict[str, FrameColumn], wanted: list[str]) -> tuple[str, list[FrameColumn]]:
    """The wide layout's default features: every number column among ``wanted`` (a frame whose only
    candidate is one column of lists: the array layout); complex numbers and numbers mixed with text
    refused, other columns (text, dates, booleans, structs) left out."""
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
    if features:
        return "wide", features
    arrays = [c for c in wanted if read[c].kind == "array"]
    if len(arrays) == 1:
        return "array", [read[arrays[0]]]
    if arrays:
        raise InputError(
            f"the frame has no numeric feature columns besides the id, but {len(arrays)} numeric array "
            f"columns ({', '.join(arrays[:10])}): choose one with --layout=array and --array-column=NAME"
        )
    raise InputError("the frame has no numeric feature columns besides the id; name them with --columns")


def _feature_columns(
    read: dict[str, FrameColumn], wanted: list[str], layout: str, options: Mapping, every_column: bool
) -> tuple[str, list[FrameColumn]]:
    """The layout (the wide one may turn out an array) and the columns that hold the features, checked."""
    if layout == "wide" and not (options.get("columns") or every_column):
        return _default_features(read, wanted)
    if layout == "wide":
        for c in wanted:
            if read[c].kind != "number":
                raise InputError(
                    f"{read[c].refusal()}, not numbers: leave it out of --columns, or cast it"
                    if options.get("columns")
                    else f"{read[c].refusal()}, not numbers: every column is a feature unless --columns names them"
                )
        return layout, [read[c] for c in wanted]
    if layout == "array":
        arrays = [c for c in wanted if read[c].kind == "array"]
        if options.get("array_column") is not None and not arrays:
            raise InputError(f"{read[wanted[0]].refusal()}, not a list of numbers per row")
        if len(arrays) != 1:
            raise InputError(f"the frame: name the array column with --array-column (numeric arrays: {arrays})")
        return layout, [read[arrays[0]]]
    for c, role in zip(wanted, ("feature index", "value"), strict=True):
        if read[c].kind != "number":
            raise InputError(f"{read[c].refusal()}, not numbers: the long layout's {role}s are numbers")
    return layout, [read[c] for c in wanted]


def admit(
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
    layout, nulls = _checked_options(options)
    if id_column is not None and (not isinstance(id_column, str) or id_column not in names):
        raise InputError(f"the frame has no id column {id_column!r}; its columns are: {', '.join(names[:20])}")
    group = options.get("group_column")
    roles = {c: role for c, role in [(_need(names, c, "label"), "label") for c in keep if c is not None]}
    if group is not None:
        roles[_need(names, group, "group")] = "group"
    if id_column is not None:
        roles[id_column] = "id"
    keys = list(roles)
    wanted = _wanted(names, keys, roles, layout, options)
    read = read_columns(frame, list(dict.fromkeys([*keys, *wanted])))
    ids = read[id_column].given().reset_index(drop=True) if id_column is not None else None
    id_values = _id_values(read[id_column], not by_position) if id_column is not None else None
    layout, sent = _feature_columns(read, wanted, layout, options, every_column)
    nan = nan_rows(sent)
    if nan is not None:
        raise InputError(
            f"the frame has NaN values in feature columns ({_labels(ids, frame, np.flatnonzero(nan))}): clean the "
            "data first (--nulls=zero reads a missing value as 0, not a NaN)"
        )
    source: dict[str, Any] = {"layout": layout, "group_column": group, "nulls": nulls}
    features = sent if layout == "wide" else []
    if every_column:  # the NumPy path: no engine frame
        return Admitted(pd.DataFrame(), "", None, None, source, {}, features)
    key = _fresh("_sqlrp_row", {n.casefold() for n in names}) if by_position else None
    keyed: dict[str, Any] = {key: pd.Series(np.arange(len(frame), dtype=np.int64))} if key else {}
    if id_column is not None and not by_position:
        keyed[id_column] = id_values
    for c, role in roles.items():
        if role != "id":
            keyed[c] = _key_values(read[c], role)
    engine, names_back, engine_names = _engine_frame(keyed, sent, names)
    if layout == "wide":
        source["columns"] = engine_names
    elif layout == "array":
        source["array_column"] = engine_names[0]
    else:
        source["feature_column"], source["value_column"] = engine_names
    return Admitted(engine, key or id_column or "", key, ids, source, names_back, features)


def _engine_frame(
    keyed: dict[str, Any], sent: list[FrameColumn], names: list[str]
) -> tuple[Any, dict[str, str], list[str]]:
    """The engine's frame: the key columns by their names (two that differ only in case refused), the
    features renamed where their names differ only in case from another's (DuckDB and SQLite read
    ``a`` and ``A`` as one name); the renaming, and the features' names in the engine."""
    taken: dict[str, str] = {}
    for c in keyed:
        if c.casefold() in taken:
            raise InputError(
                f"the frame's columns {taken[c.casefold()]!r} and {c!r} differ only in case, which DuckDB and "
                "SQLite read as one name: rename one"
            )
        taken[c.casefold()] = c
    every = {n.casefold() for n in names} | set(taken)
    out = dict(keyed)
    names_back: dict[str, str] = {}
    engine_names = []
    for column in sent:
        name = column.name
        if name.casefold() in taken:
            name = _fresh("_sqlrp_c", every | set(taken))
            names_back[name] = column.name
        taken[name.casefold()] = name
        out[name] = column.values.reset_index(drop=True)
        engine_names.append(name)
    engine = pd.DataFrame(out, copy=False) if out else pd.DataFrame(index=pd.RangeIndex(0))
    return engine, names_back, engine_names
