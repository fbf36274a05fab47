"""Resolving and checking the input: which table and columns, their d, the scan that refuses NULL,
NaN and infinite input before anything is written, and the check that nothing written overflowed.
The first stage of :func:`sqlrp.api.project`."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Unpack

import numpy as np
from sqlglot import exp

from ..backends import Backend, ColumnInfo
from ..compiler import Source, as_double, col, dense_source, feature_input, ident, table_ref
from ..compiler.limits import within_limits
from ..core.errors import InputError, InvalidParameter, overflow_error, warn_caller
from ..core.files import file_format, read_as_file, refuse_engine
from ..core.ir import Composed, Projection
from ..core.layout import SOURCE_OPTIONS, SourceOptions
from ..core.lazy import pd
from ..core.nodes import Inputs, SignedSum, balanced, gc_paused
from ..dialects import SqlrpDialect
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


@gc_paused
def check_source(db: Backend, projection: Projection | int, source: Source) -> None:
    """Fail with a clear message if any row has NULL/NaN/infinite features, a wrong array length, or
    a feature index outside ``[0, d)``.  Nothing is written.

    Wide and array layouts on engines whose float sums overflow to infinity (DuckDB) first add up
    each row's features -- NULL if one is NULL, NaN if one is NaN -- and look feature by feature only
    if some sum is: one sum per row costs less than a test per feature (``bench/run.py``,
    ``sqlrp_check``; docs/benchmarks.md, "Pipeline")."""
    d = projection if isinstance(projection, int) else projection.d
    dialect = db.sql_dialect
    table: exp.Expression = table_ref(source)

    def bad_value(e: Callable[[], exp.Expression]) -> exp.Expression:
        cond: exp.Expression = dialect.not_finite(as_double(e()))
        if source.nulls == "error":
            cond = exp.Or(this=exp.Is(this=e(), expression=exp.Null()), expression=cond)
        not_number = dialect.not_a_number(e())
        if not_number is not None:  # SQLite: a REAL column may hold '12abc', which CAST reads as 12
            cond = exp.Or(this=cond, expression=not_number)
        return cond

    keys = null_keys(db, source)  # NULL ids (long layout) or groups: summed into one output row keyed NULL
    if keys is not None and source.layout != "long":
        _refuse_null_keys(db, table, source, keys)
    values: list[Callable[[], exp.Expression]] | None = None  # the features (wide and array layouts)
    if source.layout == "wide":
        values = [lambda c=c: col(c) for c in source.columns]
        what = "NULL or NaN or infinite values in feature columns"
        key = source.id_column
    elif source.layout == "array":
        # lengths first (one detoast per row), then elements through the compiler's own source
        # relation, which detoasts once per row on PostgreSQL (x[i] on the raw column would not)
        a = col(source.array_column)  # type: ignore[arg-type]
        length = exp.ArraySize(this=a.copy(), expression=exp.Literal.number(1))
        wrong = exp.or_(
            exp.Is(this=a.copy(), expression=exp.Null()),
            exp.NEQ(this=length, expression=exp.Literal.number(d)),
        )
        bad = _offending_ids(db, table, col(source.id_column), wrong)
        if bad:
            ids = ", ".join(repr(r[0]) for r in bad)
            raise InputError(
                f"table {source.table!r} has NULL arrays or arrays whose length is not "
                f"d = {d} (rows with id {ids}); fix them or use a projection of that d"
            )
        table = dense_source(d, dataclasses.replace(source, group_column=None), dialect).subquery("src")
        values = [lambda i=i: col(f"_x{i}") for i in range(d)]
        what = "NULL or NaN or infinite array elements"
        key = "_id"
    else:
        what = ""  # named below
        key = source.id_column
    if values is not None:
        if dialect.nan_propagating_sums and not _suspect_rows(db, table, values, source, dialect):
            return
        conds = [bad_value(v) for v in values]
    else:
        conds = [*bad_index(source.feature_column, d, dialect), bad_value(lambda: col(source.value_column))]
        if keys is not None:  # one scan in the usual case: the keys' own check only if something is found
            conds.append(keys)
    bad: list = []
    for group in within_limits(conds, dialect):  # one query, or as many as the engine's limits need
        bad = _offending_ids(db, table, col(key), any_of(group))
        if bad:
            break
    if bad and values is None:  # which of the long layout's checks: the keys, the indexes, else the values
        if keys is not None:
            _refuse_null_keys(db, table, source, keys)
        index = _offending_ids(db, table, col(key), any_of(bad_index(source.feature_column, d, dialect)))
        if index:
            raise InputError(
                f"table {source.table!r} has feature indexes ({source.feature_column!r}) that are NULL, not integers "
                f"or outside [0, {d}) (rows with id {', '.join(repr(r[0]) for r in index)}): a feature index is an "
                "integer in [0, d); fix them, or use a projection of the d they need"
            )
        what = "NULL/NaN/infinite values" if source.nulls == "error" else "NaN or infinite values"
        what += f" in {source.value_column!r}"
    if bad:
        ids = ", ".join(repr(r[0]) for r in bad)
        hint = (
            " Clean the data, or pass --nulls=zero to treat NULL as 0."
            if source.nulls == "error" and source.layout != "array"
            else " Clean the data first."
        )
        raise InputError(f"table {source.table!r} has {what} (rows with id {ids}).{hint}")


def bad_index(feature_column: str, d: int, dialect: SqlrpDialect) -> list[exp.Expression]:
    """The long layout's feature index is bad: NULL, NaN or infinite, outside ``[0, d)``, or not an
    integer (``ROUND(f) <> f``: the projection's ``CAST(f AS BIGINT)`` would truncate or round 1.4 to 1
    without a word).  ``ROUND`` is in every engine's core (SQLite's ``FLOOR`` is an optional extension)
    and never overflows, where a cast of 1e30 to an integer raises or wraps."""
    f = col(feature_column)
    return [
        exp.Is(this=f.copy(), expression=exp.Null()),
        dialect.not_finite(as_double(f.copy())),
        f.copy() < exp.Literal.number(0),
        f.copy() >= exp.Literal.number(d),
        exp.NEQ(this=exp.Round(this=f.copy()), expression=f.copy()),
    ]


def null_keys(db: Backend, source: Source) -> exp.Expression | None:
    """The condition of a row whose key the projection would pool with others under one key: a NULL
    (or, in a floating-point column, NaN: the engines group NaNs together) id in the long layout (its
    rows are summed ``GROUP BY id``), or such a group in any layout; ``None`` where neither applies (a
    wide or array row with a NULL id is one output row of its own)."""
    columns = ([source.id_column] if source.layout == "long" else []) + (
        [source.group_column] if source.group_column else []
    )
    if not columns:
        return None
    floats = {c.name for c in describe(db, source.table, source.schema, source.catalog) if _FLOAT.search(c.type)}
    dialect = db.sql_dialect
    conditions: list[exp.Expression] = []
    for c in columns:
        conditions.append(exp.Is(this=col(c), expression=exp.Null()))
        if c in floats:
            conditions.append(dialect.is_nan(as_double(col(c))))
    return any_of(conditions)


#: a floating-point column's type (DuckDB DOUBLE / FLOAT, PostgreSQL double precision / real, ClickHouse
#: Float64, DataFusion Float64, SQLite REAL): its key may be NaN
_FLOAT = re.compile(r"FLOAT|DOUBLE|REAL", re.IGNORECASE)


def _refuse_null_keys(db: Backend, table: exp.Expression, source: Source, keys: exp.Expression) -> None:
    """:class:`InputError` in one line if some row has a NULL or NaN id (long layout) or group: a frame
    with such an id is refused, and a table's would be summed with every other such row into one output
    row.  The count, and up to five ids of rows with such a group."""
    dialect = db.sql_dialect
    count = exp.select(exp.Count(this=exp.Star())).from_(table.copy()).where(keys.copy())
    found = db.fetchall(dialect.render(count))[0][0]
    if not found:
        return
    if source.layout == "long":
        mine = null_keys(db, dataclasses.replace(source, group_column=None))
        ids = exp.select(exp.Count(this=exp.Star())).from_(table.copy()).where(mine)
        nulls = db.fetchall(dialect.render(ids))[0][0]
        if nulls:
            raise InputError(
                f"table {source.table!r} has {nulls} row(s) with a NULL or NaN id ({source.id_column!r}): the long "
                "layout would sum them into one output row; give every row an id, or leave those rows out"
            )
    named = _offending_ids(db, table.copy(), col(source.id_column), keys.copy())
    shown = ", ".join(repr(r[0]) for r in named)
    raise InputError(
        f"table {source.table!r} has {found} row(s) with a NULL or NaN group ({source.group_column!r}; rows with "
        f"id {shown}): pooling would sum them into one output row; give every row a group, or leave those rows out"
    )


def any_of(conditions: list[exp.Expression]) -> exp.Expression:
    """``c1 OR c2 OR ...`` as a balanced tree (:func:`~sqlrp.core.nodes.balanced`): a chain of
    2,352 ORs (784 features) is deeper than SQLite's 1,000 levels; balanced it is 12 deep."""
    return balanced(conditions, exp.Or)


def _offending_ids(db: Backend, table: exp.Expression, key: exp.Expression, condition: exp.Expression) -> list:
    """Up to five rows (their key) meeting ``condition``; none, in the usual case, after one count.
    The count comes first because PostgreSQL plans ``... LIMIT 5`` serially and ``count(*)`` with
    parallel workers (``PYTHONPATH=. python -m bench.probes pg-check``)."""
    dialect = db.sql_dialect
    count = exp.select(exp.Count(this=exp.Star())).from_(table, copy=False).where(condition, copy=False)
    if not db.fetchall(dialect.render(count))[0][0]:
        return []
    ids = exp.select(key).from_(table, copy=False).where(condition, copy=False).limit(5, copy=False)
    return db.fetchall(dialect.render(ids))  # reuses the nodes of the count query, already rendered


def _suspect_rows(
    db: Backend,
    table: exp.Expression,
    values: list[Callable[[], exp.Expression]],
    source: Source,
    dialect: SqlrpDialect,
) -> bool:
    """True if some row's features might hold NULL or NaN, by one sum per row: the sum is NULL if a
    feature is NULL and NaN if one is NaN (or if +inf and -inf meet: the exact check then clears the
    row).  Only for engines whose float sums overflow to infinity instead of raising
    (``SqlrpDialect.nan_propagating_sums``); NULLs count as 0 under ``nulls="zero"``."""

    inputs = Inputs(feature_input(v(), source) for v in values)  # rendered once, read by every group's sum

    def total() -> exp.Expression:
        out: exp.Expression | None = None
        for start in range(0, len(inputs), 32):  # chains of 32: DuckDB binds long chains slowly
            idx = np.arange(start, min(start + 32, len(inputs)))
            part = SignedSum.of(inputs, idx, np.ones(len(idx)))
            out = part if out is None else exp.Add(this=out, expression=part)
        assert out is not None
        return out

    # an infinite feature makes the sum infinite or NaN; so may finite ones that overflow (the exact
    # check then clears the row)
    suspect: exp.Expression = dialect.not_finite(total())
    if source.nulls == "error":
        suspect = exp.Or(this=exp.Is(this=total(), expression=exp.Null()), expression=suspect)
    query = exp.select(exp.Literal.number(1)).from_(table).where(suspect).limit(1)
    sql = db.sql_dialect.render(query)
    limit = dialect.max_statement_bytes
    if limit is not None and len(sql.encode()) > limit:  # past the engine's query size (ClickHouse at d =
        return True  # 5,000): every row is suspect, and the exact check runs in statements that fit
    return bool(db.fetchall(sql))


def check_outputs(db: Backend, table: exp.Table, key: str, names: list[str], array_length: int | None = None) -> None:
    """Fail if a projected value is not finite.  Finite features can still overflow: three values of
    1e308 in one sum are infinity on DuckDB, without an error (``tests/reliability/test_reliability.py``), where
    PostgreSQL raises; the check runs on every engine.  Run on the written table inside the caller's
    transaction (or before the staged table is swapped in), so that a failure leaves nothing behind.
    ``array_length``: ``names`` is one array column of that many values (each read by its index)."""
    dialect = db.sql_dialect
    if array_length is not None:
        (name,) = names
        at = [exp.Literal.number(i) for i in range(array_length)]  # 0-based: sqlglot shifts it per engine
        values = [exp.Bracket(this=col(name), expressions=[i], offset=0) for i in at]
    else:
        values = [col(n) for n in names]
    # NULL too: SQLite stores a NaN as NULL, so an overflowed output (inf - inf) is written as NULL
    conds = [exp.or_(dialect.not_finite(v), exp.Is(this=v.copy(), expression=exp.Null())) for v in values]
    bad = _offending_ids(db, table, col(key), any_of(conds))
    if bad:
        raise overflow_error(r[0] for r in bad)


def check_frame_outputs(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """:func:`check_outputs` for rows handed back as a DataFrame (wide or array outputs)."""
    values = frame.drop(columns=[key])
    if values.shape[1] == 1 and pd.api.types.is_object_dtype(values.dtypes.iloc[0]):  # an array output
        finite = np.array([np.isfinite(np.asarray(v, dtype=float)).all() for v in values.iloc[:, 0]], dtype=bool)
    else:
        finite = np.isfinite(values.to_numpy(dtype=float)).all(axis=1)
    check_finite_rows(frame[key].to_numpy(), finite)
    return frame


def check_finite_rows(ids: np.ndarray, finite: np.ndarray) -> None:
    """Raise the overflow error naming up to five of the ``ids`` whose row is not ``finite``."""
    if not finite.all():
        raise overflow_error(ids[~finite][:5])
