"""Searching an index (issue 23): :func:`search`, the one entry point -- its checks (the engine, the
query table's features, the index's freshness), the calibrated defaults, the run on the engine
(:mod:`sqlrp.search.query` writes the SQL, :mod:`sqlrp.search.staged` runs it in steps where one
statement is too much) and the warnings a result may need: queries far from the indexed rows, or
short of ``top`` neighbours.

    hits = sqlrp.search(db, "docs_idx", "questions", "qid", top=10)  # (query_id, id, rank, distance)
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TypedDict, Unpack

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, table_ref
from ..core import files
from ..core.errors import InputError, InvalidParameter, warn_caller
from ..core.lazy import pd
from ..core.options import refuse_unknown
from ..pipeline import targets
from ..pipeline.checks import check_source
from ..pipeline.frame_columns import column_names
from ..pipeline.frame_table import frame_input
from ..pipeline.frames import is_frame
from ..pipeline.materialise import atomic_table, output_table
from ..pipeline.sources import describe, infer_d, resolve_source
from ..registry.store import REGISTRY_TABLES
from .calibrate import FAR, Calibration
from .fresh import check_columns, check_fresh
from .index import RESERVED, Index, check_engine, create_as, default_candidates, load_index, unique_ids
from .progress import Steps
from .query import exact_select, search_select
from .scale import LOW, check_range, engine_range, magnitude, needs_fine
from .sql import MAX_COUNT, check_search
from .staged import run_search, staged_engine, staged_search


class SearchOptions(TypedDict, total=False):
    """:func:`search`'s options besides ``top`` and ``into``."""

    candidates: int | None
    """re-rank this many of the codes' best exactly (default: the index's calibrated rule, else ``30 * top``)"""
    probes: int | None
    """probe this many nearest lists (default: the index's calibrated rule)"""
    metric: str | None
    """``euclidean`` or ``angular`` (default: the index's)"""
    replace: bool
    """with ``into``: replace an existing table"""
    schema: str | None
    """where the query table is"""
    catalog: str | None
    check: bool
    """refuse NULL, NaN or infinite query features"""
    exact: bool
    """brute force instead: every query against every row (the ground truth and the speed baseline)"""
    strict: bool
    """refuse an index older than its table instead of warning"""
    progress: bool
    """a progress bar on stderr"""


SEARCH_DEFAULTS: SearchOptions = {
    "candidates": None, "probes": None, "metric": None, "replace": False, "schema": None, "catalog": None,
    "check": True, "exact": False, "strict": False, "progress": False,
}  # fmt: skip


def search(
    db: Backend,
    index: str,
    query_table: str,
    query_id_column: str,
    *,
    top: int = 10,
    into: str | None = None,
    **options: Unpack[SearchOptions],
) -> pd.DataFrame | None:
    """The ``top`` nearest indexed rows of every row of ``query_table``, as ``(query_id, id, rank,
    distance)`` ordered by query and rank (a DataFrame, or with ``into`` a table).

    Each query probes its ``probes`` nearest lists (default: the index's), ranks their rows by the
    codes' distance estimate, and re-ranks the ``candidates`` best (default ``30 * top``) exactly on
    the table's current rows.  Recall rises with both.  The query table holds the index's feature
    columns (or array column) and its own id column.  The index is checked against its table first
    (:func:`check_fresh`; ``strict=True`` refuses a stale index).

    :param db: the connection.
    :param index: the index's name (:func:`sqlrp.build_index`).
    :param query_table: the queries: a table, or a pandas or polars DataFrame or an Arrow table
        (registered for the call).
    :param query_id_column: the queries' key.
    :param top: the neighbours per query.
    :param into: write the result to this table instead of returning it.
    :param options: :class:`SearchOptions` -- ``candidates``, ``probes``, ``metric``, ``replace``,
        ``schema``, ``catalog``, ``check``, ``exact`` (brute force, :func:`~sqlrp.search.query.exact_select`:
        every query against every row, in the engine's strongest single statement -- the ground truth a
        search's recall is measured against, and the baseline of its speed), ``strict``, ``progress``.
    :returns: the neighbours, or ``None`` with ``into``.
    """
    refuse_unknown("search", options, SearchOptions.__annotations__)
    if is_frame(query_table):
        src = load_index(db, index).source  # the index's features, read from the frame by name
        present = set(column_names(query_table))
        wanted = {"layout": src.layout, "columns": [c for c in src.columns if c in present] or None}
        if src.layout == "array" and src.array_column in present:
            wanted["array_column"] = src.array_column
        if src.layout == "long":
            wanted.update(feature_column=src.feature_column, value_column=src.value_column)
        with frame_input(db, query_table, query_id_column, {**options, **wanted}) as (name, decided):
            rest = {k: v for k, v in decided.items() if k in options}
            return search(db, index, name, query_id_column, top=top, into=into, **rest)
    o: dict = {**SEARCH_DEFAULTS, **options}
    with (
        engine_range(f"search of index {index!r}"),
        Steps(o["progress"], f"search {index}", ["checking the table", "searching"]) as steps,
    ):
        return _search(
            db,
            index,
            query_table,
            query_id_column,
            top,
            o["candidates"],
            o["probes"],
            o["metric"],
            into,
            o["replace"],
            o["schema"],
            o["catalog"],
            o["check"],
            o["exact"],
            o["strict"],
            steps,
        )


def _search(  # noqa: PLR0913 - search's own arguments
    db: Backend,
    index: str,
    query_table: str,
    query_id_column: str,
    top: int,
    candidates: int | None,
    probes: int | None,
    metric: str | None,
    into: str | None,
    replace: bool,
    schema: str | None,
    catalog: str | None,
    check: bool,
    exact: bool,
    strict: bool,
    steps: Steps,
) -> pd.DataFrame | None:
    steps.start("checking the table")
    if into is not None:  # before any work: x.xlsx would quietly be a table of that name
        files.refuse_file_ending(into)
    dialect = check_engine(db)
    idx = load_index(db, index)
    if hasattr(db, "statement_room"):  # the engine holds the search, this process little (issue 42)
        db.statement_room()
    if metric is not None and metric != idx.metric:
        raise InvalidParameter(
            f"index {index!r} was built for {idx.metric} distances, not {metric}; build another with --metric={metric}"
        )
    cal = idx.calibration
    options = _settings(idx, top, candidates, probes, exact)
    src = idx.source
    check_columns(db, idx, "search")
    for table in (query_table, src.table):
        if dialect.fold(table).casefold() in {c.casefold() for c in RESERVED}:
            raise InvalidParameter(f"{table!r} is a name the search gives its own sub-queries; rename the table")
    queries = _query_source(db, idx, query_table, query_id_column, schema, catalog)
    unique_ids(db, queries, "query table")
    if check:
        check_source(db, idx.d, queries)
    angular, e = idx.metric == "angular", idx.scale or 0
    seen = magnitude(db, queries, idx.d, rows=angular)
    check_range(_named(query_table), seen.peak, seen.row_min, idx.d, e, idx.name)
    fine = idx.fine or needs_fine(seen.least, e)
    fresh = check_fresh(db, idx, strict) if not exact else False
    if not fresh or idx.scale is None:  # the rows re-ranked are the table's now: within the index's scale?
        now = magnitude(db, src, idx.d, rows=angular)
        check_range(f"table {src.table!r}", now.peak, now.row_min, idx.d, e, idx.name, low=LOW)
        fine = fine or needs_fine(now.least, e)
    idx = dataclasses.replace(idx, fine=fine)
    steps.start("searching")
    if into is None:
        if exact:
            with db.transaction():
                for statement in dialect.local_settings(src):
                    db.execute(statement)
                frame = db.query_df(dialect.render(exact_select(idx.layout, queries, dialect, top)))
        else:
            frame = run_search(db, idx.layout, queries, **options)
        _warn_short(frame, top, db, queries)
        if cal is not None and not exact:
            _warn_far(cal.far_queries(frame, top), len(frame["query_id"].unique()), cal, options["candidates"])
        return frame
    select = (
        exact_select(idx.layout, queries, dialect, top)
        if exact
        else search_select(idx.layout, queries, dialect, **options)
    )
    _write(db, idx, queries, into, replace, select, options if not exact else None)
    return None


def _settings(idx: Index, top: int, candidates: int | None, probes: int | None, exact: bool) -> dict:
    """The search's ``top``, candidates ``C``, probes ``P`` and adaptive rule (``ratio``, ``cap``):
    the index's calibrated defaults where none are given, checked; a warning where the settings given
    are expected to fall below the recall the index was calibrated for."""
    cal = idx.calibration
    C = candidates
    if C is None:  # the default follows top (a nonsense top is refused below), within the bound
        whole = isinstance(top, (int, np.integer)) and not isinstance(top, bool)
        C = (cal.default_candidates(top) if cal else default_candidates(top)) if whole else top
        C = max(min(C, MAX_COUNT), top) if whole else C
    P = probes if probes is not None else idx.probes
    check_search(top, C, P, idx.metric)
    if P > idx.lists:
        raise InvalidParameter(f"probes ({P}) cannot exceed the index's {idx.lists} lists")
    # the calibrated rule probes adaptively (floor P, cap, ratio); probes given: exactly those
    ratio, cap = (cal.ratio, cal.cap) if cal is not None and probes is None else (None, None)
    if cal is not None and not exact and (probes is not None or candidates is not None):
        expected = cal.expected(probes, candidates, top)
        if expected < cal.target - 0.005:
            warn_caller(
                f"--probes={P}, --candidates={C}: expected Recall@{cal.top} about {expected:.2f} on rows like the "
                f"table's, below the {cal.target:g} index {idx.name!r} was calibrated for (its defaults: "
                f"{cal.describe()})",
            )
    return {"top": top, "candidates": C, "probes": P, "ratio": ratio, "cap": cap}


def _write(  # noqa: PLR0913 - _search's
    db: Backend,
    idx: Index,
    queries: Source,
    into: str,
    replace: bool,
    select: exp.Select,
    options: dict | None,
) -> None:
    """The result of ``select`` written to the table ``into``, whole or not at all: in one transaction,
    or (engines without) built under a staging name and swapped in, so a failure leaves ``into`` as
    it was.  ``options``: the indexed search's (None for the exact one), for the staged planes."""
    dialect = db.sql_dialect
    if not into:
        raise InvalidParameter("into must name a table (an empty name writes nothing)")
    dialect.check_table_name(into)
    dialect.check_identifier(into, "output table name")
    if dialect.fold(into).casefold() in REGISTRY_TABLES or dialect.same_identifier(into, queries.table):
        raise InvalidParameter(f"{into!r} is a registry table or the query table; choose another output name")
    _check_into(db, idx, queries, into)
    with atomic_table(db, queries, into, replace=replace) as name, contextlib.ExitStack() as stack:
        assert name is not None
        if options is not None and staged_engine(db) and idx.word_bits == 64:  # the planes as a table
            select = stack.enter_context(staged_search(db, idx.layout, queries, **options))
        for statement in dialect.local_settings(idx.source):
            db.execute(statement)
        db.execute(create_as(dialect, output_table(queries, name), select))


def _check_into(db: Backend, idx: Index, queries: Source, into: str) -> None:
    """``search(..., into=)`` writes none of the tables it reads -- the query table, the indexed table
    -- nor one sqlrp owns (:func:`sqlrp.pipeline.targets.refuse_tables`), compared as catalogue entries."""
    src = idx.source
    reads = [
        targets.Table(queries.table, queries.schema, queries.catalog, "the query table"),
        targets.Table(src.table, src.schema, src.catalog, f"index {idx.name!r}'s source table"),
    ]
    targets.refuse_tables(db, [targets.Table(into, queries.schema, queries.catalog, "the output table")], reads)


def _query_source(
    db: Backend, idx: Index, table: str, id_column: str, schema: str | None, catalog: str | None
) -> Source:
    """The query table read with the index's features; a clear error if it has another ``d``."""
    d = idx.d
    if idx.source.layout == "array":
        queries = resolve_source(
            db, table, id_column, layout="array", array_column=idx.source.array_column, schema=schema, catalog=catalog
        )
        got = infer_d(db, queries)
        if got != d:
            raise InputError(f"index {idx.name!r} has d = {d} features but the query arrays hold {got}")
        return queries
    present = {c.name for c in describe(db, table, schema, catalog)}
    missing = [c for c in idx.source.columns if c not in present]
    if missing:
        numeric = resolve_source(db, table, id_column, schema=schema, catalog=catalog)
        raise InputError(
            f"index {idx.name!r} has d = {d} features ({', '.join(idx.source.columns[:5])}"
            f"{', ...' if d > 5 else ''}) but query table {table!r} has {len(numeric.columns)} numeric "
            f"columns and lacks {', '.join(map(repr, missing[:5]))}{', ...' if len(missing) > 5 else ''}"
        )
    return resolve_source(db, table, id_column, columns=idx.source.columns, schema=schema, catalog=catalog)


def _named(table: str) -> str:
    """The query table as an error names it (a DataFrame's registered name is no name of the user's)."""
    return "the query frame" if table.startswith("_sqlrp_frame") else f"query table {table!r}"


def _warn_far(far: list, total: int, cal: Calibration, candidates: int) -> None:
    """One line when some queries lie far from the indexed rows (:meth:`Calibration.far_queries`)."""
    if far:
        shown = ", ".join(map(repr, far[:5])) + (", ..." if len(far) > 5 else "")
        warn_caller(
            f"{len(far)} of {total} queries ({shown}) are far from the indexed rows (their {cal.top}th neighbour "
            f"is over {FAR:g} times farther than the table's own rows'): the calibrated Recall@{cal.top} "
            f">= {cal.target:g} need not hold for them; re-rank more candidates for them "
            f"(--candidates={4 * candidates}) or build the index with a higher --recall",
        )


def _warn_short(frame: pd.DataFrame, top: int, db: Backend, queries: Source) -> None:
    counts = frame.groupby("query_id").size()
    short = int((counts < top).sum())
    total = int(
        db.fetchall(db.sql_dialect.render(exp.select(exp.Count(this=exp.Star())).from_(table_ref(queries))))[0][0]
    )
    short += total - len(counts)
    if short:
        warn_caller(
            f"{short} queries found fewer than top = {top} neighbours (their probed lists hold fewer rows): "
            "probe more lists (--probes) or re-rank more candidates (--candidates)",
        )


__all__ = ["search"]
