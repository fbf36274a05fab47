"""Similarity-search indexes: what one is, and the catalogue of them -- load, list, describe and drop
(issues 23 and 26).  Building one is :mod:`sqlrp.search.build`, keeping it fresh
:mod:`sqlrp.search.fresh`, searching it :mod:`sqlrp.search.lookup`.

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
over it; its cost is in ``docs/benchmarks.md``, "Search"). A table
changed since the build -- rows inserted, deleted, updated, duplicated, the table re-created --
gives a warning (``strict=True``: an error) that names the refresh
(:func:`~sqlrp.search.fresh.check_fresh`); the exact re-rank reads the table's current rows, so a
deleted row is never returned. ``build_index(..., incremental=True)``
refreshes: rows whose hash no longer matches, or that are gone, leave the index, and new or changed
rows get their codes, in one transaction, with the same centroids and rotation (so that it equals a
new build on those centroids).  The id column's type is recorded: if it changes, the index's ids no
longer name the table's rows, and a refresh and a search refuse, naming the rebuild (issue 31)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, table_ref
from ..core.errors import InputError, ProjectionNotFound, refuse_nul, text_value
from ..core.lazy import pd
from ..core.names import scratch_name
from ..dialects import SqlrpDialect
from ..pipeline.materialise import output_table
from ..registry.store import Registry
from .calibrate import Calibration
from .ivf import Lists
from .rotation import rotation_signs
from .sql import CENTRE, LIST, PARENT, TOP, IndexLayout

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
    #: the rows are read times ``2^scale`` (:mod:`.scale`; None: an index of an older sqlrp, read unscaled,
    #: its table's magnitudes checked at each search)
    scale: int | None = None
    #: rows may differ by less than ``2^-400`` scaled: small distances computed again (:func:`.sql.pair_distance`)
    fine: bool = False

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
            self.scale or 0,
            self.fine,
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


def drop_tables(db: Backend, source: Source, names: tuple[str, ...]) -> None:
    """``DROP TABLE IF EXISTS`` each of ``names`` (in the source's schema), errors ignored: cleanup."""
    dialect = db.sql_dialect
    for table in names:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, table)], kind="TABLE", exists=True)))


def staging_name() -> str:
    return scratch_name("ix")


def index_table_names(name: str) -> tuple[str, str, str]:
    return name, name + LISTS_SUFFIX, name + TOPS_SUFFIX


def registry_row(db: Backend, name: str) -> tuple | None:
    db.sql_dialect.check_registry_key(name, "index name")  # a name the registry's key keeps apart (MySQL)
    rows = db.fetchall(f"SELECT source, params FROM {INDEX_TABLE} WHERE name = ?", [name])
    return rows[0] if rows else None


def registered_source(row: tuple) -> Source | None:
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


def load_index(db: Backend, name: str) -> Index:
    """The stored index ``name`` (:class:`IndexNotFound` if there is none).

    :param db: the connection whose registry holds it.
    :param name: the index's name (:func:`sqlrp.build_index`'s ``name``).
    :returns: the index: its source table, dimension, lists, code bits, metric and the rest of how it was built.
    """
    Registry.of(db)
    refuse_nul(name, "index name")
    row = registry_row(db, name)
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
            f"rebuild it: index its table again with --name={text_value(name)} --replace"
        )
    src = json.loads(source)
    src["columns"] = tuple(src["columns"])
    p = json.loads(params)
    if int(p.get("format", 1)) != FORMAT:
        raise IndexNotFound(
            f"index {name!r} was built by another version of sqlrp (index format {p.get('format', 1)}, "
            f"this one reads {FORMAT}): rebuild it: index its table again with --name={text_value(name)} --replace"
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
        int(p["scale"]) if p.get("scale") is not None else None,
        bool(p.get("fine", False)),
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
    """One row per stored index: name, table, rows' features, lists, code bits, metric.

    :param db: the connection whose registry is read.
    :returns: a DataFrame of ``name``, ``table``, ``d``, ``lists``, ``bits`` and ``metric``, ordered by name.
    """
    Registry.of(db)  # its tables, sqlrp_index included, exist from here on
    rows = db.fetchall(f"SELECT name, source, params FROM {INDEX_TABLE} ORDER BY name")
    out = []
    for name, source, params in rows:
        p = json.loads(params) if params else {}
        out.append(
            (name, json.loads(source)["table"], p.get("d"), p.get("lists"), p.get("bits"), p.get("metric", "lsh"))
        )
    return pd.DataFrame(out, columns=["name", "table", "d", "lists", "bits", "metric"])


def drop_index(db: Backend, name: str) -> None:
    """Drop the index ``name``: its tables and its registry row.

    :param db: the connection whose registry holds it.
    :param name: the index's name (:class:`IndexNotFound` if there is none).
    """
    refuse_nul(name, "index name")
    Registry.of(db)
    row = registry_row(db, name)
    if row is None:
        load_index(db, name)  # raises IndexNotFound, listing the indexes there are
    src = json.loads(row[0])
    src["columns"] = tuple(src["columns"])
    source = Source(**src)
    dialect = db.sql_dialect
    with db.transaction():  # the registry row first: without transactions, no half-dropped index stays registered
        db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])
        for table in (*index_table_names(name), name + "__bands"):  # __bands: an index of an older sqlrp
            db.execute(dialect.render(exp.Drop(tables=[output_table(source, table)], kind="TABLE", exists=True)))


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
    "default_candidates",
    "describe_defaults",
    "describe_index",
    "drop_index",
    "list_indexes",
    "load_index",
    "load_lists",
]
