"""Where the projected rows of :func:`sqlrp.api.project` go once planned and compiled: back to Python
(:func:`rows_back`, whole or in chunks), or into a table or a view (:func:`write_table`) -- in one
transaction where the engine has them, else built under a staging name and swapped in -- with the
checks that come before any write (:func:`check_table_target`) and the incremental top-up.  Files are
written by :func:`sqlrp.pipeline.materialise.write_file`."""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, check_output_columns, col, compile_statements, ident
from ..core import files
from ..core.errors import InputError, InvalidParameter
from ..core.layout import Target
from ..dialects import SqlrpDialect
from ..registry.store import REGISTRY_TABLES
from . import outputs, targets
from .checks import check_outputs
from .materialise import atomic_table, materialise, output_table, run, top_up_through_staging
from .plan import Plan
from .progress import CommandBar
from .sources import describe


def written(db: Backend, p: Plan, name: str, check: bool) -> None:
    """Nothing non-finite was written to ``name`` (``check``), before the commit or the swap."""
    if check:
        key = p.source.group_column or p.source.id_column
        length = p.projection.k if p.output.form == "array" else None
        check_outputs(db, output_table(p.source, name), key, p.output.names(p.projection.k), length)


def rows_back(db: Backend, p: Plan, target: Target, *, check_written: bool, body: Plan | None = None) -> Any:
    """The projected rows handed back in ``target.output_format`` (``target.chunk_rows``: an iterator of
    chunks streamed from the database; ``target.ordered``: by the key), their outputs checked finite
    when ``check_written``.  ``body``: the plan whose rows are fetched (default ``p``; the Arrow route's
    sums, :mod:`.arrow_route`)."""
    dialect = db.sql_dialect
    key = p.source.group_column or p.source.id_column
    chunk_rows, output_format = target.chunk_rows, target.output_format
    if chunk_rows:  # chunks outlive run(): no bound constants
        p = dataclasses.replace(p, how=dataclasses.replace(p.how, bind=False))
    statements = compile_statements(body or p, dialect, Target(ordered=target.ordered), pretty=False)
    if chunk_rows:
        if statements.setup:
            raise dialect.refuse(
                "this projection needs staged blocks: project it into a table (--into), then read that"
            )
        columns = [key, *p.output.names(p.projection.k)]
        chunks = outputs.fetch_chunks(db, statements.main, int(chunk_rows), output_format, columns)
        return (outputs.check_finite(c, key, output_format) for c in chunks) if check_written else chunks
    settings = dialect.local_settings(p.source)
    with db.transaction():
        for statement in settings:
            db.execute(statement)
        result = run(db, statements, lambda sql: outputs.fetch(db, sql, output_format))
    return outputs.check_finite(result, key, output_format) if check_written else result


def check_table_target(db: Backend, p: Plan, table: str, into: str, view: bool, incremental: bool) -> None:
    """Refuse, before any work, an output table or view ``into`` that is empty, that the engine could not
    hold as named, that is (or may be, for the engine) the input ``table`` or a table sqlrp's other
    objects read, or an incremental view."""
    dialect = db.sql_dialect
    if not into:
        raise InvalidParameter("into must name a table (an empty name writes nothing)")
    files.refuse_file_ending(into)
    check_output_names(dialect, p, into)
    if dialect.same_identifier(into, table):  # the output goes to the source's schema (output_table)
        same = f": {db.dialect} takes {into!r} for {table!r} (it ignores case)" if into != table else ""
        raise InvalidParameter(
            f"the output table must not be the input table (sqlrp never writes the source){same}; choose another name"
        )
    source_table = targets.Table(p.source.table, p.source.schema, p.source.catalog, "the input table")
    targets.refuse_tables(db, [dataclasses.replace(source_table, name=into, role="the output table")], [source_table])
    if incremental and view:
        raise InvalidParameter("incremental projection writes rows into a table; it cannot make a view")


def write_table(
    db: Backend,
    p: Plan,
    table: str,
    target: Target,
    *,
    progress: bool | int | CommandBar,
    check_written: bool,
    body: Plan | None = None,
) -> None:
    """The projected rows as the table ``target.into`` (``target.view``: a view), whole or not at all
    (:func:`sqlrp.pipeline.materialise.atomic_table`: one transaction, or staged and swapped in);
    ``target.incremental``: only the ids not in it yet are added; ``target.replace``: an existing one is
    replaced.  ``body``: the plan whose rows are written whole (default ``p``; the sums of its column
    blocks, :mod:`.column_blocks`)."""
    into, view = target.into, target.view
    assert into is not None
    check_table_target(db, p, table, into, view, target.incremental)

    def top_up() -> None:  # the ids not in ``into`` yet, checked before they are added
        same_key_type(db, p.source, into)
        missing = dataclasses.replace(p, source=not_yet_projected(db.sql_dialect, p.source, into))
        if db.transactional:
            materialise(db, missing, into, progress, create=False)
            written(db, p, into, check_written)
        else:  # no rollback here: build and check the new rows aside, then append them

            def build(name: str) -> None:
                materialise(db, missing, name, progress, create=True)
                written(db, p, name, check_written)

            top_up_through_staging(db, p.source, into, build)

    growing = top_up if target.incremental else None
    with atomic_table(db, p.source, into, replace=target.replace, top_up=growing, stage=not view) as name:
        if name is None:  # topped up
            return
        if view:  # a view outlives bound constants: the text stands alone
            text = dataclasses.replace(p, how=dataclasses.replace(p.how, bind=False))
            db.execute(compile_statements(text, db.sql_dialect, Target(into=name, view=True)).main)
        else:
            materialise(db, body or p, name, progress, create=True)
            written(db, p, name, check_written)


def same_key_type(db: Backend, source: Source, into: str) -> None:
    """An incremental top-up inserts ids into ``into`` as its key column holds them: another type there
    (DOUBLE ids into a BIGINT column) would convert them -- 1.5 and 2.5 both written as 2 -- so it is
    refused, naming the rebuild."""
    key = source.group_column or source.id_column
    kind = {c.name: c.type.upper() for c in describe(db, source.table, source.schema, source.catalog)}.get(key)
    held = {c.name: c.type.upper() for c in describe(db, into, source.schema, source.catalog)}.get(key)
    if kind is not None and held is not None and kind != held:
        raise InputError(
            f"table {into!r} holds {key!r} as {held}, the input as {kind}: a top-up would convert the ids; "
            "rebuild it (--replace) instead of topping it up (--incremental)"
        )


def not_yet_projected(dialect: SqlrpDialect, source: Source, into: str) -> Source:
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
