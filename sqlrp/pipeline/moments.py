"""The data's fourth moments, for the sparsity rule of :mod:`sqlrp.methods.sparsity` (issue 24).

What ``project`` reads (issue 34): a bounded sample, :func:`sample_kurtosis` -- the rows of smallest id
and at most 64 features, fetched and measured in NumPy.  Below, the whole table's moments in SQL
(:func:`table_kurtosis`: a full read, kept as the SQL oracle of the NumPy formula):

One aggregate pass over the input (in blocks of :data:`BLOCK` columns, so that no statement exceeds
PostgreSQL's 1,664 select-list entries): ``count(*)`` and, per feature, ``sum(x)``, ``sum(x^2)``,
``sum(x^3)``, ``sum(x^4)`` as doubles; the long layout groups by feature (absent entries are zeros and
add nothing).  On DuckDB, whose select unnests lists side by side, a wide or array table is
unnested into ``(feature, value)`` (``list_value``, ``range``) and grouped likewise: one short
statement, where writing and running the blocks' sums of products took most of a small table's
projection (``bench/small_tables.py``'s profile; docs/benchmarks.md, "Pipeline").
:func:`sqlrp.methods.sparsity.difference_kurtosis` turns the sums into ``kappa``; the NumPy oracle
is :func:`sqlrp.methods.sparsity.kurtosis_of`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Inputs, SignedSum, Source, as_double, col, dense_source, feature_input, table_ref
from ..dialects import SqlrpDialect
from ..methods.sparsity import SAMPLE_ROWS, difference_kurtosis, kurtosis_of, sample_features

#: feature columns summed per statement (4 sums each, plus the count: 1,025 select-list entries)
BLOCK = 256


def _powers(x: exp.Expression) -> list[exp.Expression]:
    """``sum(x), sum(x*x), sum(x*x*x), sum(x*x*x*x)`` of the double ``x``."""
    out = []
    for j in range(1, 5):
        term: exp.Expression = x.copy()
        for _ in range(j - 1):
            term = exp.Mul(this=term, expression=x.copy())
        out.append(exp.Sum(this=term))
    return out


def moment_queries(d: int, source: Source, dialect: SqlrpDialect) -> list[exp.Select]:
    """The aggregate statements of :func:`table_moments`: wide/array one row per block of columns
    (``count(*)`` first), long one row per feature (``feature, sums..``) and a last ``count(distinct id)``."""
    profile = dialect
    if source.layout == "long":
        v = as_double(col(source.value_column))
        per_feature = (
            exp.select(col(source.feature_column), *_powers(v))
            .from_(table_ref(source))
            .group_by(col(source.feature_column))
        )
        count = exp.select(exp.Count(this=exp.Distinct(expressions=[col(source.id_column)]))).from_(table_ref(source))
        return [per_feature, count]
    if profile.name == "duckdb":  # (feature, value) pairs, unnested side by side, grouped by feature
        values = exp.Anonymous(this="list_value", expressions=[as_double(col(f"_x{i}")) for i in range(d)])
        features = exp.Anonymous(this="range", expressions=[exp.Literal.number(d)])
        pairs = exp.select(
            exp.alias_(exp.Unnest(expressions=[features]), "_f", quoted=True),
            exp.alias_(exp.Unnest(expressions=[values]), "_v", quoted=True),
        ).from_(dense_source(d, source, profile).subquery("src", copy=False))
        grouped = exp.select(col("_f"), exp.Count(this=exp.Star()), *_powers(col("_v"))).from_(
            pairs.subquery("_pairs", copy=False)
        )
        return [grouped.group_by(col("_f"))]
    queries = []
    for lo in range(0, d, BLOCK):
        src = dense_source(d, source, profile).subquery("src", copy=False)
        aggs = [exp.Count(this=exp.Star())]
        for i in range(lo, min(d, lo + BLOCK)):
            aggs.extend(_powers(as_double(col(f"_x{i}"))))
        queries.append(exp.select(*aggs).from_(src))
    return queries


def table_moments(db: Backend, source: Source, d: int) -> tuple[int, np.ndarray]:
    """``(n, S)``: the row count and the ``4 x d`` sums of ``x, x^2, x^3, x^4`` per feature."""
    profile = db.sql_dialect
    queries = moment_queries(d, source, profile)
    sums = np.zeros((4, d))
    if source.layout == "long":
        for row in db.fetchall(profile.render(queries[0])):
            f = row[0]
            if f is not None and 0 <= int(f) < d:
                sums[:, int(f)] = [np.nan if v is None else float(v) for v in row[1:]]
        n = int(db.fetchall(profile.render(queries[1]))[0][0] or 0)
        return n, sums
    n = 0
    if profile.name == "duckdb":  # (feature, count, sums..) a row
        for row in db.fetchall(profile.render(queries[0])):
            n = int(row[1])
            sums[:, int(row[0])] = [np.nan if v is None else float(v) for v in row[2:]]
        return n, sums
    for q, lo in zip(queries, range(0, d, BLOCK), strict=True):
        row = db.fetchall(profile.render(q))[0]
        n = int(row[0] or 0)
        values = np.array([np.nan if v is None else float(v) for v in row[1:]]).reshape(-1, 4).T
        sums[:, lo : lo + values.shape[1]] = values
    return n, sums


def sample_ids_filter(source: Source) -> exp.Expression:
    """``<id> <= (the SAMPLE_ROWS-th smallest id)``: the kurtosis sample's rows, alike on every engine (a
    bounded read where ids follow the storage order: DuckDB skips the rest of a Parquet file, where
    ``ORDER BY id LIMIT`` sorts whole rows; docs/benchmarks.md, "Pipeline")."""
    key = col(source.id_column)
    ids = exp.select(exp.alias_(col(source.id_column), "_sid", quoted=True)).from_(table_ref(source))
    ids = ids.where(exp.Not(this=exp.Is(this=key.copy(), expression=exp.Null())), copy=False)
    if source.row_filter is not None:
        ids = ids.where(source.row_filter.copy(), copy=False)
    if source.layout == "long":  # one row per (id, feature): count ids, not rows
        ids = ids.distinct(copy=False)
    ids = ids.order_by(col("_sid"), copy=False).limit(SAMPLE_ROWS, copy=False)
    last = exp.select(exp.Max(this=col("_sid"))).from_(ids.subquery("_s", copy=False))
    return exp.LTE(this=key, expression=exp.Subquery(this=last))


def sample_rows(db: Backend, source: Source, d: int) -> np.ndarray:
    """The kurtosis sample (:func:`sample_ids_filter`'s rows, :func:`~sqlrp.methods.sparsity.sample_features`'
    columns) as doubles, NaN for NULL; absent entries of a long table are 0."""
    dialect = db.sql_dialect
    features = sample_features(d)
    condition = sample_ids_filter(source)
    both = condition if source.row_filter is None else exp.and_(source.row_filter.copy(), condition)
    sampled = dataclasses.replace(source, row_filter=both, group_column=None)
    if source.layout == "long":
        f, v = col(source.feature_column), feature_input(col(source.value_column), source)
        query = exp.select(col(source.id_column), f, v).from_(table_ref(sampled)).where(both, copy=False)
        rows = db.fetchall(dialect.render(query))  # every entry of the sampled ids: an id may hold none of J
        ids = {r: i for i, r in enumerate(sorted({row[0] for row in rows}))}
        X = np.zeros((len(ids), len(features)))
        at = {int(j): i for i, j in enumerate(features)}
        for rid, feature, value in rows:
            if feature is not None and int(feature) in at:
                X[ids[rid], at[int(feature)]] += np.nan if value is None else float(value)
        return X
    if source.layout == "wide":  # only the sampled columns: a wide Parquet file is read column by column
        sampled = dataclasses.replace(sampled, columns=tuple(source.columns[i] for i in features))
        relation = dense_source(len(features), sampled, dialect)
        names = [f"_x{i}" for i in range(len(features))]
    elif not dialect.needs_materialised_array():  # only the sampled elements, each read off the array
        array = col(source.array_column)  # type: ignore[arg-type]
        at = [exp.Literal.number(int(i)) for i in features]
        names = [f"_x{i}" for i in range(len(features))]
        values = [
            exp.alias_(feature_input(exp.Bracket(this=array.copy(), expressions=[i], offset=0), source), n, quoted=True)
            for i, n in zip(at, names, strict=True)
        ]
        relation = exp.select(*values).from_(table_ref(source)).where(both)
    else:  # PostgreSQL: each element of the array detoasted once (the compiler's own relation)
        relation = dense_source(d, sampled, dialect)
        names = [f"_x{i}" for i in features]
    query = exp.select(*[col(n) for n in names]).from_(relation.subquery("_sample", copy=False))
    rows = db.fetchall(dialect.render(query))
    return np.array([[np.nan if v is None else float(v) for v in row] for row in rows], dtype=np.float64).reshape(
        len(rows), len(names)
    )


def sample_kurtosis(db: Backend, source: Source, d: int, standardize: bool = False) -> float | None:
    """``kappa`` (:func:`~sqlrp.methods.sparsity.kurtosis_of`) of the bounded sample (:func:`sample_rows`):
    what ``s = "auto"`` is chosen from (the error it gives: :mod:`sqlrp.methods.sparsity`); ``None`` for
    an empty table or a NULL/NaN in the sample (the input check refuses those)."""
    X = sample_rows(db, source, d)
    return kurtosis_of(X, standardize) if len(X) else None


def table_kurtosis(db: Backend, source: Source, d: int, standardize: bool = False) -> float | None:
    """``kappa`` of the table's rows (standardised columns with ``standardize``), or ``None`` if it has
    no rows or a sum is NULL/NaN/infinite (all-NULL column, NaN input: the NULL check refuses those)."""
    n, sums = table_moments(db, source, d)
    return difference_kurtosis(n, *sums, standardize=standardize)


def variance_query(d: int, source: Source, dialect: SqlrpDialect) -> exp.Select:
    """One aggregate pass: ``count(*)`` (long: of distinct ids), the sum of every entry and the sum of every
    squared entry (a wide or array row's entries summed first, so two aggregates whatever ``d``)."""
    if source.layout == "long":
        v = feature_input(col(source.value_column), source)
        count = exp.Count(this=exp.Distinct(expressions=[col(source.id_column)]))
        return exp.select(count, exp.Sum(this=v), exp.Sum(this=exp.Mul(this=v.copy(), expression=v.copy()))).from_(
            table_ref(source)
        )
    ones = np.ones(d)
    values = Inputs(col(f"_x{i}") for i in range(d))
    squares = Inputs(exp.Mul(this=col(f"_x{i}"), expression=col(f"_x{i}")) for i in range(d))
    src = dense_source(d, source, dialect).subquery("src", copy=False)
    row_sum, row_squares = SignedSum.of(values, np.arange(d), ones), SignedSum.of(squares, np.arange(d), ones)
    return exp.select(exp.Count(this=exp.Star()), exp.Sum(this=row_sum), exp.Sum(this=row_squares)).from_(src)


def table_variance(db: Backend, source: Source, d: int, standardize: bool = False) -> float | None:
    """The variance of every entry of the table, ``E[x^2] - E[x]^2`` over its ``n d`` values, computed in SQL
    (scikit-learn SVC's ``X.var()`` for ``gamma="scale"``, :func:`sqlrp.methods.rff.scale_gamma`); with
    ``standardize``, that of the standardised table: the share of non-constant features.  ``None``: no rows,
    or a sum NULL/NaN/infinite (the input check refuses those rows)."""
    if standardize:
        n, sums = table_moments(db, source, d)
        if n == 0 or not np.all(np.isfinite(sums[:2])):
            return None
        per_feature = sums[1] / n - (sums[0] / n) ** 2
        return float(np.count_nonzero(per_feature > 1e-12 * np.maximum(1.0, sums[1] / n))) / d
    row = db.fetchall(db.sql_dialect.render(variance_query(d, source, db.sql_dialect)))[0]
    if not row[0] or row[1] is None or row[2] is None:
        return None
    entries = float(row[0]) * d
    mean, square = float(row[1]) / entries, float(row[2]) / entries
    if not (np.isfinite(mean) and np.isfinite(square)):
        return None
    return max(square - mean * mean, 0.0)


__all__ = [
    "BLOCK",
    "moment_queries",
    "table_variance",
    "variance_query",
    "sample_kurtosis",
    "sample_rows",
    "table_kurtosis",
    "table_moments",
]
