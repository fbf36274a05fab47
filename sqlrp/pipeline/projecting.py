""":func:`sqlrp.api.project` of a table from its plan on: the input checked (in the projection's own
statement where the engine can raise from inside a query, :mod:`sqlrp.compiler.guard`, else by a
separate scan), then the rows sent where they go (:mod:`sqlrp.pipeline.destinations`, or a file:
:func:`sqlrp.pipeline.materialise.write_file`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from ..backends import Backend
from ..compiler.guard import tripped
from ..core import files
from ..core.ir import Projection
from ..core.layout import Formulation, Target
from .arrow_route import arrow_sums, choose_route
from .checks import check_source
from .column_blocks import column_blocks
from .destinations import rows_back, write_table
from .materialise import file_target, write_file
from .plan import Plan, decide, plan
from .progress import CommandBar
from .targets import input_files


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
    """:func:`sqlrp.api.project` from its plan on: planned (:func:`.plan.plan`), decided once
    (:func:`.plan.decide`), the input checked in the projection's own statement where the engine can
    (:mod:`sqlrp.compiler.guard`: the data is read once), else by a separate scan first."""
    p = plan(db, table, id_column, projection, **options)
    how = dataclasses.replace(how, bind=db.binds_constants)
    p = decide(db, p, how, guard=not target.chunk_rows and not target.view)
    if how.check and not p.how.guard:
        if isinstance(progress, CommandBar):
            progress.step("checking the input", 2.0)
        check_source(db, p.projection, p.source)
    if isinstance(progress, CommandBar):
        progress.step("compiling")
    try:
        return project_plan(db, p, table, target, progress)
    except Exception as exc:
        if not (p.how.guard and tripped(exc)):
            raise
    # the statement stopped at a bad row and wrote nothing: the separate scan names the rows (up to five),
    # as before; a clean input means an output overflowed: project again, checking the written outputs
    check_source(db, p.projection, p.source)
    unguarded = dataclasses.replace(p, how=dataclasses.replace(p.how, guard=False))
    return project_plan(db, unguarded, table, target, progress)


def project_plan(db: Backend, p: Plan, table: str, target: Target, progress: bool | int | CommandBar) -> Any:
    """The rest of :func:`sqlrp.api.project` once planned and decided: ``p.how.guard`` compiled the checks
    into the statement (:mod:`sqlrp.compiler.guard`), else ``p.how.check`` reads the written outputs back."""
    check_written = p.how.check and not p.how.guard
    into = target.into
    arrow = choose_route(db, p, target, progress) == "arrow"  # the linear sums by BLAS (.arrow_route)
    if into is not None and files.output_format(into) is not None:
        reads = input_files(db, p.source.table, None, p.source.schema, p.source.catalog)
        beside = file_target(db, into, target.replace, view=False, incremental=False, reads=reads)  # refused first
        with arrow_sums(db, p, progress) if arrow else column_blocks(db, p, beside) as body:
            return write_file(db, p, into, target.replace, check_written, progress, body=body)
    if into is None:
        if arrow:
            with arrow_sums(db, p) as body:
                return rows_back(db, p, target, check_written=check_written, body=body)
        return rows_back(db, p, target, check_written=check_written)
    if hasattr(db, "statement_room"):  # the engine holds the rows written, this process little (issue 42)
        db.statement_room()
    if target.view or target.incremental:
        write_table(db, p, table, target, progress=progress, check_written=check_written)
        return None
    with arrow_sums(db, p, progress) if arrow else column_blocks(db, p, scratch_beside(db, into)) as body:
        write_table(db, p, table, target, progress=progress, check_written=check_written, body=body)
    return None


def scratch_beside(db: Backend, into: str) -> Path:
    """Where a table output's column blocks are held (:mod:`.column_blocks`): beside the database file,
    else in the engine's temporary folder."""
    folder = Path(tempfile.gettempdir())
    path = getattr(db, "path", "")
    if path and not str(path).startswith((":memory:", "md:", "(")):
        folder = Path(files.absolute(str(path))).parent
    return folder / "".join(c if c.isalnum() or c in "_-" else "_" for c in into)
