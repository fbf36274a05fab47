"""A ``pairs`` plan as the registry stores it (``sqlrp_pairs_entry``, beside its projection): the key it is
stored under (:func:`budget_key`: the dialect's partials budget), its rows (:func:`plan_rows`) and the
plan read back from them (:func:`plan_from_rows`).  The registry stores and loads plans
(:meth:`sqlrp.registry.store.Registry.load_pairs`, ``save_pairs``); :func:`sqlrp.pipeline.plan.pairs_for`
makes them."""

from __future__ import annotations

import numpy as np

from ..compiler.strategies import pairs_budget
from ..core.ir import LinearStage
from ..core.pairs_plan import PairsPlan
from ..dialects import SqlrpDialect, get_dialect


def budget_key(linear: LinearStage, dialect: SqlrpDialect | str) -> int:
    """The key a pairs plan is stored under: the dialect's partials budget (-1: no column limit)."""
    budget = pairs_budget(linear, get_dialect(dialect))
    return -1 if budget is None else int(budget)


def plan_rows(plan: PairsPlan, name: str, budget: int) -> dict[str, object]:
    """One row per signed column read by a partial (node ``q``) or an output (node ``-1 - v``)."""
    nodes, levels, reads, signs = [], [], [], []
    for q, (cols, sgn) in enumerate(plan.partials):
        nodes.append(np.full(len(cols), q))
        levels.append(np.full(len(cols), plan.level[q]))
        reads.append(cols)
        signs.append(sgn)
    for v, (cols, sgn) in enumerate(plan.terms):
        nodes.append(np.full(len(cols), -1 - v))
        levels.append(np.zeros(len(cols)))
        reads.append(cols)
        signs.append(sgn)
    return {
        "projection": name,
        "budget": budget,
        "node": np.concatenate(nodes).astype(np.int32),
        "level": np.concatenate(levels).astype(np.int32),
        "reads": np.concatenate(reads).astype(np.int32),
        "sign": np.concatenate(signs).astype(np.int16),
    }


def plan_from_rows(rows: np.ndarray, d: int, p: int) -> PairsPlan:
    """:func:`plan_rows` read back: ``rows`` of (node, level, reads, sign) sorted by node."""
    node, level, reads, sign = rows.T
    starts = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
    stops = np.r_[starts[1:], len(node)]
    partials: list[tuple[np.ndarray, np.ndarray]] = []
    levels: list[int] = []
    terms: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0, np.int64), np.zeros(0)) for _ in range(p)]
    for a, b in zip(starts, stops, strict=True):
        entry = (reads[a:b].copy(), sign[a:b].astype(np.float64))
        if node[a] >= 0:
            partials.append(entry)
            levels.append(int(level[a]))
        else:
            terms[-1 - int(node[a])] = entry
    return PairsPlan(d, partials, np.array(levels, dtype=np.int64), terms)


__all__ = ["budget_key", "plan_from_rows", "plan_rows"]
