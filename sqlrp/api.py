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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from . import files, outputs, reference
from .backends import Backend, connect
from .compiler import (
    REGISTRY_ENTRY_TABLE,
    Output,
    Source,
    check_output_columns,
    col,
    compile_sql,
    compile_statements,
    ident,
)
from .dialects import SqlrpDialect, get_dialect
from .errors import InputError, InvalidParameter, ProjectionExists
from .ir import Composed, Projection
from .lazy import pd
from .materialise import file_target, materialise, output_table, run, staged, top_up_through_staging, write_file
from .methods import make_projection
from .methods.sparsity import data_sparsity
from .moments import table_kurtosis
from .sources import (  # noqa: F401 - the API's first stage
    check_frame_outputs,
    check_outputs,
    check_source,
    describe,
    infer_d,
    resolve_source,
)
from .store import REGISTRY_TABLES, Registry
from .transfer import is_projection_file, read_projection

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
    seed: int | None = None,
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
    dtype: str = "float64",
    d: int | None = None,
    save_as: str | None = None,
    standardize: bool = False,
    catalog: str | None = None,
    **params: Any,
) -> Plan:
    """Resolve the table, then load (``projection`` = a stored name that exists), reuse (a
    ``Projection``), or generate and store (``method``, ``k``, ...) the projection.

    ``dtype="float32"`` stores the outputs as 4-byte floats (DuckDB, PostgreSQL; refused elsewhere).
    ``standardize=True`` centres and scales every feature in SQL before projecting (means and standard
    deviations computed over the table now, then inlined in the SQL); recommended for the
    polynomial-kernel methods on raw data (see :mod:`sqlrp.methods.kernel`).

    Names are taken exactly as given, each part on its own: ``catalog``, ``schema`` and ``table``
    (a dot inside ``table`` is part of the name, never a separator)."""
    source = resolve_source(
        db,
        table,
        id_column,
        layout,
        columns,
        array_column,
        feature_column,
        value_column,
        schema,
        nulls,
        group_column,
        catalog=catalog,
    )
    if source.layout != "long":  # sizes the pairs planner's time (compiler.strategies.planner_seconds)
        source = dataclasses.replace(source, rows=db.estimate_rows(source.table, source.schema, source.catalog))
    registry = _registry(db)
    if isinstance(projection, str) and is_projection_file(projection) and not registry.exists(projection):
        projection = dataclasses.replace(read_projection(projection), name=None)  # a file's, stored nowhere
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
        stored_seed = getattr(proj, "seed", None)
        if seed is not None and stored_seed is not None and seed != stored_seed:
            raise InvalidParameter(
                f"stored projection {projection!r} has seed = {stored_seed}, not {seed}; drop --seed or choose a new "
                "--projection name"
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
        seed = 0 if seed is None else seed
        params = data_sparsity(method, params, lambda: table_kurtosis(db, source, d_in, standardize))  # issue 24
        proj = make_projection(method, d_in, k, seed=seed, **params)
        name = projection if isinstance(projection, str) else save_as
        if name is None:
            name, same = default_name(registry, proj, f"{files.label(table)}_{method}_k{k}_seed{seed}")
            if same is not None:
                proj = same
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
    return Plan(proj, source, Output(form=output, prefix=prefix, array_name=prefix, dtype=dtype))


def default_name(registry: Registry, proj: Projection, base: str) -> tuple[str, Projection | None]:
    """The name to store a generated projection under, and the stored projection to reuse if one of
    the same d, parameters and seed is there: ``base`` (``{table}_{method}_k{k}_seed{seed}``) when it is
    free or holds the same projection, else ``base`` and a digest of d and the parameters, so that
    projections differing only in, say, the degree never share a default name."""
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps([proj.d, proj.params], sort_keys=True, default=str).encode()).hexdigest()
    for name in (base, f"{base}_{digest[:8]}"):
        if not registry.exists(name):
            return name, None
        stored = registry.load(name)
        if stored.d == proj.d and stored.params == proj.params and getattr(stored, "seed", None) == proj.seed:
            return name, stored
    raise ProjectionExists(f"the default names {base!r} and {base}_{digest[:8]!r} hold other projections; pass a name")


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
    from .compiler.strategies import pairs_worth_planning, planner_seconds, prefers_lists, prefers_long

    proj = p.projection
    if not (isinstance(proj, Projection) and proj.name and p.source.layout in ("wide", "array")):
        return
    nested = get_dialect(dialect).nested_plans
    if strategy == "auto" and (prefers_lists(proj, p.source, dialect) or prefers_long(proj, p.source, dialect)):
        return  # the compiler takes lists or unnests this small table: no pairs
    if strategy == "pairs" or (strategy == "auto" and nested and pairs_worth_planning(proj.linear)):
        _registry(db).pairs_plan(proj, dialect, planner_seconds(proj.linear, p.source.rows))


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
    output_format: str = "pandas",
    **options: Any,
) -> Any:
    """Project ``table`` inside the database.

    Returns the projected rows as a DataFrame ordered by id (with ``chunk_rows``: an iterator of
    DataFrames of at most that many rows, streamed from the database -- never one giant fetch), or
    with ``into`` materialises them as a table (``view=True``: a view) and returns ``None``; an
    ``into`` ending in ``.parquet``, ``.csv`` or ``.json`` is a file, written by DuckDB with the
    projection beside it (:func:`sqlrp.materialise.write_file`), and the files written are returned.
    ``table`` may name a file or a glob on DuckDB (:mod:`sqlrp.files`); ``projection`` a
    projection file (``*.sqlrp.json``, or a ``projections export``).
    ``output_format``: ``"pandas"``, ``"arrow"`` (a ``pyarrow.Table``; from DuckDB without a pandas
    copy), ``"polars"`` or ``"numpy"`` (``(ids, Y)``), for the rows and for each chunk (:mod:`sqlrp.outputs`).
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
    if into is None:
        outputs.check_format(output_format)
    elif files.output_format(into) is not None:  # a file (sqlrp.files): refused here, before any work
        file_target(db, into, replace, view, incremental)
    p = plan(db, table, id_column, projection, **options)
    if check:
        check_source(db, p.projection, p.source)
    _stored_pairs_plan(db, p, db.dialect, strategy)
    dialect = get_dialect(db.dialect)
    key = p.source.group_column or p.source.id_column

    def written(name: str) -> None:
        """Nothing non-finite was written (``check``), before the commit or the swap."""
        if check:
            length = p.projection.k if p.output.form == "array" else None
            check_outputs(db, output_table(p.source, name), key, p.output.names(p.projection.k), length)

    compile_opts = dict(matrix=_matrix(db, p, matrix), strategy=strategy, block=block, bind=db.binds_constants)
    if into is not None and files.output_format(into) is not None:
        return write_file(db, p, into, compile_opts, replace, check, progress)
    if into is None:
        statements = compile_statements(
            p.projection, p.source, db.dialect, p.output, ordered=ordered, pretty=False,
            **{**compile_opts, "bind": compile_opts["bind"] and not chunk_rows},  # chunks outlive run()
        )
        if chunk_rows:
            if statements.setup:
                raise dialect.refuse("this projection needs staged blocks: project it into= a table, then read that")
            columns = [key, *p.output.names(p.projection.k)]
            chunks = outputs.fetch_chunks(db, statements.main, int(chunk_rows), output_format, columns)
            return (outputs.check_finite(c, key, output_format) for c in chunks) if check else chunks
        settings = dialect.local_settings(p.source)
        with db.transaction():
            for statement in settings:
                db.execute(statement)
            result = run(db, statements, lambda sql: outputs.fetch(db, sql, output_format))
        return outputs.check_finite(result, key, output_format) if check else result
    if not into:
        raise InvalidParameter("into must name a table (an empty name writes nothing)")
    check_output_names(dialect, p, into)
    if dialect.same_identifier(into, table):  # the output goes to the source's schema (output_table)
        same = f": {db.dialect} takes {into!r} for {table!r} (it ignores case)" if into != table else ""
        raise InvalidParameter(
            f"the output table must not be the input table (sqlrp never writes the source){same}; choose another name"
        )
    if incremental and view:
        raise InvalidParameter("incremental projection writes rows into a table; it cannot make a view")

    def existing() -> bool | None:
        """Whether ``into`` exists; ``None`` once a top-up has added the missing ids to it."""
        exists = _exists(db, into, p.source)
        if incremental and exists:
            missing = _not_yet_projected(dialect, p.source, into)
            if db.transactional:
                materialise(db, p, missing, into, compile_opts, progress, create=False)
                written(into)
            else:  # no rollback here: build and check the new rows aside, then append them
                def build(name: str) -> None:
                    materialise(db, p, missing, name, compile_opts, progress, create=True)
                    written(name)

                top_up_through_staging(db, p.source, into, build)
            return None
        if exists and not replace:
            raise ProjectionExists(
                f"table {into!r} already exists; pass replace=True (--replace) or choose another name"
            )
        return exists

    if not view and not db.transactional:  # build under a staging name, then swap it in (materialise.staged)
        exists = existing()
        if exists is None:
            return None
        with staged(db, p.source, into, replace_existing=exists) as name:
            materialise(db, p, p.source, name, compile_opts, progress, create=True)
            written(name)
        return None
    with db.transaction():
        # one writer per output table at a time (PostgreSQL: an advisory lock held to the commit), and
        # whether it exists is read under that lock: concurrent top-ups add each id exactly once
        db.lock(f"sqlrp output {p.source.catalog}.{p.source.schema}.{into}")
        exists = existing()
        if exists is None:
            return None
        if exists:
            kind = "VIEW" if db.is_view(into, p.source.schema) else "TABLE"
            db.execute(dialect.render(exp.Drop(tables=[output_table(p.source, into)], kind=kind)))
        if view:
            text_opts = {k: v for k, v in compile_opts.items() if k != "bind"}  # a view outlives the bound constants
            db.execute(compile_sql(p.projection, p.source, db.dialect, p.output, into=into, view=True, **text_opts))
        else:
            materialise(db, p, p.source, into, compile_opts, progress, create=True)
            written(into)
    return None


def _not_yet_projected(dialect: SqlrpDialect, source: Source, into: str) -> Source:
    """``source`` restricted to the ids not yet in the output table ``into``: ``NOT EXISTS`` (a hash
    anti-join on PostgreSQL; ``NOT IN (sub-query)`` is planned there as a sub-plan per row once the ids
    outgrow ``work_mem``), or ``NOT IN`` where correlated sub-queries are missing (ClickHouse)."""
    key = source.group_column or source.id_column
    done_table = output_table(source, into)
    done_table.set("alias", exp.TableAlias(this=ident("_sqlrp_done")))
    done = exp.select(exp.Literal.number(1)).from_(done_table)
    if dialect.correlated_subqueries:
        done = done.where(col(key, "_sqlrp_done").eq(col(key, source.table)))
        return dataclasses.replace(source, row_filter=exp.Not(this=exp.Exists(this=done)))
    ids = exp.select(col(key)).from_(output_table(source, into))
    ids = ids.where(exp.Not(this=exp.Is(this=col(key), expression=exp.Null())))
    return dataclasses.replace(source, row_filter=exp.Not(this=exp.In(this=col(key), query=ids.subquery())))


def check_output_names(dialect: SqlrpDialect, p: Plan, into: str) -> None:
    """Refuse, before any work, an output the engine could not hold as named or that would clobber
    something: a registry table, a name the engine truncates (PostgreSQL: 63 bytes), output columns
    that repeat the key."""
    dialect.check_table_name(into)
    if dialect.fold(into).casefold() in REGISTRY_TABLES:
        raise InvalidParameter(f"{into!r} is one of sqlrp's registry tables; choose another output name")
    dialect.check_identifier(into, "output table name")
    key = p.source.group_column or p.source.id_column
    names = p.output.names(p.projection.k)
    for name in names[-1:] if p.output.form == "wide" else names:  # the longest name is the last
        dialect.check_identifier(name, "output column name (--prefix + index)")
    check_output_columns(dialect, key, names)


def _exists(db: Backend, name: str, source: Source) -> bool:
    try:
        describe(db, name, source.schema, source.catalog)
    except InputError:
        return False
    return True


def _matrix(db: Backend, p: Plan, matrix: str) -> str:
    """``auto``: the registry's rows if this database holds the projection's matrix (as many rows
    under its name as it has non-zeros: a projection named but stored elsewhere, or never, would
    join no rows and project to zeros), else the matrix inlined as ``VALUES``."""
    if matrix != "auto":
        return matrix
    proj = p.projection
    if not getattr(proj, "name", None):
        return "values"
    if not isinstance(proj, Projection):  # a named composition: its stages are stored under their own names
        return "registry"
    _registry(db)  # its tables exist from here on
    held = db.fetchall(f"SELECT count(*) FROM {REGISTRY_ENTRY_TABLE} WHERE projection = ?", [proj.name])
    return "registry" if held and held[0][0] == proj.linear.nnz else "values"


def transform_frame(
    projection: Projection | Composed, frame: Any, columns: Sequence[str] | None = None, prefix: str = "p"
) -> Any:
    """In-memory projection of a DataFrame with the NumPy reference (same numbers as the SQL path).
    ``frame`` may be pandas, polars or a ``pyarrow.Table`` (the result is of the same kind, columns
    ``{prefix}0 ..``), or a 2-D NumPy array or list of rows, features in order, as scikit-learn takes
    them (the result is an ``n x k`` array).  Wrong widths, missing columns and NULL/NaN/infinite
    values raise :class:`~sqlrp.errors.InputError` naming them."""
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
    out = pd.DataFrame(reference.transform(projection, X), columns=[f"{prefix}{j}" for j in range(projection.k)])
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


from .report import evaluate  # noqa: E402
from .tuning import tune  # noqa: E402
