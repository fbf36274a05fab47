"""In-SQL standardisation of the input: ``(x_i - mean_i) / std_i`` applied in the source relation.

Why (issue 5's pitfall): on raw data with large-magnitude features most of the degree-2 kernel distance
sits in the ``d`` diagonal features ``x_i^2``, which P-RP weights with zero (``s = 1``, even ``m``) or with
large variance; centring and scaling each feature first makes P-RP and PK-RP measure what they should.

The statistics are computed by one aggregate query over the table (:func:`sqlrp.pipeline.plan.feature_stats`) and then
inlined as constants, so the compiled SQL is self-contained and repeatable (the same means and
standard deviations every run).  Constant features (``max = min``, on every engine) are only centred,
to exactly 0 (divided by 1).
Wide and array layouts; the long (sparse) layout is not standardised, since centring would densify it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from sqlglot import exp

from ..core.errors import InputError, InvalidParameter
from ..core.ir import Composed, Projection
from ..core.layout import Formulation, Output, Source
from ..core.nodes import col, number
from ..dialects import SqlrpDialect
from .compose import replace_table
from .inputs import dense_source

_PLACEHOLDER = "__sqlrp_standardized_input"


def _dense(projection: Projection | Composed, source: Source, dialect: SqlrpDialect) -> exp.Select:
    return dense_source(projection, source, dialect)  # type: ignore[arg-type] - only .d is used


#: above this magnitude a feature's squares may overflow float64 in the variance (PostgreSQL raises,
#: DuckDB returns infinity): 1e150 squared, summed over up to 1e8 rows, stays below 1.8e308
MOMENT_LIMIT = 1e150

#: engines without ``stddev_pop`` (SQLite): the variance of a second pass over the rows around the
#: means of a first (the two-pass algorithm; ``E[x^2] - E[x]^2`` would cancel)
TWO_PASS = frozenset({"sqlite"})


def stats_query(projection: Projection | Composed, source: Source, dialect: SqlrpDialect) -> exp.Select:
    """Per feature ``mean, spread, min, max`` over the source relation (read by :func:`read_stats`);
    the spread is ``stddev_pop``, or on :data:`TWO_PASS` engines the population variance.

    A constant feature is told by its range, ``max = min``, never by a floating standard deviation:
    PostgreSQL's ``stddev_pop`` of a constant 0.1 column is 5e-16, not 0, which scaled the column to
    about +-1.5.  Its mean is then its value (``min``), so it centres to exactly 0.  Values above
    :data:`MOMENT_LIMIT` are left out of the moments so that no engine raises or returns infinity;
    :func:`read_stats` refuses such a column by its ``min`` / ``max``."""
    if source.layout == "long":
        raise InvalidParameter("standardize is supported for the wide and array layouts, not long (it would densify)")
    d = projection.d

    def src(alias: str) -> exp.Expression:
        return _dense(projection, source, dialect).subquery(alias, copy=False)

    def tame(i: int) -> exp.Expression:
        x = col(f"_x{i}")
        small = exp.LTE(this=exp.Abs(this=x.copy()), expression=number(MOMENT_LIMIT))
        return exp.Case(ifs=[exp.If(this=small, true=x)])

    two_pass = dialect.name in TWO_PASS
    aggs: list[exp.Expression] = []
    for i in range(d):
        x = col(f"_x{i}")
        lo, hi = exp.Min(this=x.copy()), exp.Max(this=x.copy())
        constant = exp.EQ(this=lo.copy(), expression=hi.copy())
        if two_pass:
            deviation = exp.paren(tame(i) - col(f"_m{i}"))
            spread: exp.Expression = exp.Avg(this=exp.Mul(this=deviation, expression=deviation.copy()))  # no POWER
        else:
            spread = exp.StddevPop(this=tame(i))
        aggs.append(exp.Case(ifs=[exp.If(this=constant.copy(), true=lo.copy())], default=exp.Avg(this=tame(i))))
        aggs.append(exp.Case(ifs=[exp.If(this=constant, true=number(0))], default=spread))
        aggs.extend([lo, hi])
    query = exp.select(*aggs).from_(src("src"))
    if two_pass:
        means = exp.select(*(exp.alias_(exp.Avg(this=tame(i)), f"_m{i}") for i in range(d))).from_(src("_s0"))
        query = query.join(means.subquery("_mu"), join_type="cross")
    return query


def read_stats(
    row: tuple, projection: Projection | Composed, source: Source, dialect: SqlrpDialect | None = None
) -> tuple[list[float], list[float]]:
    """``(means, stds)`` from the row of :func:`stats_query` for ``dialect`` (on :data:`TWO_PASS`
    engines the root of the variance); an all-NULL feature is centred at 0 and not scaled.  A feature
    whose values exceed :data:`MOMENT_LIMIT` (its standard deviation would overflow float64) or whose
    moments are not finite is refused, naming it, before any SQL is built."""
    means: list[float] = []
    stds: list[float] = []
    for i in range(projection.d):
        mean, sd, lo, hi = row[4 * i : 4 * i + 4]
        name = source.columns[i] if source.layout == "wide" else f"{source.array_column}[{i}]"
        mean = 0.0 if mean is None else float(mean)
        sd = 1.0 if sd is None else float(sd)
        if dialect is not None and dialect.name in TWO_PASS:
            sd = math.sqrt(max(sd, 0.0))  # the variance; inf stays inf (refused below)
        peak = max(abs(float(lo)), abs(float(hi))) if lo is not None and hi is not None else 0.0
        constant = lo is not None and lo == hi
        if not (math.isfinite(mean) and math.isfinite(sd)) or (peak > MOMENT_LIMIT and not constant):
            raise InputError(
                f"--standardize: the standard deviation of {name!r} overflows float64 (values up to {peak:.3g}; "
                f"their squares exceed 1.8e308); divide the column by a constant first"
            )
        means.append(mean)
        stds.append(sd)
    return means, stds


def standardized_relation(
    projection: Projection | Composed, source: Source, dialect: SqlrpDialect, means, stds
) -> tuple[exp.Select, Source]:
    """The standardised input as a select with columns ``<id>, [<group>,] _s0 .. _s{d-1}`` and the wide
    ``Source`` (over a placeholder table) that reads it."""
    src = _dense(projection, source, dialect).subquery("src", copy=False)
    keys = [exp.alias_(col("_id"), source.id_column, quoted=True, copy=False)]
    if source.group_column:
        keys.append(exp.alias_(col("_g"), source.group_column, quoted=True, copy=False))
    cols = []
    for i, (mu, sd) in enumerate(zip(means, stds, strict=True)):
        if not (math.isfinite(float(mu)) and math.isfinite(float(sd))):  # never rendered as an `inf` name
            raise InputError(f"--standardize: feature {i} has a mean or standard deviation that is not finite")
        if sd is not None and float(sd) == 0.0:  # constant (stats_query: max = min): exactly 0 on every engine,
            value: exp.Expression = number(0.0)  # not x - its value as a literal (SQLite parses 3.8e-299 1 ulp off)
        else:
            sd = float(sd) if sd and float(sd) > 0 else 1.0
            value = exp.Div(this=exp.paren(col(f"_x{i}") - number(mu)), expression=number(sd))
        cols.append(exp.alias_(value, f"_s{i}", quoted=True, copy=False))
    relation = exp.select(*keys, *cols).from_(src)
    wide = Source(
        _PLACEHOLDER,
        source.id_column,
        "wide",
        tuple(f"_s{i}" for i in range(projection.d)),
        group_column=source.group_column,
    )
    return relation, wide


def compile_standardized(
    projection: Projection | Composed,
    source: Source,
    dialect: SqlrpDialect,
    output: Output | None,
    how: Formulation,
    *,
    compile_select: Callable[..., exp.Select],
) -> exp.Select:
    """The projection of ``source`` standardised with its ``source.standardize = (means, stds)``: the
    compiled select reads a placeholder table that is then replaced by :func:`standardized_relation`
    as a sub-query (row filters of ``source`` apply inside it).
    ``compile_select`` is the compiler's own entry point (it calls this function: handed in, not imported)."""
    if source.layout == "long":
        raise InvalidParameter("standardize is supported for the wide and array layouts, not long (it would densify)")
    means, stds = source.standardize
    source = dataclasses.replace(source, standardize=None)
    if len(means) != projection.d or len(stds) != projection.d:
        raise InvalidParameter(f"standardize needs d = {projection.d} means and standard deviations")
    relation, wide = standardized_relation(projection, source, dialect, means, stds)
    wide = dataclasses.replace(wide, rows=source.rows)  # the same rows: the strategy rules see them
    select = compile_select(projection, wide, dialect, output, dataclasses.replace(how, guard=False))
    return replace_table(select, _PLACEHOLDER, relation, "_std")
