"""Search defaults measured on the user's own table (issue 33).  The calibration's queries are rows
that trained no centroid: the slice after the k-means sample of :mod:`sqlrp.search.sample`.

**The calibration.**  After the index rows are written, ``q`` of the table's rows (default 200) are
searched as queries, their own row left out:

1. their exact ``K + 1`` nearest rows in SQL (the brute force of ``search(..., exact=True)``),
   each with the list it is in;
2. in NumPy, from the query's distances to the centroids: the share of those true neighbours in
   the ``P`` nearest lists, for ``P`` on a grid (the *probe curve*), and the same under the
   adaptive rule -- the ``P`` nearest lists, then lists up to ``cap = 4 P`` while ``|q - c|^2 <=
   ratio * |q - c_1|^2``, ``ratio`` the median over the queries of ``|q - c_P|^2 / |q - c_1|^2``;
   the smallest rule whose share reaches ``target + (1 - target) / 2`` is taken;
3. one search in SQL under that rule returning every candidate up to ``C = 100 K`` with its rank by
   the estimate and its exact distance: the Recall@K (tie-aware: a found row counts when it is no
   farther than the K-th true neighbour) that each ``C`` would give, read off at once (the
   *candidate curve*).  The smallest ``C`` reaching the target plus a margin is kept; if none does,
   the next rule is tried.

What it stores, with the index (``sqlrp_index.params``): the rule, ``C / K``, the recall measured,
both curves, the seconds it took.  A search at other settings is checked against the curves.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, ident, table_ref
from ..core.errors import InvalidParameter, warn_caller
from ..core.names import scratch_name
from ..dialects import SqlrpDialect
from ..pipeline.materialise import output_table
from .ivf import Lists
from .query import exact_select
from .reference import probe_counts
from .sample import picked_ids
from .sql import ID, LIST, IndexLayout, feature_rows, layout_distance, rerank_rows, with_vector
from .staged import run_search

#: the default Recall@K the calibration aims for (``--recall``)
TARGET = 0.95
#: the table rows searched as queries by the calibration
QUERIES = 100
#: K of the calibration's Recall@K (a search with another top scales C by top / K)
TOP = 10
#: candidates measured, as multiples of K
CANDIDATE_STEPS = (1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 100)
#: the adaptive rule's cap, as a multiple of its floor
CAP_FACTOR = 4
#: a query whose K-th neighbour is this many times farther than the table's own rows' (95th
#: percentile) is far from the table: its recall is below the calibrated one (queries shifted by 3 to
#: 10 times the rows' norm gave Recall@10 0.93 to 0.88 at defaults calibrated for 0.95; 4 times the
#: candidates gave 0.99 and more)
FAR = 2.0
#: rules tried by SQL before giving up (each one more search of the calibration's queries)
ATTEMPTS = 3
@dataclass
class Calibration:
    """What the calibration measured and chose (stored as JSON with the index)."""

    target: float  #: the Recall@K asked for
    top: int  #: K
    queries: int  #: table rows searched as queries
    floor: int  #: lists every query probes
    ratio: float | None  #: the adaptive rule's ratio of squared centroid distances (None: fixed probes)
    cap: int  #: most lists a query probes
    candidates: float  #: C / K
    recall: float  #: Recall@K measured at the chosen settings
    mean_probes: float  #: lists probed per query under the rule, on average
    seconds: float = 0.0  #: the calibration's own time
    probe_curve: list = field(default_factory=list)  #: ``[P, share of true neighbours in P nearest lists]``
    candidate_curve: list = field(default_factory=list)  #: ``[C, Recall@K]`` under the rule
    rule_share: float = 1.0  #: share of true neighbours in the lists the rule probes
    #: the 95th percentile over the calibration's queries of the K-th true neighbour's distance: a
    #: search query whose K-th found neighbour is farther than :data:`FAR` times this is unlike the
    #: table's rows, and the recall measured on them need not hold for it (None: an older index)
    kth_distance: float | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> Calibration | None:
        return cls(**data) if data else None

    def far_queries(self, frame, top: int) -> list:  # noqa: ANN001 - a search result DataFrame
        """Ids of the queries of a search result ``(query_id, id, rank, distance)`` whose ``top``-th
        neighbour is more than :data:`FAR` times farther than the calibration's queries' (95th percentile)."""
        if self.kth_distance is None or not len(frame):
            return []
        kth = frame[frame["rank"] == top].set_index("query_id")["distance"]
        return kth.index[kth.to_numpy(dtype=np.float64) > FAR * self.kth_distance].tolist()

    def default_candidates(self, top: int) -> int:
        return max(int(top), int(math.ceil(self.candidates * top)))

    def expected(self, probes: int | None, candidates: int | None, top: int) -> float:
        """Recall@K a search at these settings can expect on rows like the calibration's (``None``:
        the calibrated value): the probe curve at ``probes`` times the candidate curve's share at
        ``candidates`` (scaled to K)."""
        share = self.rule_share
        if probes is not None and self.probe_curve:
            ps, ys = zip(*self.probe_curve, strict=True)
            share = float(np.interp(probes, ps, ys))
        recall = self.recall
        if candidates is not None and self.candidate_curve:
            cs, ys = zip(*self.candidate_curve, strict=True)
            recall = float(np.interp(candidates * self.top / max(top, 1), cs, ys, left=ys[0]))
        return min(1.0, recall * share / self.rule_share) if self.rule_share > 0 else recall

    def describe(self) -> str:
        probes = (
            f"probes {self.floor} to {self.cap} (adaptive; {self.mean_probes:.1f} on average)"
            if self.ratio is not None
            else f"probes {self.floor}"
        )
        return (
            f"{probes}, candidates {self.candidates:g} x top: calibrated for Recall@{self.top} >= {self.target:g} "
            f"(measured {self.recall:.3f} on {self.queries} of the table's rows; {self.seconds:.1f} s)"
        )

    def curve_text(self) -> str:
        """The stored curves, for ``evaluate --index``."""
        lines = [f"calibration: {self.describe()}"]
        lines.append("  probes  share of true neighbours in the probed lists")
        lines += [f"  {p:>6}  {y:.3f}" for p, y in self.probe_curve]
        lines.append(f"  candidates  Recall@{self.top} (at the calibrated probes)")
        lines += [f"  {c:>10}  {y:.3f}" for c, y in self.candidate_curve]
        return "\n".join(lines)


def _grid(lists: int) -> list[int]:
    out, p = set(), 1.0
    while p < lists:
        out.add(int(round(p)))
        p *= 1.5
    out.add(lists)
    return sorted(out)


def _rules(
    dist: np.ndarray, rank: np.ndarray, valid: np.ndarray, fixed: int | None
) -> list[tuple[int, float | None, int, float, float]]:
    """``(floor, ratio, cap, share, mean probes)`` for each floor of the grid (or the one ``fixed``)."""
    n, lists = dist.shape
    ordered = np.sort(dist, axis=1)
    d0 = np.where(ordered[:, :1] > 0, ordered[:, :1], np.nan)
    out = []
    for p in [fixed] if fixed else _grid(lists):
        p = min(p, lists)
        # the median query's own P-th list sits exactly on the median: nudged above it, so that no
        # engine's rounding decides whether that list is probed
        median = float(np.nanmedian(ordered[:, p - 1 : p] / d0)) if np.isfinite(d0).any() else None
        ratio = None if fixed or median is None else median * (1 + 2.0**-20)
        cap = p if ratio is None else min(lists, CAP_FACTOR * p)
        counts = probe_counts(dist, p, cap, ratio)
        share = float(np.mean((rank < counts[:, None])[valid])) if valid.any() else 1.0
        out.append((p, ratio, cap, share, float(counts.mean())))
    return out


def _list_ranks(dist: np.ndarray, lists_of: np.ndarray) -> np.ndarray:
    """Rank (0 = nearest, ties by list number, as the SQL) of each true neighbour's list, per query."""
    order = np.lexsort((np.broadcast_to(np.arange(dist.shape[1]), dist.shape), dist), axis=1)
    where = np.empty_like(order)
    np.put_along_axis(where, order, np.arange(dist.shape[1])[None, :].repeat(len(dist), 0), axis=1)
    return np.take_along_axis(where, lists_of, axis=1)


def _recall_by_candidates(cands, truth: dict, top: int, steps: list[int]) -> list[float]:  # noqa: ANN001 - a DataFrame
    """Tie-aware Recall@K for each ``C`` of ``steps`` from the ranked candidates ``(_qid, _id, _erank, _d)``."""
    scores = np.zeros(len(steps))
    cands = cands[cands["_qid"] != cands["_id"]].sort_values(["_qid", "_erank"])
    by_query = {qid: g["_d"].to_numpy(dtype=np.float64) for qid, g in cands.groupby("_qid", sort=False)}
    for qid, (_, kth) in truth.items():
        d = by_query.get(qid, np.zeros(0))
        for i, c in enumerate(steps):
            best = np.sort(d[:c])[:top]
            scores[i] += min(top, int(np.sum(best <= kth * (1 + 1e-9) + 1e-12))) / top
    return list(scores / max(len(truth), 1))


@dataclass(frozen=True)
class Aim:
    """What a calibration aims at: Recall@10 ``target`` measured on ``queries`` of the table's rows; with
    ``fixed_probes`` (the probes a user set) only the candidates are chosen."""

    target: float = TARGET
    queries: int = QUERIES
    fixed_probes: int | None = None


def calibrate(
    db: Backend, layout: IndexLayout, centroids: Lists, rows: int, sample: int, seed: int, aim: Aim = Aim()
) -> Calibration | None:
    """Measure the index on ``aim.queries`` of its table's ``rows`` (module docstring; the first
    ``sample`` trained the centroids, drawn with ``seed``) and choose its defaults; ``None`` when the
    table is too small to measure (``rows <= K + 1``)."""
    target, queries, fixed_probes = aim.target, aim.queries, aim.fixed_probes
    if not 0 < target <= 1:
        raise InvalidParameter(f"recall must be in (0, 1], got {target!r}")
    if rows <= TOP + 1 or queries <= 0:
        return None
    started = time.perf_counter()
    dialect = db.sql_dialect
    source = layout.source
    top = TOP
    count = min(queries, rows)
    lo = sample if sample + count <= rows else max(0, rows - count)  # rows that trained no centroid, if any
    stage = scratch_name("cal")
    table = output_table(source, stage)
    rows_ = exp.select(exp.Column(this=exp.Star(), table=ident("_t"))).from_(table_ref(source).as_("_t"))
    rows_ = rows_.join(
        picked_ids(source, rows, lo, lo + count, seed).subquery("_p"),
        on=exp.column(source.id_column, table="_t", quoted=True).eq(col("_pid", "_p")),
    )
    qsource = Source(**{**source.__dict__, "table": stage, "row_filter": None, "rows": None})
    try:
        db.execute(
            dialect.render(
                exp.Create(this=table.copy(), kind="TABLE", expression=rows_, properties=dialect.table_properties())
            )
        )
        return _measure(db, dialect, layout, centroids, qsource, rows, top, target, fixed_probes, started)
    finally:
        with contextlib.suppress(Exception):
            db.execute(dialect.render(exp.Drop(tables=[table], kind="TABLE", exists=True)))


def truth_select(layout: IndexLayout, queries: Source, dialect: SqlrpDialect, k: int) -> exp.Select:
    """``(query_id, id, distance)``: the exact ``k`` nearest rows of each query.  DuckDB: ``min_by``
    of the distance alone (no ``(distance, id)`` tuple: 3-10x faster; a tie at the K-th place is
    counted by distance, not by id, in the recall) over the rows' whole vectors; elsewhere
    :func:`~sqlrp.search.query.exact_select`."""
    if not dialect.min_by_n:
        return exact_select(layout, queries, dialect, k)
    d = layout.d
    q = with_vector(feature_rows(queries, d, dialect, layout.metric, scale=layout.scale), d, dialect)
    pairs = (
        exp.select(
            exp.alias_(col("_id", "q"), "_qid", quoted=True),
            exp.alias_(col("_id", "x"), "_id", quoted=True),
            exp.alias_(layout_distance(layout, dialect, "q", "x"), "_d", quoted=True),
        )
        .from_(q.subquery("q"))
        .join(rerank_rows(layout, dialect).subquery("x"), join_type="CROSS")
    )
    best = (
        exp.select(
            col("_qid"),
            exp.alias_(
                exp.Anonymous(this="min_by", expressions=[col("_id"), col("_d"), exp.Literal.number(k)]),
                "_ids",
                quoted=True,
            ),
        )
        .from_(pairs.subquery("_pairs"))
        .group_by(col("_qid"))
    )
    found = exp.select(col("_qid"), exp.alias_(exp.Unnest(expressions=[col("_ids")]), "_id", quoted=True)).from_(
        best.subquery("_best")
    )
    # the distances of the k found, computed again (a second min_by of the distances cost 3x the first)
    return (
        exp.select(
            exp.alias_(col("_qid", "f"), "query_id", quoted=True),
            exp.alias_(col("_id", "f"), "id", quoted=True),
            exp.alias_(layout_distance(layout, dialect, "q", "x"), "distance", quoted=True),
        )
        .from_(found.subquery("f"))
        .join(q.copy().subquery("q"), on=col("_id", "q").eq(col("_qid", "f")))
        .join(rerank_rows(layout, dialect).subquery("x"), on=col("_id", "x").eq(col("_id", "f")))
    )


def _truth(
    db: Backend, dialect: SqlrpDialect, layout: IndexLayout, qsource: Source, top: int
) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, dict]:
    """The calibration queries' exact ``top`` neighbours (found in SQL, the query row itself left
    out) and the list each is in: ``(query ids, their features, lists (queries x top), which slots
    hold a neighbour, {query id: (neighbour ids, K-th distance)})``."""
    d = layout.d
    exact = truth_select(layout, qsource, dialect, top + 1).subquery("_e")
    with_lists = exp.select(col("query_id", "_e"), col("id", "_e"), col("distance", "_e"), col(LIST, "_i")).from_(exact)
    with_lists = with_lists.join(layout.rows.copy().as_("_i"), on=col(ID, "_i").eq(col("id", "_e")))
    truth_rows = db.query_df(dialect.render(with_lists))
    truth_rows = truth_rows[truth_rows["query_id"] != truth_rows["id"]]
    truth_rows = truth_rows.sort_values(["query_id", "distance", "id"]).groupby("query_id", sort=True).head(top)
    q_rows = feature_rows(qsource, d, dialect, layout.metric, scale=layout.scale)
    q = db.query_df(dialect.render(q_rows.order_by(col("_id"))))
    qids = q["_id"].to_list()
    Q = q[[f"_x{i}" for i in range(d)]].to_numpy(dtype=np.float64)
    lists_of = np.zeros((len(qids), top), dtype=np.int64)
    valid = np.zeros((len(qids), top), dtype=bool)
    truth: dict = {}
    grouped = dict(tuple(truth_rows.groupby("query_id", sort=False)))
    for i, qid in enumerate(qids):
        g = grouped.get(qid)
        if g is None or len(g) == 0:
            continue
        m = len(g)
        lists_of[i, :m] = g[LIST].to_numpy(dtype=np.int64)
        valid[i, :m] = True
        truth[qid] = (set(g["id"]), float(g["distance"].max()))
    return qids, Q, lists_of, valid, truth


def _measure(
    db: Backend,
    dialect: SqlrpDialect,
    layout: IndexLayout,
    centroids: Lists,
    qsource: Source,
    rows: int,
    top: int,
    target: float,
    fixed_probes: int | None,
    started: float,
) -> Calibration | None:
    qids, Q, lists_of, valid, truth = _truth(db, dialect, layout, qsource, top)
    dist = ((Q[:, None, :] - centroids.leaves[None, :, :]) ** 2).sum(axis=2)
    ranks = np.where(valid, _list_ranks(dist, lists_of), -1)
    # only the true neighbours count: invalid slots (queries with fewer than K neighbours) are dropped
    flat_rank = np.where(valid, ranks, np.iinfo(np.int64).max)
    probe_curve = [[p, float(np.mean(flat_rank[valid] < p)) if valid.any() else 1.0] for p in _grid(centroids.count)]
    rules = _rules(dist, ranks, valid, fixed_probes)
    goal = target + (1 - target) / 2
    margin = min(0.01, (1 - target) / 5)
    start = next((i for i, r in enumerate(rules) if r[3] >= goal), len(rules) - 1)
    steps = [s * top for s in CANDIDATE_STEPS]
    best: Calibration | None = None
    steps_here = sorted({min(s, rows) for s in steps if s >= top} | {top})
    for floor, ratio, cap, share, mean in rules[start : start + ATTEMPTS]:
        cands = run_search(
            db,
            layout,
            qsource,
            top=top + 1,
            candidates=steps_here[-1],
            probes=floor,
            ratio=ratio,
            cap=cap,
            ranked=True,
        )
        recalls = _recall_by_candidates(cands, truth, top, steps_here)
        chosen = next((i for i, r in enumerate(recalls) if r >= min(1.0, target + margin)), None)
        pick = chosen if chosen is not None else int(np.argmax(recalls))
        found = Calibration(
            float(target),
            top,
            len(qids),
            int(floor),
            ratio,
            int(cap),
            steps_here[pick] / top,
            float(recalls[pick]),
            float(mean),
            probe_curve=probe_curve,
            candidate_curve=[[c, float(r)] for c, r in zip(steps_here, recalls, strict=True)],
            rule_share=float(share),
            kth_distance=float(np.quantile([kth for _, kth in truth.values()], 0.95)) if truth else None,
        )
        if best is None or found.recall > best.recall:
            best = found
        if chosen is not None:
            best = found
            break
    if best is not None:
        best.seconds = time.perf_counter() - started
        if best.recall < target:
            warn_caller(
                f"the index reaches Recall@{top} {best.recall:.3f} on its own rows at the most it tried "
                f"({best.describe()}), below the {target:g} asked: probe more lists (--probes) or rebuild with "
                "more bits (--bits)",
            )
    return best


__all__ = ["FAR", "QUERIES", "TARGET", "Calibration", "calibrate"]
