"""Strategies: several SQL formulations of the same linear stage, and the rule that picks one.

Dense layouts (wide, array):

- ``inline``  -- one signed sum per output over the input columns, ``(_x3 + _x17 - _x40 ...)``.
  Plain and readable; the right choice for very sparse matrices (``s = sqrt(d)``).
- ``mailman`` -- shared partial sums ("mailman" idea for +-1 matrices; :mod:`.mailman`).  The features are cut into
  blocks of ``b`` consecutive features; inside a block, every output sees one sign pattern (up to an
  overall sign).  Each distinct pattern with two or more non-zeros is summed once per row, as a column
  ``_m{q}`` of a sub-query, and every output that needs it adds or subtracts that column.  With dense
  signs (``s = 1``, d = 784, k = 200, b = 6) the outputs shrink from 156,800 terms to 26,200 terms
  plus 4,164 partial sums: still additions and subtractions only.  It pays twice in DuckDB: fewer
  additions per row, and a much smaller expression tree for the planner, whose time grows faster than
  linearly with the size of an expression (figures: docs/benchmarks.md, "Compiler").
- ``pairs``   -- the general form of that idea (:mod:`.pairs`, Paar's greedy algorithm): repeatedly
  share the signed pair of columns used by the most outputs, partials of partials included, in
  nested selects (one per level); planned on the matrix and on its transpose, the cheaper plan kept.
  d = 784, k = 200: ``s = 3`` 52,186 -> 23,678 additions per row (transposed); ``s = 1``
  156,600 -> 24,073 (transposed).

Long layout (``row_id, feature, value``):

- ``join``   -- join the matrix, ``GROUP BY id, vector``, then pivot with one
  ``SUM(..) FILTER (WHERE vector = j)`` per output: every (id, vector) row is tested k times.
- ``lookup`` -- same join and ``GROUP BY id, vector``, then one ``GROUP BY id`` that collects the
  vectors and sums into two arrays; output ``j`` is ``sums[array_position(vectors, j)]`` (0 when
  absent).  Measured several times faster than ``join`` for text-like data in DuckDB (``bench/run.py``;
  figures: docs/benchmarks.md, "Compiler").

``join`` and ``lookup`` also take a wide (or array) table, unnested in SQL (``compiler.long._unnested``):
the SQL then grows with d instead of with the matrix.

Lists (DuckDB, :mod:`.lists`):

- ``list_transform`` -- each row's features as one list; every linear sum a ``list_sum(list_select(
  ...))`` over constant positions (sparse matrices) or a ``list_dot_product`` with a dense weight row
  (denser than about 1 in 12), and the combiner's products of sums by positions too, every constant
  one string cast once.  Binding costs little at any matrix size and each row little per non-zero
  (less per dense entry; :data:`LIST_ROW_SECONDS`, :data:`LIST_DENSE_ROW_SECONDS`): the choice for
  small tables, where binding the inline query dominates (``PYTHONPATH=. python bench/small_tables.py
  --only strategies``; figures: docs/benchmarks.md, "Compiler"), and for dense matrices well beyond.

``auto`` (:func:`choose`) decides from the matrix and the engine's profile, by rules measured on
this project's benchmark (``bench/run.py``): ``lookup`` for long tables where the engine has ordered
``ARRAY_AGG`` (DuckDB, PostgreSQL), else ``join``; ``list_transform`` on a dense table of known size
where its estimate is below inline's, pairs' and lookup's (:func:`prefers_lists`, DuckDB); ``lookup``
on a small wide table of a stored projection where the join is estimated cheaper than binding the
inline query (:func:`prefers_long`, DuckDB); for dense layouts on engines where nested selects were
measured cheap (DuckDB, PostgreSQL; not Spark, ``../shared/DESIGN.md`` 4b) ``pairs`` when its
estimated cost (:func:`pairs_cost`) is at most 0.8 of ``inline``'s, else ``inline``.  ``mailman``
is never chosen by ``auto`` any more (``pairs`` was faster for ``s = 1`` and ``s = 3``; at
``s = sqrt(d)`` neither beats ``inline``) but can still be forced.  Kernel methods (PK-RP and friends)
reuse the same linear-stage strategies: the combiner sits on top of whatever the strategy returns.
"""

from __future__ import annotations

import time
from typing import Any

from ..core.errors import InvalidParameter
from ..core.ir import LinearStage, Projection
from ..core.layout import Source
from ..dialects import SqlrpDialect, get_dialect
from .mailman import BLOCK_SIZES, MailmanPlan, mailman_applicable, plan_mailman
from .pairs import PairsPlan, plan_pairs, plan_pairs_transposed

DENSE_STRATEGIES = ("inline", "mailman", "pairs")
LONG_STRATEGIES = ("join", "lookup")
LIST_STRATEGIES = ("list_transform",)  # dense layouts, engines with list lambdas (:mod:`.lists`)
STRATEGIES = ("auto",) + DENSE_STRATEGIES + LONG_STRATEGIES + LIST_STRATEGIES

#: pairs is chosen when its estimated cost is at most this fraction of inline's
PAIRS_GAIN = 0.8
#: cost of one partial-sum column beyond the terms it reads, in output terms: a partial is written
#: once per row and read back later, out of cache.  A two-term partial thus costs 2.5 terms, the
#: figure estimated from the s = 3 and s = sqrt(d) times of ``bench/run.py`` with the plans' terms
#: and partials from ``bench.probes pairs`` (d = 784, k = 200)
PARTIAL_WRITE_COST = 0.5
#: pairs is planned only if a given pair of columns is expected in at least this many rows of the
#: matrix or of its transpose (``max(p, d) * density^2``, :func:`pairs_worth_planning`): below it the
#: greedy's plan came out above :data:`PAIRS_GAIN` of inline's cost, so its planning time was spent
#: for nothing (``PYTHONPATH=. python -m bench.probes worth`` prints the measure, the planning time and
#: the plan's cost against inline's per matrix; figures: docs/benchmarks.md, "Compiler")
PAIRS_WORTH = 10.0
#: the inline query's cost per output term, for the planner's time budget: DuckDB parses, binds and
#: optimises it in about TERM_BIND_SECONDS per term once per query (EXPLAIN of the inline query in
#: ``PYTHONPATH=. python -m bench.probes worth``), then adds about TERM_ROW_SECONDS per term and row
#: (``PYTHONPATH=. python bench/engines.py``, DuckDB; figures: docs/benchmarks.md, "Compiler")
TERM_BIND_SECONDS = 50e-6
TERM_ROW_SECONDS = 2e-9
#: the pairs planner may take this share of the inline query's estimated time, within these bounds:
#: a plan saves at most about 40% of it (s = 3), so planning longer than that never pays on one run
PLANNER_SHARE = 0.25
PLANNER_SECONDS = (0.25, 60.0)
#: a wide table unnested and joined with the matrix costs about JOIN_ROW_SECONDS per row and
#: non-zero plus GROUP_ROW_SECONDS per row and vector (the ordered ARRAY_AGG), in DuckDB: fitted on
#: PK-RP degree 2 and P-RP m = 10 at 189 and 2,000 rows of 500 features, against the inline queries
#: (``PYTHONPATH=. python -m bench.probes small``; figures: docs/benchmarks.md, "Compiler")
JOIN_ROW_SECONDS = 11e-9
GROUP_ROW_SECONDS = 1.2e-6
#: ... but only once the inline query is big enough for its binding time to matter
LONG_MIN_TERMS = 10_000
#: the list_transform query (:mod:`.lists`) costs about LIST_BIND_SECONDS per non-zero once (compiling,
#: and DuckDB casting the one string of positions) and LIST_ROW_SECONDS per non-zero and row (a
#: list_select per vector): compile, EXPLAIN and CREATE TABLE AS timed apart for P-RP, PK-RP and
#: Achlioptas s = 3 at 100 to 1,600 rows of 500 features (``PYTHONPATH=. python bench/small_tables.py
#: --only fit`` re-measures; figures: docs/benchmarks.md, "Compiler").  Against inline's
#: TERM_BIND_SECONDS and TERM_ROW_SECONDS the two cross at about 4,000 rows, as issue 24 reports
#: (near 3,000 under heavier load)
LIST_BIND_SECONDS = 1.2e-6
LIST_ROW_SECONDS = 14e-9
#: ... and, for denser matrices, as dot products of the row with dense weight rows
#: (``list_dot_product``): LIST_DENSE_ROW_SECONDS per entry of the dense matrix and row, and
#: LIST_DENSE_BIND_SECONDS per entry once (measured on P-RP m = 10, s = 3, against the same sums by
#: positions in a hand-written probe of the sums alone; figures: docs/benchmarks.md, "Compiler").  Dense rows thus
#: pay from a density of about LIST_DENSE_ROW_SECONDS / LIST_ROW_SECONDS = 1 in 12 (s = 3 and s = 1;
#: not s = sqrt(d) beyond d = 150)
LIST_DENSE_ROW_SECONDS = 1.1e-9
LIST_DENSE_BIND_SECONDS = 0.3e-6
#: the unnested lookup reads and hashes the stored matrix once: about LOOKUP_BIND_SECONDS per non-zero
#: on top of its per-row cost (JOIN_ROW_SECONDS, GROUP_ROW_SECONDS): fitted on the same tables through
#: ``sqlrp.project`` into a table, lookup against list_transform (figures: docs/benchmarks.md, "Compiler")
LOOKUP_BIND_SECONDS = 1.3e-6


def inline_cost(linear: LinearStage) -> float:
    return float(linear.nnz)


def best_mailman(
    linear: LinearStage, dialect: SqlrpDialect | str = "duckdb", block: int | None = None
) -> MailmanPlan | None:
    """The mailman plan of least estimated cost (or of the given block size) within the dialect's
    column limit."""
    if not mailman_applicable(linear):
        return None
    return _best_mailman(linear, get_dialect(dialect), block)


def _best_mailman(linear: LinearStage, dialect: SqlrpDialect, block: int | None) -> MailmanPlan | None:
    limit = dialect.max_columns
    best = None
    for b in [block] if block else BLOCK_SIZES:
        if b > linear.d:
            continue
        plan = plan_mailman(linear, b)
        if limit is not None and linear.d + len(plan.partials) > limit:
            continue
        if best is None or plan.cost < best.cost:
            best = plan
    return best


def pairs_budget(linear: LinearStage, dialect: SqlrpDialect | str = "duckdb") -> int | None:
    """Most partials the dialect's column limit leaves room for (``None``: no limit)."""
    limit = get_dialect(dialect).max_columns
    return None if limit is None else limit - linear.d - 2  # id and group key


def planner_seconds(linear: LinearStage, rows: int | None = None) -> float:
    """How long the pairs planner may run: :data:`PLANNER_SHARE` of the inline query's estimated
    time on ``rows`` rows (unknown: the upper bound), within :data:`PLANNER_SECONDS`."""
    low, high = PLANNER_SECONDS
    if rows is None:
        return high
    estimate = inline_cost(linear) * (TERM_BIND_SECONDS + rows * TERM_ROW_SECONDS)
    return min(high, max(low, PLANNER_SHARE * estimate))


def best_pairs(
    linear: LinearStage, dialect: SqlrpDialect | str = "duckdb", seconds: float | None = None
) -> PairsPlan | None:
    """The greedy pair plan (:mod:`.pairs`) within the dialect's column limit and ``seconds`` of
    planning (default: the upper bound of :data:`PLANNER_SECONDS`), half for each orientation; a
    plan the time cut short has ``complete=False``.  Planned anew on every call: the caller keeps
    it (:func:`decide` returns it, the pipeline's plan carries it, the registry stores it)."""
    if not mailman_applicable(linear) or linear.p == 0:  # p = 0: no vectors (Maclaurin of degree 0), no pairs
        return None
    seconds = PLANNER_SECONDS[1] if seconds is None else seconds
    budget = pairs_budget(linear, dialect)
    if budget is not None and budget <= 0:
        return None
    start = time.perf_counter()  # Paar's greedy on the matrix and on its transpose: the cheaper plan
    first = plan_pairs(linear, budget, deadline=start + seconds / 2)
    second = plan_pairs_transposed(linear, budget, deadline=start + seconds)
    return min((first, second), key=pairs_cost)


def pairs_considered(projection: Projection, source: Source, dialect: SqlrpDialect | str, strategy: str) -> bool:
    """True if compiling with ``strategy`` may need a pairs plan: forced, or ``auto`` on a dense layout
    where neither lists nor the unnested lookup are taken and :func:`pairs_worth_planning` says so."""
    engine = get_dialect(dialect)
    if source.layout == "long" or not isinstance(projection, Projection):
        return False
    if strategy != "auto":
        return strategy == "pairs"
    if prefers_lists(projection, source, engine) or prefers_long(projection, source, engine):
        return False
    return engine.nested_plans and pairs_worth_planning(projection.linear)


def pairs_cost(plan: PairsPlan) -> float:
    """Estimated time in units of one output term: every term read, the outputs' and the partials',
    plus :data:`PARTIAL_WRITE_COST` per partial."""
    return plan.output_terms + plan.partial_terms + PARTIAL_WRITE_COST * len(plan.partials)


def pairs_worth_planning(linear: LinearStage) -> bool:
    """Pairs repeat only when a random pair of columns shares several rows of the matrix: on the
    matrix, ``p * density^2`` outputs hold a given pair of features; on its transpose (the plan
    :func:`~.pairs.plan_pairs_transposed` finds), ``d * density^2`` features a given pair of
    outputs.  Below :data:`PAIRS_WORTH` for both, the plan is not worth its planning time: PK-RP
    degree 2 (k = 160, s = sqrt(d): 4.1 at d = 784) comes out at 0.88 of inline's estimated cost,
    Achlioptas ``s = sqrt(d)`` (d = 784, k = 200: 1.1) at 1.00, ``s = 3`` with k = 40 to 200 (22.8-87.5,
    from the transpose) at 0.61-0.73 (``bench.probes worth``; ``test_auto_choice`` and
    ``test_auto_per_engine`` pin the choices)."""
    density = linear.nnz / max(linear.d * linear.p, 1)
    return mailman_applicable(linear) and max(linear.p, linear.d) * density**2 >= PAIRS_WORTH


def prefers_long(
    projection: Projection, source: Source, dialect: SqlrpDialect | str = "duckdb", matrix: str = "registry"
) -> bool:
    """``auto``'s rule for a small wide (or array) table: unnest it and ``lookup`` the stored matrix
    (SQL that grows with d, not with the matrix) when the estimated join time is below the inline
    query's (:data:`JOIN_ROW_SECONDS` and :data:`GROUP_ROW_SECONDS` per row, against
    :data:`TERM_BIND_SECONDS` once and :data:`TERM_ROW_SECONDS` per row, per term), the inline query has at
    least :data:`LONG_MIN_TERMS` terms, the matrix is stored (a ``VALUES`` list would grow with the
    matrix again) and the engine was measured to gain (``dialect.wide_as_long``: DuckDB)."""
    engine = get_dialect(dialect)
    rows, terms = source.rows, inline_cost(projection.linear)
    if not (engine.wide_as_long and source.layout != "long" and matrix != "values" and rows is not None):
        return False
    joined = rows * (terms * JOIN_ROW_SECONDS + projection.linear.p * GROUP_ROW_SECONDS)
    return terms >= LONG_MIN_TERMS and joined < terms * (TERM_BIND_SECONDS + rows * TERM_ROW_SECONDS)


def list_row_seconds(linear: LinearStage, dense: bool) -> float:
    """Estimated seconds per row of ``list_transform``'s sums: by positions (:data:`LIST_ROW_SECONDS`
    per non-zero) or as dot products with dense weight rows (:data:`LIST_DENSE_ROW_SECONDS` per
    entry of the dense matrix, twice as wide where a vector sums squares)."""
    if not dense:
        return inline_cost(linear) * LIST_ROW_SECONDS
    width = 2 * linear.d if linear.power is not None else linear.d
    return width * linear.p * LIST_DENSE_ROW_SECONDS


def list_transform_seconds(linear: LinearStage, rows: int) -> float:
    """Estimated seconds of the ``list_transform`` query on ``rows`` rows, in the cheaper of its two
    forms (:data:`LIST_BIND_SECONDS` and :data:`LIST_ROW_SECONDS`; dense rows:
    :data:`LIST_DENSE_BIND_SECONDS` and :data:`LIST_DENSE_ROW_SECONDS`)."""
    width = 2 * linear.d if linear.power is not None else linear.d
    positions = inline_cost(linear) * LIST_BIND_SECONDS + rows * list_row_seconds(linear, dense=False)
    dense = width * linear.p * LIST_DENSE_BIND_SECONDS + rows * list_row_seconds(linear, dense=True)
    return dense if list_row_seconds(linear, True) < list_row_seconds(linear, False) else positions


def prefers_lists(
    projection: Projection, source: Source, dialect: SqlrpDialect | str = "duckdb", matrix: str = "registry"
) -> bool:
    """``auto``'s rule for ``list_transform``: a dense layout of known size on an engine with list
    lambdas (DuckDB), where its estimate (:func:`list_transform_seconds`) is below the inline query's
    (:data:`TERM_BIND_SECONDS` once and :data:`TERM_ROW_SECONDS` per row, per term), below
    :data:`PAIRS_GAIN` of it where ``pairs`` may be planned, and below the unnested ``lookup``'s where
    :func:`prefers_long` would take that.  In effect: sparse matrices (by positions) up to about
    4,000 rows; denser ones (dense rows, ``s = 3`` or ``1``) far beyond: close to ``pairs`` and ahead
    of ``inline`` at 20,000 rows for ``s = 3`` (figures: docs/benchmarks.md, "Compiler")."""
    engine, rows = get_dialect(dialect), source.rows
    if not (engine.list_lambdas and source.layout != "long" and rows is not None):
        return False
    linear, terms = projection.linear, inline_cost(projection.linear)
    lists = list_transform_seconds(linear, rows)
    inline = terms * (TERM_BIND_SECONDS + rows * TERM_ROW_SECONDS)
    rivals = [inline]
    if engine.nested_plans and pairs_worth_planning(linear):
        rivals.append(PAIRS_GAIN * inline)  # the most pairs may cost and still be chosen (planning aside)
    if prefers_long(projection, source, engine, matrix):
        rivals.append(terms * LOOKUP_BIND_SECONDS + rows * (terms * JOIN_ROW_SECONDS + linear.p * GROUP_ROW_SECONDS))
    return lists < min(rivals)


def choose(projection: Projection, source: Source, *args: Any, **kwargs: Any) -> str:
    """The strategy :func:`decide` picks (given its arguments), without its pairs plan."""
    return decide(projection, source, *args, **kwargs)[0]


def decide(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect | str = "duckdb",
    strategy: str = "auto",
    matrix: str = "values",
    pairs: PairsPlan | None = None,
) -> tuple[str, PairsPlan | None]:
    """The strategy to compile with, and the pairs plan it compiles with (``None`` unless ``pairs``):
    ``strategy`` itself if forced (checked against the layout and the engine), otherwise the measured
    rule described in the module docstring -- per engine: the nested selects of ``pairs`` only where the
    dialect's profile says they were measured cheap (``nested_plans``: DuckDB, PostgreSQL), ``lookup``
    only where ordered ``ARRAY_AGG`` and ``ARRAY_POSITION`` exist (``ordered_array_agg``), else
    ``join``.  A given ``pairs`` plan (the registry's) is used, not planned again."""
    engine = get_dialect(dialect)
    chosen, pairs = _decide_name(projection, source, engine, strategy, matrix, pairs)
    if chosen != "pairs":
        return chosen, None
    if pairs is None:
        pairs = best_pairs(projection.linear, engine, planner_seconds(projection.linear, source.rows))
    if pairs is None:
        raise InvalidParameter("the pairs strategy needs a sign matrix (+1/-1 weights, no squared features)")
    return chosen, pairs


def _decide_name(
    projection: Projection,
    source: Source,
    engine: SqlrpDialect,
    strategy: str,
    matrix: str,
    pairs: PairsPlan | None,
) -> tuple[str, PairsPlan | None]:
    """The strategy's name (:func:`decide`), and the pairs plan if ``auto`` planned one to weigh it."""
    if strategy not in STRATEGIES:
        raise InvalidParameter(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    allowed = LONG_STRATEGIES if source.layout == "long" else DENSE_STRATEGIES
    if engine.select_unnest and source.layout != "long":
        allowed = allowed + LONG_STRATEGIES  # the wide table unnested (compiler.long._unnested)
    if engine.list_lambdas and source.layout != "long":
        allowed = allowed + LIST_STRATEGIES
    if strategy != "auto":
        if strategy in LIST_STRATEGIES and not engine.list_lambdas:
            raise engine.refuse(
                "the list_transform strategy needs list lambdas (list_transform, list_select, list_sum) as DuckDB "
                "has them; use --strategy=inline"
            )
        if strategy in LONG_STRATEGIES and source.layout != "long" and not engine.select_unnest:
            raise engine.refuse(
                f"the {strategy} strategy on a {source.layout} table unnests two arrays in one select list, and this "
                "engine's profile does not say they run in lockstep (in Hyper they are a cross product); use "
                "the inline, pairs or mailman strategy (--strategy)"
            )
        if strategy not in allowed:
            raise InvalidParameter(
                f"strategy {strategy!r} does not apply to the {source.layout} layout; "
                f"choose one of {', '.join(allowed)}"
            )
        if strategy in ("mailman", "pairs") and not mailman_applicable(projection.linear):
            raise InvalidParameter(
                f"the {strategy} strategy needs a sign matrix (+1/-1 weights, no squared features); use inline"
            )
        if strategy == "lookup" and not engine.ordered_array_agg:
            raise engine.refuse(
                "the lookup strategy needs ARRAY_AGG(... ORDER BY ...) and a 1-based ARRAY_POSITION, which this "
                "engine does not have as DuckDB and PostgreSQL do; use --strategy=join"
            )
        return strategy, pairs
    if source.layout == "long":
        return ("lookup" if engine.ordered_array_agg else "join"), None
    if prefers_lists(projection, source, engine, matrix):
        return "list_transform", None
    if prefers_long(projection, source, engine, matrix):
        return "lookup", None
    if not engine.nested_plans or not pairs_worth_planning(projection.linear):
        return "inline", None
    if pairs is None:
        pairs = best_pairs(projection.linear, engine, planner_seconds(projection.linear, source.rows))
    if pairs is not None and pairs_cost(pairs) <= PAIRS_GAIN * inline_cost(projection.linear):
        return "pairs", pairs
    return "inline", None


__all__ = [
    "DENSE_STRATEGIES",
    "LONG_STRATEGIES",
    "STRATEGIES",
    "LIST_STRATEGIES",
    "MailmanPlan",
    "best_mailman",
    "best_pairs",
    "choose",
    "decide",
    "planner_seconds",
    "prefers_lists",
    "prefers_long",
    "plan_mailman",
]
