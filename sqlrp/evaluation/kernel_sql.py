"""The kernel approximation error computed in the database (``001``'s NRMSE).

``||Y Y^T - K||_F / ||K||_F`` over every ordered pair of the seeded sample :mod:`sqlrp.evaluation.sql`
draws, ``Y`` the projection's outputs and ``K`` the kernel it approximates (polynomial or shift-invariant):
the same number :func:`sqlrp.evaluation.metrics.kernel_nrmse` computes in NumPy.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, ident
from ..core.ir import Projection
from ..dialects import SqlrpDialect, get_dialect
from .metrics import Kernel
from .sql import _balanced_sum, _feature_relation, _kernel, _num, _projected_relation, sample_ids_query

__all__ = ["kernel_nrmse_query", "sql_kernel_nrmse"]


def kernel_nrmse_query(
    projection: Projection, source: Source, dialect: str | SqlrpDialect, sample: int, seed: int, kernel: Kernel
) -> str:
    """SQL returning ``(sum (y_a . y_b - K_ab)^2, sum K_ab^2)`` over every ordered pair of the seeded sample
    (pairs ``a < b`` counted twice, ``a = b`` once): ``sqrt`` of their ratio is the kernel approximation error
    ``||Y Y^T - K||_F / ||K||_F`` (``001``; :func:`sqlrp.evaluation.metrics.kernel_nrmse`)."""
    dialect = get_dialect(dialect)
    ids = exp.select(col("_id")).from_(exp.Table(this=ident("_ids")))
    dot = _balanced_sum(
        [exp.Mul(this=col(f"_y{j}", "ya"), expression=col(f"_y{j}", "yb")) for j in range(projection.k)]
    )
    error = exp.paren(exp.Sub(this=dot, expression=_kernel("a", "b", projection.d, kernel)))
    twice = exp.Case(ifs=[exp.If(this=col("_id", "a").eq(col("_id", "b")), true=_num(1))], default=_num(2))
    table = {name: exp.Table(this=ident("_x" if name in "ab" else "_y"), alias=exp.TableAlias(this=ident(name)))
             for name in ("a", "b", "ya", "yb")}  # fmt: skip
    pairs = (
        exp.select(
            exp.alias_(exp.Mul(this=twice, expression=exp.Mul(this=error, expression=error.copy())), "_e", quoted=True),
            exp.alias_(
                exp.Mul(this=twice.copy(), expression=_sq(_kernel("a", "b", projection.d, kernel))), "_k", quoted=True
            ),
        )
        .from_(table["a"])
        .join(table["b"], on=exp.LTE(this=col("_id", "a"), expression=col("_id", "b")))
        .join(table["ya"], on=col("_id", "ya").eq(col("_id", "a")))
        .join(table["yb"], on=col("_id", "yb").eq(col("_id", "b")))
    )
    final = (
        exp.select(exp.Sum(this=col("_e")), exp.Sum(this=col("_k")))
        .from_(pairs.subquery("_pp"))
        .with_("_ids", as_=sample_ids_query(source, seed, sample))
        .with_("_x", as_=_feature_relation(projection, source, dialect, ids))
        .with_("_y", as_=_projected_relation(projection, source, dialect, ids))
    )
    return dialect.render(final)


def _sq(value: exp.Expression) -> exp.Expression:
    return exp.Mul(this=value, expression=value.copy())


def sql_kernel_nrmse(
    db: Backend, projection: Projection, source: Source, sample: int, seed: int, kernel: Kernel
) -> float:
    """Run :func:`kernel_nrmse_query`: the kernel approximation error computed in the database."""
    error, total = db.fetchall(kernel_nrmse_query(projection, source, db.sql_dialect, sample, seed, kernel))[0]
    return float(np.sqrt(float(error) / float(total)))
