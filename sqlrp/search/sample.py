"""The sample every engine draws alike (issue 33): the k-means sample of a build and the calibration's
queries.

Rows are picked by their rank in id order, ``r = 0 .. n-1``: row ``r`` is in the
slice ``[lo, hi)`` when ``(r * A + B) mod n`` is (``A`` coprime with ``n``, so this is a
permutation of the ranks; ``A`` and ``B`` come from the seed).  Plain BIGINT arithmetic on a
``row_number()`` over the ids: every engine picks the same rows, so the same table, seed and
parameters give the same k-means sample, the same centroids and the same codes on DuckDB,
PostgreSQL, Spark and ClickHouse.  (Ids that are text are ordered by the engine's collation.)
The k-means sample is the slice ``[0, s)``; the calibration's queries are the next slice, rows that
trained no centroid.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, table_ref
from .sql import feature_rows

_MULTIPLIER = 2654435761  # Knuth's multiplicative hash constant: spreads consecutive ranks


def _permutation(n: int, seed: int) -> tuple[int, int]:
    """``(A, B)``: ``r -> (r * A + B) mod n`` permutes ``0 .. n-1`` (``A`` coprime with ``n``)."""
    a = (_MULTIPLIER + 2 * int(seed) * 40503) % max(n, 1) or 1
    while math.gcd(a, n) != 1:
        a = a + 1 if a + 1 < n else 1
    b = (int(seed) * 7919 + 12345) % max(n, 1)
    return a, b


def picked_ids(source: Source, rows: int, lo: int, hi: int, seed: int) -> exp.Select:
    """``SELECT _pid``: the ids whose rank in id order falls in the slice ``[lo, hi)`` of the seeded
    permutation (module docstring); every engine picks the same ids."""
    a, b = _permutation(rows, seed)
    bigint = exp.DataType.build("BIGINT")
    order = exp.Order(expressions=[exp.Ordered(this=col("_pid"))])
    rank = exp.Sub(
        this=exp.Cast(this=exp.Window(this=exp.RowNumber(), order=order), to=bigint), expression=exp.Literal.number(1)
    )
    ids = exp.select(exp.alias_(col(source.id_column), "_pid", quoted=True)).from_(table_ref(source))
    if source.row_filter is not None:
        ids = ids.where(source.row_filter.copy())
    ranked = exp.select(col("_pid"), exp.alias_(rank, "_rank", quoted=True)).from_(ids.subquery("_ids"))
    slot = exp.Mod(
        this=exp.paren(
            exp.Add(
                this=exp.Mul(this=col("_rank"), expression=exp.Cast(this=exp.Literal.number(a), to=bigint.copy())),
                expression=exp.Cast(this=exp.Literal.number(b), to=bigint.copy()),
            )
        ),
        expression=exp.Cast(this=exp.Literal.number(rows), to=bigint.copy()),
    )
    return (
        exp.select(col("_pid"))
        .from_(ranked.subquery("_ranked"))
        .where(exp.and_(exp.paren(slot) >= lo, exp.paren(slot.copy()) < hi))
    )


def sample_rows(  # noqa: PLR0913 - the sample and how the index reads its rows
    db: Backend, source: Source, d: int, metric: str, rows: int, size: int, seed: int, scale: int = 0
) -> np.ndarray:
    """``size`` rows of the table's features for k-means, in id order: the slice ``[0, size)`` of the
    seeded permutation (module docstring), the same rows on every engine, read times ``2^scale``."""
    dialect = db.sql_dialect
    x = feature_rows(source, d, dialect, metric, scale=scale)
    xs = [col(f"_x{i}", "_s") for i in range(d)]
    select = exp.select(*xs).from_(x.subquery("_s"))
    if size < rows:
        select = select.join(
            picked_ids(source, rows, 0, size, seed).subquery("_p"), on=col("_id", "_s").eq(col("_pid", "_p"))
        )
    select = select.order_by(col("_id", "_s"))
    return db.query_df(dialect.render(select)).to_numpy(dtype=np.float64).reshape(-1, d)


__all__ = ["picked_ids", "sample_rows"]
