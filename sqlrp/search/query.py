"""Similarity search as SQL: inverted lists, RaBitQ code estimates, an exact re-rank (issue 23).

An index (:mod:`sqlrp.search.index`) is three tables: ``<name>__tops`` and ``<name>__lists`` (the two-level
centroids, and each list's rotated centroid) and ``<name>`` (every row's list, code words and the
estimator's constants; :mod:`sqlrp.search.ivf` has the mathematics).  A batch of queries is one ``SELECT``:

1. ``probe``: each query's ``probes`` nearest lists (distances to every list's centroid);
2. ``planes``: the rotated query, quantised to 4 bit planes (once per query);
3. ``estimate``: every row of the probed lists, its estimated squared distance from popcounts of its
   code AND the planes (:func:`sqlrp.search.ivf.estimates`);
4. ``top``: the ``candidates`` best estimates per query (ties by id);
5. re-ranked exactly on the table's own rows *as they are now* (a row deleted since the build is
   never returned): Euclidean ``sqrt(sum_i (q_i - x_i)^2)``, or for ``angular`` indexes
   ``|q/|q| - x/|x||^2 / 2 = 1 - cos(q, x)``; the ``top`` nearest by ``(distance, id)`` come back as
   ``(query_id, id, rank, distance)``.

Recall rises with ``candidates`` (the re-ranked share of the probed rows) up to the probed lists'
ceiling, and with ``probes``.  The pieces: :mod:`sqlrp.search.sql` (shared by every statement),
:mod:`sqlrp.search.planes` (step 2) and :mod:`sqlrp.search.rows` (the index's rows, what a build
writes); :func:`sqlrp.search.reference.reference_search` is the NumPy oracle of every step: integer
data gives the same lists, codes, candidates and ranks, bit for bit.
"""

from __future__ import annotations

from typing import Unpack

import numpy as np
from sqlglot import exp

from ..compiler import Source, col, number
from ..core.nodes import balanced
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select
from ..dialects import SqlrpDialect
from .ivf import QUERY_BITS
from .planes import planes_select
from .sql import (
    CENTRE,
    ID,
    LIST,
    NX,
    ONES,
    ROTATED,
    TB,
    WORD,
    G,
    IndexLayout,
    Probing,
    best_per,
    centroids,
    check_search,
    cte,
    distance_key,
    feature_rows,
    layout_distance,
    named,
    nearest,
    probing,
    rerank_rows,
    result_select,
    squared_distance,
    top_ranked,
    with_vector,
    xs,
)


def probe_adaptive(
    rows: exp.Expression, centroids: exp.Select, floor: int, cap: int, ratio: float, d: int, dialect: SqlrpDialect
) -> exp.Select:
    """``(_id, _list)``: each query's probed lists under the adaptive rule -- its ``floor`` nearest
    lists, and further lists up to ``cap`` while ``|q - c|^2 <= ratio * |q - c_1|^2`` (``c_1`` the
    nearest centroid).  A query far from every centroid (unlike the table's rows) sees many lists at
    about the same distance and probes more of them; a query inside a list's cluster, few
    (:mod:`sqlrp.search.calibrate` measures ``floor`` and ``ratio`` on the table's own rows)."""
    pairs = _select(
        named("_id", "r"),
        exp.alias_(col(LIST, "c"), "_list", quoted=True, copy=False),
        exp.alias_(distance_key(d, dialect, "r", "c", CENTRE), "_dist", quoted=True, copy=False),
    ).from_(rows, copy=False)
    pairs = pairs.join(centroids.subquery("c", copy=False), join_type="CROSS", copy=False)
    order = exp.Order(expressions=[exp.Ordered(this=col("_dist"), nulls_first=False), exp.Ordered(this=col("_list"))])
    ranked = _select(
        col("_id"),
        col("_list"),
        col("_dist"),
        exp.alias_(
            exp.Window(this=exp.RowNumber(), partition_by=[col("_id")], order=order), "_rk", quoted=True, copy=False
        ),
        exp.alias_(
            exp.Window(this=exp.Min(this=col("_dist")), partition_by=[col("_id")]), "_d0", quoted=True, copy=False
        ),
    ).from_(pairs.subquery("_pairs", copy=False), copy=False)
    # the distance key is the distance itself where the engine has a vector distance, else its square
    factor = float(np.sqrt(ratio)) if dialect.vector(xs(1)) is not None else float(ratio)
    keep = exp.or_(
        col("_rk") <= floor,
        exp.and_(col("_rk") <= cap, col("_dist") <= exp.Mul(this=number(factor), expression=col("_d0"))),
    )
    return _select(col("_id"), col("_list")).from_(ranked.subquery("_probes", copy=False), copy=False).where(
        keep, copy=False
    )


def search_select(
    layout: IndexLayout,
    queries: Source,
    dialect: SqlrpDialect,
    *,
    ranked: bool = False,
    staged: bool = False,
    **options: Unpack[Probing],
) -> exp.Select:
    """The whole search, one ``SELECT`` of ``(query_id, id, rank, distance)`` ordered by query and
    rank.  ``queries`` must hold the same features as the index's table (its own id column).
    ``ratio`` (with ``cap``) probes adaptively (:func:`probe_adaptive`; ``probes`` is the floor);
    ``ranked`` returns every candidate instead, ``(_qid, _id, _erank, _d)``: its rank by the
    estimate and its exact distance (what the calibration measures recall from).  ``staged``
    leaves out the two common table expressions ``_sqlrp_q`` and ``_sqlrp_planes``: the caller
    writes them as tables first (:mod:`sqlrp.search.staged`).  ``options``: :class:`~.sql.Probing`."""
    top, candidates, probes, ratio, cap = probing(options)
    check_search(top, candidates, probes, layout.metric)
    d = layout.d
    leaves = centroids(layout.lists, LIST, d, dialect)
    if ratio is None:
        probe = nearest(cte("_sqlrp_q", "r"), leaves, LIST, probes, d, dialect)
    else:
        probe = probe_adaptive(cte("_sqlrp_q", "r"), leaves, probes, max(cap or probes, probes), ratio, d, dialect)
    estimated = _estimated(layout, probe, dialect)
    best = _candidates(estimated, candidates, ranked, dialect)
    x = rerank_rows(layout, dialect)
    rr = (
        _select(
            named("_qid", "t"),
            named("_id", "t"),
            *([named("_erank", "t")] if ranked else []),
            exp.alias_(layout_distance(layout, dialect, "q", "x"), "_d", quoted=True, copy=False),
        )
        .from_(x.subquery("x", copy=False))
        .join(best.subquery("t", copy=False), on=col("_id", "x").eq(col("_id", "t")), copy=False)
        .join(cte("_sqlrp_q", "q"), on=col("_id", "q").eq(col("_qid", "t")), copy=False)
    )
    out = rr if ranked else result_select(top_ranked(rr, top))
    if staged:
        return out
    qv = with_vector(feature_rows(queries, d, dialect, layout.metric, scale=layout.scale), d, dialect)
    planes = planes_select(layout, dialect)
    return out.with_("_sqlrp_q", as_=qv, copy=False).with_("_sqlrp_planes", as_=planes, copy=False)


def _per_probe(layout: IndexLayout, probe: exp.Select, dialect: SqlrpDialect) -> exp.Select:
    """``(_qid, _list, _nq, _us, _lo, _dl, _p..)``: each probed list with the query's squared distance
    to its centroid, the query's rotated sum less the list's, and the query's planes."""
    d, size = layout.d, layout.size
    plane_columns = [f"_p{p}_{w}" for p in range(QUERY_BITS) for w in range(layout.words)]
    probed = (
        _select(
            exp.alias_(col("_id", "p"), "_qid", quoted=True, copy=False),
            named("_list", "p"),
            exp.alias_(squared_distance(xs(d, "q"), xs(d, "l", CENTRE)), "_nq", quoted=True, copy=False),
            exp.alias_(
                balanced([col(f"{ROTATED}{j}", "l") for j in range(size)], exp.Add), "_tsum", quoted=True, copy=False
            ),
        )
        .from_(probe.subquery("p", copy=False))
        .join(cte("_sqlrp_q", "q"), on=col("_id", "q").eq(col("_id", "p")), copy=False)
        .join(layout.lists.copy().as_("l"), on=col(LIST, "l").eq(col("_list", "p")), copy=False)
    )
    return (
        _select(
            named("_qid", "b"),
            named("_list", "b"),
            named("_nq", "b"),
            exp.alias_(exp.Sub(this=col("_hsum", "k"), expression=col("_tsum", "b")), "_us", quoted=True, copy=False),
            named("_lo", "k"),
            named("_dl", "k"),
            *[named(c, "k") for c in plane_columns],
        )
        .from_(dialect.fence(probed).subquery("b", copy=False))
        .join(cte("_sqlrp_planes", "k"), on=col("_qid", "k").eq(col("_qid", "b")), copy=False)
    )


def _estimate(words: int, dialect: SqlrpDialect) -> exp.Expression:
    """RaBitQ's estimate of ``|q - x|^2`` for index row ``i`` and probe ``pr`` (module docstring of
    :mod:`sqlrp.search.ivf`): ``nx + nq - 2 g (2 (delta S + lo ones - tb) - us)``, ``S`` the sum over
    the planes of ``2^p popcount(code AND plane p)``."""
    S = balanced(
        [
            exp.Mul(
                this=exp.Literal.number(1 << p),
                expression=dialect.popcount_sum(
                    [
                        _p(exp.BitwiseAnd(this=col(f"{WORD}{w}", "i"), expression=col(f"_p{p}_{w}", "pr")))
                        for w in range(words)
                    ]
                ),
            )
            for p in range(QUERY_BITS)
        ],
        exp.Add,
    )
    under = exp.Sub(  # delta * S + lo * ones - tb: the quantised sum of h - t where the code's bits are set
        this=exp.Add(
            this=exp.Mul(this=col("_dl", "pr"), expression=_p(S)),
            expression=exp.Mul(this=col("_lo", "pr"), expression=col(ONES, "i")),
        ),
        expression=col(TB, "i"),
    )
    inner = exp.Mul(
        this=col(G, "i"),
        expression=_p(
            exp.Sub(
                this=exp.Mul(this=exp.Literal.number(2), expression=_p(under)),
                expression=col("_us", "pr"),
            )
        ),
    )
    return exp.Sub(
        this=_p(exp.Add(this=col(NX, "i"), expression=col("_nq", "pr"))),
        expression=exp.Mul(this=exp.Literal.number(2), expression=_p(inner)),
    )


def _estimated(layout: IndexLayout, probe: exp.Select, dialect: SqlrpDialect) -> exp.Select:
    """``(_qid, _id, _e)``: every row of every probed list with its estimated squared distance."""
    # the index's rows joined to the probes: the engine picks the sides.  (Pinning DuckDB's hash table
    # to the rows, so that a pair copies a row's 7 columns rather than a probe's 13, made that join
    # one thread, and slower: docs/benchmarks.md, "Search".)
    return (
        _select(
            col("_qid", "pr"),
            exp.alias_(col(ID, "i"), "_id", quoted=True, copy=False),
            exp.alias_(_estimate(layout.words, dialect), "_e", quoted=True, copy=False),
        )
        .from_(dialect.fence(_per_probe(layout, probe, dialect)).subquery("pr", copy=False))
        .join(layout.rows.copy().as_("i"), on=col(LIST, "i").eq(col("_list", "pr")), copy=False)
    )


def _candidates(estimated: exp.Select, candidates: int, ranked: bool, dialect: SqlrpDialect) -> exp.Select:
    """``(_qid, _id)``: each query's ``candidates`` best estimates; ``ranked`` adds ``_erank``, the
    candidate's rank by its estimate (DuckDB: ``min_by(_id, _e, C)`` unnested beside ``range``)."""
    if not ranked:
        return best_per(estimated, "_qid", "_id", "_e", candidates, dialect, "_id", tie_break=False)
    if dialect.min_by_n:  # the C best ids in estimate order, numbered in lockstep
        listed = _select(
            col("_qid"),
            exp.alias_(
                exp.Anonymous(this="min_by", expressions=[col("_id"), col("_e"), exp.Literal.number(candidates)]),
                "_ids",
                quoted=True,
                copy=False,
            ),
        ).from_(estimated.subquery("_est", copy=False), copy=False).group_by(col("_qid"), copy=False)
        count = exp.Add(this=exp.Anonymous(this="len", expressions=[col("_ids")]), expression=exp.Literal.number(1))
        return _select(
            col("_qid"),
            exp.alias_(exp.Unnest(expressions=[col("_ids")]), "_id", quoted=True, copy=False),
            exp.alias_(
                exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[exp.Literal.number(1), count])]),
                "_erank",
                quoted=True,
                copy=False,
            ),
        ).from_(listed.subquery("_listed", copy=False), copy=False)
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[col("_qid")],
        order=exp.Order(expressions=[exp.Ordered(this=col("_e")), exp.Ordered(this=col("_id"))]),
    )
    numbered = _select(col("_qid"), col("_id"), exp.alias_(window, "_erank", quoted=True, copy=False)).from_(
        estimated.subquery("_est", copy=False), copy=False
    )
    best = _select(exp.Star()).from_(numbered.subquery("_num", copy=False), copy=False)
    return best.where(col("_erank") <= candidates, copy=False)


def query_vectors(layout: IndexLayout, queries: Source, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_q``: the queries' ``_id, _x..`` (and ``_vec``) as the search reads them."""
    return with_vector(feature_rows(queries, layout.d, dialect, layout.metric, scale=layout.scale), layout.d, dialect)


def exact_select(layout: IndexLayout, queries: Source, dialect: SqlrpDialect, top: int = 10) -> exp.Select:
    """Exact k-NN by brute force, the baseline a search is measured against: every query against
    every row of the table, the same distance and ``(distance, id)`` ranking, in the engine's
    strongest single statement (DuckDB: ``array_distance`` over ``DOUBLE[d]`` and ``min_by(id,
    (distance, id), top)``, the form DESIGN.md 4c measured fastest; elsewhere a window)."""
    check_search(top, top, None, layout.metric)
    d = layout.d
    q = with_vector(feature_rows(queries, d, dialect, layout.metric, scale=layout.scale), d, dialect)
    x = with_vector(feature_rows(layout.source, d, dialect, layout.metric, scale=layout.scale), d, dialect)
    pairs = (
        _select(
            exp.alias_(col("_id", "q"), "_qid", quoted=True, copy=False),
            exp.alias_(col("_id", "x"), "_id", quoted=True, copy=False),
            exp.alias_(layout_distance(layout, dialect, "q", "x"), "_d", quoted=True, copy=False),
        )
        .from_(q.subquery("q", copy=False))
        .join(x.subquery("x", copy=False), join_type="CROSS")
    )
    if dialect.min_by_n:  # the K smallest (distance, id) per query in one aggregate, unnested in lockstep
        order = exp.Tuple(expressions=[col("_d"), col("_id")])
        best = (
            _select(
                col("_qid"),
                *[
                    exp.alias_(
                        exp.Anonymous(this="min_by", expressions=[col(c), order.copy(), exp.Literal.number(top)]),
                        f"{c}s",
                        quoted=True,
                        copy=False,
                    )
                    for c in ("_id", "_d")
                ],
            )
            .from_(pairs.subquery("_pairs", copy=False))
            .group_by(col("_qid"), copy=False)
        )
        pairs = _select(
            col("_qid"),
            *[exp.alias_(exp.Unnest(expressions=[col(f"{c}s")]), c, quoted=True, copy=False) for c in ("_id", "_d")],
        ).from_(best.subquery("_best", copy=False))
    return result_select(top_ranked(pairs, top))


__all__ = ["exact_select", "probe_adaptive", "query_vectors", "search_select"]
