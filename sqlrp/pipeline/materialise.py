"""Materialising a projection: ``CREATE TABLE ... AS``, ``INSERT`` top-ups, progress batches,
staged blocks for engines whose limits need several statements, and the staging-and-rename that
keeps engines without transactions (Spark, ClickHouse) from leaving a half-written table.  The last
stage of :func:`sqlrp.api.project`; the caller holds the transaction where the engine has them."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from sqlglot import exp

from ..backends import Backend
from ..backends.staging import sweep_scratch_tables
from ..compiler import Source, Statements, col, compile_statements, ident, table_ref
from ..core import files
from ..core.errors import InputError, InvalidParameter, ProjectionExists
from ..core.ir import Projection
from ..core.layout import Target
from ..core.names import scratch_name
from ..registry.transfer import JSON_ENDING, _refuse_existing, write_projection
from . import targets
from .checks import check_outputs
from .plan import Plan
from .progress import CommandBar, asked, command_bar
from .sources import describe

T = TypeVar("T")


def run(db: Backend, statements: Statements, action: Callable[[str], T]) -> T:
    """Run ``statements.setup``, then ``action(statements.main)``, then the cleanup -- also after a
    failure, when its own errors are ignored so that the first error is the one raised.  The
    statements' bound constants are registered meanwhile (``Backend.bound``)."""
    try:
        with db.bound(statements.constants):
            for sql in statements.setup:
                db.execute(sql)
            result = action(statements.main)
    except BaseException:
        for sql in statements.cleanup:
            with contextlib.suppress(Exception):
                db.execute(sql)
        raise
    for sql in statements.cleanup:
        db.execute(sql)
    return result


def materialise(db: Backend, p: Plan, into: str, progress: bool | int | CommandBar, create: bool) -> None:
    """``CREATE TABLE into AS`` (``create``) or ``INSERT INTO into`` the projection of ``p.source``
    (the caller holds the transaction).  ``progress=True`` shows a tqdm bar (the command's own, if
    given: :mod:`.progress`): the engine's own progress of the one statement where it reports it
    (DuckDB), else id-range batches; an integer asks for that many batches."""
    dialect = db.sql_dialect
    for statement in dialect.local_settings(p.source):
        db.execute(statement)  # SET LOCAL: ends with the caller's transaction
    wanted = asked(progress)
    with command_bar(progress, f"projecting into {into}") as bar:
        if bar is not None:
            bar.step(f"projecting into {into}")
        if wanted is True and db.reports_progress and (create or dialect.parallel_insert):
            statements = compile_statements(p, dialect, Target(into=into, insert=not create))
            assert bar is not None
            report = bar.statement()
            run(db, statements, lambda sql: db.execute_watched(sql, report))
            return
        _batches(db, p, into, wanted, create, bar)


def _batches(db: Backend, p: Plan, into: str, wanted: bool | int, create: bool, bar: CommandBar | None) -> None:
    """:func:`materialise` in id-range batches (one, without progress), each moving the bar."""
    source = p.source
    batches = id_batches(db, source, wanted) if wanted else [None]
    report = bar.statement() if bar is not None else None
    for i, condition in enumerate(batches):
        part = p
        if condition is not None:
            both = condition if source.row_filter is None else exp.and_(source.row_filter.copy(), condition)
            part = dataclasses.replace(p, source=dataclasses.replace(source, row_filter=both))
        if create and i == 0:
            run(db, compile_statements(part, db.sql_dialect, Target(into=into)), db.execute)
        else:
            insert(db, part, into)
        if report is not None:
            report(100.0 * (i + 1) / len(batches))


def insert(db: Backend, p: Plan, into: str) -> None:
    """``INSERT INTO into`` the projection of ``p.source``.  Where the engine runs ``INSERT ... SELECT``
    serially (PostgreSQL), the rows are first made by a parallel ``CREATE TEMPORARY TABLE AS`` and
    then copied, which is cheap next to projecting them (``dialects/postgres.py``)."""
    dialect = db.sql_dialect
    if dialect.parallel_insert:
        run(db, compile_statements(p, dialect, Target(into=into, insert=True)), db.execute)
        return
    staging = scratch_name("staging")
    run(db, compile_statements(p, dialect, Target(into=staging, temporary=True)), db.execute)
    names = [ident(n) for n in [p.source.group_column or p.source.id_column, *p.output.names(p.projection.k)]]
    target = exp.Schema(this=output_table(p.source, into), expressions=names)
    copy = exp.select(*[exp.Column(this=n.copy()) for n in names]).from_(exp.Table(this=ident(staging)))
    db.execute(dialect.render(exp.Insert(this=target, expression=copy)))
    db.execute(dialect.render(exp.Drop(tables=[exp.Table(this=ident(staging))], kind="TABLE")))


def output_table(source: Source, into: str) -> exp.Table:
    """``into`` in the source's schema and catalog."""
    return exp.Table(
        this=ident(into),
        db=ident(source.schema) if source.schema else None,
        catalog=ident(source.catalog) if source.catalog else None,
    )


def table_exists(db: Backend, name: str, source: Source) -> bool:
    """Whether ``name`` is a table or view in the schema of ``source``."""
    try:
        describe(db, name, source.schema, source.catalog)
    except InputError:
        return False
    return True


def existing_output(db: Backend, source: Source, into: str, replace: bool) -> bool:
    """The one output-table check: whether ``into`` exists (in the source's schema), refused unless
    ``replace``."""
    exists = table_exists(db, into, source)
    if exists and not replace:
        raise ProjectionExists(f"table {into!r} already exists; pass --replace or choose another name")
    return exists


@contextlib.contextmanager
def atomic_table(
    db: Backend,
    source: Source,
    into: str,
    *,
    replace: bool,
    top_up: Callable[[], None] | None = None,
    stage: bool = True,
) -> Iterator[str | None]:
    """The one way sqlrp writes a whole output table (projections, search results): yields the name to
    build it under, and a failure anywhere leaves ``into`` as it was.

    In one transaction where the engine has them -- one writer per output table at a time (PostgreSQL:
    an advisory lock held to the commit), an existing ``into`` dropped inside -- yielding ``into``;
    elsewhere (``stage``) under a staging name swapped in once built (:func:`staged`).  An existing
    ``into`` is refused unless ``replace`` (:func:`existing_output`); with ``top_up`` (an incremental
    run) it is topped up instead, under the same lock, and ``None`` is yielded: nothing to build.  The
    scratch tables killed processes left in the schema are dropped first (no litter, issue 42)."""
    sweep_scratch_tables(db, source.schema)
    if stage and not db.transactional:
        exists = table_exists(db, into, source)
        if exists and top_up is not None:
            top_up()
            yield None
            return
        with staged(db, source, into, existing_output(db, source, into, replace)) as name:
            yield name
        return
    with db.transaction():
        # whether it exists is read under the lock: concurrent top-ups add each id exactly once
        db.lock(f"sqlrp output {source.catalog}.{source.schema}.{into}")
        if top_up is not None and table_exists(db, into, source):
            top_up()
            yield None
            return
        if existing_output(db, source, into, replace):
            kind = "VIEW" if db.is_view(into, source.schema) else "TABLE"
            db.execute(db.sql_dialect.render(exp.Drop(tables=[output_table(source, into)], kind=kind)))
        yield into


@contextlib.contextmanager
def staged(db: Backend, source: Source, into: str, replace_existing: bool) -> Iterator[str]:
    """For engines without transactions: yield a staging name to build the output under; when the
    build succeeded, swap it in: the old ``into`` (if ``replace_existing``) is renamed aside, the
    staging table renamed to ``into``, and the old one dropped.  Any failure drops the staging
    table and puts the old ``into`` back, untouched."""
    dialect = db.sql_dialect
    name, aside = (scratch_name(kind) for kind in ("new", "old"))

    def drop(table: str) -> None:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, table)], kind="TABLE", exists=True)))

    try:
        yield name
        if replace_existing and db.is_view(into, source.schema):  # a view holds no rows: drop it
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, into)], kind="VIEW")))
            replace_existing = False
        if replace_existing:
            db.execute(dialect.rename(output_table(source, into), output_table(source, aside)))
            try:
                db.execute(dialect.rename(output_table(source, name), output_table(source, into)))
            except BaseException:
                db.execute(dialect.rename(output_table(source, aside), output_table(source, into)))
                raise
            drop(aside)
        else:
            db.execute(dialect.rename(output_table(source, name), output_table(source, into)))
    except BaseException:
        drop(name)
        raise


def top_up_through_staging(db: Backend, source: Source, into: str, build: Callable[[str], None]) -> None:
    """For engines without transactions: ``build(name)`` creates the new rows under a staging name
    (and checks them); only then are they appended to ``into`` in one ``INSERT ... SELECT``, so a
    failed build or check leaves ``into`` as it was.  The staging table is always dropped."""
    dialect = db.sql_dialect
    name = scratch_name("add")
    try:
        build(name)
        rows = exp.select(exp.Star()).from_(output_table(source, name))
        db.execute(dialect.render(exp.insert(rows, output_table(source, into))))
    finally:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, name)], kind="TABLE", exists=True)))


MIN_BATCH_ROWS = 20_000


def id_batches(db: Backend, source: Source, progress: bool | int) -> list[exp.Expression | None]:
    """Conditions ``lo <= key < hi`` covering the key's range (one ``None`` if the key is not a number,
    the table is small or empty).  Each batch is planned anew, so a few large batches are best."""
    key = source.group_column or source.id_column
    info = {c.name: c for c in db.columns(source.table, source.schema)}
    if not info[key].numeric:
        return [None]
    query = exp.select(exp.Min(this=col(key)), exp.Max(this=col(key)), exp.Count(this=exp.Star())).from_(
        table_ref(source)
    )
    if source.row_filter is not None:
        query = query.where(source.row_filter.copy())
    lo, hi, rows = db.fetchall(db.sql_dialect.render(query))[0]
    # progress=True: up to 10 batches of >= MIN_BATCH_ROWS rows (each batch is planned anew)
    # a number of batches is capped at the rows: more would be statements that select nothing
    count = min(10, rows // MIN_BATCH_ROWS) if progress is True else min(int(progress), rows)
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


# ----------------------------------------------------------------------------------------------
# files as the output (sqlrp.core.files)


def file_target(
    db: Backend, path: str, replace: bool, view: bool, incremental: bool, reads: Iterable[tuple[str, str]] = ()
) -> Path:
    """Refuse, before any work, a file output that cannot be written: an engine other than DuckDB,
    a view or a top-up (files are written whole), a missing folder, an existing file (or its
    projection definition) without ``replace``, or -- with or without it -- a file the operation
    reads (``reads``: ``(path, what)``, compared resolved) or one sqlrp owns
    (:func:`sqlrp.pipeline.targets.refuse_output_file`).  Returns the absolute target."""
    if not hasattr(db, "read_file"):
        raise files.refuse_engine(db.dialect, f"write the file {path!r}")
    if view or incremental:
        raise InvalidParameter(f"{path!r} is a file, written whole: it cannot be a view or topped up (--incremental)")
    target = Path(files.absolute(path))
    if not target.parent.is_dir():
        raise InputError(f"cannot write {path!r}: there is no folder {str(target.parent)!r}")
    if target.is_dir():
        raise InputError(f"cannot write {path!r}: it is a folder")
    targets.refuse_output_file(db, target, files.definition_path(target), reads)
    if not replace:
        _refuse_existing([target, files.definition_path(target)])
    return target


#: the statement cache's listeners (:mod:`sqlrp.cli.statement_cache`): each called with what
#: :func:`write_file` ran (:func:`_program`) once the file is written and checked, before the rename
RECORDERS: list[Callable[[dict], None]] = []
#: non-empty while the plan being written reads a relation only this process holds (the Arrow route's
#: stream, column blocks' scratch view): its statements cannot be run again by another process
_UNREPLAYABLE: list[str] = []


@contextlib.contextmanager
def unreplayable(why: str) -> Iterator[None]:
    """While the block runs, :func:`write_file` tells the statement cache nothing (``why``: for a reader)."""
    _UNREPLAYABLE.append(why)
    try:
        yield
    finally:
        _UNREPLAYABLE.pop()


class _Logged:
    """``db`` whose ``fetchall`` notes each query in ``log`` (the read-back's, for the statement cache)."""

    def __init__(self, db: Backend, log: list[str]):
        self._db, self._log = db, log

    def __getattr__(self, name: str) -> object:
        return getattr(self._db, name)

    def fetchall(self, sql: str, params: object = None) -> list[tuple]:
        self._log.append(sql)
        return self._db.fetchall(sql) if params is None else self._db.fetchall(sql, params)


def _program(
    statements: Statements, copy: str, checks: list[str], tmp: Path, sidecar: Path | None, target: Path
) -> dict:
    """What :func:`write_file` ran, to run again by hand (:mod:`sqlrp.start`): the statements (``copy``:
    the main one as ``COPY ... TO tmp``), the bound matrices' rows, the read-back's count query (``checks``:
    the first, that finds none), the sidecar's text, with the staging files' stamp as ``@STAMP@``."""
    stamp = tmp.name[len(f".{target.name}.") : -len(".tmp")]
    mark = lambda sql: sql.replace(stamp, "@STAMP@")  # noqa: E731
    return {
        "setup": [mark(s) for s in statements.setup],
        "copy": mark(copy),
        "cleanup": [mark(s) for s in statements.cleanup],
        "constants": {name: [[float(v) for v in row] for row in W] for name, W in statements.constants.items()},
        "checks": [mark(s) for s in checks[:1]],
        "sidecar": files.definition_path(target).read_text() if sidecar else None,  # renamed into place by now
        "staging": [mark(tmp.name), mark(sidecar.name) if sidecar else None],
        "target": str(target),
        "definition": str(files.definition_path(target)) if sidecar else None,
        "stamped": stamp in copy,
        "exact": all(
            getattr(W, "dtype", None) == "float64" and W.ndim == 2 and W.size for W in statements.constants.values()
        ),
    }


def write_file(
    db: Backend,
    p: Plan,
    path: str,
    replace: bool,
    check: bool,
    progress: bool | int | CommandBar = False,
    body: Plan | None = None,
) -> list[Path]:
    """Write the projection of ``p.source`` to the file ``path`` (``.parquet``, ``.csv``, ``.json``)
    with DuckDB's ``COPY (query) TO``, and the projection beside it (``<path>.sqlrp.json``, when it is
    one matrix: :func:`sqlrp.core.files.definition_path`).  Both are written under temporary names in the
    target's folder; the output is read back and checked for non-finite values (``check``), and only
    then are both renamed into place -- a failure leaves no file.  ``body``: the plan whose rows are
    written (default ``p``; the sums of its column blocks, :mod:`.column_blocks`).  Returns the files
    written."""
    reads = targets.input_files(db, p.source.table, None, p.source.schema, p.source.catalog)
    target = file_target(db, path, replace, view=False, incremental=False, reads=reads)
    fmt = files.output_format(path)
    assert fmt is not None
    statements = compile_statements(body or p, db.sql_dialect, Target(ordered=False), pretty=False)
    stamp = uuid.uuid4().hex[:12]
    files.sweep_staging(target)  # no litter: a killed writer's staging files go with the next write there
    tmp = files.staging_path(target, stamp)
    definition = files.definition_path(target) if isinstance(p.projection, Projection) else None
    tmp_definition = files.staging_path(target, stamp, JSON_ENDING)
    names = p.output.names(p.projection.k)
    array = p.output.form == "array"

    options = f"FORMAT {fmt}"
    budget = getattr(db, "budget", None)
    if fmt == "parquet" and budget is not None and budget.small:
        # the writer holds a row group (122,880 rows by default) per thread before it flushes: on a small
        # device, row groups of an eighth of the engine's memory, at most 16,384 rows (issue 42: beside a
        # one-pass scan pinned just above the reader's row group, :mod:`sqlrp.backends.scan_fit`)
        row_bytes = 8 * (len(names) if not array else p.projection.k) + 16
        options += f", ROW_GROUP_SIZE {max(2048, min(16_384, budget.engine_memory // 8 // row_bytes))}"

    def copy(sql: str) -> str:
        literal = exp.Literal.string(str(tmp)).sql("duckdb")
        return f"COPY ({sql.rstrip().rstrip(';')}) TO {literal} ({options})"

    try:
        with command_bar(progress if db.reports_progress else False, f"projecting into {target.name}") as bar:
            if bar is not None:
                bar.step(f"projecting into {target.name}")
                report = bar.statement()
                run(db, statements, lambda sql: db.execute_watched(copy(sql), report))
            else:
                run(db, statements, lambda sql: db.execute(copy(sql)))
        key = p.source.group_column or p.source.id_column
        checks: list[str] = []  # the read-back's queries, for the statement cache
        if check:
            # read back what was written: CSV has no types, so the values are read as numbers
            types = {n: "DOUBLE[]" if array else "DOUBLE" for n in names} if fmt == "csv" else None
            columns = [key, *names] if fmt == "csv" else None  # by position: a header's spaces are trimmed
            written = exp.Table(this=files.reader(str(tmp), fmt, types, columns))
            check_outputs(
                _Logged(db, checks) if RECORDERS else db, written, key, names, p.projection.k if array else None
            )
        if definition is not None:
            # the sidecar records what the file holds: the output type follows the input's (issue 34)
            held = {"dtype": p.output.dtype, "form": p.output.form, "columns": [key, *names]}
            write_projection(p.projection, tmp_definition, replace=True, output=held)
            os.chmod(tmp_definition, os.stat(tmp).st_mode & 0o777)  # as readable as the output DuckDB wrote
            os.replace(tmp_definition, definition)
        for note in RECORDERS if not _UNREPLAYABLE else ():  # never in the way of the write itself
            with contextlib.suppress(Exception):
                note(_program(statements, copy(statements.main), checks, tmp, definition and tmp_definition, target))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        tmp_definition.unlink(missing_ok=True)
        raise
    return [target] if definition is None else [target, definition]
