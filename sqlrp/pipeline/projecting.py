""":func:`sqlrp.api.project` of a table from its plan on: the input checked (in the projection's own
statement where the engine can raise from inside a query, :mod:`sqlrp.compiler.guard`, else by a
separate scan), then the rows sent where they go (:mod:`sqlrp.pipeline.destinations`, or a file:
:func:`sqlrp.pipeline.materialise.write_file`)."""

from __future__ import annotations

from typing import Any

from ..backends import Backend
from ..compiler.guard import guarded, tripped
from ..core import files
from ..core.ir import Composed, Projection
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
    *,
    into: str | None,
    view: bool,
    replace: bool,
    check: bool,
    matrix: str,
    strategy: str,
    block: int | None,
    chunk_rows: int | None,
    incremental: bool,
    ordered: bool,
    output_format: str,
    **options: Any,
) -> Any:
    """:func:`sqlrp.api.project` from its plan on, checking the input in the projection's own statement where
    the engine can (:mod:`sqlrp.compiler.guard`)."""
    p = plan(db, table, id_column, projection, **options)
    check_block(block, p.projection)
    stored_pairs_plan(db, p, db.sql_dialect, strategy)
    chosen = choose_matrix(db, p, matrix)
    # the input and output checks ride along the projection's own statement where the engine can raise
    # from inside a query (sqlrp.compiler.guard): the data is read once
    one_pass = bool(check) and not chunk_rows and not view
    one_pass = one_pass and guarded(p.projection, p.source, db.sql_dialect, strategy, chosen)
    if check and not one_pass:
        if isinstance(progress, CommandBar):
            progress.step("checking the input", 2.0)
        check_source(db, p.projection, p.source)
    if isinstance(progress, CommandBar):
        progress.step("compiling")
    run_opts = dict(into=into, view=view, replace=replace, check=check, matrix=chosen, strategy=strategy, block=block)
    more = dict(chunk_rows=chunk_rows, incremental=incremental, progress=progress, ordered=ordered)
    try:
        return project_plan(db, p, table, one_pass=one_pass, output_format=output_format, **run_opts, **more)
    except Exception as exc:
        if not (one_pass and tripped(exc)):
            raise
    # the statement stopped at a bad row and wrote nothing: the separate scan names the rows (up to five),
    # as before; a clean input means an output overflowed: project again, checking the written outputs
    check_source(db, p.projection, p.source)
    return project_plan(db, p, table, one_pass=False, output_format=output_format, **run_opts, **more)


def project_plan(
    db: Backend,
    p: Plan,
    table: str,
    *,
    into: str | None,
    view: bool,
    replace: bool,
    check: bool,
    one_pass: bool,
    matrix: str,
    strategy: str,
    block: int | None,
    chunk_rows: int | None,
    incremental: bool,
    progress: bool | int | CommandBar,
    ordered: bool,
    output_format: str,
) -> Any:
    """The rest of :func:`sqlrp.api.project` once planned: ``one_pass`` compiles the checks into the statement
    (:mod:`sqlrp.compiler.guard`), else ``check`` reads the written outputs back."""
    check_written = check and not one_pass
    compile_opts = dict(matrix=matrix, strategy=strategy, block=block, bind=db.binds_constants, guard=one_pass)
    if into is not None and files.output_format(into) is not None:
        return write_file(db, p, into, compile_opts, replace, check_written, progress)
    if into is None:
        return rows_back(
            db, p, compile_opts, chunk_rows=chunk_rows, ordered=ordered, output_format=output_format,
            check_written=check_written,
        )  # fmt: skip
    write_table(
        db, p, table, into, compile_opts, view=view, replace=replace, incremental=incremental, progress=progress,
        check_written=check_written,
    )  # fmt: skip
    return None
