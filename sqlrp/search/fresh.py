"""An index kept true to its table: the fingerprint check every search makes (:func:`check_fresh`), the
id column's type (:func:`id_type_change`), and the incremental refresh (:func:`refresh`: rows gone or
changed leave the index, new and changed rows get their codes, on the same centroids and rotation).
The module docstring of :mod:`sqlrp.search.index` says what the fingerprint is."""

from __future__ import annotations

import contextlib
import dataclasses
import json

from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, ident
from ..core.errors import text_value, warn_caller
from ..pipeline import targets
from ..pipeline.checks import check_source
from ..pipeline.materialise import output_table, staged
from ..pipeline.sources import describe, fill_source
from .index import INDEX_TABLE, Index, StaleIndex, create_as, staging_name, unique_ids
from .rows import fingerprint, fingerprint_select, rows_select
from .scale import LOW, check_range, magnitude, needs_fine
from .sql import HASH, ID, feature_rows


def check_fresh(db: Backend, index: Index, strict: bool = False) -> bool:
    """True if the table holds the rows the index was built (or last refreshed) from; else a warning
    naming the refresh (:class:`StaleIndex` with ``strict``)."""
    changed = id_type_change(db, index, index.source)
    if changed:  # the index's ids no longer name the table's rows: no search, strict or not
        raise StaleIndex(f"cannot search: {changed}")
    (rows, h), (indexed, h0) = _fingerprints(db, index)
    if (rows, h) == (indexed, h0):
        return True
    what = f"{indexed} rows then, {rows} now" if rows != indexed else f"{rows} rows, some of them changed"
    message = (
        f"table {index.source.table!r} changed since index {index.name!r} was built ({what}): results may miss "
        f"rows or rank old values (deleted rows are never returned); refresh it: index the table again with "
        f"--incremental ({_same(index.source, index.name)})"
    )
    if strict:
        raise StaleIndex(message)
    warn_caller(message)
    return False


def check_columns(db: Backend, index: Index, doing: str) -> None:
    """Refuse (:class:`StaleIndex`, before anything runs) to ``doing`` an index whose table no longer has
    the columns it was built on -- renamed or dropped: the index must be rebuilt on the table as it is."""
    src = index.source
    wanted = [src.id_column, *(src.columns if src.layout == "wide" else [src.array_column])]
    present = {c.name for c in describe(db, src.table, src.schema, src.catalog)}
    missing = [c for c in wanted if c is not None and c not in present]
    if missing:
        shown = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise StaleIndex(
            f"cannot {doing}: table {src.table!r} no longer has the column{'s' if len(missing) > 1 else ''} "
            f"{shown} index {index.name!r} was built on (renamed or dropped); rebuild the index: index the table "
            f"again with --replace ({_same(src, index.name)}, and its columns as they are now)"
        )


def _fingerprints(db: Backend, index: Index) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((rows, hash sum) of the table now, (rows, hash sum) of the index)``."""
    dialect = db.sql_dialect
    layout = index.layout
    now = db.fetchall(dialect.render(fingerprint_select(layout, index.source, dialect)))[0]
    built = db.fetchall(dialect.render(exp.select(*fingerprint(col(HASH), dialect)).from_(layout.rows.copy())))[0]

    def norm(pair: tuple) -> tuple[int, int]:
        return int(pair[0]), int(pair[1] or 0)

    return norm(now), norm(built)


def id_type(db: Backend, source: Source) -> str:
    """The type of ``source``'s id column, as the engine's catalogue names it."""
    types = {c.name: c.type for c in describe(db, source.table, source.schema, source.catalog)}
    return str(types.get(source.id_column, "")).strip()


def id_type_change(db: Backend, index: Index, source: Source) -> str | None:
    """None if the table's id column has the type it had when ``index`` was built; else the reason,
    naming the rebuild.  An index keeps its table's ids in a column of that type: a refresh would cast
    new ids to it (DOUBLE 0.25 into BIGINT 0) or fail to compare them (PostgreSQL's TEXT with BIGINT).
    An index of an older sqlrp, which did not record the type, is compared with its own id column."""
    built = index.id_type
    if built is None:
        own = {c.name: c.type for c in describe(db, index.name, source.schema, source.catalog)}
        built = str(own.get(ID, "")).strip()
    now = id_type(db, source)
    if now == built:
        return None
    return (
        f"the id column {source.id_column!r} of table {source.table!r} was {built} when index {index.name!r} was "
        f"built and is {now} now; rebuild the index: index the table again with --replace "
        f"({_same(source, index.name)})"
    )


def _same(source: Source, name: str) -> str:
    """The options that build the index ``name`` of ``source`` again, as a message names them."""
    return f"--table={text_value(source.table)} --id-column={text_value(source.id_column)} --name={text_value(name)}"


def refresh(db: Backend, index: Index, check: bool) -> Index:
    """Bring ``index`` up to date with its table (module docstring), in one transaction."""
    dialect = db.sql_dialect
    src = index.source
    check_columns(db, index, "refresh")
    wanted = Source(src.table, src.id_column, src.layout, src.columns, src.array_column)
    source = fill_source(db, dataclasses.replace(wanted, schema=src.schema, nulls=src.nulls, catalog=src.catalog))
    changed = id_type_change(db, index, source)
    if changed:
        raise StaleIndex(f"cannot refresh: {changed}")
    unique_ids(db, source, "table")
    if check:
        check_source(db, index.d, source)
    seen = magnitude(db, source, index.d, rows=index.metric == "angular")
    check_range(f"table {source.table!r}", seen.peak, seen.row_min, index.d, index.scale or 0, index.name, low=LOW)
    if needs_fine(seen.least, index.scale or 0) and not index.fine:
        _mark_fine(db, index)
        index = dataclasses.replace(index, fine=True)
    indexed = targets.Table(source.table, source.schema, source.catalog, f"index {index.name!r}'s source table")
    written = targets.index_tables(index.name, source.schema, source.catalog)[:3]
    targets.refuse_tables(db, written, [indexed], besides=index.name)
    layout = index.layout
    fresh = exp.Table(this=ident("_sqlrp_fresh"))
    hashed = exp.select(col("_id"), col("_h")).from_(
        feature_rows(source, index.d, dialect, index.metric, hashed=True).subquery("x", copy=False)
    )
    if not db.transactional:
        _refresh_staged(db, index, source, hashed)
        return index
    with db.transaction():
        db.lock(f"sqlrp index {index.name}")
        db.execute(dialect.render(exp.Drop(tables=[fresh.copy()], kind="TABLE", exists=True)))
        temporary = exp.Properties(expressions=[exp.TemporaryProperty()])
        db.execute(dialect.render(exp.Create(this=fresh.copy(), kind="TABLE", expression=hashed, properties=temporary)))
        same = exp.select(exp.Literal.number(1)).from_(fresh.copy().as_("_f"))
        same = same.where(
            exp.and_(
                col("_id", "_f").eq(exp.column(ID, table=layout.rows.name, quoted=True)),
                col("_h", "_f").eq(exp.column(HASH, table=layout.rows.name, quoted=True)),
            )
        )
        db.execute(dialect.render(exp.delete(layout.rows.copy(), where=exp.Not(this=exp.Exists(this=same)))))
        done = exp.select(exp.Literal.number(1)).from_(layout.rows.copy().as_("_done"))
        done = done.where(col(ID, "_done").eq(col(source.id_column, source.table)))
        missing = Source(**{**source.__dict__, "row_filter": exp.Not(this=exp.Exists(this=done))})
        new = rows_select(layout, missing, dialect)
        db.execute(dialect.render(exp.insert(new, layout.rows.copy())))
        db.execute(dialect.render(exp.Drop(tables=[fresh.copy()], kind="TABLE")))
    return index


def _mark_fine(db: Backend, index: Index) -> None:
    """Record in the registry that ``index``'s table now holds rows that may differ by less than
    ``2^-400`` scaled (:func:`~sqlrp.search.scale.needs_fine`): its searches compute small distances again."""
    row = db.fetchall(f"SELECT params FROM {INDEX_TABLE} WHERE name = ?", [index.name])
    if row:
        params = {**json.loads(row[0][0]), "fine": True}
        db.execute(f"UPDATE {INDEX_TABLE} SET params = ? WHERE name = ?", [json.dumps(params), index.name])


def _refresh_staged(db: Backend, index: Index, source: Source, hashed: exp.Select) -> None:
    """:func:`refresh` on an engine without transactions: the refreshed rows -- those whose id and
    hash the table still holds, and codes for the rest -- are written to a staging table in one
    ``CREATE TABLE AS``, then swapped in for the index rows (:func:`sqlrp.pipeline.materialise.staged`).  A
    failure before the swap leaves the index as it was; a search never reads a half-refreshed one.
    No correlated sub-query (ClickHouse has none by default): joins and ``NOT IN``."""
    dialect = db.sql_dialect
    layout = index.layout
    fresh = output_table(source, staging_name())
    names = [e.alias_or_name for e in rows_select(layout, source, dialect).expressions]  # the index rows' columns
    try:
        db.execute(create_as(dialect, fresh.copy(), hashed))
        joined = (
            exp.select(*[col(c, "_i") for c in names])
            .from_(layout.rows.copy().as_("_i"))
            .join(
                fresh.copy().as_("_f"),
                on=exp.and_(col("_id", "_f").eq(col(ID, "_i")), col("_h", "_f").eq(col(HASH, "_i"))),
            )
        )
        kept_ids = exp.select(col(ID)).from_(joined.subquery("_k", copy=True))
        gone = exp.Not(this=exp.In(this=col(source.id_column, source.table), query=kept_ids.subquery(copy=False)))
        new = rows_select(layout, Source(**{**source.__dict__, "row_filter": gone}), dialect)
        both = exp.union(joined, new, distinct=False)
        with staged(db, source, layout.rows.name, True) as stage:
            db.execute(create_as(dialect, output_table(source, stage), both))
    finally:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[fresh.copy()], kind="TABLE", exists=True)))


__all__ = [
    "check_fresh",
    "id_type",
    "id_type_change",
    "refresh",
]
