"""Greedy shared pair sums: fewer additions for a +-1 / 0 matrix, still additions only.

Paar's greedy algorithm for linear maps over signs (C. Paar, "Optimized arithmetic for Reed-Solomon
encoders", ISIT 1997; there over XOR, here over +-): every output vector ``v`` is a signed sum of
columns.  Repeatedly take the pair of columns ``(a, b)`` and relative sign ``sigma`` that occurs in
the most outputs -- outputs holding ``s*a + s*sigma*b`` for some sign ``s`` -- add the partial sum
``u = a + sigma*b`` as a new column and rewrite those outputs to ``s*u``.  Each partial costs one
addition and saves one per output that uses it, so a pair used ``c`` times saves ``c - 1``
additions.  Partials may pair with features or other partials, which makes a hierarchy: the
"mailman" strategy's fixed blocks (``strategies.py``) are one special case of it.

Measured on d = 784, k = 200 (additions per row; ``PYTHONPATH=. python -m bench.probes pairs``):
``s = 3``: 52,186 inline -> 23,249; ``s = 1``: 156,600 -> 26,354; ``s = sqrt(d)``: 5,541 -> 4,577.
The same greedy on the transposed matrix (:func:`plan_pairs_transposed`) gives plans with fewer,
longer partials that are read back half as often, and DuckDB runs them faster for wide matrices
(``PYTHONPATH=. python -m bench.probes orientation``; figures: docs/benchmarks.md, "Compiler").

Each partial is then computed as late as possible -- on the last level before its first reader --
because every level passes on the columns later levels read (:func:`_as_late_as_possible`).  A
stored projection keeps its plan in the registry (``sqlrp_pairs_entry``, ``Registry.pairs_plan``).

Counting is incremental: ``same[a, b]`` / ``diff[a, b]`` (outputs where ``a`` and ``b`` have equal /
opposite signs) change only on the rows a new partial rewrites, so each step costs
O(rows rewritten x columns) instead of a fresh Gram matrix; the best pair of each column is cached
and recounted only once it may have lost uses and comes up as the maximum.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import numpy as np

from ..core.ir import LinearStage
from ..core.pairs_plan import PairsPlan, signs_of

#: features planned together; wider matrices are cut into blocks planned one by one, which bounds
#: the count matrices (``(block + partials)^2`` entries) and the planning time
FEATURE_BLOCK = 1024

#: most bytes the two count matrices of one block may take: the block's partials stop there (the
#: plan stays valid, with fewer shared sums).  Without it the transposed plan of a wide stage grew
#: them to (p + 16 d)^2: P-RP m = 10, k = 40, d = 6,830 was killed at 24 GB (issue 12; a throw-away run,
#: the kernel log); tests/projection/test_strategies.py checks the cap.
PLANNER_BYTES = 1 << 29


def plan_pairs(
    linear: LinearStage, max_partials: int | None = None, min_uses: int = 2, deadline: float | None = None
) -> PairsPlan:
    """Greedy shared pair sums for a sign matrix (see the module docstring).

    ``max_partials`` caps the number of partials (PostgreSQL's column limit; default ``16 d``);
    a pair is shared only if at least ``min_uses`` outputs use it.  ``deadline`` (a
    :func:`time.perf_counter` value) stops the greedy there: the pairs found so far, the most shared
    first, make an exact plan marked ``complete=False``."""
    W = signs_of(linear)
    p, d = W.shape
    budget = max_partials if max_partials is not None else 16 * d
    pairs: list[tuple[int, int, int]] = []
    outputs: list[np.ndarray] = []
    partial_cols: list[np.ndarray] = []
    blocks = range(0, d, FEATURE_BLOCK)
    complete = True
    for start in blocks:
        stop = min(start + FEATURE_BLOCK, d)
        share = budget * (stop - start) // d
        local_pairs, M, finished = _greedy(W[:, start:stop], share, min_uses, deadline)
        complete = complete and finished
        width = stop - start
        offset = len(pairs)

        def glob(c: int, start: int = start, width: int = width, offset: int = offset) -> int:
            return start + c if c < width else d + offset + (c - width)

        pairs.extend((glob(a), glob(b), sigma) for a, b, sigma in local_pairs)
        outputs.append(M[:, :width])
        partial_cols.append(M[:, width:])
    M = np.concatenate([*outputs, *partial_cols], axis=1)
    plan = _flatten(d, pairs, M)
    plan.complete = complete
    return plan


def plan_pairs_transposed(
    linear: LinearStage, max_partials: int | None = None, min_uses: int = 2, deadline: float | None = None
) -> PairsPlan:
    """Paar's greedy on the transposed matrix, its circuit transposed back.

    By the transposition principle (Tellegen) a circuit of additions computing ``W^T`` (p inputs,
    d outputs) turns into one computing ``W`` by reversing every edge: each node ``c`` of the first
    becomes the sum ``z_c`` of the nodes that read it -- features for the outputs ``W^T`` made,
    ``z`` of the partials that read ``c`` -- and output ``j`` is ``z`` of input ``j``.  The
    additions differ by ``d - p``.  For a wide matrix the greedy finds more to share among the
    outputs' side, and the plan that comes back has fewer and longer partials, read back half as
    often: d = 784, k = 200, s = 3: 23,678 additions (23,249 direct), 5,361 partials (7,737) read
    10,773 times (22,967); s = 1: 24,073 additions (26,354) (``PYTHONPATH=. python -m bench.probes
    pairs``).  Fewer partial columns written and read back make the transposed plan the faster one on
    DuckDB for both (``PYTHONPATH=. python -m bench.probes orientation``; figures: docs/benchmarks.md,
    "Compiler").
    :func:`sqlrp.compiler.strategies.best_pairs` plans both and keeps the cheaper.

    ``max_partials`` (default ``16 d``, as for :func:`plan_pairs`) and ``min_uses`` apply to the greedy
    on the transposed matrix; a ``z`` with a single term is folded into its readers, so the plan has
    at most ``max_partials`` partials; ``deadline`` as for :func:`plan_pairs`."""
    d, p = linear.d, linear.p
    flipped = LinearStage(d=p, p=d, vector=linear.feature, feature=linear.vector, weight=linear.weight)
    dual = plan_pairs(flipped, max_partials if max_partials is not None else 16 * d, min_uses, deadline)
    # readers[c]: z_c as {column of the new plan: sign}; nodes c < p are the inputs of the dual
    # plan (this plan's outputs), c = p + q its partials.  Features first, from the dual's outputs.
    readers: list[Counter[int]] = [Counter() for _ in range(p + len(dual.partials))]
    for i, (cols, signs) in enumerate(dual.terms):
        for c, sign in zip(cols.tolist(), signs.tolist(), strict=True):
            readers[c][i] += int(sign)
    partials: list[tuple[np.ndarray, np.ndarray]] = []
    for q in reversed(range(len(dual.partials))):  # a dual partial's readers come after it
        z = _signed_sum(readers[p + q])
        if len(z[0]) > 1:  # a new column; otherwise z is an alias, passed on as it is
            partials.append(z)
            z = (np.array([d + len(partials) - 1]), np.ones(1))
        for c, sign in zip(dual.partials[q][0].tolist(), dual.partials[q][1].tolist(), strict=True):
            for col, s_col in zip(z[0].tolist(), z[1].tolist(), strict=True):
                readers[c][col] += int(sign * s_col)
    plan = _leveled(d, partials, [_signed_sum(readers[j]) for j in range(p)])
    plan.complete = dual.complete
    return plan


def _signed_sum(terms: Counter[int]) -> tuple[np.ndarray, np.ndarray]:
    """``{column: sign}`` as the plan's ``(columns, signs)``, sorted, cancelled terms dropped."""
    cols = np.array(sorted(c for c, sign in terms.items() if sign), dtype=np.int64)
    return cols, np.array([terms[c] for c in cols.tolist()], dtype=np.float64)


def _greedy(
    W: np.ndarray, budget: int, min_uses: int, deadline: float | None = None
) -> tuple[list[tuple[int, int, int]], np.ndarray, bool]:
    """The greedy loop on one block of features: ``(a, b, sigma)`` per partial (column ``width + q``),
    the rewritten sign matrix over features and partials, and False if ``deadline`` stopped it."""
    p, d = W.shape
    count_t = np.uint8 if p < 256 else np.uint16
    largest = math.isqrt(PLANNER_BYTES // (2 * np.dtype(count_t).itemsize))  # columns within PLANNER_BYTES
    budget = max(0, min(budget, largest - d))
    cap = d + min(budget, d)  # grown by doubling: the count matrices stay as small as the plan
    M = np.zeros((p, cap), dtype=np.int8)
    M[:, :d] = W
    same, diff = _pair_counts(W, cap, count_t)
    best = np.maximum(same[:d, :d], diff[:d, :d])
    rowmax = np.zeros(cap, dtype=np.int64)
    rowarg = np.zeros(cap, dtype=np.int64)
    rowmax[:d], rowarg[:d] = best.max(1), best.argmax(1)
    pairs: list[tuple[int, int, int]] = []
    m = d

    # rowmax holds each row's best count, exactly -- or, where ``dirty``, an upper bound: counts of
    # existing pairs only fall, so a row whose best pair lost uses is recounted only when it comes
    # up as the maximum (the first maximum of the bounds that is exact is the first exact maximum)
    dirty = np.zeros(cap, dtype=bool)

    def refresh(rows: np.ndarray) -> None:
        block = np.maximum(same[rows, :m], diff[rows, :m])
        rowmax[rows], rowarg[rows] = block.max(1), block.argmax(1)
        dirty[rows] = False

    while len(pairs) < budget:
        if deadline is not None and time.perf_counter() > deadline:
            return pairs, M[:, :m], False
        a = int(np.argmax(rowmax[:m]))
        while dirty[a]:
            refresh(np.array([a]))
            a = int(np.argmax(rowmax[:m]))
        if rowmax[a] < min_uses:
            break
        b = int(rowarg[a])
        sigma = 1 if same[a, b] >= diff[a, b] else -1
        rows = np.flatnonzero((M[:, a] != 0) & (M[:, b] == sigma * M[:, a]))
        if m == cap:
            cap = min(2 * cap, d + budget)
            M = _grown(M, m, cap, square=False)
            same, diff = (_grown(x, m, cap, square=True) for x in (same, diff))
            rowmax, rowarg, dirty = (_grown(x, m, cap, square=False) for x in (rowmax, rowarg, dirty))
        sign_a, nz, d_same, d_diff = _take_pair(M, same, diff, rows, (a, b, sigma), m)
        n_same, n_diff = d_same[nz], d_diff[nz]
        u = m
        m += 1
        M[rows, u] = sign_a
        pairs.append((a, b, sigma))
        same[u, nz], diff[u, nz] = n_same, n_diff  # row and column u are still zero elsewhere
        same[nz, u], diff[nz, u] = n_same, n_diff
        dirty[:m][(rowarg[:m] == a) | (rowarg[:m] == b)] = True  # their best pair lost uses
        refresh(np.array([a, b, u]))
        column_u = np.zeros(m, dtype=np.int64)  # symmetric: column u is row u, just written
        column_u[:u] = np.maximum(d_same, d_diff)
        better = column_u > rowmax[:m]  # above a bound is above the exact count: u is the best
        rowmax[:m][better] = column_u[better]
        rowarg[:m][better] = u
        dirty[:m][better] = False
    return pairs, M[:, :m], True


def _pair_counts(W: np.ndarray, cap: int, count_t: type) -> tuple[np.ndarray, np.ndarray]:
    """``same[a, b]`` / ``diff[a, b]``: the outputs where features ``a`` and ``b`` have equal / opposite
    signs (zero diagonal), in ``cap x cap`` matrices with room for the partials to come."""
    d = W.shape[1]
    S = W.astype(np.float32)
    A = np.abs(S)
    G, Ga = S.T @ S, A.T @ A
    same = np.zeros((cap, cap), dtype=count_t)
    diff = np.zeros((cap, cap), dtype=count_t)
    same[:d, :d] = np.rint((Ga + G) / 2)
    diff[:d, :d] = np.rint((Ga - G) / 2)
    idx = np.arange(d)
    same[idx, idx] = diff[idx, idx] = 0
    return same, diff


def _take_pair(
    M: np.ndarray, same: np.ndarray, diff: np.ndarray, rows: np.ndarray, pair: tuple[int, int, int], m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rewrite ``rows`` of ``M`` to no longer hold the pair ``(a, b, sigma)`` and take its uses off the
    counts, in place; returns the rows' sign of ``a`` (the new partial's column), the columns the
    rewritten rows still hold, and the new partial's same / diff counts against every column."""
    a, b, sigma = pair
    count_t = same.dtype
    sign_a = M[rows, a].astype(np.int16)
    M[rows, a] = 0
    M[rows, b] = 0
    X = M[rows, :m].astype(np.int16) * sign_a[:, None]
    d_same = (X > 0).sum(0).astype(count_t)
    d_diff = (X < 0).sum(0).astype(count_t)
    # only the columns the rewritten rows still hold change: a column write in these row-major
    # matrices touches one cache line per entry, so write those few entries, not all m
    nz = np.flatnonzero(X.any(0))
    n_same, n_diff = d_same[nz], d_diff[nz]
    kept = diff[a, b] if sigma > 0 else same[a, b]  # the other relative sign is untouched
    for col, s_delta, d_delta in ((a, n_same, n_diff), (b, *((n_same, n_diff) if sigma > 0 else (n_diff, n_same)))):
        same[col, nz] -= s_delta
        same[nz, col] = same[col, nz]
        diff[col, nz] -= d_delta
        diff[nz, col] = diff[col, nz]
    (same if sigma > 0 else diff)[a, b] = 0
    (same if sigma > 0 else diff)[b, a] = 0
    (diff if sigma > 0 else same)[a, b] = kept
    (diff if sigma > 0 else same)[b, a] = kept
    return sign_a, nz, d_same, d_diff


def _grown(x: np.ndarray, m: int, cap: int, square: bool) -> np.ndarray:
    """``x`` with its first ``m`` columns (and rows, if ``square``) in a larger zeroed array."""
    if x.ndim == 1:
        out = np.zeros(cap, dtype=x.dtype)
        out[:m] = x[:m]
    elif square:
        out = np.zeros((cap, cap), dtype=x.dtype)
        out[:m, :m] = x[:m, :m]
    else:
        out = np.zeros((x.shape[0], cap), dtype=x.dtype)
        out[:, :m] = x[:, :m]
    return out


def _flatten(d: int, pairs: list[tuple[int, int, int]], M: np.ndarray) -> PairsPlan:
    """Fold every partial used exactly once, by another partial, into that user: same additions,
    fewer columns and levels.  Then renumber the partials that remain and assign their levels."""
    n = len(pairs)
    output_users = np.count_nonzero(M[:, d:], axis=0)
    partial_users = np.zeros(n, dtype=np.int64)
    for a, b, _ in pairs:
        for c in (a, b):
            if c >= d:
                partial_users[c - d] += 1
    folded = (output_users == 0) & (partial_users == 1)
    resolved: list[dict[int, int]] = []  # partial q over features and kept partials (children first)
    for a, b, sigma in pairs:
        out: dict[int, int] = {}
        for c, s in ((a, 1), (b, sigma)):
            inner = resolved[c - d].items() if c >= d and folded[c - d] else ((c, 1),)
            for cc, ss in inner:
                out[cc] = out.get(cc, 0) + s * ss
        resolved.append({c: s for c, s in out.items() if s})
    keep = np.flatnonzero(~folded)
    new_index = np.full(n, -1, dtype=np.int64)
    new_index[keep] = np.arange(len(keep))

    def renumber(cols: np.ndarray) -> np.ndarray:
        if n == 0:  # no pair was worth sharing: the outputs read features only
            return cols
        return np.where(cols < d, cols, d + new_index[np.maximum(cols - d, 0)])

    partials: list[tuple[np.ndarray, np.ndarray]] = []
    for q in keep:
        items = sorted(resolved[q].items())
        cols = renumber(np.array([c for c, _ in items], dtype=np.int64))
        partials.append((cols, np.array([s for _, s in items], dtype=np.float64)))
    terms = []
    for row in M:
        nz = np.flatnonzero(row)
        terms.append((renumber(nz.astype(np.int64)), row[nz].astype(np.float64)))
    return _leveled(d, partials, terms)


def _leveled(d: int, partials: list[tuple[np.ndarray, np.ndarray]], terms: list) -> PairsPlan:
    """The plan with every partial that holds only negative terms flipped, and its sign flipped
    wherever it is read (DuckDB evaluates a leading minus as one more node), then levelled as late
    as possible."""
    factor = np.ones(d + len(partials))
    positive = []
    for q, (cols, signs) in enumerate(partials):  # children first: their flips are known here
        signs = signs * factor[cols]
        if len(signs) and (signs < 0).all():
            signs, factor[d + q] = -signs, -1.0
        positive.append((cols, signs))
    terms = [(cols, signs * factor[cols]) for cols, signs in terms]
    return PairsPlan(d, positive, _as_late_as_possible(d, positive, earliest_levels(d, positive)), terms)


def earliest_levels(d: int, partials: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Each partial one level above the highest partial it reads (features are level 0); partials
    are listed children first."""
    level = np.zeros(len(partials), dtype=np.int64)
    for q, (cols, _) in enumerate(partials):
        below = cols[cols >= d] - d
        level[q] = 1 + (int(level[below].max()) if len(below) else 0)
    return level


def _as_late_as_possible(d: int, partials: list[tuple[np.ndarray, np.ndarray]], level: np.ndarray) -> np.ndarray:
    """Move each partial to the last level before its first reader (outputs read after the last
    level), keeping the depth.  Each level's select passes on every column a later level still
    reads, so computing a partial late shortens what is carried: for s = 3, d = 784, k = 200 the
    carried columns summed over levels fall from 11,972 to 5,023 (s = 1: 7,282 to 4,443; the
    transposed plans ``auto`` uses, ``PYTHONPATH=. python -m bench.probes pairs``)."""
    if not len(level):
        return level
    depth = int(level.max())
    late = np.full(len(level), depth, dtype=np.int64)
    readers: list[list[int]] = [[] for _ in level]
    for q, (cols, _) in enumerate(partials):
        for c in cols[cols >= d]:
            readers[int(c) - d].append(q)
    for q in np.argsort(-level, kind="stable"):  # readers sit on higher levels: settle them first
        if readers[q]:
            late[q] = min(late[r] for r in readers[q]) - 1
    return late


__all__ = ["PairsPlan", "plan_pairs", "plan_pairs_transposed", "signs_of"]
