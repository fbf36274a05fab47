"""The input and output checks: a table's NULL, NaN or infinite features, bad feature indexes and NULL keys
refused before a projection runs (:func:`check_source`, one scan in the usual case), and outputs that
overflowed refused after (:func:`check_outputs`, :func:`check_frame_outputs`) -- each in one line naming the
rows."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, as_double, col, dense_source, feature_input, table_ref
from ..compiler.limits import within_limits
from ..core.errors import InputError, overflow_error
from ..core.ir import Projection
from ..core.lazy import pd
from ..core.nodes import Inputs, SignedSum, balanced, gc_paused
from ..dialects import SqlrpDialect
from .sources import describe


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
        _check_array_lengths(db, table, source, d)
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
        what = _long_check_failed(db, table, source, keys, d)
    if bad:
        ids = ", ".join(repr(r[0]) for r in bad)
        hint = (
            " Clean the data, or pass --nulls=zero to treat NULL as 0."
            if source.nulls == "error" and source.layout != "array"
            else " Clean the data first."
        )
        raise InputError(f"table {source.table!r} has {what} (rows with id {ids}).{hint}")


def _check_array_lengths(db: Backend, table: exp.Expression, source: Source, d: int) -> None:
    """Refuse NULL arrays and arrays whose length is not ``d``, naming the rows."""
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


def _long_check_failed(db: Backend, table: exp.Expression, source: Source, keys: exp.Expression | None, d: int) -> str:
    """The long layout's check found rows: refuse NULL keys or bad indexes by name, else say which values."""
    if keys is not None:
        _refuse_null_keys(db, table, source, keys)
    bad = bad_index(source.feature_column, d, db.sql_dialect)
    index = _offending_ids(db, table, col(source.id_column), any_of(bad))
    if index:
        raise InputError(
            f"table {source.table!r} has feature indexes ({source.feature_column!r}) that are NULL, not integers "
            f"or outside [0, {d}) (rows with id {', '.join(repr(r[0]) for r in index)}): a feature index is an "
            "integer in [0, d); fix them, or use a projection of the d they need"
        )
    what = "NULL/NaN/infinite values" if source.nulls == "error" else "NaN or infinite values"
    return what + f" in {source.value_column!r}"


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
