""":func:`sqlrp.project` from its options on: a table's options checked before any work and one progress
bar over the run (:func:`run_table`), a DataFrame registered for the call (:func:`run_frame`), and the
SQL text of a plan (:func:`compile_plan`).  What :class:`sqlrp.relation.Relation`'s destinations call."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..backends import Backend
from ..compiler import compile_statements
from ..core import files
from ..core.errors import InputError, InvalidParameter
from ..core.ir import Projection
from ..core.layout import Formulation, Target
from ..core.options import FormulationOptions, TargetOptions, names
from ..core.params import batches, block_size, optional_count
from ..dialects import get_dialect
from . import outputs, targets
from .arrow_route import refuse_early
from .frame_admit import FRAME_DECIDES, admit
from .frame_table import frame_table
from .frames import is_frame, with_frame_ids
from .given import check_matrix_origin
from .materialise import file_target
from .outputs import Projected
from .plan import Plan, decide
from .progress import command_bar
from .projecting import plan_and_project
from .sources import input_dimension


def run(
    db: Backend, table: Any, id_column: str, projection: Any, options: dict[str, Any], into: str | None
) -> Projected:
    """:func:`sqlrp.project` with its keyword ``options`` (:class:`~sqlrp.core.options.ProjectOptions`)
    taken apart: how the SQL is written (a :class:`~sqlrp.core.layout.Formulation`), where the rows go
    (a :class:`~sqlrp.core.layout.Target`), the plan's options."""
    rest = dict(options)
    # every option parsed and checked here, where it enters, whatever the table (sqlrp.core.layout)
    how = Formulation(**{key: rest.pop(key) for key in names(FormulationOptions) if key in rest})
    wanted = {key: rest.pop(key) for key in names(TargetOptions) if key in rest}
    progress = batches(wanted.pop("progress", False))
    target = Target(into, **wanted)
    if is_frame(table):
        return run_frame(db, table, id_column, projection, options, into)
    return run_table(db, table, id_column, projection, how, target, progress, rest)


def run_table(
    db: Backend,
    table: Any,
    id_column: str,
    projection: str | Projection | None,
    how: Formulation,
    target: Target,
    progress: bool | int,
    options: dict[str, Any],
) -> Any:
    """:func:`sqlrp.project` of a table, a view, or a file or glob: every option checked before any work, then
    planned and run under one progress bar (:func:`sqlrp.pipeline.projecting.plan_and_project`)."""
    if not isinstance(table, str):  # a frame went to run_frame
        raise InputError(f"the table must be a table name or a DataFrame / Arrow table, not a {type(table).__name__}")
    into = target.into
    if into is None and projection is None and not options.get("save_as"):
        options.setdefault("store", False)  # exploratory: rows back, nothing left in the registry
    check_matrix_origin(db, how.matrix, projection)  # a matrix table needs the projection it came from
    refuse_early(db, options.get("layout") or "wide", target, progress)  # route="arrow" where it cannot run
    optional_count("d", options.get("d"))
    if how.block is not None:  # against d too, before a new projection is stored
        block_size(how.block, input_dimension(db, table, id_column, projection, options))
    if into is None:
        outputs.check_format(target.output_format)
    elif files.output_format(into) is not None:  # a file (sqlrp.core.files): refused here, before any work
        reads = targets.input_files(db, table, projection, options.get("schema"), options.get("catalog"))
        file_target(db, into, target.replace, target.view, target.incremental, reads)
    # one bar over the whole command, from the first read to the last write (pipeline/progress.py)
    with command_bar(progress if (into and not target.view) else False, f"sqlrp project {files.label(table)}") as bar:
        if bar is not None:
            bar.step("planning (columns, sample, matrix)", 0.0)
        return plan_and_project(db, table, id_column, projection, bar or progress, how, target, **options)


def run_frame(
    db: Backend, frame: Any, id_column: str, projection: Any, options: dict[str, Any], into: str | None
) -> Any:
    """:func:`sqlrp.project` of a pandas or polars DataFrame or a ``pyarrow.Table``: the frame is a table of
    ``db`` for this call only (:meth:`~sqlrp.backends.base.Backend.frame_table`: DuckDB reads it in
    place), and a new projection is stored only under a name given.  Rows handed back (wide or array
    layout, no ``group_column``) are keyed in SQL by each row's position and come back in the frame's
    order with the frame's own ids (their dtype kept) and, for pandas, its index; ``chunk_rows``: that
    result cut into chunks.  Pooled and long-layout results, and rows written ``into`` a table or
    file, are keyed by the ids as the engine holds them (pooled and long: in key order)."""
    options = dict(options)
    if options.get("view"):
        raise InvalidParameter("a view of a DataFrame would outlive it: project it into a table (--into) instead")
    if not isinstance(projection, str) and not options.get("save_as"):
        options["store"] = False  # exploratory: nothing left in the registry
    rows = options.pop("chunk_rows", None)  # checked by run(); the frame is in memory: chunks cut
    layout = options.get("layout", "wide")
    by_position = into is None and layout != "long" and not options.get("group_column")
    fmt = options.get("output_format", "pandas")
    # every column decided once, here: the same features, of the same types, on every engine
    admitted = admit(frame, id_column, options, by_position=by_position)
    rest = {k: v for k, v in options.items() if k not in FRAME_DECIDES}
    decided = {**rest, **{k: v for k, v in admitted.source.items() if v is not None}}
    with frame_table(db, admitted) as name:
        result = run(db, name, admitted.id_column, projection, decided, into)
    if not by_position:
        return outputs.chunks_of(result, rows, fmt) if rows and result is not None else result
    names = [] if fmt == "numpy" else (result.column_names if fmt == "arrow" else list(result.columns))
    if id_column in names[1:]:
        raise InvalidParameter(f"output column {id_column!r} would be the id column too; choose another prefix")
    result = with_frame_ids(result, admitted.key, admitted.ids, id_column, frame, fmt)
    return outputs.chunks_of(result, rows, fmt) if rows else result


def compile_plan(db: Backend | None, p: Plan, dialect: str | None, target: Target, how: Formulation) -> str:
    """The SQL text of the plan ``p`` for ``dialect`` (default: the database's own), decided once
    (:func:`~.plan.decide`); the checks ride along only for the engine of ``db`` itself
    (:func:`sqlrp.api.compile_projection`)."""
    if target.into is not None:
        files.refuse_file_ending(target.into)
    engine = get_dialect(dialect or (db.dialect if db is not None else "duckdb"))  # resolved once, here
    same_engine = db is not None and engine.name == db.dialect
    if how.matrix == "auto" and not same_engine:  # the same engine: decide() picks (plan.choose_matrix)
        how = replace(how, matrix="values")
    if db is None:
        block_size(how.block, p.projection.d)
        decided = replace(p, how=replace(how, guard=False))
    else:
        decided = decide(db, p, how, engine, guard=same_engine)
    statements = compile_statements(decided, engine, replace(target, ordered=False))
    return statements.script() if statements.setup else statements.main
