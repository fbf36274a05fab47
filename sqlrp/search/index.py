"""Similarity-search indexes: build, refresh, load, list and drop (issues 23 and 26); searching one is
:mod:`sqlrp.search.lookup`.

    sqlrp.build_index(db, "docs", "id", "docs_idx")                  # lists + RaBitQ codes, in SQL
    hits = sqlrp.search(db, "docs_idx", "questions", "qid", top=10)  # (query_id, id, rank, distance)

An index is three tables named after it, in its table's schema -- ``<name>__tops`` and
``<name>__lists`` (two-level centroids, trained by k-means on a sample) and ``<name>`` (every row's
list, code and estimator constants; :mod:`sqlrp.search.ivf`) -- and a row of ``sqlrp_index`` saying how
they were made.  A search probes each query's nearest lists, ranks their rows by the codes'
distance estimate and re-ranks the best ``candidates`` exactly on the table itself
(:mod:`sqlrp.search.lookup`, its SQL in :mod:`sqlrp.search.query`).

**An index knows its table.** Each index row keeps a hash of the row's id and features; their count
and the sum of each hash hashed again are the table's fingerprint
(:func:`~sqlrp.search.rows.fingerprint`), which every search compares with the table as it is (one pass
over it: 0.24 s for 1,000,000 x 128 ``FLOAT[128]`` rows on DuckDB, ``bench/search.py``). A table
changed since the build -- rows inserted, deleted, updated, duplicated, the table re-created --
gives a warning (``strict=True``: an error) that names the refresh; the exact re-rank reads the
table's current rows, so a deleted row is never returned. ``build_index(..., incremental=True)``
refreshes: rows whose hash no longer matches, or that are gone, leave the index, and new or changed
rows get their codes, in one transaction, with the same centroids and rotation (so that it equals a
new build on those centroids).  The id column's type is recorded: if it changes, the index's ids no
longer name the table's rows, and a refresh and a search refuse, naming the rebuild (issue 31).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, ident, table_ref
from ..core import files
from ..core.errors import InputError, InvalidParameter, ProjectionExists, ProjectionNotFound, refuse_nul
from ..core.lazy import pd
from ..core.names import scratch_name
from ..dialects import SqlrpDialect
from ..pipeline import targets
from ..pipeline.frames import table_name
from ..pipeline.materialise import output_table, staged
from ..pipeline.sources import check_source, describe, infer_d, resolve_source
from ..registry.store import REGISTRY_TABLES, Registry
from .calibrate import QUERIES, TARGET, Calibration, calibrate, sample_rows
from .ivf import MAX_SAMPLE, SAMPLE_PER_LIST, Lists, default_lists, default_probes, train_lists
from .progress import Steps
from .rotation import ROUNDS, rotate, rotation_signs, rotation_size
from .rows import fingerprint, fingerprint_select, rows_select
from .sql import CENTRE, HASH, ID, LIST, METRICS, PARENT, ROTATED, TOP, IndexLayout, feature_rows

INDEX_TABLE = "sqlrp_index"
KIND = "ivf-rabitq"
#: the index rows' format: 2 added ``tb`` (queries quantised once, not once per probed list)
FORMAT = 2
LISTS_SUFFIX, TOPS_SUFFIX = "__lists", "__tops"
#: the search's own common table expressions: a user table of that name would be hidden by them
RESERVED = ("_sqlrp_q", "_sqlrp_planes")


class IndexNotFound(ProjectionNotFound):
    """No index of that name in this database."""


class StaleIndex(InputError):
    """The table changed since the index was built or refreshed (``strict=True``)."""


@dataclass(frozen=True)
class Index:
    """A stored index, as its ``sqlrp_index`` row describes it."""

    name: str
    source: Source
    d: int
    lists: int
    bits: int
    metric: str
    seed: int
    signs: np.ndarray
    probes: int  #: the search's default number of probed lists
    word_bits: int = 64  #: bits of a stored code word (the engine's ``code_word_bits`` when built)
    id_type: str | None = None  #: the id column's type when built (None: an index of an older sqlrp)
    calibration: Calibration | None = None  #: the defaults measured on the table (:mod:`.calibrate`)

    @property
    def layout(self) -> IndexLayout:
        return IndexLayout(
            self.d,
            self.source,
            output_table(self.source, self.name),
            output_table(self.source, self.name + LISTS_SUFFIX),
            output_table(self.source, self.name + TOPS_SUFFIX),
            self.signs,
            self.metric,
            self.word_bits,
        )


def default_candidates(top: int) -> int:
    """``C``: the rows re-ranked exactly per query by default, ``30 * top``.  On the embedding-like
    1,000,000 x 128 table (1,000 lists, 1,000 queries), 84 probes and C = 200 / 300 gave Recall@10
    0.942 / 0.956; 80 probes, C = 300, 0.953 (``/tmp`` probes of 2026-11-25 beside
    ``PYTHONPATH=. python bench/search.py``, whose grid measures them again)."""
    return 30 * top


#: ClickHouse session settings a search raises: an index of 256-bit codes is written by one
#: statement of about 0.5-2 MB and 100,000+ syntax nodes, beyond the defaults (262,144 bytes, 50,000
#: nodes: 3,000 x 32 rows at 256 bits failed at position 262,142)
CLICKHOUSE_LIMITS = {"max_query_size": 1 << 28, "max_ast_elements": 1 << 24, "max_expanded_ast_elements": 1 << 24}


def check_engine(db: Backend) -> SqlrpDialect:
    """Search runs where the engine counts bits and hashes rows (DuckDB, PostgreSQL, Spark,
    ClickHouse); refuse the others up front, naming the engine.  On ClickHouse the session's
    statement limits are raised (:data:`CLICKHOUSE_LIMITS`; ``SET`` lasts for the session)."""
    dialect = db.sql_dialect
    dialect.popcount(col("a"))  # raises EngineLimit naming the engine where missing
    dialect.row_hash([col("a")])
    if dialect.name == "clickhouse":
        for setting, value in CLICKHOUSE_LIMITS.items():
            db.execute(f"SET {setting} = {int(value)}")
    return dialect


def create_as(dialect: SqlrpDialect, table: exp.Table, select: exp.Expression) -> str:
    """``CREATE TABLE table AS select`` with what the engine needs on every table (ClickHouse: an ENGINE)."""
    return dialect.render(
        exp.Create(this=table, kind="TABLE", expression=select, properties=dialect.table_properties())
    )


def _drop_tables(db: Backend, source: Source, names: tuple[str, ...]) -> None:
    """``DROP TABLE IF EXISTS`` each of ``names`` (in the source's schema), errors ignored: cleanup."""
    dialect = db.sql_dialect
    for table in names:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, table)], kind="TABLE", exists=True)))


def _staging_name() -> str:
    return scratch_name("ix")


def _tables(name: str) -> tuple[str, str, str]:
    return name, name + LISTS_SUFFIX, name + TOPS_SUFFIX


def _check_name(dialect: SqlrpDialect, name: str, source: Source) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidParameter("an index needs a name (--name)")
    refuse_nul(name, "index name")
    for table in _tables(name):
        dialect.check_table_name(table)
        dialect.check_identifier(table, "index table name")
        if dialect.fold(table).casefold() in REGISTRY_TABLES:
            raise InvalidParameter(f"{table!r} is one of sqlrp's registry tables; choose another index name")
        if dialect.same_identifier(table, source.table):
            raise InvalidParameter(f"the index would overwrite its source table {source.table!r}; choose another name")


def _check_targets(db: Backend, name: str, source: Source, old: Source | None, existing: tuple | None) -> None:
    """Refuse, before any work, index tables that would overwrite the table indexed, a table sqlrp
    owns (the registry, another index's: :func:`sqlrp.pipeline.targets.refuse_tables`), or a table of
    the user's -- any table there but this index's own (``old``: where its source was)."""
    schema, catalog = source.schema, source.catalog
    new = targets.index_tables(name, schema, catalog)[:3]
    indexed = targets.Table(source.table, schema, catalog, f"index {name!r}'s source table")
    targets.refuse_tables(db, new, [indexed], besides=name)
    own = targets.index_tables(name, old.schema, old.catalog) if old is not None else []
    for table in new:
        if existing is not None and (old is None or any(targets.same_table(db, table, o) for o in own)):
            continue
        if db.table_exists(table.name, schema):
            raise ProjectionExists(f"a table {table.name!r} exists and is not an index; choose another index name")


def _registered_source(row: tuple) -> Source | None:
    """The source an index's registry row names (None if it names none that sqlrp can read)."""
    try:
        src = json.loads(row[0])
        src["columns"] = tuple(src["columns"])
        return Source(**src)
    except (TypeError, ValueError, KeyError):
        return None


def unique_ids(db: Backend, source: Source, what: str) -> int:
    """Row count of ``source``; its ids must be unique and not NULL (a search result names rows by id)."""
    dialect = db.sql_dialect
    key = col(source.id_column)
    query = exp.select(exp.Count(this=exp.Star()), exp.Count(this=exp.Distinct(expressions=[key]))).from_(
        table_ref(source)
    )
    rows, distinct = db.fetchall(dialect.render(query))[0]
    if rows == 0:
        raise InputError(f"{what} {source.table!r} is empty: nothing to {'index' if what == 'table' else 'search'}")
    if rows != distinct:
        raise InputError(
            f"the ids of {what} {source.table!r} ({source.id_column!r}) must be unique and not NULL: "
            f"{rows} rows, {distinct} distinct ids"
        )
    return int(rows)


def _row(db: Backend, name: str) -> tuple | None:
    rows = db.fetchall(f"SELECT source, params FROM {INDEX_TABLE} WHERE name = ?", [name])
    return rows[0] if rows else None


def load_index(db: Backend, name: str) -> Index:
    """The stored index ``name`` (:class:`IndexNotFound` if there is none)."""
    Registry(db)
    refuse_nul(name, "index name")
    row = _row(db, name)
    if row is None:
        known = [r[0] for r in db.fetchall(f"SELECT name FROM {INDEX_TABLE} ORDER BY name")]
        raise IndexNotFound(
            f"no index named {name!r} in this database"
            + (f" (there are: {', '.join(map(repr, known[:20]))})" if known else "; build one with `sqlrp index`")
        )
    source, params = row
    if not params:
        raise IndexNotFound(
            f"index {name!r} was built by an older sqlrp (LSH bands), which this version does not search: "
            f"rebuild it with `sqlrp index ... --name {name} --replace`"
        )
    src = json.loads(source)
    src["columns"] = tuple(src["columns"])
    p = json.loads(params)
    if int(p.get("format", 1)) != FORMAT:
        raise IndexNotFound(
            f"index {name!r} was built by another version of sqlrp (index format {p.get('format', 1)}, "
            f"this one reads {FORMAT}): rebuild it with `sqlrp index ... --name {name} --replace`"
        )
    return Index(
        name,
        Source(**src),
        int(p["d"]),
        int(p["lists"]),
        int(p["bits"]),
        p["metric"],
        int(p["seed"]),
        rotation_signs(int(p["bits"]), int(p["seed"]), int(p["rounds"])),
        int(p["probes"]),
        int(p.get("word_bits", 64)),
        p.get("id_type"),
        Calibration.from_json(p.get("calibration")),
    )


def load_lists(db: Backend, index: Index) -> Lists:
    """The index's stored centroids (what :func:`sqlrp.search.reference.reference_search` needs to replay it)."""
    dialect = db.sql_dialect
    layout = index.layout
    xs = [col(f"{CENTRE}{i}") for i in range(index.d)]
    tops = db.fetchall(dialect.render(exp.select(*xs).from_(layout.tops.copy()).order_by(col(TOP))))
    leaves = db.fetchall(dialect.render(exp.select(col(PARENT), *xs).from_(layout.lists.copy()).order_by(col(LIST))))
    return Lists(
        np.array(tops, dtype=np.float64).reshape(-1, index.d),
        np.array([r[1:] for r in leaves], dtype=np.float64).reshape(-1, index.d),
        np.array([r[0] for r in leaves], dtype=np.int64),
    )


def list_indexes(db: Backend) -> pd.DataFrame:
    """One row per stored index: name, table, rows' features, lists, code bits, metric."""
    Registry(db)  # its tables, sqlrp_index included, exist from here on
    rows = db.fetchall(f"SELECT name, source, params FROM {INDEX_TABLE} ORDER BY name")
    out = []
    for name, source, params in rows:
        p = json.loads(params) if params else {}
        out.append(
            (name, json.loads(source)["table"], p.get("d"), p.get("lists"), p.get("bits"), p.get("metric", "lsh"))
        )
    return pd.DataFrame(out, columns=["name", "table", "d", "lists", "bits", "metric"])


def drop_index(db: Backend, name: str) -> None:
    """Drop the index ``name``: its tables and its registry row."""
    refuse_nul(name, "index name")
    Registry(db)
    row = _row(db, name)
    if row is None:
        load_index(db, name)  # raises IndexNotFound, listing the indexes there are
    src = json.loads(row[0])
    src["columns"] = tuple(src["columns"])
    source = Source(**src)
    dialect = db.sql_dialect
    with db.transaction():  # the registry row first: without transactions, no half-dropped index stays registered
        db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])
        for table in (*_tables(name), name + "__bands"):  # __bands: an index of an older sqlrp
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, table)], kind="TABLE", exists=True)))


def _write_centroids(db: Backend, table: exp.Table, columns: dict[str, np.ndarray]) -> None:
    """``CREATE TABLE table`` with these columns (BIGINT keys, DOUBLE centroids), staged through a
    temporary table (the backends insert arrays into an unqualified name)."""
    dialect = db.sql_dialect
    if not db.transactional:  # Spark has no temporary tables: a staging table, dropped whatever happens
        stage = _staging_name()
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


def build_index(
    db: Backend,
    table: str,
    id_column: str,
    name: str,
    *,
    lists: int | None = None,
    bits: int | None = None,
    probes: int | None = None,
    metric: str = "euclidean",
    seed: int = 0,
    sample: int | None = None,
    incremental: bool = False,
    replace: bool = False,
    check: bool = True,
    layout: str = "wide",
    columns: list[str] | None = None,
    array_column: str | None = None,
    schema: str | None = None,
    catalog: str | None = None,
    nulls: str = "error",
    recall: float = TARGET,
    calibration_queries: int = QUERIES,
    progress: bool = False,
) -> Index:
    """Index ``table`` for similarity search (module docstring): ``lists`` inverted lists (default
    :func:`~sqlrp.search.ivf.default_lists`, about ``sqrt(rows)``) trained by k-means on ``sample`` rows
    (default 40 a list, at most 100,000), and ``bits``-bit RaBitQ codes (a power of two >= d; default
    :func:`~sqlrp.search.rotation.rotation_size`, 256 for d = 128).  ``probes`` sets the lists a search
    probes by default; ``metric`` is ``euclidean`` or ``angular`` (cosine distance).

    One transaction: a failure leaves no index (on Spark and ClickHouse, which have none, the tables
    are staged and swapped in and the registry row written last: :func:`_build_staged`).
    ``incremental=True`` refreshes an existing index from its table (new, changed and deleted rows;
    same centroids); ``replace=True`` rebuilds it.

    The defaults a search uses are measured on the table itself (:mod:`sqlrp.search.calibrate`):
    ``calibration_queries`` of its rows (0: none; the defaults are then ``probes`` and ``30 * top``)
    are searched, and the probing rule and candidates that reach Recall@10 ``recall`` are stored.
    ``progress`` shows a bar on stderr (:mod:`sqlrp.search.progress`)."""
    table_name(table)  # a frame's index would outlive it
    if incremental and replace:
        raise InvalidParameter("incremental refreshes an index and replace rebuilds it: choose one")
    if metric not in METRICS:
        raise InvalidParameter(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    for label, value in (("lists", lists), ("probes", probes), ("sample", sample)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0):
            raise InvalidParameter(f"{label} must be a positive integer, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidParameter(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(recall, bool) or not isinstance(recall, (int, float)) or not 0 < recall <= 1:
        raise InvalidParameter(f"recall must be a number in (0, 1], got {recall!r}")
    if (
        isinstance(calibration_queries, bool)
        or not isinstance(calibration_queries, (int, np.integer))
        or calibration_queries < 0
    ):
        raise InvalidParameter(f"calibration_queries must be a whole number >= 0, got {calibration_queries!r}")
    check_engine(db)
    Registry(db)
    existing = _row(db, name) if isinstance(name, str) and name else None
    if existing is not None and not (incremental or replace):
        raise ProjectionExists(
            f"index {name!r} exists; pass replace=True (--replace) to rebuild it or incremental=True "
            "(--incremental) to refresh it from its table"
        )
    if incremental and existing is not None:
        with Steps(progress, f"refreshing index {name}", ["refreshing"]) as steps:
            steps.start("refreshing")
            return _refresh(db, load_index(db, name), check)
    with Steps(progress, f"index {name}", list(BUILD_STAGES)) as steps:
        return _build(
            db,
            name,
            existing,
            steps,
            table,
            id_column,
            lists,
            bits,
            probes,
            metric,
            seed,
            sample,
            check,
            layout,
            columns,
            array_column,
            schema,
            catalog,
            nulls,
            recall,
            calibration_queries,
        )


#: the stages a build's progress bar shows
BUILD_STAGES = ("reading the table", "k-means", "writing codes", "calibrating")


def _build(  # noqa: PLR0913 - build_index's own arguments, checked there
    db: Backend,
    name: str,
    existing: tuple | None,
    steps: Steps,
    table: str,
    id_column: str,
    lists: int | None,
    bits: int | None,
    probes: int | None,
    metric: str,
    seed: int,
    sample: int | None,
    check: bool,
    layout: str,
    columns: list[str] | None,
    array_column: str | None,
    schema: str | None,
    catalog: str | None,
    nulls: str,
    recall: float,
    calibration_queries: int,
) -> Index:
    """:func:`build_index` once its arguments are checked: a new index (or a rebuild)."""
    dialect = db.sql_dialect
    steps.start("reading the table")
    if schema is None and catalog is None and files.file_format(table) is not None and files.matching(table):
        table = files.absolute(table)  # a file is kept by its absolute path: searched later from anywhere
    source = resolve_source(
        db, table, id_column, layout, columns, array_column, schema=schema, nulls=nulls, catalog=catalog
    )
    if source.layout == "long":
        raise InvalidParameter("indexes read the wide or array layout (the re-ranking needs every feature)")
    _check_name(dialect, name, source)
    _check_targets(db, name, source, _registered_source(existing) if existing else None, existing)
    d = infer_d(db, source)
    size = rotation_size(d, bits)
    rows = unique_ids(db, source, "table")
    if check:
        check_source(db, d, source)
    L = min(lists if lists is not None else default_lists(rows), rows)
    want = sample if sample is not None else min(max(SAMPLE_PER_LIST * L, 1000), MAX_SAMPLE)
    size_ = min(want, rows)
    drawn = sample_rows(db, source, d, metric, rows, size_, seed)
    steps.start("k-means")
    centroids = train_lists(drawn, L, seed)
    signs = rotation_signs(size, seed, ROUNDS)
    P = min(probes if probes is not None else default_probes(centroids.count), centroids.count)
    params = {"kind": KIND, "format": FORMAT, "d": d, "lists": centroids.count, "bits": size}
    params |= {"rounds": ROUNDS, "seed": int(seed), "word_bits": dialect.code_word_bits}
    params |= {"id_type": id_type(db, source)}
    params |= {"metric": metric, "probes": int(P), "sample": int(min(want, rows))}
    index = Index(
        name,
        source,
        d,
        centroids.count,
        size,
        metric,
        int(seed),
        signs,
        int(P),
        dialect.code_word_bits,
        params["id_type"],
    )
    described = {
        "table": source.table,
        "id_column": source.id_column,
        "layout": source.layout,
        "columns": list(source.columns),
        "array_column": source.array_column,
        "schema": source.schema,
        "catalog": source.catalog,
        "nulls": source.nulls,
    }

    def measure(built: Index) -> None:  # the defaults, measured on the written index (calibrate.py)
        nonlocal index
        steps.start("calibrating")
        found = calibrate(
            db, built.layout, centroids, rows, size_, int(seed), recall, calibration_queries, probes and int(P)
        )
        if found is not None:
            params["calibration"] = found.to_json()
            params["probes"] = found.floor
            index = Index(**{**index.__dict__, "probes": found.floor, "calibration": found})

    def register() -> None:
        db.execute(
            f"INSERT INTO {INDEX_TABLE} (name, projection, source, bits, band_bits, means, vectors, params) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [name, "", json.dumps(described), size, 0, None, False, json.dumps(params)],
        )

    if not db.transactional:
        _build_staged(db, index, source, centroids, existing, register, measure, steps)
        return index
    with db.transaction():
        db.lock(f"sqlrp index {name}")
        if existing is not None:
            _unregister(db, name, source, existing)
        _write_index(db, index.layout, source, centroids, steps)
        measure(index)
        register()
    return index


def _write_index(
    db: Backend, layout: IndexLayout, source: Source, centroids: Lists, steps: Steps | None = None
) -> None:
    """The index's three tables: centroids, then every row's list and code."""
    dialect = db.sql_dialect
    steps = steps or Steps(False, "", [])
    steps.start("writing codes")
    _store_centroids(db, layout, centroids, layout.signs)
    # written list by list: the search's join of probes to rows then meets a list's rows together
    # (1,000 queries x 63 probes on 1M rows: 2.10 s against 3.03 s for the rows in table order)
    rows = rows_select(layout, source, dialect).order_by(col("_list", "r"), copy=False)
    steps.execute(db, create_as(dialect, layout.rows, rows))
    for statement in dialect.lookup_indexes(layout.rows, [LIST]):
        db.execute(statement)


def _unregister(db: Backend, name: str, source: Source, existing: tuple) -> None:
    """Delete the index ``name``'s registry row, then its tables (a search finds no index from the
    first statement on, never a half-dropped one)."""
    old = load_index(db, name) if existing[1] else None
    db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])
    dialect = db.sql_dialect
    for table in (*_tables(name), name + "__bands"):  # __bands: an index of an older sqlrp
        target = output_table(old.source if old else source, table)
        db.execute(dialect.render(exp.Drop(tables=[target], kind="TABLE", exists=True)))


def _build_staged(
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
    stage = Index(**{**index.__dict__, "name": _staging_name()})
    try:
        _write_index(db, stage.layout, source, centroids, steps)
        measure(stage)
    except BaseException:
        _drop_tables(db, source, _tables(stage.name))
        raise
    unregistered = existing is None
    try:
        if existing is not None:
            _unregister(db, index.name, source, existing)
            unregistered = True
        for old, new in zip(_tables(stage.name), _tables(index.name), strict=True):
            db.execute(dialect.rename(output_table(source, old), output_table(source, new)))
        register()
    except BaseException:
        _drop_tables(db, source, _tables(stage.name))
        if unregistered:  # the name is free again: no half-renamed tables are left under it
            _drop_tables(db, source, _tables(index.name))
        raise


def _store_centroids(db: Backend, layout: IndexLayout, centroids: Lists, signs: np.ndarray) -> None:
    d = layout.d
    rotated = rotate(centroids.leaves, signs)
    tops = {TOP: np.arange(len(centroids.tops), dtype=np.int64)}
    tops |= {f"{CENTRE}{i}": centroids.tops[:, i].copy() for i in range(d)}
    leaves = {LIST: np.arange(centroids.count, dtype=np.int64), PARENT: centroids.parent.astype(np.int64)}
    leaves |= {f"{CENTRE}{i}": centroids.leaves[:, i].copy() for i in range(d)}
    leaves |= {f"{ROTATED}{j}": rotated[:, j].copy() for j in range(rotated.shape[1])}
    _write_centroids(db, layout.tops, tops)
    _write_centroids(db, layout.lists, leaves)


def _refresh(db: Backend, index: Index, check: bool) -> Index:
    """Bring ``index`` up to date with its table (module docstring), in one transaction."""
    dialect = db.sql_dialect
    src = index.source
    source = resolve_source(
        db,
        src.table,
        src.id_column,
        src.layout,
        src.columns or None,
        src.array_column,
        schema=src.schema,
        nulls=src.nulls,
        catalog=src.catalog,
    )
    changed = id_type_change(db, index, source)
    if changed:
        raise StaleIndex(f"cannot refresh: {changed}")
    unique_ids(db, source, "table")
    if check:
        check_source(db, index.d, source)
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


def _refresh_staged(db: Backend, index: Index, source: Source, hashed: exp.Select) -> None:
    """:func:`_refresh` on an engine without transactions: the refreshed rows -- those whose id and
    hash the table still holds, and codes for the rest -- are written to a staging table in one
    ``CREATE TABLE AS``, then swapped in for the index rows (:func:`sqlrp.pipeline.materialise.staged`).  A
    failure before the swap leaves the index as it was; a search never reads a half-refreshed one.
    No correlated sub-query (ClickHouse has none by default): joins and ``NOT IN``."""
    dialect = db.sql_dialect
    layout = index.layout
    fresh = output_table(source, _staging_name())
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
        f"built and is {now} now; rebuild the index with `sqlrp index --table {source.table} "
        f"--id-column {source.id_column} --name {index.name} --replace`"
    )


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
        f"rows or rank old values (deleted rows are never returned); refresh it with "
        f"`sqlrp index --table {index.source.table} --id-column {index.source.id_column} "
        f"--name {index.name} --incremental`"
    )
    if strict:
        raise StaleIndex(message)
    warnings.warn(message, stacklevel=3)
    return False


def describe_index(index: Index) -> str:
    """One line for the CLI."""
    head = f"index {index.name!r}: {index.lists} lists, {index.bits}-bit codes, {index.metric}"
    if index.calibration is not None:
        return f"{head}; defaults {index.calibration.describe()}"
    return f"{head}, {index.probes} probes by default"


def describe_defaults(db: Backend, name: str, top: int) -> str | None:
    """What a search of ``name`` at its defaults does and the recall they were calibrated for (``None``
    for an index built without a calibration)."""
    cal = load_index(db, name).calibration
    if cal is None:
        return None
    return f"search defaults of index {name!r}: {cal.describe()}; candidates {cal.default_candidates(top)} at top {top}"


__all__ = [
    "Index",
    "IndexNotFound",
    "StaleIndex",
    "build_index",
    "check_fresh",
    "default_candidates",
    "describe_defaults",
    "drop_index",
    "list_indexes",
    "load_index",
    "load_lists",
]
