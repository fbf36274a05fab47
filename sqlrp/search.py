"""Similarity search as SQL: LSH bands, Hamming candidates, exact re-ranking (issue 15).

A stored index (:mod:`sqlrp.index`) holds, for every row of a table, its sign signature (``bits``
bits in BIGINT words, :mod:`sqlrp.signatures`) and the signature cut into ``bits / r`` bands of ``r``
bits, one ``(band, key, id)`` row each.  A batch of queries is answered in one statement:

1. ``q``: the queries' signatures, through the same projection and thresholds as the index;
2. ``cand``: every indexed row that shares at least one band with a query, an equality join on
   ``(band, key)`` -- classic banded LSH (``../shared/seeds/004_501365892903997c.txt`` Section 5.2;
   Charikar's SimHash): a row at angle ``theta`` from the query agrees on a bit with probability
   ``1 - theta / pi`` and becomes a candidate with probability ``1 - (1 - (1 - theta/pi)^r)^(bits/r)``;
   the table is never scanned row by row against each query;
3. ``top``: the ``candidates`` best of those by Hamming distance ``sum_w popcount(q_w XOR s_w)``
   (ties by id);
4. re-ranked exactly: Euclidean ``sqrt(sum_i (q_i - x_i)^2)`` or angular (cosine distance)
   ``1 - q.x / (|q| |x|)`` on the original features, or on the stored projected vectors; the ``top``
   nearest by ``(distance, id)`` are returned as ``(query_id, id, rank, distance)``.

:func:`reference_search` is the NumPy oracle of every step; the tests require the same candidates
and the same ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from .compiler import Source, col, dense_source
from .compiler.nodes import balanced
from .dialects import get_dialect
from .errors import InvalidParameter
from .ir import Projection
from .lazy import pd
from .reference import transform
from .signatures import (
    WORD_BITS,
    band_key,
    band_keys,
    check_band_bits,
    check_bits,
    hamming,
    hamming_expression,
    signature_select,
    signatures,
)

METRICS = ("euclidean", "angular")
#: output columns of a search, in order
RESULT_COLUMNS = ("query_id", "id", "rank", "distance")
#: the index tables' own column names (sqlrp's tables: fixed names, never the user's)
ID, BAND, KEY, WORD, VECTOR = "id", "band", "key", "w", "v"
#: the search's common table expressions: names no user table is likely to have (a CTE hides a table)
Q_CTE, QB_CTE, CAND_CTE = "_sqlrp_queries", "_sqlrp_query_bands", "_sqlrp_candidates"


@dataclass(frozen=True)
class IndexLayout:
    """What a search needs to know of a stored index (:class:`sqlrp.index.Index` holds one)."""

    projection: Projection
    source: Source  #: the indexed table, for re-ranking on its original features
    signatures: exp.Table  #: ``(id, w0 .. w{bits/64 - 1} [, v0 .. v{bits - 1}])``
    bands: exp.Table  #: ``(band, key, id)``
    band_bits: int
    thresholds: tuple[float, ...] | None = None
    vectors: bool = False  #: the signatures table also holds the projected vectors ``v0 ..``

    @property
    def words(self) -> int:
        return check_bits(self.projection.k)

    @property
    def band_count(self) -> int:
        return check_band_bits(self.band_bits, self.projection.k)


def check_search(top: int, candidates: int, metric: str, rerank: str) -> None:
    """Refuse nonsense parameters before any SQL is written."""
    for name, value in (("top", top), ("candidates", candidates)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise InvalidParameter(f"{name} must be a positive integer, got {value!r}")
    if candidates < top:
        raise InvalidParameter(f"candidates ({candidates}) must be at least top ({top}): only candidates are re-ranked")
    if metric not in METRICS:
        raise InvalidParameter(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if rerank not in ("original", "vectors"):
        raise InvalidParameter(f"rerank must be 'original' or 'vectors', got {rerank!r}")


def band_rows(
    select: exp.Select, id_name: str, words: int, r: int, id_alias: str = ID, dialect: str | None = None
) -> exp.Expression:
    """``(band, key, id)`` rows of the signatures ``select`` (columns ``id_name, w0 ..``).  Where two
    ``UNNEST`` in one select list run in lockstep (``dialect.select_unnest``: DuckDB, PostgreSQL) one
    scan unnests the array of band numbers beside the array of keys; elsewhere one ``SELECT`` per
    band, joined by ``UNION ALL``.  PostgreSQL, 1,000,000 signatures -> 16,000,000 rows: 16.1 s
    unnested, 41.8 s as 16 unions (``PYTHONPATH=.:tests python bench/probes.py pg-bands``)."""
    count = words * WORD_BITS // r
    smallint = exp.DataType.build("SMALLINT")
    source = select.copy().subquery("_s", copy=False)
    if dialect is not None and get_dialect(dialect).select_unnest:
        bands = exp.Array(expressions=[exp.cast(exp.Literal.number(b), smallint) for b in range(count)])
        keys = exp.Array(expressions=[band_key([col(f"{WORD}{w}") for w in range(words)], b, r) for b in range(count)])
        return exp.select(
            exp.alias_(exp.Unnest(expressions=[bands]), BAND, quoted=True),
            exp.alias_(exp.Unnest(expressions=[keys]), KEY, quoted=True),
            exp.alias_(col(id_name), id_alias, quoted=True),
        ).from_(source)
    parts = []
    for band in range(count):
        key = band_key([col(f"{WORD}{w}") for w in range(words)], band, r)
        parts.append(
            exp.select(
                exp.alias_(exp.cast(exp.Literal.number(band), smallint), BAND, quoted=True),
                exp.alias_(key, KEY, quoted=True),
                exp.alias_(col(id_name), id_alias, quoted=True),
            ).from_(source.copy())
        )
    return balanced(parts, exp.Union) if len(parts) > 1 else parts[0]


def _distance(metric: str, left: list[exp.Expression], right: list[exp.Expression]) -> exp.Expression:
    pairs = list(zip(left, right, strict=True))
    if metric == "euclidean":
        squares = [exp.Mul(this=exp.paren(a - b), expression=exp.paren(a.copy() - b.copy())) for a, b in pairs]
        return exp.Sqrt(this=balanced(squares, exp.Add))
    dots = balanced([exp.Mul(this=a.copy(), expression=b.copy()) for a, b in pairs], exp.Add)
    qq = balanced([exp.Mul(this=a.copy(), expression=a.copy()) for a in left], exp.Add)
    xx = balanced([exp.Mul(this=b.copy(), expression=b.copy()) for b in right], exp.Add)
    product = exp.Mul(this=exp.paren(qq), expression=exp.paren(xx))
    norms = exp.Nullif(this=exp.Sqrt(this=product), expression=exp.Literal.number(0))
    return exp.Literal.number(1) - exp.Div(this=dots, expression=norms)


def _ranked(select: exp.Select, by: str, limit: int, alias: str, order: Sequence[str]) -> exp.Select:
    """The rows of ``select`` numbered by ``row_number() OVER (PARTITION BY by ORDER BY order...)`` as
    ``alias``, kept where that is at most ``limit`` (sub-queries: not every engine has ``QUALIFY``)."""
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[col(by)],
        order=exp.Order(expressions=[exp.Ordered(this=col(c), nulls_first=False) for c in order]),
    )
    ranked = exp.select(exp.Star(), exp.alias_(window, alias, quoted=True)).from_(select.subquery("_in", copy=False))
    return exp.select(exp.Star()).from_(ranked.subquery("_ranked", copy=False)).where(col(alias) <= limit)


def search_select(
    index: IndexLayout,
    queries: Source,
    dialect: str,
    top: int = 10,
    candidates: int = 1000,
    metric: str = "euclidean",
    rerank: str = "original",
    matrix: str = "values",
) -> exp.Select:
    """The whole search, one ``SELECT`` of ``(query_id, id, rank, distance)`` ordered by query and rank.
    ``queries`` must hold the same features as the index's table (its own id column)."""
    check_search(top, candidates, metric, rerank)
    engine = get_dialect(dialect)
    proj, words = index.projection, index.words
    keep = "_v" if rerank == "vectors" else None
    if rerank == "vectors" and not index.vectors:
        raise InvalidParameter("this index holds no projected vectors: build it with vectors=True (--vectors)")
    sig = signature_select(proj, queries, engine, WORD, index.thresholds, keep=keep, matrix=matrix)
    q = exp.select(
        exp.alias_(col(queries.id_column), "_qid", quoted=True),
        *[col(f"{WORD}{w}") for w in range(words)],
        *([col(f"_v{j}") for j in range(proj.k)] if keep else []),
    ).from_(sig.subquery("_q", copy=False))
    qb = band_rows(
        exp.select(exp.Star()).from_(exp.Table(this=exp.to_identifier(Q_CTE))), "_qid", words, index.band_bits, "_qid"
    )
    cand = (
        exp.select(col("_qid", "qb"), exp.alias_(col(ID, "b"), "_id", quoted=True))
        .distinct()
        .from_(exp.Table(this=exp.to_identifier(QB_CTE), alias=exp.TableAlias(this=exp.to_identifier("qb"))))
        .join(
            index.bands.copy().as_("b"),
            on=exp.and_(col(BAND, "b").eq(col(BAND, "qb")), col(KEY, "b").eq(col(KEY, "qb"))),
        )
    )
    hamming_d = hamming_expression(words, "q", "s", engine, WORD)
    ham = (
        exp.select(col("_qid", "c"), col("_id", "c"), exp.alias_(hamming_d, "_h", quoted=True))
        .from_(exp.Table(this=exp.to_identifier(CAND_CTE), alias=exp.TableAlias(this=exp.to_identifier("c"))))
        .join(
            exp.Table(this=exp.to_identifier(Q_CTE), alias=exp.TableAlias(this=exp.to_identifier("q"))),
            on=col("_qid", "q").eq(col("_qid", "c")),
        )
        .join(index.signatures.copy().as_("s"), on=col(ID, "s").eq(col("_id", "c")))
    )
    best = _ranked(ham, "_qid", candidates, "_hr", ["_h", "_id"])
    if rerank == "vectors":
        left = [col(f"_v{j}", "q") for j in range(proj.k)]
        right = [col(f"{VECTOR}{j}", "x") for j in range(proj.k)]
        other = index.signatures.copy().as_("x")
        query_side = exp.Table(this=exp.to_identifier(Q_CTE), alias=exp.TableAlias(this=exp.to_identifier("q")))
        query_on = col("_qid", "q").eq(col("_qid", "t"))
        left_alias = "q"
        other_on = col(ID, "x").eq(col("_id", "t"))
    else:
        left = [col(f"_x{i}", "qd") for i in range(proj.d)]
        right = [col(f"_x{i}", "x") for i in range(proj.d)]
        other = dense_source(proj, index.source, engine).subquery("x", copy=False)
        query_side = dense_source(proj, queries, engine).subquery("qd", copy=False)
        left_alias = "qd"
        query_on = col("_id", left_alias).eq(col("_qid", "t"))
        other_on = col("_id", "x").eq(col("_id", "t"))
    rr = (
        exp.select(col("_qid", "t"), col("_id", "t"), exp.alias_(_distance(metric, left, right), "_d", quoted=True))
        .from_(best.subquery("t", copy=False))
        .join(query_side, on=query_on)
        .join(other, on=other_on)
    )
    out = _result(_ranked(rr, "_qid", top, "_rank", ["_d", "_id"]))
    out = out.with_(Q_CTE, as_=q, copy=False).with_(QB_CTE, as_=qb, copy=False)
    return out.with_(CAND_CTE, as_=cand, copy=False)


def exact_select(
    index: IndexLayout, queries: Source, dialect: str, top: int = 10, metric: str = "euclidean"
) -> exp.Select:
    """Exact k-NN by brute force, the baseline a search is measured against: every query against
    every indexed row (a cross join), the same distance and the same ``(distance, id)`` ranking,
    ``(query_id, id, rank, distance)``.  No signature is read: it is right by construction, and
    ``rows x queries`` times as costly as it sounds."""
    check_search(top, top, metric, "original")
    engine = get_dialect(dialect)
    proj = index.projection
    left = [col(f"_x{i}", "qd") for i in range(proj.d)]
    right = [col(f"_x{i}", "x") for i in range(proj.d)]
    pairs = exp.select(
        exp.alias_(col("_id", "qd"), "_qid", quoted=True),
        exp.alias_(col("_id", "x"), "_id", quoted=True),
        exp.alias_(_distance(metric, left, right), "_d", quoted=True),
    ).from_(dense_source(proj, queries, engine).subquery("qd", copy=False))
    pairs = pairs.join(dense_source(proj, index.source, engine).subquery("x", copy=False), join_type="CROSS")
    if engine.min_by_n:  # the K smallest (distance, id) per query in one aggregate, then unnested in lockstep
        order = exp.Tuple(expressions=[col("_d"), col("_id")])
        best = (
            exp.select(
                col("_qid"),
                *[
                    exp.alias_(
                        exp.Anonymous(this="min_by", expressions=[col(c), order.copy(), exp.Literal.number(top)]),
                        f"{c}s",
                        quoted=True,
                    )
                    for c in ("_id", "_d")
                ],
            )
            .from_(pairs.subquery("_pairs", copy=False))
            .group_by(col("_qid"))
        )
        pairs = exp.select(
            col("_qid"), *[exp.alias_(exp.Unnest(expressions=[col(f"{c}s")]), c, quoted=True) for c in ("_id", "_d")]
        ).from_(best.subquery("_best", copy=False))
    return _result(_ranked(pairs, "_qid", top, "_rank", ["_d", "_id"]))


def _result(final: exp.Select) -> exp.Select:
    out = exp.select(
        exp.alias_(col("_qid"), "query_id", quoted=True),
        exp.alias_(col("_id"), "id", quoted=True),
        exp.alias_(col("_rank"), "rank", quoted=True),
        exp.alias_(col("_d"), "distance", quoted=True),
    ).from_(final.subquery("_f", copy=False))
    return out.order_by(col("query_id"), col("rank"), copy=False)


# ----------------------------------------------------------------------------------------------
# the NumPy oracle


def reference_search(
    projection: Projection,
    X: np.ndarray,
    ids: Sequence,
    Q: np.ndarray,
    query_ids: Sequence,
    band_bits: int,
    top: int = 10,
    candidates: int = 1000,
    metric: str = "euclidean",
    thresholds: Sequence[float] | None = None,
    rerank: str = "original",
) -> pd.DataFrame:
    """Every step of :func:`search_select` in NumPy: same bands, same candidates (ties by id), same
    distances and ranks."""
    check_search(top, candidates, metric, rerank)
    ids = np.asarray(ids)
    order = np.argsort(ids, kind="stable")  # ties are broken by id: work in id order
    ids, X = ids[order], np.asarray(X, dtype=float)[order]
    SX, SQ = signatures(projection, X, thresholds), signatures(projection, Q, thresholds)
    KX, KQ = band_keys(SX, band_bits), band_keys(SQ, band_bits)
    VX = VQ = None
    if rerank == "vectors":
        VX, VQ = transform(projection, X), transform(projection, Q)
    buckets = [dict() for _ in range(KX.shape[1])]
    for b, bucket in enumerate(buckets):
        for row, key in enumerate(KX[:, b]):
            bucket.setdefault(int(key), []).append(row)
    rows = []
    for qi, qid in enumerate(query_ids):
        found = sorted({row for b, bucket in enumerate(buckets) for row in bucket.get(int(KQ[qi, b]), ())})
        if not found:
            continue
        found = np.asarray(found)
        h = hamming(SX[found], SQ[qi])
        best = found[np.lexsort((found, h))][:candidates]  # rows are in id order: row order is id order
        a, b = (VX[best], VQ[qi]) if VX is not None else (X[best], np.asarray(Q[qi], dtype=float))
        if metric == "euclidean":
            dist = np.sqrt(((a - b) ** 2).sum(axis=1))
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                norms = np.sqrt((a * a).sum(axis=1) * (b * b).sum())
                dist = 1 - (a @ b) / np.where(norms == 0, np.nan, norms)
        for rank, at in enumerate(np.lexsort((best, np.where(np.isnan(dist), np.inf, dist)))[:top], start=1):
            rows.append((qid, ids[best[at]], rank, dist[at]))
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def recall_at_k(found: pd.DataFrame, truth: pd.DataFrame) -> float:
    """Recall@K: the mean over the queries of truth of ``|found ids & true ids| / |true ids|``
    (both frames ``(query_id, id, ...)``; a query with no result counts 0)."""
    got = found.groupby("query_id")["id"].apply(set).to_dict()
    scores = [len(got.get(qid, set()) & set(true)) / len(true) for qid, true in truth.groupby("query_id")["id"]]
    return float(np.mean(scores)) if scores else float("nan")


__all__ = [
    "METRICS",
    "RESULT_COLUMNS",
    "IndexLayout",
    "band_rows",
    "exact_select",
    "recall_at_k",
    "reference_search",
    "search_select",
]
