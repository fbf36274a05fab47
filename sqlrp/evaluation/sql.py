"""Distortion and Recall@K computed *inside* the database on a seeded sample of rows.

Python builds one query (sqlglot trees, rendered per dialect, user names always quoted); only the
one-row result leaves the database.  The same numbers come out of :mod:`sqlrp.evaluation.metrics`
on the same rows (tests check this on DuckDB and PostgreSQL).

Seeded sample: rows are ordered by ``md5('<seed>:' || CAST(id AS TEXT))`` and then by id, the same
order on every engine with ``md5`` (DuckDB, PostgreSQL, Spark); the first ``n`` rows are the sample.
For Recall@K the first ``queries`` rows are the queries and the next ``database`` rows (default: all
the others) the database (``002`` Section 4.1 protocol).

Shape of the distortion query (``000`` Eq. 22)::

    WITH _ids AS (SELECT id AS _id, row_number() OVER (ORDER BY md5(..), id) AS _rn ... LIMIT n),
         _x   AS (<the features of the sampled rows, as _id, _x0 .. _x{d-1}>),
         _y   AS (<the compiled projection of the sampled rows, as _id, _y0 .. _y{k-1}>),
         _pairs AS (SELECT sum((a._xi - b._xi)^2) AS _dx, sum((ya._yj - yb._yj)^2) AS _dy
                    FROM _x a JOIN _x b ON a._id < b._id JOIN _y ya ... JOIN _y yb ...)
    SELECT count(*), avg(abs(_dy - _dx) / _dx), percentile_cont(0.5 / 0.95), max(...)
    FROM _pairs WHERE _dx > 0

Recall@K ranks the database rows of each query with ``row_number() OVER (PARTITION BY query ORDER BY
distance, id)`` in both spaces and counts the common ids among the first K.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Output, Source, col, compile_select, dense_source, ident, table_ref
from ..core.errors import InputError, InvalidParameter
from ..core.ir import Projection
from ..core.lazy import pd
from ..core.nodes import balanced
from ..dialects import SqlrpDialect, get_dialect
from ..methods.rff import ShiftKernel
from ..pipeline.column_blocks import feature_blocks
from .metrics import Kernel

__all__ = [
    "distortion_query",
    "fetch_sample",
    "recall_query",
    "sample_ids",
    "sample_ids_query",
    "sql_distortion",
    "sql_recall_at_k",
]

TEXT = exp.DataType.build("TEXT")
DOUBLE = exp.DataType.build("DOUBLE")


def _num(value: float | int) -> exp.Expression:
    return exp.Literal.number(value)


def _hash(source: Source, seed: int) -> exp.Expression:
    key = exp.DPipe(
        this=exp.Literal.string(f"{int(seed)}:"),
        expression=exp.cast(col(source.id_column), TEXT),
        safe=True,
    )
    return exp.MD5(this=key)


def sample_ids_query(source: Source, seed: int, limit: int | None) -> exp.Select:
    """``SELECT _id, _rn``: the table's ids in seeded order (``_rn`` = 1, 2, ...), first ``limit``."""
    inner = (
        exp.select(exp.alias_(col(source.id_column), "_id", quoted=True), exp.alias_(_hash(source, seed), "_h"))
        .from_(table_ref(source))
        .where(exp.Not(this=exp.Is(this=col(source.id_column), expression=exp.Null())))
    )
    if source.layout == "long":  # one row per (id, feature): sample ids, not rows
        inner = inner.distinct()
    if limit is not None:
        inner = inner.order_by(col("_h"), col("_id")).limit(int(limit))
    rn = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=col("_h")), col("_id")]))
    return exp.select(col("_id"), exp.alias_(rn, "_rn", quoted=True)).from_(inner.subquery("_hs"))


def _restrict(select: exp.Select, source: Source, ids: exp.Select) -> exp.Select:
    """Add ``WHERE <id> IN (ids)`` to every select that reads the source table directly, so only the
    sampled rows are read and projected."""
    target = table_ref(source)
    for table in list(select.find_all(exp.Table)):
        if table.this == target.this and table.args.get("db") == target.args.get("db"):
            parent = table.find_ancestor(exp.Select)
            if parent is not None:
                parent.where(col(source.id_column).isin(query=ids.copy()), copy=False)
    return select


def _balanced_sum(terms: list[exp.Expression]) -> exp.Expression:
    """``t0 + t1 + ...`` as a balanced tree (:func:`sqlrp.core.nodes.balanced`); 0 for no terms."""
    return balanced(terms, exp.Add) if terms else _num(0)


def _sq_dist(a: str, b: str, prefix: str, n: int) -> exp.Expression:
    terms = []
    for i in range(n):
        diff = exp.paren(exp.Sub(this=col(f"{prefix}{i}", a), expression=col(f"{prefix}{i}", b)))
        terms.append(exp.Mul(this=diff, expression=diff.copy()))
    return _balanced_sum(terms)


def _dot(a: str, b: str, n: int, square: bool = False) -> exp.Expression:
    terms = []
    for i in range(n):
        x, y = col(f"_x{i}", a), col(f"_x{i}", b)
        if square:
            x, y = exp.Mul(this=x, expression=x.copy()), exp.Mul(this=y, expression=y.copy())
        terms.append(exp.Mul(this=x, expression=y))
    return _balanced_sum(terms)


def _shift_kernel(a: str, b: str, d: int, kernel: ShiftKernel) -> exp.Expression:
    """``exp(-gamma |a - b|^2)`` (rbf) or ``exp(-gamma |a - b|_1)`` (laplacian) of two sample rows."""
    terms: list[exp.Expression] = []
    for i in range(d):
        diff = exp.paren(exp.Sub(this=col(f"_x{i}", a), expression=col(f"_x{i}", b)))
        terms.append(exp.Abs(this=diff) if kernel.kind == "laplacian" else exp.Mul(this=diff, expression=diff.copy()))
    gamma = exp.cast(_num(repr(float(kernel.gamma))), DOUBLE)
    return exp.Exp(this=exp.Neg(this=exp.paren(exp.Mul(this=gamma, expression=_balanced_sum(terms)))))


def _kernel(a: str, b: str, d: int, kernel: Kernel | ShiftKernel) -> exp.Expression:
    if isinstance(kernel, ShiftKernel):
        return _shift_kernel(a, b, d, kernel)
    base = exp.paren(exp.Add(this=_dot(a, b, d), expression=exp.cast(_num(repr(float(kernel.c))), DOUBLE)))
    value: exp.Expression = base
    for _ in range(kernel.degree - 1):
        value = exp.Mul(this=value, expression=base.copy())
    if kernel.modified:
        value = exp.Sub(this=exp.paren(value), expression=exp.paren(_dot(a, b, d, square=True)))
    return exp.paren(value)


def _feature_relation(projection: Projection, source: Source, dialect: SqlrpDialect, ids: exp.Select) -> exp.Select:
    if source.layout == "long":
        raise InvalidParameter(
            "in-SQL evaluation reads wide or array tables; for a long table evaluate in Python "
            "(--no-sql) or pivot a sample into a wide table"
        )
    src = dense_source(projection, replace(source, group_column=None), dialect)
    return _restrict(src, source, ids)


def _projected_relation(projection: Projection, source: Source, dialect: SqlrpDialect, ids: exp.Select) -> exp.Select:
    plain = replace(source, group_column=None)
    proj = compile_select(projection, plain, dialect, Output("wide", prefix="_y"))
    proj = _restrict(proj, source, ids)
    cols = [exp.alias_(col(source.id_column), "_id", quoted=True)]
    cols += [col(f"_y{j}") for j in range(projection.k)]
    return exp.select(*cols).from_(proj.subquery("_p"))


def _features_dx(projection: Projection, kernel: Kernel | None, a: str = "a", b: str = "b") -> exp.Expression:
    d = projection.d
    if kernel is None:
        return _sq_dist(a, b, "_x", d)
    return exp.paren(
        exp.Sub(
            this=exp.Add(this=col("_kk", a), expression=col("_kk", b)),
            expression=exp.Mul(this=_num(2), expression=_kernel(a, b, d, kernel)),
        )
    )


def _with_self_kernel(x_rel: exp.Select, d: int, kernel: Kernel | None) -> exp.Select:
    if kernel is None:
        return x_rel
    return exp.select(exp.Star(), exp.alias_(_kernel("_s", "_s", d, kernel), "_kk", quoted=True)).from_(
        x_rel.subquery("_s")
    )


def distortion_query(
    projection: Projection,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    sample: int = 200,
    seed: int = 0,
    kernel: Kernel | None = None,
) -> str:
    """SQL returning one row ``(n_pairs, mean, median, p95, max)`` of the pairwise distortion
    (``000`` Eq. 22; kernel feature space via Eq. 23) over the seeded sample of ``sample`` rows."""
    dialect = get_dialect(dialect)
    ids_cte = sample_ids_query(source, seed, sample)
    ids = exp.select(col("_id")).from_(exp.Table(this=ident("_ids")))
    x_rel = _with_self_kernel(_feature_relation(projection, source, dialect, ids), projection.d, kernel)
    y_rel = _projected_relation(projection, source, dialect, ids)
    pairs = (
        exp.select(
            exp.alias_(_features_dx(projection, kernel), "_dx", quoted=True),
            exp.alias_(_sq_dist("ya", "yb", "_y", projection.k), "_dy", quoted=True),
        )
        .from_(exp.Table(this=ident("_x"), alias=exp.TableAlias(this=ident("a"))))
        .join(
            exp.Table(this=ident("_x"), alias=exp.TableAlias(this=ident("b"))),
            on=exp.LT(this=col("_id", "a"), expression=col("_id", "b")),
        )
        .join(
            exp.Table(this=ident("_y"), alias=exp.TableAlias(this=ident("ya"))),
            on=col("_id", "ya").eq(col("_id", "a")),
        )
        .join(
            exp.Table(this=ident("_y"), alias=exp.TableAlias(this=ident("yb"))),
            on=col("_id", "yb").eq(col("_id", "b")),
        )
    )
    dist = exp.Div(
        this=exp.Abs(this=exp.Sub(this=col("_dy"), expression=col("_dx"))), expression=col("_dx"), typed=False
    )
    per_pair = exp.select(exp.alias_(dist, "_dist", quoted=True)).from_(pairs.subquery("_pp")).where(col("_dx") > 0)

    def pct(q: float) -> exp.Expression:
        if not dialect.percentile_aggregate:
            return _ranked_percentile(q)
        return exp.WithinGroup(
            this=exp.PercentileCont(this=_num(q)), expression=exp.Order(expressions=[exp.Ordered(this=col("_dist"))])
        )

    if not dialect.percentile_aggregate:
        per_pair = _with_ranks(per_pair)
    final = (
        exp.select(
            exp.alias_(exp.Count(this=exp.Star()), "n_pairs"),
            exp.alias_(exp.Avg(this=col("_dist")), "mean"),
            exp.alias_(pct(0.5), "median"),
            exp.alias_(pct(0.95), "p95"),
            exp.alias_(exp.Max(this=col("_dist")), "max"),
        )
        .from_(per_pair.subquery("_d"))
        .with_("_ids", as_=ids_cte)
        .with_("_x", as_=x_rel)
        .with_("_y", as_=y_rel)
    )
    return dialect.render(final)


def _with_ranks(per_pair: exp.Select) -> exp.Select:
    """``per_pair`` with each distance's place in ascending order (``_i``, from 0) and their count
    (``_n``): the percentiles of an engine without a ``PERCENTILE_CONT`` aggregate (:func:`_ranked_percentile`)."""
    order = exp.Order(expressions=[exp.Ordered(this=col("_dist"))])
    place = exp.Sub(this=exp.Window(this=exp.RowNumber(), order=order), expression=_num(1))
    return exp.select(
        col("_dist"),
        exp.alias_(place, "_i", quoted=True),
        exp.alias_(exp.Window(this=exp.Count(this=exp.Star())), "_n", quoted=True),
    ).from_(per_pair.subquery("_pr"))


def _ranked_percentile(q: float) -> exp.Expression:
    """``PERCENTILE_CONT(q)`` over the ranked distances (:func:`_with_ranks`) as a plain aggregate, its
    definition spelt out: with ``h = q (n - 1)``, ``x[floor h] (1 - f) + x[floor h + 1] f``, ``f = h -
    floor h`` (MariaDB has PERCENTILE_CONT only as a window function, MySQL not at all)."""
    h = exp.Mul(this=exp.cast(_num(q), DOUBLE), expression=exp.paren(exp.Sub(this=col("_n"), expression=_num(1))))
    low = exp.Floor(this=h)
    frac = exp.paren(exp.Sub(this=h.copy(), expression=low.copy()))
    weight = exp.Case(
        ifs=[
            exp.If(this=col("_i").eq(low.copy()), true=exp.Sub(this=_num(1), expression=frac.copy())),
            exp.If(this=col("_i").eq(exp.Add(this=low.copy(), expression=_num(1))), true=frac.copy()),
        ],
        default=_num(0),
    )
    return exp.Sum(this=exp.Mul(this=col("_dist"), expression=weight))


def recall_query(
    projection: Projection,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    queries: int = 100,
    database: int | None = None,
    k: int = 5,
    seed: int = 0,
) -> str:
    """SQL returning one row ``(recall, n_queries)``: Recall@K (``002`` Eq. 12) of the first
    ``queries`` sampled rows searched among the next ``database`` rows (default: all other rows)."""
    dialect = get_dialect(dialect)
    limit = None if database is None else queries + database
    ids_cte = sample_ids_query(source, seed, limit)
    ids_table = exp.Table(this=ident("_ids"))
    ids = exp.select(col("_id")).from_(ids_table.copy())
    x_rel = _feature_relation(projection, source, dialect, ids)
    y_rel = _projected_relation(projection, source, dialect, ids)
    is_query = exp.select(col("_id")).from_(ids_table.copy()).where(col("_rn") <= _num(queries))

    def ranked(rel: str, prefix: str, n: int) -> exp.Select:
        dist = _sq_dist("q", "b", prefix, n)
        pairs = (
            exp.select(
                exp.alias_(col("_id", "q"), "_q", quoted=True),
                exp.alias_(col("_id", "b"), "_b", quoted=True),
                exp.alias_(dist, "_dd", quoted=True),
            )
            .from_(exp.Table(this=ident(rel), alias=exp.TableAlias(this=ident("q"))))
            .join(
                exp.Table(this=ident(rel), alias=exp.TableAlias(this=ident("b"))),
                on=exp.and_(
                    col("_id", "q").isin(query=is_query.copy()),
                    exp.Not(this=col("_id", "b").isin(query=is_query.copy())),
                ),
            )
        )
        rank = exp.Window(
            this=exp.RowNumber(),
            partition_by=[col("_q")],
            order=exp.Order(expressions=[exp.Ordered(this=col("_dd")), exp.Ordered(this=col("_b"))]),
        )
        inner = exp.select(col("_q"), col("_b"), exp.alias_(rank, "_r", quoted=True)).from_(pairs.subquery("_pq"))
        return exp.select(col("_q"), col("_b")).from_(inner.subquery("_rk")).where(col("_r") <= _num(k))

    hits = (
        exp.select(exp.Count(this=exp.Star()))
        .from_(exp.Table(this=ident("_true"), alias=exp.TableAlias(this=ident("t"))))
        .join(
            exp.Table(this=ident("_found"), alias=exp.TableAlias(this=ident("f"))),
            on=exp.and_(col("_q", "t").eq(col("_q", "f")), col("_b", "t").eq(col("_b", "f"))),
        )
    )
    nq = exp.select(exp.Count(this=exp.Star())).from_(ids_table.copy()).where(col("_rn") <= _num(queries))
    recall = exp.Div(
        this=exp.cast(exp.Subquery(this=hits), DOUBLE),
        expression=exp.paren(exp.Mul(this=_num(k), expression=exp.Subquery(this=nq))),
        typed=False,
    )
    final = (
        exp.select(exp.alias_(recall, "recall"), exp.alias_(exp.Subquery(this=nq.copy()), "n_queries"))
        .with_("_ids", as_=ids_cte)
        .with_("_x", as_=x_rel)
        .with_("_y", as_=y_rel)
        .with_("_true", as_=ranked("_x", "_x", projection.d))
        .with_("_found", as_=ranked("_y", "_y", projection.k))
    )
    return dialect.render(final)


def sample_ids(db: Backend, source: Source, n: int | None, seed: int = 0) -> list:
    """The ids of the seeded sample, in sample order (the same rows the SQL metrics use)."""
    query = sample_ids_query(source, seed, n).order_by(col("_rn"))
    return [r[0] for r in db.fetchall(db.sql_dialect.render(query))]


def fetch_sample(
    db: Backend, projection: Projection | None, source: Source, n: int | None, seed: int = 0, d: int | None = None
) -> tuple[list, np.ndarray]:
    """``(ids, X)``: the features of the seeded sample, rows in sample order.  Reads only those rows.
    ``projection`` gives ``d`` (or pass ``d``); long tables are pivoted in NumPy."""
    dialect = db.sql_dialect
    ids_sel = sample_ids_query(source, seed, n)
    if hasattr(db, "statement_room"):  # the engine holds the sample's scan, this process little (issue 42)
        db.statement_room()
    ids = sample_ids(db, source, n, seed)
    if not ids:
        raise InputError(f"table {source.table!r} has no rows to sample")
    position = {v: i for i, v in enumerate(ids)}
    in_sample = exp.select(col("_id")).from_(ids_sel.subquery("_ids"))
    dim = projection.d if projection is not None else d
    if dim is None:
        raise InvalidParameter("fetch_sample needs the input dimension d")
    if source.layout == "long":
        q = exp.select(col(source.id_column), col(source.feature_column), col(source.value_column)).from_(
            table_ref(source)
        )
        q = q.where(col(source.id_column).isin(query=in_sample), copy=False)
        rows = db.fetchall(dialect.render(q))
        X = np.zeros((len(ids), dim))
        for rid, f, v in rows:
            if v is not None:
                X[position[rid], int(f)] += float(v)
        return ids, X
    X = np.zeros((len(ids), dim))
    # a wide Parquet file whose row groups the engine cannot hold is read a block of columns at a time
    # (issue 42: the scan holds a row group of the columns it reads, the filter notwithstanding)
    for block in feature_blocks(db, source) or [list(range(dim))]:
        part = replace(source, group_column=None)
        if source.layout == "wide" and len(block) < dim:
            part = replace(part, columns=tuple(source.columns[i] for i in block))
        rel = _restrict(dense_source(len(block), part, dialect), source, in_sample)
        frame: pd.DataFrame = db.query_df(dialect.render(rel))
        order = np.array([position[v] for v in frame["_id"].tolist()], dtype=np.int64)
        X[np.ix_(order, block)] = frame[[f"_x{i}" for i in range(len(block))]].to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise InputError(f"the sample of {source.table!r} has NULL/NaN features; clean them or pass --nulls=zero")
    return ids, X


@contextmanager
def sample_table(db: Backend, source: Source, ids: list, X: np.ndarray) -> Iterator[Source]:
    """Where the SQL metrics read the sample from: ``source`` itself, or -- a wide Parquet file whose row
    groups the engine cannot hold (:func:`~sqlrp.pipeline.column_blocks.feature_blocks`) -- the sample
    :func:`fetch_sample` read (``ids``, ``X``), registered as a table: the same rows, the same seeded order."""
    if feature_blocks(db, source) is None:
        yield source
        return
    frame = pd.DataFrame({source.id_column: ids, **{c: X[:, i] for i, c in enumerate(source.columns)}})
    with db.frame_table(frame) as name:  # type: ignore[attr-defined]
        yield replace(source, table=name, schema=None, catalog=None)


def sql_distortion(
    db: Backend, projection: Projection, source: Source, sample: int = 200, seed: int = 0, kernel: Kernel | None = None
) -> dict[str, float]:
    """Run :func:`distortion_query`; returns ``n_pairs, mean, median, p95, max``."""
    row = db.fetchall(distortion_query(projection, source, db.sql_dialect, sample, seed, kernel))[0]
    keys = ("n_pairs", "mean", "median", "p95", "max")
    return {key: (int(v) if key == "n_pairs" else float(v)) for key, v in zip(keys, row, strict=True)}


def sql_recall_at_k(
    db: Backend,
    projection: Projection,
    source: Source,
    queries: int = 100,
    database: int | None = None,
    k: int = 5,
    seed: int = 0,
) -> float:
    """Run :func:`recall_query`; returns Recall@K."""
    row = db.fetchall(recall_query(projection, source, db.sql_dialect, queries, database, k, seed))[0]
    return float(row[0])
