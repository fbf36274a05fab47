"""In-SQL standardisation of the input: ``(x_i - mean_i) / std_i`` applied in the source relation.

Why (issue 5's pitfall): on raw data with large-magnitude features most of the degree-2 kernel distance
sits in the ``d`` diagonal features ``x_i^2``, which P-RP weights with zero (``s = 1``, even ``m``) or with
large variance; centring and scaling each feature first makes P-RP and PK-RP measure what they should.

The statistics are computed by one aggregate query over the table (:func:`sqlrp.pipeline.plan.feature_stats`) and then
inlined as constants, so the compiled SQL is self-contained and repeatable (the same means and
standard deviations every run).  Constant features (``std = 0``) are only centred (divided by 1).
Wide and array layouts; the long (sparse) layout is not standardised, since centring would densify it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sqlglot import exp

from ..core.errors import InvalidParameter
from ..core.ir import Composed, Projection
from ..core.layout import Output, Source
from ..core.nodes import col, number
from ..dialects import SqlrpDialect
from .compose import replace_table
from .inputs import dense_source

_PLACEHOLDER = "__sqlrp_standardized_input"


def _dense(projection: Projection | Composed, source: Source, dialect: SqlrpDialect) -> exp.Select:
    return dense_source(projection, source, dialect)  # type: ignore[arg-type] - only .d is used


def stats_query(projection: Projection | Composed, source: Source, dialect: SqlrpDialect) -> exp.Select:
    """``SELECT avg(_x0), stddev_pop(_x0), avg(_x1), ...`` over the source relation."""
    if source.layout == "long":
        raise InvalidParameter("standardize is supported for the wide and array layouts, not long (it would densify)")
    src = _dense(projection, source, dialect).subquery("src", copy=False)
    aggs: list[exp.Expression] = []
    for i in range(projection.d):
        aggs.append(exp.Avg(this=col(f"_x{i}")))
        aggs.append(exp.StddevPop(this=col(f"_x{i}")))
    return exp.select(*aggs).from_(src)


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
    matrix: str,
    strategy: str = "auto",
    block: int | None = None,
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
    select = compile_select(projection, wide, dialect, output, matrix, strategy, block)
    return replace_table(select, _PLACEHOLDER, relation, "_std")
