"""A low-rank fit's pass over a long table ``(id, feature, value)`` (issue 43; the dense passes:
:mod:`sqlrp.pipeline.fitting`).

The rows are first summed per ``(id, feature)`` (a repeated feature adds, as the long layout's projection
reads it; an absent one is 0), then three aggregate statements, only their sums leaving the database:

- ``n``: the distinct ids, and the rows holding NULL (refused unless ``nulls="zero"``);
- per feature: ``sum(x)``, ``sum(x^2)``;
- ``C = (X W)^T X``: ``y(id, j) = sum_f w_fj x_f`` by joining the test matrix ``W`` as a relation
  ``(vector, feature, weight)`` (:func:`~sqlrp.compiler.long.matrix_values`, as the long layout's projection
  joins its matrix) and grouping by ``(id, vector)``; then ``sum(y_j x_i)`` joining back on the id, grouped
  by ``(vector, feature)``: ``l x d`` rows at most.

No shift (a long table is usually sparse, and a shift would fill in its zeros): the centring is
:meth:`~sqlrp.methods.lowrank.Sums.centred_cross`'s, exact in real numbers; a table whose features sit far
from 0 relative to their spread loses digits to cancellation, as any one-pass covariance does.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col
from ..compiler.long import matrix_values
from ..core.errors import InputError
from ..core.ir import LinearStage
from ..core.nodes import DOUBLE, from_source
from ..methods.lowrank import Sums

BIGINT = exp.DataType.build("BIGINT")


def long_rows(source: Source) -> exp.Select:
    """``SELECT _id, _f, sum(_v) AS _v ... GROUP BY _id, _f``: one value per id and feature."""
    value: exp.Expression = col(source.value_column)
    if source.nulls == "zero":
        value = exp.Coalesce(this=value, expressions=[exp.Literal.number(0)])
    rows = from_source(
        exp.select(
            exp.alias_(col(source.id_column), "_id", quoted=True),
            exp.alias_(exp.cast(col(source.feature_column), BIGINT), "_f", quoted=True),
            exp.alias_(exp.cast(value, DOUBLE), "_v", quoted=True),
        ),
        source,
    ).subquery("_r", copy=False)
    return (
        exp.select(col("_id"), col("_f"), exp.alias_(exp.Sum(this=col("_v")), "_v", quoted=True))
        .from_(rows)
        .group_by(col("_id"), col("_f"))
    )


def long_queries(db: Backend, source: Source, W: np.ndarray) -> list[exp.Select]:
    """The three statements of the module doc: counts, per-feature moments, ``C`` as ``(vector, feature, sum)``."""
    dialect = db.sql_dialect
    count = from_source(
        exp.select(
            exp.Count(this=exp.Distinct(expressions=[col(source.id_column)])),
            exp.Sub(this=exp.Count(this=exp.Star()), expression=exp.Count(this=col(source.value_column))),
        ),
        source,
    )
    base = long_rows(source)
    v = col("_v", "b")
    moments = (
        exp.select(col("_f", "b"), exp.Sum(this=v), exp.Sum(this=exp.Mul(this=v.copy(), expression=v.copy())))
        .from_(base.subquery("b"))
        .group_by(col("_f", "b"))
    )
    index = np.nonzero(W)
    lin = LinearStage(d=W.shape[0], p=W.shape[1], vector=index[1], feature=index[0], weight=W[index])
    weight = exp.Mul(this=col("weight", "m"), expression=col("_v", "b"))
    ys = (
        exp.select(
            exp.alias_(col("_id", "b"), "_id", quoted=True),
            exp.alias_(exp.cast(col("vector", "m"), BIGINT), "_j", quoted=True),
            exp.alias_(exp.Sum(this=weight), "_y", quoted=True),
        )
        .from_(base.subquery("b"))
        .join(matrix_values(lin, dialect).subquery("m"), on=exp.EQ(this=col("_f", "b"), expression=col("feature", "m")))
        .group_by(col("_id", "b"), col("vector", "m"))
    )
    product = exp.Sum(this=exp.Mul(this=col("_y", "y"), expression=col("_v", "x")))
    cross = (
        exp.select(col("_j", "y"), col("_f", "x"), product)
        .from_(ys.subquery("y"))
        .join(base.subquery("x"), on=exp.EQ(this=col("_id", "y"), expression=col("_id", "x")))
        .group_by(col("_j", "y"), col("_f", "x"))
    )
    return [count, moments, cross]


def long_pass(db: Backend, source: Source, d: int, W: np.ndarray) -> Sums:
    """One pass over a long table (module doc): the same :class:`~sqlrp.methods.lowrank.Sums` as a dense
    pass with ``shift = 0``."""
    render = db.sql_dialect.render
    count, moments, cross = (db.fetchall(render(q)) for q in long_queries(db, source, W))
    n, nulls = int(count[0][0] or 0), int(count[0][1] or 0)
    if nulls and source.nulls != "zero":
        raise InputError(
            f"{nulls} rows of {source.table!r} hold NULL in {source.value_column!r}: a fit needs every value "
            "(pass --nulls zero to read NULL as 0)"
        )
    total, squares, C = np.zeros(d), np.zeros(d), np.zeros((W.shape[1], d))
    for f, s, s2 in moments:
        if f is None or not 0 <= int(f) < d:
            raise InputError(f"{source.table!r} holds the feature {f!r}, outside 0 .. {d - 1} (d = {d})")
        total[int(f)], squares[int(f)] = float(s), float(s2)
    for j, f, s in cross:
        C[int(j), int(f)] = float(s)
    return Sums(n, np.zeros(d), total, squares, C)


__all__ = ["long_pass", "long_queries", "long_rows"]
