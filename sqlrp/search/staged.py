"""A search run in steps on Spark and ClickHouse (issue 33): the queries' rotation, quantisation and
bit planes computed in NumPy and written as a table, rather than as SQL.

Written column by column (:func:`sqlrp.search.planes.planes_in_columns`), the planes are 60-320 KB
of nested expressions, which those engines inline at each reference to the common table
expression: profiled, the planes alone took most of Spark's search (its generated code passes
Janino's 64 KB method limit and falls back to interpretation) and of ClickHouse's
(``docs/benchmarks.md``, "Search").  The queries are a batch of
rows the caller holds anyway; their planes are the NumPy reference's own
(:func:`sqlrp.search.ivf.query_planes`, the function the SQL forms are tested against), so the
result is the same.  The queries are first written to a table in SQL (``_sqlrp_q``: their features
as the index reads them) and read back from it; both tables are dropped whatever happens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..backends.staging import sweep_scratch_tables
from ..compiler import Source, col
from ..core.lazy import pd
from ..core.names import scratch_name
from ..pipeline.materialise import output_table
from .ivf import QUERY_BITS, query_planes
from .query import query_vectors, search_select
from .rotation import rotate
from .sql import IndexLayout


def staged_engine(db: Backend) -> bool:
    """Engines whose search runs in steps: no transactions and no list lambdas (Spark, ClickHouse)."""
    dialect = db.sql_dialect
    return not db.transactional and not dialect.list_lambdas


def _substitute(select: exp.Expression, names: dict[str, exp.Table]) -> exp.Expression:
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.name in names and not node.args.get("db"):
            table = names[node.name].copy()
            if node.args.get("alias") is not None:
                table.set("alias", node.args["alias"].copy())
            return table
        return node

    return select.transform(swap, copy=False)


@contextlib.contextmanager
def staged_search(db: Backend, layout: IndexLayout, queries: Source, **options: object) -> Iterator[exp.Expression]:
    """Yield the search's ``SELECT`` reading the staged ``_sqlrp_q`` and ``_sqlrp_planes`` tables
    (``options``: :func:`~sqlrp.search.query.search_select`'s); they are dropped on exit."""
    dialect = db.sql_dialect
    sweep_scratch_tables(db, queries.schema)  # what killed searches left (issue 42)
    q_table = output_table(queries, scratch_name("q"))
    planes_table = output_table(queries, scratch_name("planes"))
    try:
        create = exp.Create(
            this=q_table.copy(),
            kind="TABLE",
            expression=query_vectors(layout, queries, dialect),
            properties=dialect.table_properties(),
        )
        db.execute(dialect.render(create))
        xs = [col(f"_x{i}") for i in range(layout.d)]
        rows = db.query_df(dialect.render(exp.select(col("_id"), *xs).from_(q_table.copy())))
        db.write_dataframe(planes_table.name, planes_frame(layout, rows))
        select = search_select(layout, queries, dialect, staged=True, **options)  # type: ignore[arg-type]
        yield _substitute(select, {"_sqlrp_q": q_table, "_sqlrp_planes": planes_table})
    finally:
        for table in (q_table, planes_table):
            with contextlib.suppress(Exception):
                db.execute(dialect.render(exp.Drop(tables=[table], kind="TABLE", exists=True)))


def planes_frame(layout: IndexLayout, rows: pd.DataFrame) -> pd.DataFrame:
    """``(_qid, _lo, _dl, _hsum, _p{p}_{w})`` of the queries ``rows`` (``_id, _x..``), by the NumPy
    reference: rotated (:func:`~sqlrp.search.rotation.rotate`) and quantised to ``QUERY_BITS`` planes."""
    X = rows[[f"_x{i}" for i in range(layout.d)]].to_numpy(dtype=np.float64)
    rotated = rotate(X, layout.signs) if len(X) else np.zeros((0, layout.size))
    out: dict[str, object] = {"_qid": rows["_id"].to_numpy()}
    found = [query_planes(u) for u in rotated]
    out["_lo"] = np.array([f[1] for f in found], dtype=np.float64)
    out["_dl"] = np.array([f[2] for f in found], dtype=np.float64)
    out["_hsum"] = np.array([f[3] for f in found], dtype=np.float64)
    for p in range(QUERY_BITS):
        for w in range(layout.words):
            out[f"_p{p}_{w}"] = np.array([f[0][p][w] for f in found], dtype=np.int64)
    return pd.DataFrame(out)


def run_search(db: Backend, layout: IndexLayout, queries: Source, **options: object) -> pd.DataFrame:
    """The search's result as a DataFrame: in steps on Spark and ClickHouse (:func:`staged_search`),
    else one statement with the engine's local settings, in a transaction."""
    dialect = db.sql_dialect
    if staged_engine(db) and layout.word_bits == 64:
        with staged_search(db, layout, queries, **options) as select:
            for statement in dialect.local_settings(layout.source):
                db.execute(statement)
            return db.query_df(dialect.render(select))
    select = search_select(layout, queries, dialect, **options)  # type: ignore[arg-type]
    with db.transaction():
        for statement in dialect.local_settings(layout.source):
            db.execute(statement)
        return db.query_df(dialect.render(select))


__all__ = ["planes_frame", "run_search", "staged_engine", "staged_search"]
