"""The Python API.  The CLI (:mod:`sqlrp.cli`) mirrors it name for name.

    db = sqlrp.connect("duckdb:///digits.db")
    proj = sqlrp.create_projection(db, "digits_k40", method="achlioptas", d=64, k=40, s="auto", seed=1)
    df = sqlrp.project(db, "digits", "id", "digits_k40")  # DataFrame
    sqlrp.project(db, "digits", "id", "digits_k40", into="digits_rp")  # table
    print(sqlrp.compile_projection(db, sqlrp.plan(db, "digits", "id", "digits_k40"), dialect="spark"))

``tune`` (DT-RP / best-of-n, :mod:`sqlrp.tuning`) and ``evaluate`` (metrics and report,
:mod:`sqlrp.report`) live in their own modules and are imported at the end of this one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlglot import exp

from . import reference
from .backends import Backend, ColumnInfo, connect
from .compiler import (
    Output,
    Source,
    as_double,
    col,
    compile_select,
    compile_sql,
    dense_source,
    feature_input,
    ident,
)
from .compiler.nodes import Inputs, SignedSum, gc_paused
from .dialects import get_dialect
from .errors import InputError, InvalidParameter, ProjectionExists
from .ir import Composed, Projection
from .methods import make_projection
from .store import Registry

__all__ = [
    "compile_projection",
    "connect",
    "copy_projection",
    "create_projection",
    "drop_projection",
    "evaluate",
    "list_projections",
    "load_projection",
    "project",
    "resolve_source",
    "transform_frame",
    "tune",
]


def _registry(db: Backend) -> Registry:
    return Registry(db)


def create_projection(
    db: Backend | None,
    name: str | None,
    method: str = "achlioptas",
    d: int = 0,
    k: int = 0,
    seed: int | None = 0,
    replace: bool = False,
    **params: Any,
) -> Projection:
    """Generate a projection (``d`` inputs, ``k`` outputs) and, if ``db`` is given, store it as ``name``."""
    projection = make_projection(method, d, k, seed=seed, **params)
    projection.name = name
    if db is not None:
        if not name:
            raise InvalidParameter("give the projection a name to store it")
        _registry(db).save(projection, name, replace=replace)
    return projection


def load_projection(db: Backend, name: str) -> Projection:
    """The projection stored as ``name``."""
    return _registry(db).load(name)


def list_projections(db: Backend) -> pd.DataFrame:
    """All stored projections, one row each."""
    return _registry(db).list()


def copy_projection(db: Backend, name: str, to: Backend, new_name: str | None = None, replace: bool = False) -> None:
    """Copy the stored projection ``name`` from ``db`` into the registry of ``to`` (another database),
    so that both project with the identical matrix."""
    _registry(to).save(_registry(db).load(name), new_name or name, replace=replace)


def drop_projection(db: Backend, name: str) -> None:
    """Delete the stored projection ``name``."""
    _registry(db).drop(name)


# ----------------------------------------------------------------------------------------------
# input tables


def resolve_source(
    db: Backend,
    table: str,
    id_column: str,
    layout: str = "wide",
    columns: Sequence[str] | None = None,
    array_column: str | None = None,
    feature_column: str = "feature",
    value_column: str = "value",
    schema: str | None = None,
    nulls: str = "error",
    group_column: str | None = None,
) -> Source:
    """Check the table and columns exist and are numeric; fill in the default feature columns."""
    info = {c.name: c for c in db.columns(table, schema)}
    where = f"table {table!r}"

    def need(name: str | None, what: str) -> ColumnInfo:
        if name is None or name not in info:
            raise InputError(f"{where} has no {what} column {name!r}; its columns are: {', '.join(list(info)[:50])}")
        return info[name]

    need(id_column, "id")
    if group_column is not None:
        need(group_column, "group")
    keys = {id_column, group_column}
    if layout == "wide":
        if columns:
            chosen = list(columns)
            dupes = {c for c in chosen if chosen.count(c) > 1}
            if dupes:
                raise InputError(f"feature columns listed twice: {sorted(dupes)}")
            for c in chosen:
                if not need(c, "feature").numeric:
                    raise InputError(
                        f"column {c!r} of {where} has type {info[c].type}, not a number; "
                        "leave it out of --columns or cast it in a view"
                    )
        else:
            chosen = [c.name for c in info.values() if c.numeric and c.name not in keys]
            if not chosen:
                raise InputError(f"{where} has no numeric feature columns besides the id; name them with --columns")
        return Source(table, id_column, "wide", tuple(chosen), schema=schema, nulls=nulls, group_column=group_column)
    if layout == "array":
        if array_column is None:
            arrays = [c.name for c in info.values() if c.numeric_array]
            if len(arrays) != 1:
                raise InputError(f"{where}: name the array column with --array-column (numeric arrays: {arrays})")
            array_column = arrays[0]
        if not need(array_column, "array").numeric_array:
            raise InputError(
                f"column {array_column!r} of {where} has type {info[array_column].type}, "
                "not a numeric array (DuckDB DOUBLE[] / PostgreSQL float8[])"
            )
        return Source(
            table, id_column, "array", array_column=array_column, schema=schema, nulls=nulls, group_column=group_column
        )
    if layout == "long":
        need(feature_column, "feature")
        if not info[feature_column].numeric:
            raise InputError(f"the feature column {feature_column!r} must hold integer feature indices 0..d-1")
        if not need(value_column, "value").numeric:
            raise InputError(f"the value column {value_column!r} has type {info[value_column].type}, not a number")
        return Source(
            table,
            id_column,
            "long",
            feature_column=feature_column,
            value_column=value_column,
            schema=schema,
            nulls=nulls,
            group_column=group_column,
        )
    raise InvalidParameter(f"unknown layout {layout!r}; choose wide, long or array")


def infer_d(db: Backend, source: Source) -> int:
    """The input dimension of ``source``: column count (wide), array length, or max feature + 1 (long)."""
    if source.layout == "wide":
        return len(source.columns)
    info = {c.name: c for c in db.columns(source.table, source.schema)}
    dialect = get_dialect(db.dialect)
    table = exp.Table(this=ident(source.table), db=ident(source.schema) if source.schema else None)
    if source.layout == "array":
        assert source.array_column is not None
        if info[source.array_column].length:
            return int(info[source.array_column].length)  # type: ignore[arg-type]
        agg = exp.Max(this=exp.ArraySize(this=col(source.array_column), expression=exp.Literal.number(1)))
    else:
        agg = exp.Max(this=col(source.feature_column)) + exp.Literal.number(1)
    value = db.fetchall(dialect.render(exp.select(agg).from_(table)))[0][0]
    if value is None:
        raise InputError(f"cannot infer d from the empty table {source.table!r}; pass d explicitly (--d)")
    return int(value)


@gc_paused
def check_source(db: Backend, projection: Projection, source: Source) -> None:
    """Fail with a clear message if any row has NULL/NaN features, a wrong array length, or a feature
    index outside ``[0, d)``.  Nothing is written.

    Wide and array layouts on engines whose float sums overflow to infinity (DuckDB) first add up
    each row's features -- NULL if one is NULL, NaN if one is NaN -- and look feature by feature only
    if some sum is: 200,000 x 784 in 0.1 s instead of 0.3 s (``bench/run.py``, ``sqlrp_check``)."""
    dialect = get_dialect(db.dialect)
    table: exp.Expression = exp.Table(this=ident(source.table), db=ident(source.schema) if source.schema else None)

    def nan() -> exp.Expression:
        return as_double(exp.Literal.string("NaN"))

    def bad_value(e: Callable[[], exp.Expression]) -> exp.Expression:
        cond: exp.Expression = exp.EQ(this=as_double(e()), expression=nan())
        if source.nulls == "error":
            cond = exp.Or(this=exp.Is(this=e(), expression=exp.Null()), expression=cond)
        return cond

    values: list[Callable[[], exp.Expression]] | None = None  # the features (wide and array layouts)
    if source.layout == "wide":
        values = [lambda c=c: col(c) for c in source.columns]
        what = "NULL or NaN in feature columns"
        key = source.id_column
    elif source.layout == "array":
        # lengths first (one detoast per row), then elements through the compiler's own source
        # relation, which detoasts once per row on PostgreSQL (x[i] on the raw column would not)
        a = col(source.array_column)  # type: ignore[arg-type]
        length = exp.ArraySize(this=a.copy(), expression=exp.Literal.number(1))
        wrong = exp.or_(
            exp.Is(this=a.copy(), expression=exp.Null()),
            exp.NEQ(this=length, expression=exp.Literal.number(projection.d)),
        )
        bad = _offending_ids(db, table, col(source.id_column), wrong)
        if bad:
            ids = ", ".join(repr(r[0]) for r in bad)
            raise InputError(
                f"table {source.table!r} has NULL arrays or arrays whose length is not "
                f"d = {projection.d} (rows with id {ids}); fix them or use a projection of that d"
            )
        table = dense_source(projection, dataclasses.replace(source, group_column=None), dialect).subquery("src")
        values = [lambda i=i: col(f"_x{i}") for i in range(projection.d)]
        what = "NULL or NaN array elements"
        key = "_id"
    else:
        what = f"a NULL/NaN value or a feature index outside [0, {projection.d})"
        key = source.id_column
    if values is not None:
        if dialect.nan_propagating_sums and not _suspect_rows(db, table, values, source, nan):
            return
        conds = [bad_value(v) for v in values]
    else:
        f = source.feature_column
        conds = [
            exp.Is(this=col(f), expression=exp.Null()),
            col(f) < exp.Literal.number(0),
            col(f) >= exp.Literal.number(projection.d),
            bad_value(lambda: col(source.value_column)),  # type: ignore[arg-type]
        ]
    condition = conds[0]
    for c in conds[1:]:
        condition = exp.Or(this=condition, expression=c)
    bad = _offending_ids(db, table, col(key), condition)
    if bad:
        ids = ", ".join(repr(r[0]) for r in bad)
        hint = (
            " Clean the data, or pass nulls='zero' (--nulls zero) to treat NULL as 0."
            if source.nulls == "error" and source.layout != "array"
            else " Clean the data first."
        )
        raise InputError(f"table {source.table!r} has {what} (rows with id {ids}).{hint}")


def _offending_ids(db: Backend, table: exp.Expression, key: exp.Expression, condition: exp.Expression) -> list:
    """Up to five rows (their key) meeting ``condition``; none, in the usual case, after one count.
    The count comes first because PostgreSQL plans ``... LIMIT 5`` serially and ``count(*)`` with
    parallel workers (clean 50,000 x 784 table: 0.60 s -> 0.33 s, ``bench/probes.py pg-check``)."""
    dialect = get_dialect(db.dialect)
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
    nan: Callable[[], exp.Expression],
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

    suspect: exp.Expression = exp.EQ(this=total(), expression=nan())
    if source.nulls == "error":
        suspect = exp.Or(this=exp.Is(this=total(), expression=exp.Null()), expression=suspect)
    query = exp.select(exp.Literal.number(1)).from_(table).where(suspect).limit(1)
    return bool(db.fetchall(get_dialect(db.dialect).render(query)))


# ----------------------------------------------------------------------------------------------
# projecting


@dataclass
class Plan:
    """A projection bound to an input table: what ``project`` and ``compile_projection`` run.

    ``source.standardize`` holds ``(means, stds)`` of the features when the input is standardised in
    SQL (``plan(..., standardize=True)``; :mod:`sqlrp.compiler.preprocess`)."""

    projection: Projection | Composed
    source: Source
    output: Output


def feature_stats(db: Backend, projection: Projection | Composed, source: Source) -> tuple[list[float], list[float]]:
    """Per-feature mean and population standard deviation of ``source``, computed in the database."""
    from .compiler.preprocess import stats_query

    dialect = get_dialect(db.dialect)
    row = db.fetchall(dialect.render(stats_query(projection, source, dialect)))[0]
    means = [float(v) if v is not None else 0.0 for v in row[0::2]]
    stds = [float(v) if v is not None else 1.0 for v in row[1::2]]
    return means, stds


def plan(
    db: Backend,
    table: str,
    id_column: str,
    projection: str | Projection | None = None,
    method: str | None = None,
    k: int | None = None,
    seed: int | None = 0,
    layout: str = "wide",
    columns: Sequence[str] | None = None,
    array_column: str | None = None,
    feature_column: str = "feature",
    value_column: str = "value",
    schema: str | None = None,
    nulls: str = "error",
    group_column: str | None = None,
    output: str = "wide",
    prefix: str = "p",
    d: int | None = None,
    save_as: str | None = None,
    standardize: bool = False,
    **params: Any,
) -> Plan:
    """Resolve the table, then load (``projection`` = a stored name that exists), reuse (a
    ``Projection``), or generate and store (``method``, ``k``, ...) the projection.

    ``standardize=True`` centres and scales every feature in SQL before projecting (means and standard
    deviations computed over the table now, then inlined in the SQL); recommended for the
    polynomial-kernel methods on raw data (see :mod:`sqlrp.methods.kernel`)."""
    source = resolve_source(
        db, table, id_column, layout, columns, array_column, feature_column, value_column, schema, nulls, group_column
    )
    registry = _registry(db)
    if isinstance(projection, (Projection, Composed)):
        proj = projection
    elif isinstance(projection, str) and registry.exists(projection):
        proj = registry.load(projection)
        if k is not None and k != proj.k:
            raise InvalidParameter(
                f"stored projection {projection!r} has k = {proj.k}, not {k}; drop --k or use another name"
            )
        if method is not None and method != proj.method:
            raise InvalidParameter(
                f"stored projection {projection!r} has method {proj.method}, not {method}; drop --method "
                "or choose a new --projection name"
            )
        stored = proj.params
        differ = sorted(
            key
            for key, value in params.items()
            if value is not None and value not in (stored.get(key), stored.get(f"{key}_requested"))
        )
        if differ:
            raise InvalidParameter(
                f"stored projection {projection!r} has other {', '.join(differ)} ({stored}); it is reused as "
                "stored: drop those options or choose a new --projection name"
            )
    else:
        method = method or "achlioptas"
        if k is None:
            raise InvalidParameter("give k (the output dimension) or the name of a stored projection")
        d_in = d if d is not None else infer_d(db, source)
        proj = make_projection(method, d_in, k, seed=seed, **params)
        name = projection if isinstance(projection, str) else save_as
        if name is None:
            name = f"{table}_{method}_k{k}_seed{seed}"
            if registry.exists(name):
                stored = registry.load(name)
                if stored.d == proj.d and stored.params == proj.params:
                    proj = stored
        if proj.name is None:
            registry.save(proj, name)
    d_in = infer_d(db, source) if source.layout != "long" else proj.d
    if source.layout == "wide" and d_in != proj.d:
        raise InputError(
            f"projection {proj.name!r} expects d = {proj.d} features but table {table!r} gives {d_in} "
            f"({', '.join(source.columns[:10])}{', ...' if d_in > 10 else ''}); choose the matching "
            "--columns or create a projection for this table"
        )
    if source.layout == "array" and d_in != proj.d:
        raise InputError(
            f"projection {proj.name!r} expects arrays of length d = {proj.d} but "
            f"{source.array_column!r} holds length {d_in}"
        )
    if standardize:
        means, stds = feature_stats(db, proj, source)
        source = dataclasses.replace(source, standardize=(tuple(means), tuple(stds)))
    return Plan(proj, source, Output(form=output, prefix=prefix, array_name=prefix))


def compile_projection(
    db: Backend | None,
    plan_: Plan,
    dialect: str | None = None,
    into: str | None = None,
    view: bool = False,
    matrix: str = "auto",
    strategy: str = "auto",
    block: int | None = None,
) -> str:
    """SQL text of a plan for ``dialect`` (default: the database's own)."""
    dialect_name = dialect or (db.dialect if db is not None else "duckdb")
    if db is not None:
        _stored_pairs_plan(db, plan_, get_dialect(dialect_name).name, strategy)
    if matrix == "auto":
        same_db = db is not None and get_dialect(dialect_name).name == db.dialect
        matrix = "registry" if (same_db and plan_.projection.name) else "values"
    return compile_sql(
        plan_.projection,
        plan_.source,
        dialect_name,
        plan_.output,
        into=into,
        view=view,
        matrix=matrix,
        strategy=strategy,
        block=block,
    )


def _stored_pairs_plan(db: Backend, p: Plan, dialect: str, strategy: str) -> None:
    """If the compiler may plan ``pairs`` for a stored projection (forced, or ``auto`` where
    :func:`~sqlrp.compiler.strategies.pairs_worth_planning` says so), take the registry's plan, or
    plan it once and store it there (:meth:`Registry.pairs_plan`)."""
    from .compiler.strategies import pairs_worth_planning

    proj = p.projection
    if not (isinstance(proj, Projection) and proj.name and p.source.layout in ("wide", "array")):
        return
    nested = get_dialect(dialect).nested_plans
    if strategy == "pairs" or (strategy == "auto" and nested and pairs_worth_planning(proj.linear)):
        _registry(db).pairs_plan(proj, dialect)


def project(
    db: Backend,
    table: str,
    id_column: str,
    projection: str | Projection | None = None,
    *,
    into: str | None = None,
    view: bool = False,
    replace: bool = False,
    check: bool = True,
    matrix: str = "auto",
    strategy: str = "auto",
    block: int | None = None,
    chunk_rows: int | None = None,
    incremental: bool = False,
    progress: bool | int = False,
    ordered: bool = True,
    **options: Any,
) -> pd.DataFrame | Iterator[pd.DataFrame] | None:
    """Project ``table`` inside the database.

    Returns the projected rows as a DataFrame ordered by id (with ``chunk_rows``: an iterator of
    DataFrames of at most that many rows, streamed from the database -- never one giant fetch), or
    with ``into`` materialises them as a table (``view=True``: a view) and returns ``None``.
    Materialisation is one transaction: on any failure no output table is left, and the source table
    is never written.

    ``strategy``: ``auto`` (the compiler's measured choice) or ``inline`` / ``pairs`` / ``mailman`` (wide, array),
    ``join`` / ``lookup`` (long); ``block`` forces mailman's block size.
    ``incremental=True`` (with ``into``): if ``into`` exists, insert only the rows whose id is not in
    it yet -- running twice adds nothing.  ``progress`` (with ``into``; opt-in): a tqdm bar.  ``True``
    on DuckDB follows the engine's own progress through one statement; on PostgreSQL, which reports
    none, it materialises in id-range batches (up to 10 of at least 20,000 rows); an integer asks
    for that many batches on any engine (each batch is planned anew: one statement is faster).
    ``ordered=False`` drops the ``ORDER BY id`` of returned rows: under a tight DuckDB
    ``memory_limit`` the sort of a large result is what runs out of memory; unordered chunks stream.
    See :func:`plan` for the other options (``method``, ``k``, ``s``, ``seed``, ``layout``, ``columns``...).
    """
    p = plan(db, table, id_column, projection, **options)
    if check:
        check_source(db, p.projection, p.source)
    _stored_pairs_plan(db, p, db.dialect, strategy)
    dialect = get_dialect(db.dialect)
    key = p.source.group_column or p.source.id_column
    compile_opts = dict(matrix=_matrix(db, p, matrix), strategy=strategy, block=block)
    if into is None:
        select = compile_select(p.projection, p.source, db.dialect, p.output, **compile_opts)
        if ordered:
            select = select.order_by(col(key), copy=False)
        if chunk_rows:
            return db.iter_chunks(dialect.render(select), rows=int(chunk_rows))
        settings = dialect.local_settings(p.source)
        if not settings:
            return db.query_df(dialect.render(select))
        with db.transaction():
            for statement in settings:
                db.execute(statement)
            return db.query_df(dialect.render(select))
    if into == table and (p.source.schema is None):
        raise InvalidParameter("the output table must not be the input table (sqlrp never writes the source)")
    target = ident(into).sql(dialect.sqlglot)
    if p.source.schema:
        target = f"{ident(p.source.schema).sql(dialect.sqlglot)}.{target}"
    exists = db.table_exists(into, p.source.schema)
    if incremental and view:
        raise InvalidParameter("incremental projection writes rows into a table; it cannot make a view")
    if incremental and exists:
        # only the ids not yet projected: NOT IN (SELECT key FROM into)
        done = (
            exp.select(col(key))
            .from_(exp.Table(this=ident(into), db=_schema(p)))
            .where(exp.Not(this=exp.Is(this=col(key), expression=exp.Null())))
        )
        fresh = dataclasses.replace(p.source, row_filter=exp.Not(this=exp.In(this=col(key), query=done.subquery())))
        with db.transaction():
            _materialise(db, p, fresh, into, compile_opts, progress, create=False)
        return None
    with db.transaction():
        if exists:
            if not replace:
                raise ProjectionExists(
                    f"table {into!r} already exists; pass replace=True (--replace) or choose another name"
                )
            kind = "VIEW" if _is_view(db, into, p.source.schema) else "TABLE"
            db.execute(f"DROP {kind} {target}")
        if view:
            db.execute(compile_sql(p.projection, p.source, db.dialect, p.output, into=into, view=True, **compile_opts))
        else:
            _materialise(db, p, p.source, into, compile_opts, progress, create=True)
    return None


def _schema(p: Plan) -> exp.Identifier | None:
    return ident(p.source.schema) if p.source.schema else None


_PERCENT_BAR = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"


def _materialise(
    db: Backend, p: Plan, source: Source, into: str, compile_opts: dict, progress: bool | int, create: bool
) -> None:
    """``CREATE TABLE into AS`` (``create``) or ``INSERT INTO into`` the projection of ``source``
    (the caller holds the transaction).  ``progress=True`` shows a tqdm bar: the engine's own
    progress of the one statement where it reports it (DuckDB), else id-range batches; an integer
    asks for that many batches."""
    for statement in get_dialect(db.dialect).local_settings(source):
        db.execute(statement)  # SET LOCAL: ends with the caller's transaction
    if progress is True and db.reports_progress and (create or get_dialect(db.dialect).parallel_insert):
        from tqdm import tqdm

        sql = compile_sql(p.projection, source, db.dialect, p.output, into=into, insert=not create, **compile_opts)
        with tqdm(total=100, desc=f"projecting into {into}", unit="%", bar_format=_PERCENT_BAR) as bar:

            def report(percent: float) -> None:
                bar.update(max(0.0, round(percent, 1) - bar.n))

            db.execute_watched(sql, report)
        return
    batches = _id_batches(db, source, progress) if progress else [None]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(batches), desc=f"projecting into {into}", unit="batch")
    try:
        for i, condition in enumerate(batches):
            part = source
            if condition is not None:
                both = condition if source.row_filter is None else exp.and_(source.row_filter.copy(), condition)
                part = dataclasses.replace(source, row_filter=both)
            if create and i == 0:
                db.execute(compile_sql(p.projection, part, db.dialect, p.output, into=into, **compile_opts))
            else:
                _insert(db, p, part, into, compile_opts)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def _insert(db: Backend, p: Plan, source: Source, into: str, compile_opts: dict) -> None:
    """``INSERT INTO into`` the projection of ``source``.  Where the engine runs ``INSERT ... SELECT``
    serially (PostgreSQL), the rows are first made by a parallel ``CREATE TEMPORARY TABLE AS`` and
    then copied, which is cheap next to projecting them (``dialects/postgres.py``)."""
    dialect = get_dialect(db.dialect)
    if dialect.parallel_insert:
        db.execute(compile_sql(p.projection, source, db.dialect, p.output, into=into, insert=True, **compile_opts))
        return
    staging = f"_sqlrp_staging_{uuid.uuid4().hex[:12]}"
    db.execute(compile_sql(p.projection, source, db.dialect, p.output, into=staging, temporary=True, **compile_opts))
    names = [ident(n) for n in [p.source.group_column or p.source.id_column, *p.output.names(p.projection.k)]]
    target = exp.Schema(this=exp.Table(this=ident(into), db=_schema(p)), expressions=names)
    copy = exp.select(*[exp.Column(this=n.copy()) for n in names]).from_(exp.Table(this=ident(staging)))
    db.execute(dialect.render(exp.Insert(this=target, expression=copy)))
    db.execute(dialect.render(exp.Drop(tables=[exp.Table(this=ident(staging))], kind="TABLE")))


MIN_BATCH_ROWS = 20_000


def _id_batches(db: Backend, source: Source, progress: bool | int) -> list[exp.Expression | None]:
    """Conditions ``lo <= key < hi`` covering the key's range (one ``None`` if the key is not a number,
    the table is small or empty).  Each batch is planned anew, so a few large batches are best."""
    key = source.group_column or source.id_column
    info = {c.name: c for c in db.columns(source.table, source.schema)}
    if not info[key].numeric:
        return [None]
    table = exp.Table(this=ident(source.table), db=ident(source.schema) if source.schema else None)
    query = exp.select(exp.Min(this=col(key)), exp.Max(this=col(key)), exp.Count(this=exp.Star())).from_(table)
    if source.row_filter is not None:
        query = query.where(source.row_filter.copy())
    lo, hi, rows = db.fetchall(get_dialect(db.dialect).render(query))[0]
    # progress=True: up to 10 batches of >= MIN_BATCH_ROWS rows (each batch is planned anew)
    count = min(10, rows // MIN_BATCH_ROWS) if progress is True else int(progress)
    if lo is None or count <= 1:
        return [None]
    lo, hi = float(lo), float(hi)
    edges = [lo + (hi - lo) * i / count for i in range(count)]
    conds: list[exp.Expression | None] = []
    for i, edge in enumerate(edges):
        cond: exp.Expression = col(key) >= exp.Literal.number(repr(edge))
        if i + 1 < count:
            cond = exp.and_(cond, col(key) < exp.Literal.number(repr(edges[i + 1])))
        conds.append(cond)
    return conds


def _matrix(db: Backend, p: Plan, matrix: str) -> str:
    if matrix != "auto":
        return matrix
    return "registry" if p.projection.name else "values"


def _is_view(db: Backend, name: str, schema: str | None) -> bool:
    rows = db.fetchall(
        "SELECT table_type FROM information_schema.tables WHERE table_name = ? "
        "AND table_schema = coalesce(?, current_schema())",
        [name, schema],
    )
    return bool(rows) and "VIEW" in str(rows[0][0]).upper()


def transform_frame(
    projection: Projection | Composed, frame: pd.DataFrame, columns: Sequence[str] | None = None, prefix: str = "p"
) -> pd.DataFrame:
    """In-memory projection of a DataFrame with the NumPy reference (same numbers as the SQL path)."""
    cols = list(columns) if columns else list(frame.columns)
    Y = reference.transform(projection, frame[cols].to_numpy(dtype=float))
    return pd.DataFrame(Y, columns=[f"{prefix}{j}" for j in range(projection.k)], index=frame.index)


from .report import evaluate  # noqa: E402
from .tuning import tune  # noqa: E402
