"""Building a similarity-search index (:func:`build_index`): read and check the table, train the lists
by k-means on a sample, write every row's list and RaBitQ code, then measure the search's defaults on
the written index (:mod:`sqlrp.search.calibrate`).  One transaction where the engine has them, else
staged under another name and swapped in; the tables are written by :mod:`sqlrp.search.write`.  What an
index is, and the catalogue of them: :mod:`sqlrp.search.index`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Unpack

from ..backends import Backend
from ..backends.staging import sweep_scratch_tables
from ..compiler import Source
from ..core import files
from ..core.errors import InvalidParameter, ProjectionExists, refuse_nul
from ..core.layout import SOURCE_OPTIONS, SourceOptions
from ..core.options import refuse_unknown
from ..core.params import count, optional_count
from ..dialects import SqlrpDialect
from ..pipeline import targets
from ..pipeline.checks import check_source
from ..pipeline.frames import table_name
from ..pipeline.sources import infer_d, resolve_source
from ..registry.store import REGISTRY_TABLES, Registry
from .calibrate import QUERIES, TARGET, Aim, calibrate
from .fresh import id_type, refresh
from .index import (
    FORMAT,
    INDEX_TABLE,
    KIND,
    Index,
    check_engine,
    index_table_names,
    load_index,
    registered_source,
    registry_row,
    unique_ids,
)
from .ivf import MAX_SAMPLE, SAMPLE_PER_LIST, Lists, default_lists, default_probes, train_lists
from .progress import Steps
from .rotation import ROUNDS, rotation_signs, rotation_size
from .sample import sample_rows
from .scale import check_range, engine_range, magnitude, needs_fine, scale_exponent
from .sql import METRICS
from .write import build_staged, unregister, write_index

#: the stages a build's progress bar shows
BUILD_STAGES = ("reading the table", "k-means", "writing codes", "calibrating")


@dataclass(frozen=True)
class IndexSpec:
    """How an index is made (:func:`build_index`'s parameters of the index itself), checked once."""

    lists: int | None = None
    bits: int | None = None
    probes: int | None = None
    metric: str = "euclidean"
    seed: int = 0
    sample: int | None = None
    recall: float = TARGET
    calibration_queries: int = QUERIES

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise InvalidParameter(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        for label, value in (("lists", self.lists), ("probes", self.probes), ("bits", self.bits)):
            optional_count(label, value)  # whole numbers in their ranges (sqlrp.core.params.LIMITS)
        optional_count("sample", self.sample, limit="index_sample")
        count("seed", self.seed)
        recall = self.recall
        if isinstance(recall, bool) or not isinstance(recall, (int, float)) or not 0 < recall <= 1:
            raise InvalidParameter(f"recall must be a number in (0, 1], got {recall!r}")
        count("calibration_queries", self.calibration_queries)


class IndexOptions(SourceOptions, total=False):
    """:func:`build_index`'s options: the index itself (:class:`IndexSpec`, with its defaults), the input
    (:class:`~sqlrp.core.layout.SourceOptions`; an index reads the wide or array layout, unpooled) and
    how it is written."""

    lists: int | None
    """inverted lists (default :func:`~sqlrp.search.ivf.default_lists`, about ``sqrt(rows)``), trained by k-means on
    ``sample`` rows (default 40 a list, at most 100,000)"""
    sample: int | None
    bits: int | None
    """bits of the RaBitQ codes: a power of two >= d (default :func:`~sqlrp.search.rotation.rotation_size`)"""
    probes: int | None
    """the lists a search probes when calibration is off"""
    metric: str
    """``euclidean`` or ``angular`` (cosine distance)"""
    seed: int
    recall: float
    """the Recall@10 the calibrated defaults reach, measured on ``calibration_queries`` rows (0: none)"""
    calibration_queries: int
    incremental: bool
    """refresh an existing index from its table (same centroids), or rebuild it"""
    replace: bool
    check: bool
    """refuse NULL, NaN or infinite features; a progress bar on stderr"""
    progress: bool


#: the input options an index reads, and their defaults: the Source's, but the long layout's and pooling
INDEX_INPUTS = {
    name: field.default
    for name, field in Source.__dataclass_fields__.items()
    if name in SOURCE_OPTIONS and name not in ("feature_column", "value_column", "group_column")
}


def build_index(db: Backend, table: str, id_column: str, name: str, **options: Unpack[IndexOptions]) -> Index:
    """Index ``table`` for similarity search (module docstring): inverted lists trained by k-means on a
    sample, and RaBitQ codes of every row.

    One transaction: a failure leaves no index (on Spark and ClickHouse, which have none, the tables
    are staged and swapped in and the registry row written last: :func:`sqlrp.search.write.build_staged`).

    The defaults a search uses are measured on the table itself (:mod:`sqlrp.search.calibrate`):
    ``calibration_queries`` of its rows (0: none; the defaults are then ``probes`` and ``30 * top``)
    are searched, and the probing rule and candidates that reach Recall@10 ``recall`` are stored.

    :param db: the connection.
    :param table: the table to index (wide or array layout; on DuckDB also a file or glob).
    :param id_column: the rows' key.
    :param name: the index's name.
    :param options: :class:`IndexOptions` -- the index (``lists``, ``bits``, ``probes``, ``metric``,
        ``seed``, ``sample``, ``recall``, ``calibration_queries``), the input (``layout``, ``columns``,
        ``array_column``, ``schema``, ``catalog``, ``nulls``), ``incremental`` (refresh an existing index
        from its table: new, changed and deleted rows; same centroids), ``replace`` (rebuild it),
        ``check``, ``progress`` (a bar on stderr, :mod:`sqlrp.search.progress`).
    :returns: the index.
    """
    refuse_unknown("build_index", options, IndexOptions.__annotations__)
    given: dict = dict(options)
    spec = IndexSpec(**{key: given.pop(key) for key in IndexSpec.__dataclass_fields__ if key in given})
    inputs = {key: given.pop(key, default) for key, default in INDEX_INPUTS.items()}
    incremental, replace = given.pop("incremental", False), given.pop("replace", False)
    check, progress = given.pop("check", True), given.pop("progress", False)
    if given:  # the long layout's columns, or pooling
        raise InvalidParameter(f"an index reads the wide or array layout, one row a vector: no {', '.join(given)}")
    table_name(table)  # a frame's index would outlive it
    if incremental and replace:
        raise InvalidParameter("--incremental refreshes an index and --replace rebuilds it: choose one")
    check_engine(db)
    Registry.of(db)
    sweep_scratch_tables(db, inputs.get("schema"))  # what killed builds left (issue 42)
    existing = registry_row(db, name) if isinstance(name, str) and name else None
    if existing is not None and not (incremental or replace):
        raise ProjectionExists(
            f"index {name!r} exists; pass --replace to rebuild it or --incremental to refresh it from its table"
        )
    if incremental and existing is not None:
        with (
            engine_range(f"refresh of index {name!r}"),
            Steps(progress, f"refreshing index {name}", ["refreshing"]) as steps,
        ):
            steps.start("refreshing")
            return refresh(db, load_index(db, name), check)
    with engine_range(f"index {name!r}"), Steps(progress, f"index {name}", list(BUILD_STAGES)) as steps:
        return _build(db, name, existing, steps, table, id_column, inputs, spec, check)


def _build(  # noqa: PLR0913 - build_index's own arguments, checked there
    db: Backend,
    name: str,
    existing: tuple | None,
    steps: Steps,
    table: str,
    id_column: str,
    inputs: dict,
    spec: IndexSpec,
    check: bool,
) -> Index:
    """:func:`build_index` once its arguments are checked: a new index (or a rebuild)."""
    steps.start("reading the table")
    source, d, size, rows = _read(db, name, existing, table, id_column, inputs, spec.bits, check)
    # one pass for the table's magnitudes: the scale that keeps its squared distances finite (scale.py)
    seen = magnitude(db, source, d, rows=spec.metric == "angular")
    e = scale_exponent(seen.peak)
    check_range(f"table {source.table!r}", seen.peak, seen.row_min, d, e, name)
    L = min(spec.lists if spec.lists is not None else default_lists(rows), rows)
    want = spec.sample if spec.sample is not None else min(max(SAMPLE_PER_LIST * L, 1000), MAX_SAMPLE)
    drawn_rows = min(want, rows)
    drawn = sample_rows(db, source, d, spec.metric, rows, drawn_rows, spec.seed, e)
    steps.start("k-means")
    centroids = train_lists(drawn, L, spec.seed)
    index, params = _new_index(db, name, source, d, size, centroids, spec, drawn_rows, e, needs_fine(seen.least, e))
    P = index.probes
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
        aim = Aim(spec.recall, spec.calibration_queries, spec.probes and int(P))
        found = calibrate(db, built.layout, centroids, rows, drawn_rows, int(spec.seed), aim)
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
        build_staged(db, index, source, centroids, existing, register, measure, steps)
        return index
    with db.transaction():
        db.lock(f"sqlrp index {name}")
        if existing is not None:
            unregister(db, name, source, existing)
        write_index(db, index.layout, source, centroids, steps)
        measure(index)
        register()
    return index


def _read(  # noqa: PLR0913 - _build's
    db: Backend,
    name: str,
    existing: tuple | None,
    table: str,
    id_column: str,
    inputs: dict,
    bits: int | None,
    check: bool,
) -> tuple[Source, int, int, int]:
    """The table to index, resolved and checked before any work: ``(source, d, code bits, rows)``."""
    schema, catalog = inputs["schema"], inputs["catalog"]
    if schema is None and catalog is None and files.file_format(table) is not None and files.matching(table):
        table = files.absolute(table)  # a file is kept by its absolute path: searched later from anywhere
    source = resolve_source(db, table, id_column, **{**inputs, "schema": schema, "catalog": catalog})
    if source.layout == "long":
        raise InvalidParameter("indexes read the wide or array layout (the re-ranking needs every feature)")
    _check_name(db.sql_dialect, name, source)
    _check_targets(db, name, source, registered_source(existing) if existing else None, existing)
    d = infer_d(db, source)
    size = rotation_size(d, bits)
    widest = 2 + d + size  # the lists table: list, parent, d centroid and D rotated coordinates
    limit = db.sql_dialect.max_columns
    if limit is not None and widest > limit:
        raise db.sql_dialect.refuse(
            f"index {name!r} of d = {d} features with {size}-bit codes needs tables of {widest:,} columns; the "
            f"engine allows {limit:,}: choose --bits={_widest_bits(d, limit)} or less"
        )
    rows = unique_ids(db, source, "table")
    if check:
        check_source(db, d, source)
    return source, d, size, rows


def _new_index(  # noqa: PLR0913 - _build's
    db: Backend,
    name: str,
    source: Source,
    d: int,
    size: int,
    centroids: Lists,
    spec: IndexSpec,
    drawn: int,
    e: int,
    fine: bool,
) -> tuple[Index, dict]:
    """The index about to be written, and the parameters its registry row keeps."""
    dialect = db.sql_dialect
    signs = rotation_signs(size, spec.seed, ROUNDS)
    P = min(spec.probes if spec.probes is not None else default_probes(centroids.count), centroids.count)
    params = {"kind": KIND, "format": FORMAT, "d": d, "lists": centroids.count, "bits": size}
    params |= {"rounds": ROUNDS, "seed": int(spec.seed), "word_bits": dialect.code_word_bits}
    params |= {"id_type": id_type(db, source)}
    params |= {"metric": spec.metric, "probes": int(P), "sample": int(drawn), "scale": int(e)}
    params |= {"fine": bool(fine)}
    index = Index(
        name,
        source,
        d,
        centroids.count,
        size,
        spec.metric,
        int(spec.seed),
        signs,
        int(P),
        dialect.code_word_bits,
        params["id_type"],
        scale=int(e),
        fine=bool(fine),
    )
    return index, params


def _widest_bits(d: int, columns: int) -> int:
    """The most code bits (a power of two) whose lists table of ``d`` features fits ``columns``."""
    bits = 64
    while 2 + d + 2 * bits <= columns:
        bits *= 2
    return bits


def _check_name(dialect: SqlrpDialect, name: str, source: Source) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidParameter("an index needs a name (--name)")
    refuse_nul(name, "index name")
    for table in index_table_names(name):
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


__all__ = ["BUILD_STAGES", "IndexSpec", "build_index"]
