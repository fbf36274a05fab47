"""Similarity-search indexes: build, load, list, drop, and search (issue 15).

    sqlrp.build_index(db, "docs", "id", "docs_idx", bits=256)            # signatures + bands, in SQL
    hits = sqlrp.search(db, "docs_idx", "questions", "qid", top=10)     # (query_id, id, rank, distance)

An index is a stored linear projection with ``bits`` outputs (Achlioptas by default) whose signs
are kept: ``<name>`` holds ``(id, w0 .. [, v0 ..])`` -- the signature words of every row and, with
``vectors=True``, the projected vectors -- and ``<name>__bands`` the ``(band, key, id)`` rows that
the search joins on (:mod:`sqlrp.search`).  ``sqlrp_index`` records how they were made.  By default
the bits are centred: bit ``j`` is ``y_j(x) > y_j(mean)``, i.e. the sign of the projection of
``x - mean`` (random hyperplanes through the data's centre rather than the origin; ``center=False``
keeps SimHash's hyperplanes through the origin, the angular setting).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import warnings
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from .backends import Backend
from .compiler import Source, col, ident, table_ref
from .dialects import SqlrpDialect, get_dialect
from .errors import InputError, InvalidParameter, ProjectionExists, ProjectionNotFound, refuse_nul
from .ir import Projection
from .lazy import pd
from .materialise import output_table
from .search import (
    BAND,
    CAND_CTE,
    ID,
    KEY,
    Q_CTE,
    QB_CTE,
    VECTOR,
    WORD,
    IndexLayout,
    band_rows,
    check_search,
    exact_select,
    search_select,
)
from .signatures import WORD_BITS, centre_thresholds, check_band_bits, check_bits, signature_select
from .sources import check_source, describe, infer_d, resolve_source
from .store import REGISTRY_TABLES, Registry

INDEX_TABLE = "sqlrp_index"
DEFAULT_BITS = 256
BANDS_SUFFIX = "__bands"


class IndexNotFound(ProjectionNotFound):
    """No index of that name in this database."""


@dataclass(frozen=True)
class Index:
    """A stored index, as its ``sqlrp_index`` row describes it."""

    name: str
    projection: Projection
    source: Source
    bits: int
    band_bits: int
    means: tuple[float, ...] | None
    vectors: bool

    @property
    def layout(self) -> IndexLayout:
        thresholds = None if self.means is None else tuple(centre_thresholds(self.projection, self.means))
        return IndexLayout(
            self.projection,
            self.source,
            output_table(self.source, self.name),
            output_table(self.source, self.name + BANDS_SUFFIX),
            self.band_bits,
            thresholds,
            self.vectors,
        )


def default_band_bits(rows: int) -> int:
    """LSH's band width ``r`` for a table of ``rows`` rows: a band's key splits the table into ``2^r``
    buckets, so ``r ~ log2(rows) - 4`` leaves about 16 rows per bucket on evenly spread data -- near
    rows share a bucket in some band, far ones rarely (4, 8, 16 or 32: a band tiles a word)."""
    want = math.log2(max(rows, 2)) - 4
    return min((4, 8, 16, 32), key=lambda r: (abs(r - want), r))


def _check_engine(db: Backend) -> SqlrpDialect:
    """Search runs where the engine counts bits (DuckDB, PostgreSQL); refuse the others up front."""
    dialect = get_dialect(db.dialect)
    dialect.hamming_word(col("a"), col("b"))  # raises EngineLimit naming the engine where missing
    if not db.transactional:
        raise dialect.refuse("indexes are built in one transaction; this engine has none")
    return dialect


def _check_name(dialect: SqlrpDialect, name: str, source: Source) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidParameter("an index needs a name (--name)")
    refuse_nul(name, "index name")
    for table in (name, name + BANDS_SUFFIX):
        dialect.check_table_name(table)
        dialect.check_identifier(table, "index table name")
        if dialect.fold(table).casefold() in REGISTRY_TABLES:
            raise InvalidParameter(f"{table!r} is one of sqlrp's registry tables; choose another index name")
        if dialect.same_identifier(table, source.table):
            raise InvalidParameter(f"the index would overwrite its source table {source.table!r}; choose another name")


def _unique_ids(db: Backend, source: Source, what: str) -> int:
    """Row count of ``source``; its ids must be unique and not NULL (a search result names rows by id)."""
    dialect = get_dialect(db.dialect)
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
    rows = db.fetchall(
        f"SELECT projection, source, bits, band_bits, means, vectors FROM {INDEX_TABLE} WHERE name = ?", [name]
    )
    return rows[0] if rows else None


def load_index(db: Backend, name: str) -> Index:
    """The stored index ``name`` (:class:`IndexNotFound` if there is none)."""
    registry = Registry(db)
    refuse_nul(name, "index name")
    row = _row(db, name)
    if row is None:
        known = [r[0] for r in db.fetchall(f"SELECT name FROM {INDEX_TABLE} ORDER BY name")]
        raise IndexNotFound(
            f"no index named {name!r} in this database"
            + (f" (there are: {', '.join(map(repr, known[:20]))})" if known else "; build one with `sqlrp index`")
        )
    projection, source, bits, band_bits, means, vectors = row
    proj = registry.load(projection)
    src = json.loads(source)
    src["columns"] = tuple(src["columns"])
    return Index(
        name,
        proj,
        Source(**src),
        int(bits),
        int(band_bits),
        tuple(json.loads(means)) if means else None,
        bool(vectors),
    )


def list_indexes(db: Backend) -> pd.DataFrame:
    """One row per stored index: name, projection, table, bits, band bits, centred, vectors."""
    Registry(db)  # its tables, sqlrp_index included, exist from here on
    rows = db.fetchall(
        f"SELECT name, projection, source, bits, band_bits, means, vectors FROM {INDEX_TABLE} ORDER BY name"
    )
    out = [(n, p, json.loads(s)["table"], int(b), int(r), m is not None, bool(v)) for n, p, s, b, r, m, v in rows]
    return pd.DataFrame(out, columns=["name", "projection", "table", "bits", "band_bits", "centred", "vectors"])


def drop_index(db: Backend, name: str) -> None:
    """Drop the index ``name``: its two tables and its registry row (the projection stays)."""
    index = load_index(db, name)
    dialect = get_dialect(db.dialect)
    with db.transaction():
        for table in (name, name + BANDS_SUFFIX):
            db.execute(dialect.render(exp.Drop(tables=[output_table(index.source, table)], kind="TABLE", exists=True)))
        db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])


def build_index(
    db: Backend,
    table: str,
    id_column: str,
    name: str,
    *,
    bits: int | None = None,
    projection: str | None = None,
    method: str = "achlioptas",
    seed: int = 0,
    band_bits: int | None = None,
    center: bool = True,
    vectors: bool = False,
    incremental: bool = False,
    replace: bool = False,
    check: bool = True,
    layout: str = "wide",
    columns: list[str] | None = None,
    array_column: str | None = None,
    schema: str | None = None,
    catalog: str | None = None,
    nulls: str = "error",
    **params: Any,
) -> Index:
    """Index ``table`` for similarity search: project it with a stored linear projection of ``bits``
    outputs (``projection``: a stored name; else ``method`` -- Achlioptas by default -- with ``seed``
    and ``params``, stored as ``{name}_projection``), keep the signs (centred on the table's means
    unless ``center=False``), pack them into ``bits / 64`` BIGINT words (default 256 bits) and cut them into bands of
    ``band_bits`` bits (default :func:`default_band_bits`).  ``vectors=True`` also stores the
    projected vectors, for ``search(..., rerank="vectors")``.

    One transaction: a failure leaves no index.  ``incremental=True`` adds only the ids not indexed
    yet (same projection, centre and bands); ``replace=True`` rebuilds an existing index."""
    from .api import _matrix, plan  # the projecting stage of the API

    if bits is not None:
        check_bits(bits)
    if incremental and replace:
        raise InvalidParameter("incremental adds to an index and replace rebuilds it: choose one")
    dialect = _check_engine(db)
    registry = Registry(db)
    existing = _row(db, name) if isinstance(name, str) and name else None
    if existing is not None and not (incremental or replace):
        raise ProjectionExists(
            f"index {name!r} exists; pass replace=True (--replace) or incremental=True (--incremental)"
        )
    if incremental and existing is not None:
        index = load_index(db, name)
        if bits is not None and bits != index.bits:
            raise InvalidParameter(f"index {name!r} has {index.bits} bits, not {bits}; drop --bits to add to it")
        if band_bits is not None and band_bits != index.band_bits:
            raise InvalidParameter(f"index {name!r} has bands of {index.band_bits} bits, not {band_bits}")
        bits, vectors = index.bits, index.vectors
        proj: Projection = index.projection
        source = resolve_source(
            db,
            index.source.table,
            index.source.id_column,
            index.source.layout,
            index.source.columns,
            index.source.array_column,
            schema=index.source.schema,
            nulls=index.source.nulls,
            catalog=index.source.catalog,
        )
    else:
        p = plan(  # a stored projection by name (with k = bits, when given), else a new one stored
            db,
            table,
            id_column,
            projection if projection is not None else f"{name}_projection",
            method=None if projection is not None else method,
            k=bits if bits is not None or (projection and registry.exists(projection)) else DEFAULT_BITS,
            seed=None if projection is not None else seed,
            layout=layout,
            columns=columns,
            array_column=array_column,
            schema=schema,
            catalog=catalog,
            nulls=nulls,
            **params,
        )
        proj, source = p.projection, dataclasses.replace(p.source, rows=None)
        bits = proj.k
        if not isinstance(proj, Projection) or not proj.is_linear:
            raise InvalidParameter(
                f"projection {proj.name!r} is not linear: an index keeps the signs of a linear projection "
                "(achlioptas, gaussian, ...)"
            )
        if source.layout == "long":
            raise InvalidParameter("indexes read the wide or array layout (the re-ranking needs every feature)")
    _check_name(dialect, name, source)
    if existing is None:
        for table_ in (name, name + BANDS_SUFFIX):
            if db.table_exists(table_, source.schema):
                raise ProjectionExists(f"a table {table_!r} exists and is not an index; choose another index name")
    rows = _unique_ids(db, source, "table")
    if check:
        check_source(db, proj, source)
    r = band_bits if band_bits is not None else default_band_bits(rows)
    check_band_bits(r, bits)
    means = None
    if incremental and existing is not None:
        means, r = index.means, index.band_bits
    elif center:
        from .api import feature_stats

        means = tuple(feature_stats(db, proj, source)[0])
    from .api import Plan
    from .compiler import Output

    matrix = _matrix(db, Plan(proj, source, Output()), "auto")
    thresholds = None if means is None else centre_thresholds(proj, means)
    words = bits // WORD_BITS
    sig_table, band_table = output_table(source, name), output_table(source, name + BANDS_SUFFIX)

    def signature_rows(src: Source) -> exp.Select:
        sig = signature_select(proj, src, dialect, WORD, thresholds, keep="_v" if vectors else None, matrix=matrix)
        return exp.select(
            exp.alias_(col(src.id_column), ID, quoted=True),
            *[col(f"{WORD}{w}") for w in range(words)],
            *[exp.alias_(col(f"_v{j}"), f"{VECTOR}{j}", quoted=True) for j in range(proj.k if vectors else 0)],
        ).from_(sig.subquery("_sig", copy=False))

    with db.transaction():
        db.lock(f"sqlrp index {name}")
        for statement in dialect.local_settings(source):
            db.execute(statement)
        if incremental and existing is not None:
            done = exp.select(exp.Literal.number(1)).from_(sig_table.copy().as_("_done"))
            done = done.where(col(ID, "_done").eq(col(source.id_column, source.table)))
            missing = dataclasses.replace(source, row_filter=exp.Not(this=exp.Exists(this=done)))
            staging = exp.Table(this=ident("_sqlrp_index_new"))
            db.execute(dialect.render(exp.Drop(tables=[staging], kind="TABLE", exists=True)))
            db.execute(
                dialect.render(
                    exp.Create(
                        this=staging,
                        kind="TABLE",
                        expression=signature_rows(missing),
                        properties=exp.Properties(expressions=[exp.TemporaryProperty()]),
                    )
                )
            )
            new = exp.select(exp.Star()).from_(staging.copy())
            db.execute(dialect.render(exp.insert(new, sig_table.copy())))
            db.execute(dialect.render(exp.insert(band_rows(new, ID, words, r, dialect=dialect), band_table.copy())))
            db.execute(dialect.render(exp.Drop(tables=[staging], kind="TABLE")))
            return load_index(db, name)
        if existing is not None or replace:
            for table_ in (sig_table, band_table):
                db.execute(dialect.render(exp.Drop(tables=[table_.copy()], kind="TABLE", exists=True)))
            db.execute(f"DELETE FROM {INDEX_TABLE} WHERE name = ?", [name])
        db.execute(dialect.render(exp.Create(this=sig_table.copy(), kind="TABLE", expression=signature_rows(source))))
        stored = exp.select(exp.Star()).from_(sig_table.copy())
        db.execute(
            dialect.render(
                exp.Create(
                    this=band_table.copy(), kind="TABLE", expression=band_rows(stored, ID, words, r, dialect=dialect)
                )
            )
        )
        for statement in dialect.lookup_indexes(sig_table, [ID], band_table, [BAND, KEY]):
            db.execute(statement)
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
        db.execute(
            f"INSERT INTO {INDEX_TABLE} (name, projection, source, bits, band_bits, means, vectors) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [name, proj.name, json.dumps(described), bits, r, None if means is None else json.dumps(means), vectors],
        )
    return load_index(db, name)


def search(
    db: Backend,
    index: str,
    query_table: str,
    query_id_column: str,
    *,
    top: int = 10,
    candidates: int = 1000,
    metric: str = "euclidean",
    rerank: str = "original",
    into: str | None = None,
    replace: bool = False,
    schema: str | None = None,
    catalog: str | None = None,
    check: bool = True,
    exact: bool = False,
) -> pd.DataFrame | None:
    """The ``top`` nearest indexed rows of every row of ``query_table``, as ``(query_id, id, rank,
    distance)`` ordered by query and rank (a DataFrame, or with ``into`` a table).

    Candidates are the indexed rows sharing a band of their signature with the query; the
    ``candidates`` nearest of them in Hamming distance are re-ranked exactly by ``metric``
    (``euclidean`` or ``angular``, i.e. cosine distance) on the original features
    (``rerank="original"``) or on the stored projected vectors (``"vectors"``).  The query table
    holds the index's feature columns (or array column) and its own id column.  A query with fewer
    than ``top`` candidates gets fewer rows, and a warning says how many queries did.

    ``exact=True`` answers by brute force instead (:func:`~sqlrp.search.exact_select`: every query
    against every row, in SQL): the ground truth a search's recall is measured against, and the
    baseline of its speed."""
    check_search(top, candidates, metric, rerank)
    dialect = _check_engine(db)
    idx = load_index(db, index)
    src = idx.source
    for table in (query_table, src.table):
        if dialect.fold(table).casefold() in {c.casefold() for c in (Q_CTE, QB_CTE, CAND_CTE)}:
            raise InvalidParameter(f"{table!r} is a name the search gives its own sub-queries; rename the table")
    queries = _query_source(db, idx, query_table, query_id_column, schema, catalog)
    _unique_ids(db, queries, "query table")
    if check:
        check_source(db, idx.projection, queries)
    from .api import Plan, _matrix
    from .compiler import Output

    matrix = _matrix(db, Plan(idx.projection, src, Output()), "auto")
    if exact:
        select = exact_select(idx.layout, queries, dialect, top, metric)
    else:
        select = search_select(idx.layout, queries, dialect, top, candidates, metric, rerank, matrix)
    sql = dialect.render(select)
    if into is None:
        with db.transaction():
            for statement in dialect.local_settings(src):
                db.execute(statement)
            frame = db.query_df(sql)
        _warn_short(frame, top, db, queries)
        return frame
    if not into:
        raise InvalidParameter("into must name a table (an empty name writes nothing)")
    dialect.check_table_name(into)
    dialect.check_identifier(into, "output table name")
    if dialect.fold(into).casefold() in REGISTRY_TABLES or dialect.same_identifier(into, queries.table):
        raise InvalidParameter(f"{into!r} is a registry table or the query table; choose another output name")
    target = output_table(queries, into)
    with db.transaction():
        exists = db.table_exists(into, queries.schema)
        if exists and not replace:
            raise ProjectionExists(
                f"table {into!r} already exists; pass replace=True (--replace) or choose another name"
            )
        if exists:
            db.execute(dialect.render(exp.Drop(tables=[target.copy()], kind="TABLE")))
        for statement in dialect.local_settings(src):
            db.execute(statement)
        db.execute(dialect.render(exp.Create(this=target, kind="TABLE", expression=select)))
    return None


def _query_source(
    db: Backend, idx: Index, table: str, id_column: str, schema: str | None, catalog: str | None
) -> Source:
    """The query table read with the index's features; a clear error if it has another ``d``."""
    d = idx.projection.d
    if idx.source.layout == "array":
        queries = resolve_source(
            db, table, id_column, "array", array_column=idx.source.array_column, schema=schema, catalog=catalog
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
    return resolve_source(db, table, id_column, "wide", idx.source.columns, schema=schema, catalog=catalog)


def _warn_short(frame: pd.DataFrame, top: int, db: Backend, queries: Source) -> None:
    counts = frame.groupby("query_id").size()
    short = int((counts < top).sum())
    with contextlib.suppress(Exception):
        total = int(
            db.fetchall(
                get_dialect(db.dialect).render(exp.select(exp.Count(this=exp.Star())).from_(table_ref(queries)))
            )[0][0]
        )
        short += total - len(counts)
    if short:
        warnings.warn(
            f"{short} queries found fewer than top = {top} neighbours (no band in common with enough rows): "
            "more bits per signature or narrower bands (band_bits) find more candidates",
            stacklevel=3,
        )


__all__ = [
    "Index",
    "IndexNotFound",
    "build_index",
    "default_band_bits",
    "drop_index",
    "list_indexes",
    "load_index",
    "search",
]
