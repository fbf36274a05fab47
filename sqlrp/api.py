"""The Python API.  The CLI (:mod:`sqlrp.cli`) mirrors it name for name.

    db = sqlrp.connect("duckdb:///digits.db")
    proj = sqlrp.create_projection(db, "digits_k40", method="achlioptas", d=64, k=40, s="auto", seed=1)
    df = sqlrp.project(db, "digits", "id", "digits_k40")  # DataFrame
    sqlrp.project(db, "digits", "id", "digits_k40", into="digits_rp")  # table
    print(sqlrp.compile_projection(db, sqlrp.plan(db, "digits", "id", "digits_k40"), dialect="spark"))

The planning (:mod:`sqlrp.pipeline.plan`), the materialising (:mod:`sqlrp.pipeline.materialise`), DT-RP's
tuner (:mod:`sqlrp.methods.tuning`) and the evaluation (:mod:`sqlrp.evaluation.report`) live in their own
modules; this one binds them to a database.  :func:`project` runs a plan with
:mod:`sqlrp.pipeline.projecting`, the rows going where :mod:`sqlrp.pipeline.destinations` sends them, and
a DataFrame as a table for the call with :mod:`sqlrp.pipeline.frame_table`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .backends import Backend, connect
from .compiler import compile_sql
from .compiler.guard import guarded
from .core import files
from .core.errors import InputError, InvalidParameter
from .core.files import existing_database
from .core.ir import Projection
from .core.layout import Formulation, Target
from .core.lazy import pd
from .core.params import batches, block_size, optional_positive, positive_int, whole
from .dialects import get_dialect
from .evaluation.report import evaluate
from .evaluation.sql import fetch_sample
from .methods import make_projection
from .methods.tuning import best_of_n, projection_from_dense, tune_matrix
from .pipeline import outputs, targets
from .pipeline.destinations import check_output_names  # noqa: F401 - the names sqlrp.api had before issue 35
from .pipeline.frame_table import frame_table
from .pipeline.frames import (
    frame_keys,
    is_frame,
    numbers_as_numbers,
    transform_frame,
    with_frame_ids,
    with_positions,
)
from .pipeline.materialise import file_target
from .pipeline.plan import Plan, plan, registry_of, stored_pairs_plan  # noqa: F401 - plan: sqlrp.plan
from .pipeline.progress import command_bar
from .pipeline.projecting import check_block, plan_and_project
from .pipeline.sources import (  # noqa: F401 - the API's first stage
    SOURCE_OPTIONS,
    check_frame_outputs,
    check_outputs,
    check_source,
    describe,
    infer_d,
    input_dimension,
    resolve_source,
)
from .registry.store import Registry

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
    "migrate",
    "tune",
]


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
        registry_of(db).save(projection, name, replace=replace)
    return projection


def load_projection(db: Backend, name: str) -> Projection:
    """The projection stored as ``name``."""
    return registry_of(existing_database(db)).load(name)


def list_projections(db: Backend) -> pd.DataFrame:
    """All stored projections, one row each."""
    return registry_of(existing_database(db)).list()


def copy_projection(db: Backend, name: str, to: Backend, new_name: str | None = None, replace: bool = False) -> None:
    """Copy the stored projection ``name`` from ``db`` into the registry of ``to`` (another database),
    so that both project with the identical matrix."""
    registry_of(to).save(registry_of(existing_database(db)).load(name), new_name or name, replace=replace)


def drop_projection(db: Backend, name: str) -> None:
    """Delete the stored projection ``name``."""
    registry_of(existing_database(db)).drop(name)


# ----------------------------------------------------------------------------------------------
# projecting


def compile_projection(
    db: Backend | None,
    plan_: Plan,
    dialect: str | None = None,
    into: str | None = None,
    view: bool = False,
    matrix: str = "auto",
    strategy: str = "auto",
    block: int | None = None,
    check: bool = True,
) -> str:
    """SQL text of a plan for ``dialect`` (default: the database's own).  ``check``: for the engine of
    ``db`` itself, where it can raise from inside a query (DuckDB, PostgreSQL; :mod:`sqlrp.compiler.guard`),
    the statement refuses a NULL, NaN or infinite feature and an overflowing output as ``project`` does,
    naming the row; for another dialect (its raising construct may not exist on the engine that runs
    the text) or where :func:`sqlrp.compiler.guard.guarded` is false, the text cannot check its input."""
    check_block(block, plan_.projection)
    target = get_dialect(dialect or (db.dialect if db is not None else "duckdb"))  # resolved once, here
    if db is not None:
        stored_pairs_plan(db, plan_, target, strategy)
    if matrix == "auto":
        same_db = db is not None and target.name == db.dialect
        matrix = "registry" if (same_db and plan_.projection.name) else "values"
    same_engine = db is not None and target.name == db.dialect
    guard = check and same_engine and guarded(plan_.projection, plan_.source, target, strategy, matrix)
    return compile_sql(
        plan_.projection,
        plan_.source,
        target,
        plan_.output,
        into=into,
        view=view,
        matrix=matrix,
        strategy=strategy,
        block=block,
        guard=guard,
    )


def project(
    db: Backend,
    table: Any,
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
    projection beside it (:func:`sqlrp.pipeline.materialise.write_file`), and the files written are returned.
    ``table`` may name a file or a glob on DuckDB (:mod:`sqlrp.core.files`); ``projection`` a
    projection file (``*.sqlrp.json``, or a ``projections export``).
    ``output_format``: ``"pandas"``, ``"arrow"`` (a ``pyarrow.Table``; from DuckDB without a pandas
    copy), ``"polars"`` or ``"numpy"`` (``(ids, Y)``), for the rows and for each chunk (:mod:`sqlrp.pipeline.outputs`).
    Materialisation is one transaction: on any failure no output table is left, and the source table
    is never written.

    ``progress=True`` follows DuckDB's own progress through one statement; on PostgreSQL, which reports
    none, it materialises in id-range batches (up to 10 of at least 20,000 rows).  ``ordered=False``:
    under a tight DuckDB ``memory_limit`` the sort of a large result is what runs out of memory.
    The same projection, lazily, with its destinations as methods: :func:`sqlrp.projected`.

    A new projection (``method``, ``k``, ...) is stored in the registry when the rows go ``into`` a
    table or file (under ``save_as``, else a name made of the table, method, k and seed) or when a
    name is given; rows handed back to Python store nothing.

    ``table`` may also be a pandas or polars DataFrame or a ``pyarrow.Table`` (:func:`project_frame`):
    registered with the database for this call only, its rows come back in the frame's own order (a
    pandas result keeps the frame's index), and a new projection is stored only under a name given
    (``projection=`` or ``save_as=``).

    :param db: the connection (:func:`sqlrp.connect`).
    :param table: a table or view, a file or glob (DuckDB), or a DataFrame / Arrow table.
    :param id_column: the column copied to the output as each row's key.
    :param projection: a stored projection's name, a :class:`~sqlrp.core.ir.Projection`, a projection
        file, or ``None`` with ``method``/``k``/... in ``options`` for a new one.
    :param into: a table (``view=True``: a view) or a ``.parquet`` / ``.csv`` / ``.json`` file to write.
    :param replace: overwrite an existing ``into``.
    :param check: refuse NULL, NaN or infinite features and overflowing outputs (in the statement
        itself where the engine can raise).
    :param matrix: long layout: ``auto``, ``registry``, ``values`` or a table holding the matrix.
    :param strategy: ``auto`` (the compiler's measured choice), ``inline`` / ``pairs`` / ``mailman`` /
        ``list_transform`` (wide, array) or ``join`` / ``lookup`` (long).
    :param block: mailman's block size (default: chosen).
    :param chunk_rows: hand the rows back in chunks of at most this many.
    :param incremental: with ``into``: add only the ids not in it yet (running twice adds nothing).
    :param progress: with ``into``: a progress bar (``True``) or that many id-range batches (an integer).
    :param ordered: ``ORDER BY`` the key (``False``: stream unordered).
    :param output_format: ``pandas``, ``arrow``, ``polars`` or ``numpy``.
    :param options: the plan's options (:func:`sqlrp.pipeline.plan.plan`): ``method``, ``k``, ``s``,
        ``seed``, ``layout``, ``columns``, ``array_column``, ``nulls``, ``standardize``, ``dtype``,
        ``output``, ``prefix``, ``group_column``, ``save_as``, the method's own parameters.
    :returns: the rows in ``output_format`` (or an iterator of chunks); with ``into`` a table,
        ``None``; with ``into`` a file, the files written.
    """
    if is_frame(table):
        return project_frame(
            db, table, id_column, projection, into=into, view=view, replace=replace, check=check, matrix=matrix,
            strategy=strategy, block=block, chunk_rows=chunk_rows, incremental=incremental, progress=progress,
            ordered=ordered, output_format=output_format, **options,
        )  # fmt: skip
    how = Formulation(matrix, strategy, block, check)
    target = Target(into, view, replace, incremental, chunk_rows, ordered, output_format)
    return _project_table(db, table, id_column, projection, how, target, progress, **options)


def _project_table(
    db: Backend,
    table: Any,
    id_column: str,
    projection: str | Projection | None,
    how: Formulation,
    target: Target,
    progress: bool | int,
    **options: Any,
) -> Any:
    """:func:`project` of a table, a view, or a file or glob: every option checked before any work, then
    planned and run under one progress bar (:func:`sqlrp.pipeline.projecting.plan_and_project`)."""
    if not isinstance(table, str):  # a frame went to project_frame
        raise InputError(f"the table must be a table name or a DataFrame / Arrow table, not a {type(table).__name__}")
    into = target.into
    if into is None and projection is None and not options.get("save_as"):
        options.setdefault("store", False)  # exploratory: rows back, nothing left in the registry
    block = optional_positive("block", how.block)  # sqlrp.core.params: every count checked before any work
    optional_positive("d", options.get("d"))
    if block is not None:  # against d too, before a new projection is stored
        block_size(block, input_dimension(db, table, id_column, projection, options))
    chunk_rows = optional_positive("chunk_rows", target.chunk_rows)
    if chunk_rows and into is not None:
        raise InvalidParameter("chunk_rows hands rows back in chunks; it does not go with into=")
    progress = batches(progress)
    if into is None:
        outputs.check_format(target.output_format)
    elif files.output_format(into) is not None:  # a file (sqlrp.core.files): refused here, before any work
        reads = targets.input_files(db, table, projection, options.get("schema"), options.get("catalog"))
        file_target(db, into, target.replace, target.view, target.incremental, reads)
    how, target = replace(how, block=block), replace(target, chunk_rows=chunk_rows)
    # one bar over the whole command, from the first read to the last write (pipeline/progress.py)
    with command_bar(progress if (into and not target.view) else False, f"sqlrp project {files.label(table)}") as bar:
        if bar is not None:
            bar.step("planning (columns, sample, matrix)", 0.0)
        return plan_and_project(db, table, id_column, projection, bar or progress, how, target, **options)


def project_frame(db: Backend, frame: Any, id_column: str, projection: Any = None, **options: Any) -> Any:
    """:func:`project` of a pandas or polars DataFrame or a ``pyarrow.Table``: the frame is a table of
    ``db`` for this call only (:meth:`~sqlrp.backends.base.Backend.frame_table`: DuckDB reads it in
    place), and a new projection is stored only under a name given.  Rows handed back (wide or array
    layout, no ``group_column``) are keyed in SQL by each row's position and come back in the frame's
    order with the frame's own ids (their dtype kept) and, for pandas, its index; ``chunk_rows``: that
    result cut into chunks.  Pooled and long-layout results, and rows written ``into`` a table or
    file, are keyed by the ids as the engine holds them (pooled and long: in key order)."""
    ids = frame_keys(frame, id_column)
    frame = numbers_as_numbers(frame, [id_column, options.get("group_column") or id_column])
    if options.get("view"):
        raise InvalidParameter("a view of a DataFrame would outlive it: project it into= a table instead")
    if not isinstance(projection, str) and not options.get("save_as"):
        options["store"] = False  # exploratory: nothing left in the registry
    rows = optional_positive("chunk_rows", options.pop("chunk_rows", None))  # the frame is in memory: chunks cut
    if rows and options.get("into") is not None:
        raise InvalidParameter("chunk_rows hands rows back in chunks; it does not go with into=")
    layout = options.get("layout", "wide")
    by_position = options.get("into") is None and layout != "long" and not options.get("group_column")
    fmt = options.get("output_format", "pandas")
    if not by_position:
        with frame_table(db, frame) as name:
            result = project(db, name, id_column, projection, **options)
        return outputs.chunks_of(result, rows, fmt) if rows and result is not None else result
    keyed, key = with_positions(frame)
    with frame_table(db, keyed, ids) as name:
        # the features the user's id would leave (the id itself is no feature): read, then named
        given = {k: v for k, v in options.items() if k in SOURCE_OPTIONS and k != "group_column"}
        source = resolve_source(db, name, id_column, **given, group_column=key)  # the key: no feature either
        chosen = dict(layout=source.layout, columns=source.columns or None, array_column=source.array_column)
        result = project(db, name, key, projection, **{**options, **chosen})
    names = [] if fmt == "numpy" else (result.column_names if fmt == "arrow" else list(result.columns))
    if id_column in names[1:]:
        raise InvalidParameter(f"output column {id_column!r} would be the id column too; choose another prefix")
    result = with_frame_ids(result, key, ids, id_column, frame, fmt)
    return outputs.chunks_of(result, rows, fmt) if rows else result


def migrate(db: Backend) -> list[str]:
    """Create or upgrade the registry tables of ``db`` (``sqlrp migrate``); returns the names of the
    migrations applied (none when it is up to date)."""
    return Registry(db, migrate=False).migrate()


def tune(
    db: Backend,
    table: str,
    id_column: str,
    sample: int = 500,
    k: int = 200,
    s: float | str = "auto",
    iterations: int = 4000,
    seed: int | None = 0,
    name: str | None = None,
    replace: bool = False,
    baseline: str = "dt-rp",
    draws: int = 20,
    **source_options: Any,
) -> Projection:
    """Tune a projection on a seeded sample of ``sample`` rows of ``table`` and store it as ``name``.

    ``baseline="dt-rp"`` runs DT-RP (002 Section 3); ``"best-of-n"`` keeps the best of ``draws``
    Achlioptas matrices (002 Section 4.2).  The result is an ordinary linear projection (sign matrix,
    identity combiner) whose ``params`` record the training sample and the final loss; it compiles and
    runs like any other.  ``source_options``: ``layout``, ``columns``, ``array_column``, ... as in
    :func:`resolve_source`.  Only the sample rows leave the database.  ``table`` may be a DataFrame
    or Arrow table (registered for the call; ``name`` is then needed).
    """
    if is_frame(table):
        if name is None:
            raise InvalidParameter("name the tuned projection (name=): a DataFrame has no name to make one of")
        with db.frame_table(table) as registered:
            return tune(
                db, registered, id_column, sample=sample, k=k, s=s, iterations=iterations, seed=seed, name=name,
                replace=replace, baseline=baseline, draws=draws, **source_options,
            )  # fmt: skip
    sample = positive_int("sample", sample)
    k = positive_int("k", k)
    iterations = whole("iterations", iterations, 0)
    draws = positive_int("draws", draws)
    if seed is not None:
        whole("seed", seed, 0)
    source = resolve_source(db, table, id_column, **source_options)
    d = infer_d(db, source)
    sample_seed = 0 if seed is None else int(seed)
    ids, X = fetch_sample(db, None, source, sample, sample_seed, d=d)
    if baseline == "dt-rp":
        result = tune_matrix(X, k, s=s, iterations=iterations, seed=seed)
        method = "dt-rp"
        extra: dict[str, Any] = {"iterations": int(iterations), "accepted": result.accepted}
    elif baseline == "best-of-n":
        result = best_of_n(X, k, s=s, n=draws, seed=seed)
        method = "best-of-n"
        extra = {"draws": result.iterations}
    else:
        raise InvalidParameter(f"baseline must be 'dt-rp' or 'best-of-n', got {baseline!r}")
    params = {
        "s": result.s,
        "initial_loss": result.initial_loss,
        "final_loss": result.loss,
        "seconds": round(result.seconds, 3),
        "training_sample": {
            "table": table,
            "schema": source.schema,
            "id_column": id_column,
            "layout": source.layout,
            "rows": len(ids),
            "seed": sample_seed,
            "order": "md5('<seed>:' || CAST(id AS TEXT)), id",
            "valid_pairs": result.n_pairs,
        },
        **extra,
    }
    projection = projection_from_dense(result.R, result.s, method, params, seed=seed)
    name = name or f"{table}_{method}_k{k}_seed{seed}"
    projection.name = name
    registry_of(db).save(projection, name, replace=replace)
    return projection
