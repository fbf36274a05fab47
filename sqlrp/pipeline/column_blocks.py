"""Projecting a file whose row groups the engine cannot hold: its columns in blocks (issue 42).

A Parquet reader holds a row group of the columns it reads, and two while it moves to the next (DuckDB:
a 100,000 x 384 float32 row group is 153 MB decoded; a scan needs about 2.6 times that,
:func:`sqlrp.backends.duckdb_settings.fit_row_groups`, and a block's pass up to 3.6 times,
:data:`ROW_GROUP_FACTOR`).  Where even one thread's row group does not fit
the engine's memory, the features are read a block of columns at a time: the linear stage is a sum over
the features, ``K_v = sum_f w_fv x_f^power_v + bias_v``, so each block's partial sums (``p`` of them, the
linear stage's vectors) are written to a scratch database in the file's row order, and the blocks are then
joined back row by row (``POSITIONAL JOIN``: a lockstep scan, nothing held whole) and added.  The
combiner (identity for a linear projection, products of ``K`` for the kernel methods) and the scale are
applied after the sum, by the same compiler, on a projection whose linear stage is the identity -- so
kernel methods are exact too.  A composition (CRAFTMaps) is refused in one line naming the budget.

The plan is chosen from the engine's memory limit and threads as set (the budget's, or ``--memory-limit``
and ``--threads`` given) and the file's footers (:meth:`~sqlrp.backends.duckdb_blocks.ColumnBlocks.row_group_columns`):
each block is as wide as fits ``(15/16 memory_limit - 16 MB) / (3.6 x threads)`` in every row group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..backends import Backend
from ..backends.scan_fit import block_room, scan_need
from ..compiler import compile_statements
from ..core import files
from ..core.errors import EngineLimit
from ..core.ir import Combiner, LinearStage, Projection
from ..core.layout import Formulation, Output, Source, Target
from ..core.nodes import ident
from ..core.plan import Plan
from .materialise import run, unreplayable
from .plan import decide

#: a block's pass holds up to this many times a row group of the columns it reads: DuckDB's scan holds two
#: row groups while it moves from one to the next, and sqlrp's statement its vectors as DOUBLE (measured on
#: 100,000 x 384 float32 under a 512 MB cgroup, memory_limit 307 MiB: two blocks of 77 MB finished once and
#: failed once inside DuckDB; three blocks of 51 MB finish)
ROW_GROUP_FACTOR = 3.6
#: and this much beside, whatever the row group (vectors of each stage, the statement's own state)
SCAN_FLOOR = 16 * 2**20
#: the share of the memory limit a block's partial sums may hold while written (a row group of the
#: scratch table: :func:`partial_rows`)
PARTIAL_SHARE = 1 / 16


def partial_rows(memory: int, p: int) -> int:
    """Rows of a scratch table's row group: ``p`` partial sums and the key in :data:`PARTIAL_SHARE` of
    ``memory``, a multiple of DuckDB's vector (2,048 rows), at most its default (122,880)."""
    return int(max(2048, min(122_880, memory * PARTIAL_SHARE // (8 * (p + 1)) // 2048 * 2048)))


def _footprint(
    db: Backend, source: Source, one_pass: bool = False
) -> tuple[np.ndarray, np.ndarray, float, int, int] | None:
    """Per row group, each feature's bytes held and the keys'; the room a block may take; the engine's
    memory limit and threads -- ``None`` where the input is no Parquet file read in columns (a database
    table, an array or long layout) or its row groups fit whole.  On a small device whose scan was chosen
    from the budget with chunks above DuckDB's block (:func:`sqlrp.backends.scan_fit.fit_scan`: pinned),
    the bytes are the reader's buffers and the room :func:`~sqlrp.backends.scan_fit.block_room` of one
    thread; else the decoded bytes and ``(15/16 memory_limit - 16 MB) / (3.6 x threads)``.  ``one_pass``:
    the projection's own statement, which the fit applies to (``evaluate``'s sample reads keep the decoded
    model: their statements hold more than a projection's)."""
    if not getattr(db, "reads_column_blocks", False) or source.layout != "wide" or source.row_filter is not None:
        return None
    fit = db.scan_fit(source.table) if one_pass else None  # type: ignore[attr-defined]
    if fit is not None and fit.single:  # one pass fits (chosen from the budget and the file's chunks)
        return None
    pinned = fit is not None and fit.pinned
    groups = db.row_group_columns(source.table, reader=pinned)  # type: ignore[attr-defined]
    if not groups or not source.columns:
        return None
    memory, threads = db.scan_room()  # type: ignore[attr-defined]
    if pinned:
        room = float(block_room(memory, int(memory * PARTIAL_SHARE)))
    else:
        room = (memory * (1 - PARTIAL_SHARE) - SCAN_FLOOR) / (ROW_GROUP_FACTOR * threads)
    keys = [c for c in (source.id_column, source.group_column) if c]
    sizes = np.array([[g.get(c, 0) for c in source.columns] for g in groups], dtype=np.float64)
    base = np.array([sum(g.get(c, 0) for c in keys) for g in groups], dtype=np.float64)
    if float(np.max(base + sizes.sum(axis=1))) <= room:
        return None
    return sizes, base, room, memory, threads


def block_limit(db: Backend, source: Source, block: list[int]) -> int | None:
    """The ``memory_limit`` a block's pass is pinned to where the file's chunks exceed DuckDB's block (the
    reader reads ahead and fails under a looser limit, :mod:`sqlrp.backends.scan_fit`): the need of its
    widest row group and the partial sums' share; ``None`` elsewhere (the limit as set)."""
    fit = db.scan_fit(source.table)  # type: ignore[attr-defined]
    shape = _footprint(db, source, one_pass=True)
    if fit is None or not fit.pinned or shape is None:
        return None
    sizes, base, _, memory, _ = shape
    widest = float(np.max(base + sizes[:, block].sum(axis=1)))
    return min(memory, scan_need(int(widest)) + int(memory * PARTIAL_SHARE))


def feature_blocks(db: Backend, source: Source, one_pass: bool = False) -> list[list[int]] | None:
    """The features of ``source`` in blocks (indices into ``source.columns``, in order), each block's widest
    row group (with the keys) fitting ``(15/16 memory_limit - 16 MB) / (3.6 x threads)``; ``None`` where
    the whole row group fits, or the input is not read in columns (:func:`_footprint`)."""
    shape = _footprint(db, source, one_pass)
    if shape is None:
        return None
    sizes, base, room, _, _ = shape
    blocks: list[list[int]] = [[]]
    used = base.copy()
    for i in range(len(source.columns)):
        if blocks[-1] and float(np.max(used + sizes[:, i])) > room:
            blocks.append([])
            used = base.copy()
        blocks[-1].append(i)
        used += sizes[:, i]
    return blocks


def plan_blocks(db: Backend, p: Plan) -> list[list[int]] | None:
    """:func:`feature_blocks` of the plan's input; a composition (or pooled groups) whose row groups do not
    fit is refused in one line naming the budget."""
    source = p.source
    blocks = feature_blocks(db, source, one_pass=True)
    if blocks is None:
        return None
    if isinstance(p.projection, Projection) and source.group_column is None and len(blocks) > 1:
        return blocks
    sizes, base, _, memory, threads = _footprint(db, source, one_pass=True)  # type: ignore[misc]
    widest = float(np.max(base + sizes.sum(axis=1)))
    raise EngineLimit(
        f"{source.table!r}: a row group of its columns is {widest / 2**20:.0f} MiB decoded, more than the "
        f"{memory / 2**20:.0f} MiB memory_limit holds with {threads} thread(s), and "
        f"{'a composition' if not isinstance(p.projection, Projection) else 'this input'} cannot be read in "
        "column blocks: rewrite the file in smaller row groups (COPY ... (ROW_GROUP_SIZE 20000)) or raise "
        "--memory-limit"
    )


def block_plan(p: Plan, block: list[int]) -> Plan:
    """The plan of the linear stage's partial sums over the features ``block``: every vector's sum
    (``p`` outputs, no bias, no combiner, no scale), as DOUBLE columns ``_s0 ..``."""
    proj, source = p.projection, p.source
    assert isinstance(proj, Projection)
    lin = proj.linear
    where = np.full(lin.d, -1)
    where[block] = np.arange(len(block))
    keep = where[lin.feature] >= 0
    stage = LinearStage(
        d=len(block),
        p=lin.p,
        vector=lin.vector[keep],
        feature=where[lin.feature[keep]],
        weight=lin.weight[keep],
        power=lin.power,
    )
    part = Projection(proj.method, stage, Combiner.identity(lin.p), 1.0, dict(proj.params), proj.seed)
    standardize = source.standardize
    if standardize is not None:
        standardize = (tuple(standardize[0][i] for i in block), tuple(standardize[1][i] for i in block))
    columns = tuple(source.columns[i] for i in block)
    sub = dataclasses.replace(source, columns=columns, standardize=standardize)
    return Plan(part, sub, Output(form="wide", prefix="_s", dtype="float64"), p.how)


def sum_plan(p: Plan, view: str) -> Plan:
    """The plan over the summed blocks (``view``: the key and ``_k0 .. _k{p-1}``): the identity linear
    stage with the projection's bias, then its combiner and scale, written as ``p.output``."""
    proj = p.projection
    assert isinstance(proj, Projection)
    n = proj.linear.p
    stage = LinearStage(d=n, p=n, vector=np.arange(n), feature=np.arange(n), weight=np.ones(n), bias=proj.linear.bias)
    final = Projection(proj.method, stage, proj.combiner, proj.scale, dict(proj.params), proj.seed)
    source = dataclasses.replace(
        p.source,
        table=view,
        schema=None,
        catalog=None,
        columns=tuple(f"_k{v}" for v in range(n)),
        standardize=None,
        nulls="error",
        exclude=(),
    )
    return Plan(final, source, p.output, p.how)


def pinned_scan(db: Backend, source: Source) -> contextlib.AbstractContextManager[None]:
    """The one-pass scan the fit pinned for ``source``'s Parquet file on a small device
    (:func:`sqlrp.backends.scan_fit.fit_scan`: its memory limit and one thread) while the block runs; else
    nothing (another engine, another layout, a file whose row groups leave room, memory that is plenty)."""
    fit = db.scan_fit(source.table) if getattr(db, "reads_column_blocks", False) else None  # type: ignore[attr-defined]
    if fit is None or not (fit.single and fit.pinned) or source.layout != "wide":
        return contextlib.nullcontext()
    return db.scan_limit(fit.memory_limit, threads=1)  # type: ignore[attr-defined]


@contextlib.contextmanager
def column_blocks(db: Backend, p: Plan, beside: Path) -> Iterator[Plan]:
    """``p`` itself where its input's row groups fit, else the plan over its blocks' sums: each block's
    partial sums written (in the file's row order) to a scratch database beside ``beside`` (the output;
    named as its staging files are, :func:`sqlrp.core.files.staging_path`: a killed run's is swept by
    the next), joined back by position in a view that the plan yielded reads.  Each block's strategy is
    decided for its own matrix (:func:`sqlrp.pipeline.plan.decide`).  A one-pass scan pinned by the fit
    (:func:`sqlrp.backends.scan_fit.fit_scan`) runs with its limit and one thread."""
    blocks = plan_blocks(db, p)
    if blocks is None:
        with pinned_scan(db, p.source):
            yield p
        return
    stamp = uuid.uuid4().hex[:12]
    files.sweep_staging(beside)
    scratch = files.staging_path(beside, stamp, ".blocks.duckdb")
    catalog, view = f"sqlrp_blocks_{stamp}", f"__sqlrp_blocks_{stamp}"
    key = p.source.id_column
    asked = Formulation(check=p.how.guard, bind=p.how.bind)
    rows = partial_rows(db.scan_room()[0], p.projection.linear.p)  # type: ignore[attr-defined, union-attr]
    with db.scratch_database(scratch, catalog, rows):  # type: ignore[attr-defined]
        tables = []
        for i, block in enumerate(blocks):
            part = decide(db, block_plan(p, block), asked, guard=True)
            name = f"{ident(catalog).sql('duckdb')}.main.b{i}"
            pinned = block_limit(db, p.source, block)
            with db.keeping_row_order(), db.scan_limit(pinned):  # type: ignore[attr-defined]
                statements = compile_statements(part, db.sql_dialect, Target(ordered=False), pretty=False)
                run(
                    db,
                    statements,
                    lambda sql, name=name: db.execute(f"CREATE TABLE {name} AS {sql.rstrip().rstrip(';')}"),
                )
            tables.append(name)
        n = p.projection.linear.p  # type: ignore[union-attr]
        k = ident(key).sql("duckdb")
        select = [f"b0.{k} AS {k}"] + [
            " + ".join(f"b{i}._s{v}" for i in range(len(tables))) + f" AS _k{v}" for v in range(n)
        ]
        check = " AND ".join(f"b{i}.{k} IS NOT DISTINCT FROM b0.{k}" for i in range(1, len(tables)))
        db.positional_view(view, tables, select, check)  # type: ignore[attr-defined]
        try:
            with unreplayable("column blocks' scratch view"):
                yield decide(db, sum_plan(p, view), asked, guard=True)
        finally:
            db.drop_view(view)  # type: ignore[attr-defined]
