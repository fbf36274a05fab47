"""Resolving and checking the input: which table and columns, their d, the scan that refuses NULL,
NaN and infinite input before anything is written, and the check that nothing written overflowed.
The first stage of :func:`sqlrp.api.project`."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Sequence
from typing import Any, Unpack

from sqlglot import exp

from ..backends import Backend, ColumnInfo
from ..compiler import Source, col, ident, table_ref
from ..core.errors import InputError, InvalidParameter, warn_caller
from ..core.files import file_format, read_as_file, refuse_engine
from ..core.ir import Composed, Projection
from ..core.layout import SOURCE_OPTIONS, SourceOptions
from .frames import table_name

_INTEGER = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?\d*|INT\d+|U?INT\d+|LONG|SHORT|BYTE)$", re.IGNORECASE)


def _integers_beside_floats(where: str, columns: list[ColumnInfo]) -> None:
    """Warn when the default features mix integer columns into floating-point ones: an integer
    ``label`` or ``year`` beside embeddings is read as a feature (and moves ``s = auto``) unless the
    features are named; a table of counts or pixels (integers only) is read as it is, silently."""
    integers = [c.name for c in columns if _INTEGER.match(c.type.strip())]
    if integers and len(integers) < len(columns):
        shown = ", ".join(map(repr, integers[:5])) + (", ..." if len(integers) > 5 else "")
        what = "columns" if len(integers) > 1 else "column"
        warn_caller(
            f"{where}: integer {what} {shown} read as features beside floating-point ones; leave such a label "
            "or key out (--exclude) or name the features (--columns)"
        )


def resolve_source(db: Backend, table: str, id_column: str, **options: Unpack[SourceOptions]) -> Source:
    """The input ``table`` as a :class:`~sqlrp.core.layout.Source`, checked and with its blanks filled
    (:func:`fill_source`).

    :param db: the connection.
    :param table: a table or view (on DuckDB also a file or glob).
    :param id_column: the column copied to the output as each row's key.
    :param options: :class:`~sqlrp.core.layout.SourceOptions` -- ``layout``, ``columns``,
        ``array_column``, ``feature_column``, ``value_column``, ``schema``, ``catalog``, ``nulls``,
        ``group_column``.
    """
    table_name(table)
    unknown = sorted(set(options) - set(SOURCE_OPTIONS))
    if unknown:
        raise TypeError(f"resolve_source() got an unexpected keyword argument {unknown[0]!r}")
    return fill_source(db, Source(table, id_column, **options))  # type: ignore[arg-type]


def fill_source(db: Backend, wanted: Source) -> Source:
    """Check the table and columns of ``wanted`` exist and are numeric, and fill its blanks: the wide
    layout's feature columns (the numeric columns but the id and the group; a table whose one numeric
    column is an array: the array layout), the array layout's column."""
    table, id_column, group_column = wanted.table, wanted.id_column, wanted.group_column
    table_name(table)
    names = (table, id_column, wanted.schema, wanted.catalog, group_column, wanted.array_column)
    for name in (*names, wanted.feature_column, wanted.value_column, *wanted.columns):
        if name is not None:
            ident(name)  # refuses a NUL before the lookup (C engines end a name there)
    found = _Table(db, table, wanted.schema, wanted.catalog)
    found.need(id_column, "id")
    if group_column is not None:
        found.need(group_column, "group")
    if wanted.layout != "long":  # the long layout's own columns: unused here, kept at their defaults
        wanted = dataclasses.replace(wanted, feature_column="feature", value_column="value")
    for name in wanted.exclude:
        found.need(name, "excluded")
    if wanted.exclude and (wanted.layout != "wide" or wanted.columns):
        raise InvalidParameter("--exclude narrows the wide layout's default features: give it without --columns")
    if wanted.layout == "wide":
        keys = {id_column, group_column, *wanted.exclude}  # left out of the default features
        chosen = _wide_columns(db, found, wanted.columns, keys, id_column)
        if isinstance(chosen, str):  # one embedding column and nothing else numeric: the array layout
            return dataclasses.replace(wanted, layout="array", columns=(), array_column=chosen)
        return dataclasses.replace(wanted, columns=tuple(chosen), array_column=None)
    if wanted.layout == "array":
        array_column = wanted.array_column
        if array_column is None:
            arrays = [c.name for c in found.info.values() if c.numeric_array]
            if len(arrays) != 1:
                raise InputError(f"{found.where}: name the array column with --array-column (numeric arrays: {arrays})")
            array_column = arrays[0]
        if not found.need(array_column, "array").numeric_array:
            raise InputError(
                f"column {array_column!r} of {found.where} has type {found.info[array_column].type}, "
                "not a numeric array (DuckDB DOUBLE[] / PostgreSQL float8[])"
            )
        return dataclasses.replace(wanted, columns=(), array_column=array_column)
    feature_column, value_column = wanted.feature_column, wanted.value_column
    if not found.need(feature_column, "feature").numeric:
        raise InputError(f"the feature column {feature_column!r} must hold integer feature indices 0..d-1")
    if not found.need(value_column, "value").numeric:
        raise InputError(f"the value column {value_column!r} has type {found.info[value_column].type}, not a number")
    return dataclasses.replace(wanted, columns=(), array_column=None)


class _Table:
    """A table's columns as :func:`resolve_source` reads them, once."""

    def __init__(self, db: Backend, table: str, schema: str | None, catalog: str | None) -> None:
        self.table = table
        self.info = {c.name: c for c in describe(db, table, schema, catalog)}
        self.where = f"table {table!r}"
        self.from_file = schema is None and catalog is None and read_as_file(db, table)

    def need(self, name: str | None, what: str) -> ColumnInfo:
        if name is None or name not in self.info:
            columns = ", ".join(list(self.info)[:50])
            raise InputError(f"{self.where} has no {what} column {name!r}; its columns are: {columns}")
        return self.info[name]


def _wide_columns(
    db: Backend, found: _Table, columns: Sequence[str] | None, keys: set, id_column: str
) -> list[str] | str:
    """The wide layout's feature columns: those named, checked; else every numeric column but the
    keys.  A table whose only numeric column besides the keys is one array: that column's name."""
    info, where = found.info, found.where
    if columns:
        chosen = list(columns)
        dupes = {c for c in chosen if chosen.count(c) > 1}
        if dupes:
            raise InputError(f"feature columns listed twice: {sorted(dupes)}")
        for c in chosen:
            if c in keys:
                role = "id" if c == id_column else "group"
                raise InputError(f"{c!r} is the {role} column; it cannot be a feature too")
            if not found.need(c, "feature").numeric:
                if found.from_file:
                    check_text_column(db, found.table, c, info[c].type)  # names the first value that is no number
                raise InputError(
                    f"column {c!r} of {where} has type {info[c].type}, not a number; "
                    "leave it out of --columns or cast it in a view"
                )
        return chosen
    chosen = [c.name for c in info.values() if c.numeric and c.name not in keys]
    _integers_beside_floats(where, [info[c] for c in chosen])
    if found.from_file:  # a file's types were guessed from its text: a column is never dropped silently
        for c in info.values():
            if c.name not in keys and not c.numeric and not c.numeric_array and is_guessed_type(c.type):
                check_text_column(db, found.table, c.name, c.type)
    if chosen:
        return chosen
    arrays = [c.name for c in info.values() if c.numeric_array and c.name not in keys]
    if len(arrays) == 1:
        return arrays[0]
    if arrays:
        raise InputError(
            f"{where} has no numeric feature columns besides the id, but {len(arrays)} numeric array "
            f"columns ({', '.join(arrays[:10])}): choose one with --layout=array and --array-column=NAME"
        )
    raise InputError(f"{where} has no numeric feature columns besides the id; name them with --columns")


def is_text_type(sql_type: str) -> bool:
    """``VARCHAR``, ``TEXT``, ``STRING``, ``JSON``...: what a file reader makes of a column it could
    not read as numbers."""
    upper = sql_type.upper()
    return any(word in upper for word in ("CHAR", "TEXT", "STRING", "JSON"))


def is_guessed_type(sql_type: str) -> bool:
    """Text, or a date or time: the types a file reader may guess for a column of numbers (DuckDB's
    CSV reader types a column whose every cell is ``inf`` as DATE, the infinite date)."""
    return is_text_type(sql_type) or any(word in sql_type.upper() for word in ("DATE", "TIME"))


def check_text_column(db: Backend, table: str, name: str, sql_type: str) -> None:
    """A text column of a file: :class:`InputError` if it is empty (every cell), or if some of its
    values read as numbers and some do not -- one bad cell made the reader type the whole column as
    text, and leaving it out would project the wrong d without a word (issue 31).  A column with no
    number at all (labels, names) is text, and is left out of the default features.  A date or time
    column is refused only if every value is a number (``inf`` read as the infinite date); real dates
    are left out as labels are."""
    c = col(name)
    cell = c.copy() if is_text_type(sql_type) else exp.Cast(this=c.copy(), to=exp.DataType.build("varchar"))
    number = exp.TryCast(this=cell, to=exp.DataType.build("double"))
    counts = exp.select(exp.Count(this=number.copy()), exp.Count(this=c.copy())).from_(exp.Table(this=ident(table)))
    parsed, filled = db.fetchall(db.sql_dialect.render(counts))[0]
    where = f"column {name!r} of the file {table!r}"
    if not filled:
        raise InputError(
            f"{where} is empty (no cell holds a value): fill it, or name the feature columns with --columns"
        )
    if not parsed:
        return  # a text column (labels, names): not a feature
    if not is_text_type(sql_type):
        if parsed < filled:
            return  # dates or times (an infinite one among them is still a date): not a feature
        raise InputError(
            f"{where} was read as {sql_type}, but every value in it is a number (such as inf, which the file "
            "reader takes for the infinite date): cast it to a number in a view, or name the feature columns "
            "with --columns"
        )
    text = exp.and_(
        exp.Not(this=exp.Is(this=c.copy(), expression=exp.Null())), exp.Is(this=number, expression=exp.Null())
    )
    bad = exp.select(c.copy()).from_(exp.Table(this=ident(table))).where(text).limit(1)
    first = db.fetchall(db.sql_dialect.render(bad))
    if not first:  # every value is a number, kept as text (a Parquet or JSON string column)
        raise InputError(
            f"{where} holds numbers as text ({parsed} of them): cast it to a number in the file or a view, or "
            "name the feature columns with --columns"
        )
    value = repr(first[0][0])
    raise InputError(
        f"{where} does not parse as a number: the first bad value is {value} (it made the whole column "
        "text); fix the file, or name the feature columns with --columns"
    )


def input_dimension(db: Backend, table: str, id_column: str, projection: Any, options: dict) -> int | None:
    """d as the plan will find it, read before a new projection is stored (to check options that d
    bounds, such as mailman's block); ``None`` where only the plan can tell (a long table: its largest
    feature index need not be the projection's d)."""
    if isinstance(projection, (Projection, Composed)):
        return projection.d
    if options.get("d"):
        return int(options["d"])
    if options.get("layout", "wide") == "long":
        return None
    source = resolve_source(db, table, id_column, **{k: v for k, v in options.items() if k in SOURCE_OPTIONS})
    return infer_d(db, source)


def describe(db: Backend, table: str, schema: str | None, catalog: str | None = None) -> list[ColumnInfo]:
    """The columns of ``[catalog.][schema.]table``.  A catalog needs a backend that can look into
    one (DuckDB: an attached database); elsewhere it is refused -- ``compile --catalog`` still renders it."""
    if catalog is None:
        try:
            return db.columns(table, schema)
        except InputError:
            if schema is None and file_format(table) is not None and not hasattr(db, "read_file"):
                raise refuse_engine(db.dialect, f"read the file {table!r} as a table") from None
            raise
    if "catalog" not in inspect.signature(db.columns).parameters:
        raise InvalidParameter(
            f"{db.dialect}: sqlrp cannot look up tables in another catalog here; connect to {catalog!r} "
            "itself, or only render the SQL (compile with --catalog)"
        )
    return db.columns(table, schema, catalog=catalog)  # type: ignore[call-arg]


def infer_d(db: Backend, source: Source) -> int:
    """The input dimension of ``source``: column count (wide), array length (a fixed-size type's, else
    one row's), or max feature + 1 (long)."""
    if source.layout == "wide":
        return len(source.columns)
    info = {c.name: c for c in describe(db, source.table, source.schema, source.catalog)}
    dialect = db.sql_dialect
    table = table_ref(source)
    if source.layout == "array":
        assert source.array_column is not None
        if info[source.array_column].length:
            return int(info[source.array_column].length)  # type: ignore[arg-type]
        # one row's length (check_source then requires it of every row): a scan for the longest
        # would read a whole Parquet file of embeddings once more
        a = col(source.array_column)
        length = exp.ArraySize(this=a, expression=exp.Literal.number(1))
        query = exp.select(length).from_(table).where(exp.Not(this=exp.Is(this=a.copy(), expression=exp.Null())))
        rows = db.fetchall(dialect.render(query.limit(1)))
        value = rows[0][0] if rows else None
    else:
        agg = exp.Max(this=col(source.feature_column)) + exp.Literal.number(1)
        value = db.fetchall(dialect.render(exp.select(agg).from_(table)))[0][0]
    if value is None:
        raise InputError(f"cannot infer d from the empty table {source.table!r}; pass d explicitly (--d)")
    top = float(value)
    if source.layout == "long" and not (math.isfinite(top) and top == round(top) and top >= 1):
        # the check (check_source) names the rows; d must be a number first (inf would be a traceback)
        raise InputError(
            f"cannot infer d from table {source.table!r}: its largest feature index is {top - 1!r}; feature "
            f"indexes ({source.feature_column!r}) are integers in [0, d): fix them, or pass d (--d) to have "
            "the rows named"
        )
    return int(value)
