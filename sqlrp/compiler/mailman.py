"""The mailman plan: shared partial sums per block of consecutive features, for a sign matrix.

The features are cut into blocks of ``b`` consecutive features; inside a block every output sees one
sign pattern (up to an overall sign), and each distinct pattern with two or more non-zeros is summed
once per row, as a column ``_m{q}``, that every output needing it adds or subtracts
(:mod:`.strategies` for when it pays, :func:`.strategies.best_mailman` for the block size chosen,
:mod:`.dense` for the SQL).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.ir import LinearStage

#: block sizes tried by the mailman planner
BLOCK_SIZES = (2, 3, 4, 5, 6, 7, 8)


@dataclass
class MailmanPlan:
    """Partial sums and the outputs that reuse them.

    ``partials[q] = (features, signs)``; output vector ``v`` is ``sum_t sign * input[index]`` over
    ``terms[v]``, where indices ``< d`` are features and ``d + q`` is partial ``q``;
    ``uses_feature[i]``: feature ``i`` appears in an output directly (not only inside partials).
    """

    block: int
    d: int
    partials: list[tuple[np.ndarray, np.ndarray]]
    terms: list[tuple[np.ndarray, np.ndarray]]
    uses_feature: np.ndarray

    @property
    def cost(self) -> float:
        return mailman_cost(self)


def mailman_cost(plan: MailmanPlan) -> float:
    """Estimated work: output terms plus the additions inside the partial sums.

    Partial sums are cheap next to output terms in DuckDB's planner (short, shallow expressions),
    hence the weight 0.5 (fitted on d = 784, k = 200: b = 6 was fastest for s = 1)."""
    out_terms = sum(len(t[0]) for t in plan.terms)
    partial_adds = sum(len(p[0]) - 1 for p in plan.partials)
    return out_terms + 0.5 * partial_adds


def mailman_applicable(linear: LinearStage) -> bool:
    """Mailman needs a sign matrix of plain sums (no squares); other stages are rendered inline."""
    return linear.is_signs and linear.power is None


def plan_mailman(linear: LinearStage, block: int) -> MailmanPlan:
    """Share partial sums over blocks of ``block`` consecutive features."""
    d, p = linear.d, linear.p
    W = np.zeros((d, p), dtype=np.int8)
    W[linear.feature, linear.vector] = np.sign(linear.weight).astype(np.int8)
    partials: list[tuple[np.ndarray, np.ndarray]] = []
    per_vector_idx: list[list[int]] = [[] for _ in range(p)]
    per_vector_sgn: list[list[int]] = [[] for _ in range(p)]
    uses_feature = np.zeros(d, dtype=bool)
    for start in range(0, d, block):
        blk = W[start : start + block]  # b x p
        nz_count = np.count_nonzero(blk, axis=0)
        first = np.argmax(blk != 0, axis=0)
        lead = blk[first, np.arange(p)].astype(np.int64)  # sign of the first non-zero (0 if none)
        patterns: dict[bytes, int] = {}
        for v in np.flatnonzero(nz_count):
            sign = int(lead[v])
            col = blk[:, v] * sign
            if nz_count[v] == 1:
                f = start + int(first[v])
                per_vector_idx[v].append(f)
                uses_feature[f] = True
            else:
                key = col.tobytes()
                q = patterns.get(key)
                if q is None:
                    q = patterns[key] = len(partials)
                    nz = np.flatnonzero(col)
                    partials.append((start + nz, col[nz].astype(np.float64)))
                per_vector_idx[v].append(d + q)
            per_vector_sgn[v].append(sign)
    terms = [
        (np.asarray(i, dtype=np.int64), np.asarray(s, dtype=np.float64))
        for i, s in zip(per_vector_idx, per_vector_sgn, strict=True)
    ]
    return MailmanPlan(block, d, partials, terms, uses_feature)
