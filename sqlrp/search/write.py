"""Writing an index's tables (what :mod:`sqlrp.search.build` computes): the centroids, then every row's
list and code (:func:`write_index`); on an engine without transactions, written under a staging name and
swapped in (:func:`build_staged`); and an old index's registry row and tables dropped (:func:`unregister`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, ident
from ..core.lazy import pd
from ..pipeline.materialise import output_table
from .index import INDEX_TABLE, Index, create_as, drop_tables, index_table_names, load_index, staging_name
from .ivf import Lists
from .progress import Steps
from .rotation import rotate
from .rows import rows_select
from .sql import CENTRE, LIST, PARENT, ROTATED, TOP, IndexLayout


def write_index(db: Backend, layout: IndexLayout, source: Source, centroids: Lists, steps: Steps | None = None) -> None:
    """The index's three tables: centroids, then every row's list and code."""
    dialect = db.sql_dialect
    steps = steps or Steps(False, "", [])
    steps.start("writing codes")
    store_centroids(db, layout, centroids, layout.signs)
    # written list by list: the search's join of probes to rows then meets a list's rows together
    # (faster than table order; measured: docs/benchmarks.md, "Search")
    rows = rows_select(layout, source, dialect).order_by(col("_list", "r"), copy=False)
    steps.execute(db, create_as(dialect, layout.rows, rows))
    for statement in dialect.lookup_indexes(layout.rows, [LIST]):
        db.execute(statement)


def unregister(db: Backend, name: str, source: Source, existing: tuple) -> None:
    """Delete the index ``name``'s registry row, then its tables (a search finds no index from the
    first statement on, never a half-dropped one)."""
    old = load_index(db, name) if existing[1] else None
    db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])
    dialect = db.sql_dialect
    for table in (*index_table_names(name), name + "__bands"):  # __bands: an index of an older sqlrp
        target = output_table(old.source if old else source, table)
        db.execute(dialect.render(exp.Drop(tables=[target], kind="TABLE", exists=True)))


def build_staged(
    db: Backend,
    index: Index,
    source: Source,
    centroids: Lists,
    existing: tuple | None,
    register: Callable[[], None],
    measure: Callable[[Index], None] = lambda _: None,
    steps: Steps | None = None,
) -> None:
    """A build on an engine without transactions (Spark, ClickHouse): the tables are written under a
    staging name, where no search looks; only then is an old index unregistered and dropped, the
    staging tables renamed, and the registry row written last.  A failed build leaves the old index
    as it was; a failure during the swap leaves no index registered (a search says there is none),
    never a half-written one that a search would use."""
    dialect = db.sql_dialect
    stage = Index(**{**index.__dict__, "name": staging_name()})
    try:
        write_index(db, stage.layout, source, centroids, steps)
        measure(stage)
    except BaseException:
        drop_tables(db, source, index_table_names(stage.name))
        raise
    unregistered = existing is None
    try:
        if existing is not None:
            unregister(db, index.name, source, existing)
            unregistered = True
        for old, new in zip(index_table_names(stage.name), index_table_names(index.name), strict=True):
            db.execute(dialect.rename(output_table(source, old), output_table(source, new)))
        register()
    except BaseException:
        drop_tables(db, source, index_table_names(stage.name))
        if unregistered:  # the name is free again: no half-renamed tables are left under it
            drop_tables(db, source, index_table_names(index.name))
        raise


def store_centroids(db: Backend, layout: IndexLayout, centroids: Lists, signs: np.ndarray) -> None:
    d = layout.d
    rotated = rotate(centroids.leaves, signs)
    tops = {TOP: np.arange(len(centroids.tops), dtype=np.int64)}
    tops |= {f"{CENTRE}{i}": centroids.tops[:, i].copy() for i in range(d)}
    leaves = {LIST: np.arange(centroids.count, dtype=np.int64), PARENT: centroids.parent.astype(np.int64)}
    leaves |= {f"{CENTRE}{i}": centroids.leaves[:, i].copy() for i in range(d)}
    leaves |= {f"{ROTATED}{j}": rotated[:, j].copy() for j in range(rotated.shape[1])}
    write_centroids(db, layout.tops, tops)
    write_centroids(db, layout.lists, leaves)


def write_centroids(db: Backend, table: exp.Table, columns: dict[str, np.ndarray]) -> None:
    """``CREATE TABLE table`` with these columns (BIGINT keys, DOUBLE centroids), staged through a
    temporary table (the backends insert arrays into an unqualified name)."""
    dialect = db.sql_dialect
    if not db.transactional:  # Spark has no temporary tables: a staging table, dropped whatever happens
        stage = staging_name()
        try:
            db.write_dataframe(stage, pd.DataFrame(columns))
            db.execute(create_as(dialect, table, exp.select(exp.Star()).from_(ident(stage))))
        finally:
            with contextlib.suppress(Exception):
                db.execute(dialect.render(exp.Drop(tables=[exp.Table(this=ident(stage))], kind="TABLE", exists=True)))
        return
    stage = "_sqlrp_centroids"
    kinds = {True: exp.DataType.build("BIGINT"), False: exp.DataType.build("DOUBLE")}
    types = ", ".join(
        f"{dialect.render(ident(c))} {dialect.render(kinds[v.dtype.kind in 'iu'])}" for c, v in columns.items()
    )
    db.execute(dialect.render(exp.Drop(tables=[exp.Table(this=ident(stage))], kind="TABLE", exists=True)))
    db.execute(f"CREATE TEMPORARY TABLE {dialect.render(ident(stage))} ({types})")
    db.insert_columns(stage, columns)
    db.execute(
        dialect.render(exp.Create(this=table, kind="TABLE", expression=exp.select(exp.Star()).from_(ident(stage))))
    )
    db.execute(dialect.render(exp.Drop(tables=[exp.Table(this=ident(stage))], kind="TABLE")))


__all__ = ["build_staged", "store_centroids", "unregister", "write_centroids", "write_index"]
