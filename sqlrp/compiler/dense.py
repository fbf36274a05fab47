"""The dense layouts' linear stage: signed sums over the columns ``_x{i}`` of :func:`.inputs.dense_source`.

One function per strategy (:mod:`.strategies`), each returning the relation the sums read from and
the sums, in the table :data:`LINEAR`: ``inline`` (one signed sum per output over the inputs),
``mailman`` (shared partial sums per block of features, in a fenced sub-query) and ``pairs``
(:mod:`.pairs`' partial sums in nested selects, one per level).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlglot import exp

from ..core.errors import InvalidParameter
from ..core.ir import LinearStage, Projection
from ..core.layout import Formulation, Source
from ..core.nodes import Inputs, SignedSum, col
from ..dialects import SqlrpDialect
from .inputs import dense_source
from .strategies import best_mailman

#: (projection, source, dialect, dense source relation, the decided formulation: mailman's block, the
#: pairs plan) -> (relation read, linear sums)
LinearBody = Callable[
    [Projection, Source, SqlrpDialect, exp.Select, Formulation], tuple[exp.Select, list[exp.Expression]]
]


def _linear_sums(linear: LinearStage, inputs: Inputs, squares: Inputs | None) -> list[SignedSum]:
    sums = []
    for v, (feat, weight) in enumerate(linear.columns()):
        src = squares if (squares is not None and linear.vector_power(v) == 2) else inputs
        if linear.vector_power(v) > 2:
            raise InvalidParameter("linear stage powers above 2 are not supported by the compiler")
        sums.append(SignedSum.of(src, feat, weight, linear.vector_bias(v)))
    return sums


def _inline_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, src: exp.Select, how: Formulation
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``inline``: one signed sum per output over the input columns, ``(_x3 + _x17 - _x40 ...)``,
    read from ``src`` itself (``_x{i} * _x{i}`` for a vector of squared features)."""
    lin = projection.linear
    inputs = Inputs(col(f"_x{i}") for i in range(projection.d))
    squares = Inputs(exp.Mul(this=col(f"_x{i}"), expression=col(f"_x{i}")) for i in range(projection.d))
    return src, list(_linear_sums(lin, inputs, squares if lin.power is not None else None))


def _mailman_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, src: exp.Select, how: Formulation
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``mailman``: each distinct sign pattern of a block of features summed once per row, as a
    column ``_m{q}`` of a fenced select over ``src``; the outputs add or subtract those columns and
    the features left over (``block`` forces the block size, :func:`.strategies.best_mailman`)."""
    lin = projection.linear
    inputs = Inputs(col(f"_x{i}") for i in range(projection.d))
    plan = best_mailman(lin, dialect, how.block)
    if plan is None:
        raise InvalidParameter("the mailman strategy needs a sign matrix (+1/-1 weights, no squared features)")
    keys = [col("_id")] + ([col("_g")] if source.group_column else [])
    used = [col(f"_x{i}") for i in range(projection.d) if plan.uses_feature[i]]
    partials = [
        exp.alias_(SignedSum.of(inputs, feat, sign), f"_m{q}", quoted=True, copy=False)
        for q, (feat, sign) in enumerate(plan.partials)
    ]
    # fenced: each partial sum computed once per row (PostgreSQL: parallel plans still allowed;
    # `PYTHONPATH=. python -m bench.probes pg-fence`, figures: docs/benchmarks.md, "Compiler")
    shared = dialect.fence(exp.select(*keys, *used, *partials).from_(src.subquery("src", copy=False), copy=False))
    extended = Inputs([*(col(f"_x{i}") for i in range(projection.d)), *(col(f"_m{q}") for q in range(len(partials)))])
    sums = [SignedSum.of(extended, idx, sign, lin.vector_bias(v)) for v, (idx, sign) in enumerate(plan.terms)]
    return shared, sums


def _pairs_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, src: exp.Select, how: Formulation
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``pairs``: the partial sums of :mod:`.pairs` as columns ``_m{q}`` of nested selects,
    one per level (a partial reads only lower levels; each sits on the last level before its first
    reader), each fenced and passing on only the columns that a later level or an output still reads;
    the outputs sum features and partials.  Where the dialect has ``SELECT * EXCLUDE`` (DuckDB) a
    level names the columns it drops if they are fewer than those it keeps: for d = 784, k = 200 the
    SQL shrinks from 451,000 to 427,000 characters for s = 3 and from 460,000 to 432,000 for s = 1,
    and DuckDB parses it a little faster (``PYTHONPATH=. python -m bench.probes pairs``, which also
    counts the carried columns; figures: docs/benchmarks.md, "Compiler")."""
    lin = projection.linear
    plan = how.pairs  # decided once, before compiling (strategies.decide)
    if plan is None:
        raise RuntimeError("sqlrp defect: the pairs strategy reached the compiler without its plan")
    d = projection.d
    names = [f"_x{i}" for i in range(d)] + [f"_m{q}" for q in range(len(plan.partials))]
    inputs = Inputs(col(n) for n in names)
    depth = plan.depth
    defined = np.concatenate([np.zeros(d, dtype=np.int64), plan.level])
    last_use = np.zeros(len(names), dtype=np.int64)  # level that last reads a column (depth + 1: outputs)
    for q, (cols, _) in enumerate(plan.partials):
        np.maximum.at(last_use, cols, plan.level[q])
    for cols, _ in plan.terms:
        last_use[cols] = depth + 1
    keys = [col("_id")] + ([col("_g")] if source.group_column else [])
    relation = src
    available = defined == 0  # the columns of the relation the next level reads
    for lev in range(1, depth + 1):
        keep = (defined < lev) & (last_use > lev)
        drop = available & ~keep
        if dialect.star_exclude and drop.sum() < keep.sum():
            # ``* EXCLUDE`` names the columns dropped here where they are fewer than those kept
            dropped = [col(names[c]) for c in np.flatnonzero(drop)]
            carried: list[exp.Expression] = [exp.Star(except_=dropped) if dropped else exp.Star()]
        else:
            carried = [k.copy() for k in keys] + [col(names[c]) for c in np.flatnonzero(keep)]
        available = keep | (defined == lev)
        new = [
            exp.alias_(SignedSum.of(inputs, *plan.partials[q]), names[d + q], quoted=True, copy=False)
            for q in np.flatnonzero(plan.level == lev)
        ]
        select = exp.select(*carried, *new).from_(relation.subquery(f"_l{lev}", copy=False), copy=False)
        relation = dialect.fence(select)
    sums = [SignedSum.of(inputs, idx, sign, lin.vector_bias(v)) for v, (idx, sign) in enumerate(plan.terms)]
    return relation, sums


#: strategy -> the function building its linear sums over the dense source (one row per dense strategy)
LINEAR: dict[str, LinearBody] = {
    "inline": _inline_linear,
    "mailman": _mailman_linear,
    "pairs": _pairs_linear,
}


def _dense_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, how: Formulation, guard: bool = False
) -> tuple[exp.Select, list[exp.Expression]]:
    """The relation the linear sums read from, and the sums (strategies ``inline`` / ``mailman`` / ``pairs``);
    ``guard``: the source relation checks the input (:func:`.guard.input_guard`)."""
    src = dense_source(projection, source, dialect, checked=guard)
    return LINEAR[how.strategy](projection, source, dialect, src, how)
