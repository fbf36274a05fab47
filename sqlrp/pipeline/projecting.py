""":func:`sqlrp.api.project` of a table from its plan on: the input checked (in the projection's own
statement where the engine can raise from inside a query, :mod:`sqlrp.compiler.guard`, else by a
separate scan), then the rows sent where they go (:mod:`sqlrp.pipeline.destinations`, or a file:
:func:`sqlrp.pipeline.materialise.write_file`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..backends import Backend
from ..compiler.guard import guarded, tripped
from ..core import files
from ..core.ir import Composed, Projection
from ..core.layout import Formulation, Target
from ..core.params import block_size
from .destinations import rows_back, write_table
from .materialise import write_file
from .plan import Plan, choose_matrix, plan, stored_pairs_plan
from .progress import CommandBar
from .sources import check_source


def check_block(block: int | None, projection: Projection | Composed) -> None:
    """``block`` is a whole number from 1 to the projection's ``d`` (:func:`sqlrp.core.params.block_size`)."""
    block_size(block, projection.d)


def plan_and_project(
    db: Backend,
    table: str,
    id_column: str,
    projection: str | Projection | None,
    progress: bool | int | CommandBar,
    how: Formulation,
    target: Target,
    **options: Any,
) -> Any:
    """:func:`sqlrp.api.project` from its plan on, checking the input in the projection's own statement where
    the engine can (:mod:`sqlrp.compiler.guard`)."""
    p = plan(db, table, id_column, projection, **options)
    check_block(how.block, p.projection)
    stored_pairs_plan(db, p, db.sql_dialect, how.strategy)
    how = dataclasses.replace(how, matrix=choose_matrix(db, p, how.matrix))
    # the input and output checks ride along the projection's own statement where the engine can raise
    # from inside a query (sqlrp.compiler.guard): the data is read once
    one_pass = bool(how.check) and not target.chunk_rows and not target.view
    one_pass = one_pass and guarded(p.projection, p.source, db.sql_dialect, how.strategy, how.matrix)
    if how.check and not one_pass:
        if isinstance(progress, CommandBar):
            progress.step("checking the input", 2.0)
        check_source(db, p.projection, p.source)
    if isinstance(progress, CommandBar):
        progress.step("compiling")
    try:
        return project_plan(db, p, table, how, target, progress, one_pass=one_pass)
    except Exception as exc:
        if not (one_pass and tripped(exc)):
            raise
    # the statement stopped at a bad row and wrote nothing: the separate scan names the rows (up to five),
    # as before; a clean input means an output overflowed: project again, checking the written outputs
    check_source(db, p.projection, p.source)
    return project_plan(db, p, table, how, target, progress, one_pass=False)


def project_plan(
    db: Backend,
    p: Plan,
    table: str,
    how: Formulation,
    target: Target,
    progress: bool | int | CommandBar,
    *,
    one_pass: bool,
) -> Any:
    """The rest of :func:`sqlrp.api.project` once planned: ``one_pass`` compiles the checks into the statement
    (:mod:`sqlrp.compiler.guard`), else ``how.check`` reads the written outputs back."""
    check_written = how.check and not one_pass
    compile_opts = dict(matrix=how.matrix, strategy=how.strategy, block=how.block)
    compile_opts |= dict(bind=db.binds_constants, guard=one_pass)
    into = target.into
    if into is not None and files.output_format(into) is not None:
        return write_file(db, p, into, compile_opts, target.replace, check_written, progress)
    if into is None:
        return rows_back(
            db, p, compile_opts, chunk_rows=target.chunk_rows, ordered=target.ordered,
            output_format=target.output_format, check_written=check_written,
        )  # fmt: skip
    write_table(
        db, p, table, into, compile_opts, view=target.view, replace=target.replace,
        incremental=target.incremental, progress=progress, check_written=check_written,
    )  # fmt: skip
    return None
