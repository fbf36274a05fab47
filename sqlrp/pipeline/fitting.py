"""The passes over the rows of a low-rank fit (issue 43; the algorithm: :mod:`sqlrp.methods.lowrank`).

Each pass sums, for ``Z = X - 1 shift^T`` and the test matrix ``W`` (``d x l``): ``n``, ``sum(Z)``,
``sum(Z^2)`` per feature and ``(Z W)^T Z`` (``l x d``).  Two routes, the same sums:

- ``sql``: aggregate statements rendered per dialect -- ``SELECT count(*), sum(_z0), .., sum(_y0 * _z0), ..``
  over a fenced sub-query computing ``_z_i = x_i - shift_i`` and ``_y_j = sum_i w_ij _z_i`` once per row
  (signed sums for the sparse ``Omega``), in blocks of :data:`BLOCK` aggregates (PostgreSQL allows 1,664 per
  select); only those numbers leave the database;
- ``arrow``: on an in-process engine (``Backend.streams_arrow``: DuckDB), the rows stream as Arrow
  record batches of about :data:`BATCH_BYTES` into NumPy and BLAS (``Yt = W^T Zt``, ``C += Yt Zt^T``): bounded
  memory, never the whole table; the rows never leave the process.

The first pass shifts by a pilot row (SQL: the first row read; Arrow: the first batch's mean), which keeps
the uncentred sums from cancelling; :meth:`~sqlrp.methods.lowrank.Sums.centred_cross` removes the shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col, dense_source
from ..core.errors import InputError, InvalidParameter
from ..core.layout import check_route
from ..core.nodes import SignedSum, number
from ..methods.lowrank import AUTO_MAX, Fitted, Sums, auto_more, finish, oversampled, sketch_matrix, step
from .column_blocks import pinned_scan
from .fitting_long import long_pass
from .progress import CommandBar

#: aggregates per statement of the ``sql`` route (PostgreSQL: at most 1,664 entries in a select list)
BLOCK = 1200
#: engine memory one aggregate of the ``sql`` route may take per thread (DuckDB computes each product as a
#: vector of 2,048 doubles before summing it: about 60 KiB measured, twice that for room); a statement
#: holds at most ``memory_limit / (threads * AGGREGATE_BYTES)`` aggregates (:func:`aggregates_per_statement`)
AGGREGATE_BYTES = 128 << 10
#: the exact route where ``d <= GRAM_FACTOR * (k + p)`` (:func:`exact_reason`)
GRAM_FACTOR = 8
#: ``variance=``: the first fit's ``k`` (doubled until the components reach the target)
VARIANCE_START = 32
#: bytes of float64 features per Arrow batch of the ``arrow`` route
BATCH_BYTES = 32 << 20


def feature_relation(db: Backend, source: Source, d: int) -> exp.Select:
    """``SELECT _x0 .. _x{d-1}`` of the source (doubles; NULL as 0 under ``nulls="zero"``)."""
    inner = dense_source(d, source, db.sql_dialect).subquery("_src", copy=False)
    return exp.select(*[col(f"_x{i}") for i in range(d)]).from_(inner)


def pilot_row(db: Backend, source: Source, d: int) -> np.ndarray:
    """One row's features (NULL as 0): the first pass's shift."""
    rows = db.fetchall(db.sql_dialect.render(feature_relation(db, source, d).limit(1)))
    if not rows:
        raise InputError(f"the table {source.table!r} has no rows to fit")
    return np.array([0.0 if v is None or not math.isfinite(float(v)) else float(v) for v in rows[0]])


def _weighted(z: list[exp.Expression], column: np.ndarray) -> exp.Expression:
    """``sum_i w_i z_i`` (:class:`~sqlrp.core.nodes.SignedSum`: bare additions where the weights are +-1)."""
    index = np.flatnonzero(column)
    return SignedSum.of(z, index, column[index]) if len(index) else number(0.0)


def aggregates_per_statement(db: Backend) -> int:
    """At most :data:`BLOCK` aggregates (fewer than the dialect's columns per select), and where the engine
    reports its memory limit (``scan_room``: DuckDB), few enough that a statement's products fit in it: a
    table larger than the limit then streams through each statement (more statements, each a scan)."""
    block = min(BLOCK, (db.sql_dialect.max_columns or BLOCK) - 1)
    room = getattr(db, "scan_room", None)
    if room is not None:
        memory, threads = room()
        block = min(block, max(16, memory // (max(threads, 1) * AGGREGATE_BYTES)))
    return block


def pass_queries(db: Backend, source: Source, d: int, W: np.ndarray | None, shift: np.ndarray) -> list[exp.Select]:
    """The ``sql`` route's statements; the aggregates, in order over all of them: ``count(*)``, per feature
    ``count(_z)``, ``sum(_z)``, ``sum(_z * _z)``, then ``sum(_y_j * _z_i)`` row by row of ``W^T``.  Each
    statement's fenced sub-query computes only the ``_y_j`` its own sums read (no ``_y`` twice per row).
    ``W=None``: the exact route, ``_y_j = _z_j`` and only the Gram matrix's upper triangle ``j <= i``."""
    dialect = db.sql_dialect
    base = feature_relation(db, source, d).subquery("_f", copy=False)
    z = [exp.alias_(exp.Sub(this=col(f"_x{i}"), expression=number(shift[i])), f"_z{i}", quoted=True) for i in range(d)]
    zs = exp.select(*z).from_(base)
    zcols = [col(f"_z{i}") for i in range(d)]
    aggs: list[tuple[int | None, exp.Expression]] = [(None, exp.Count(this=exp.Star()))]
    for i in range(d):
        aggs.append((None, exp.Count(this=col(f"_z{i}"))))
        aggs.append((None, exp.Sum(this=col(f"_z{i}"))))
        aggs.append((None, exp.Sum(this=exp.Mul(this=col(f"_z{i}"), expression=col(f"_z{i}")))))
    for j in range(d if W is None else W.shape[1]):  # W None: the Gram matrix, its upper triangle
        pairs = range(j, d) if W is None else range(d)
        aggs.extend((j, exp.Sum(this=exp.Mul(this=col(f"_y{j}"), expression=col(f"_z{i}")))) for i in pairs)
    block = aggregates_per_statement(db)
    queries = []
    for lo in range(0, len(aggs), block):
        part = aggs[lo : lo + block]
        used = sorted({j for j, _ in part if j is not None})
        ys = [exp.alias_(zcols[j] if W is None else _weighted(zcols, W[:, j]), f"_y{j}", quoted=True) for j in used]
        inner = dialect.fence(exp.select(*[c.copy() for c in zcols], *ys).from_(zs.subquery("_zs", copy=True)))
        queries.append(exp.select(*[a for _, a in part]).from_(inner.subquery("_p", copy=False)))
    return queries


def sql_pass(db: Backend, source: Source, d: int, W: np.ndarray | None, shift: np.ndarray) -> Sums:
    """One pass by aggregate SQL (:func:`pass_queries`); only the sums leave the database."""
    values: list[float] = []
    dialect = db.sql_dialect
    for query in pass_queries(db, source, d, W, shift):
        row = db.fetchall(dialect.render(query))[0]
        values.extend(math.nan if v is None else float(v) for v in row)
    n = int(values[0])
    per = np.array(values[1 : 1 + 3 * d]).reshape(d, 3)
    nulls = n - per[:, 0]
    _refuse_nulls(source, nulls)
    if W is None:  # the upper triangle, row by row
        cross = np.zeros((d, d))
        cross[np.triu_indices(d)] = values[1 + 3 * d :]
        cross = cross + np.triu(cross, 1).T
    else:
        cross = np.array(values[1 + 3 * d :]).reshape(W.shape[1], d)
    return _checked(source, Sums(n, shift, np.nan_to_num(per[:, 1]), per[:, 2], cross))


def batch_rows(d: int) -> int:
    """Rows per Arrow batch: :data:`BATCH_BYTES` of float64 features, at least 1,024."""
    return max(1024, BATCH_BYTES // (8 * max(d, 1)))


def arrow_pass(db: Backend, source: Source, d: int, W: np.ndarray | None, shift: np.ndarray | None) -> Sums:
    """One pass by streaming Arrow batches into BLAS (``shift=None``: the first batch's mean; ``W=None``: the
    Gram matrix, by ``dsyrk``: one triangle, half a product's flops)."""
    sql = db.sql_dialect.render(feature_relation(db, source, d))
    n, width = 0, d if W is None else W.shape[1]
    total, squares, cross = np.zeros(d), np.zeros(d), np.zeros((width, d))
    Wt = None if W is None else np.ascontiguousarray(W.T)
    with db.streaming_reader():  # DuckDB: one reader thread, BLAS on the other core (bounded memory)
        for table in db.iter_arrow(sql, rows=batch_rows(d)):
            Zt = _batch(table, source, d)
            if shift is None:
                shift = Zt.mean(axis=1)
            Zt -= shift[:, None]
            n += Zt.shape[1]
            total += Zt.sum(axis=1)
            squares += np.einsum("ij,ij->i", Zt, Zt)
            cross += _gram(Zt) if Wt is None else (Wt @ Zt) @ Zt.T
    if n == 0:
        raise InputError(f"the table {source.table!r} has no rows to fit")
    assert shift is not None
    if Wt is None:
        cross = np.triu(cross) + np.triu(cross, 1).T
    return _checked(source, Sums(n, shift, total, squares, cross))


def _batch(table: Any, source: Source, d: int) -> np.ndarray:
    """An Arrow batch's features as ``Zt``, ``d x rows`` float64 (each column one contiguous copy)."""
    Zt = np.empty((d, table.num_rows))
    nulls = np.zeros(d)
    for i, column in enumerate(table.columns):
        nulls[i] = column.null_count
        Zt[i] = column.to_numpy()
    _refuse_nulls(source, nulls)
    return Zt


def _gram(Zt: np.ndarray) -> np.ndarray:
    """``Zt Zt^T``: its upper triangle by BLAS ``dsyrk`` (half a product's flops) where scipy is installed."""
    try:
        from scipy.linalg.blas import dsyrk
    except ImportError:  # sqlrp's core needs no scipy
        return Zt @ Zt.T
    return dsyrk(1.0, Zt.T, trans=1)  # Zt.T is Fortran-ordered: no copy


def _refuse_nulls(source: Source, nulls: np.ndarray) -> None:
    """A NULL feature: refused, naming the first such feature (``--nulls zero`` reads them as 0)."""
    bad = np.flatnonzero(nulls > 0)
    if len(bad):
        i = int(bad[0])
        name = source.columns[i] if source.layout == "wide" and i < len(source.columns) else f"feature {i}"
        raise InputError(
            f"{int(nulls[i])} rows of {source.table!r} hold NULL in {name!r}: a fit needs every feature "
            "(pass --nulls zero to read NULL as 0)"
        )


def _checked(source: Source, sums: Sums) -> Sums:
    """The sums, if every one is finite (else a NaN or infinite feature, refused)."""
    if sums.n < 2:
        raise InputError(f"the table {source.table!r} has {sums.n} row(s): a fit needs at least 2")
    for values in (sums.total, sums.squares, sums.cross):
        if not np.all(np.isfinite(values)):
            raise InputError(
                f"a feature of {source.table!r} holds NaN or an infinite value (or its squares overflow): "
                "a fit needs finite features"
            )
    return sums


def _one_pass(db: Backend, source: Source, d: int, W: np.ndarray | None, shift: np.ndarray | None, route: str) -> Sums:
    with pinned_scan(db, source):  # a small device's Parquet scan, as project's (issue 42)
        return _pass(db, source, d, W, shift, route)


def _pass(db: Backend, source: Source, d: int, W: np.ndarray | None, shift: np.ndarray | None, route: str) -> Sums:
    if source.layout == "long":  # the sql route's joins and GROUP BYs (fitting_long), no shift
        return _checked(source, long_pass(db, source, d, np.eye(d) if W is None else W))
    if route == "arrow":
        return arrow_pass(db, source, d, W, shift)
    return sql_pass(db, source, d, W, pilot_row(db, source, d) if shift is None else shift)


def choose_route(db: Backend, route: str) -> str:
    """``auto``: ``arrow`` where the engine streams Arrow in-process (``Backend.streams_arrow``), else ``sql``."""
    if check_route(route) == "auto":
        return "arrow" if getattr(db, "streams_arrow", False) else "sql"
    return route


def exact_reason(d: int, width: int, gram: str) -> str | None:
    """Why the fit sums the exact ``d x d`` Gram matrix in one pass instead of sketching (``None``: it sketches).
    ``gram="auto"``: where ``d <= GRAM_FACTOR * l`` -- the Gram's ``d^2 / 2`` products per row cost no more
    than the ``2 l d`` of each of the ~4 passes ``power_iterations="auto"`` takes (``bench/lowrank.py``)."""
    if gram not in ("auto", "always", "never"):
        raise InvalidParameter(f"gram must be 'auto', 'always' or 'never', got {gram!r}")
    if width >= d:
        return f"exact: k + p >= d = {d}, one pass summed the d x d Gram matrix"
    if gram == "always":
        return "exact: --gram=always, one pass summed the d x d Gram matrix"
    if gram == "auto" and d <= GRAM_FACTOR * width:
        return f"exact: d = {d} <= {GRAM_FACTOR} (k + p), one pass of the d x d Gram matrix costs less than sketching"
    return None


def run_fit(db: Backend, source: Source, d: int, plan: FitPlan, bar: CommandBar | None = None) -> Fitted:
    """The passes of a fit (module doc) and the NumPy steps between them: pass 1 with ``Omega``, then
    ``plan.power_iterations`` more (``"auto"``: :func:`~sqlrp.methods.lowrank.auto_more` decides after each);
    or one pass of the Gram matrix (:func:`exact_reason`), whose eigenvectors are the exact components."""
    width = oversampled(plan.k, plan.oversample, d)
    exact = exact_reason(d, width, plan.gram)
    W = np.eye(d) if exact else sketch_matrix(d, width, plan.seed)
    centre = plan.method == "pca"
    shift = None if centre else np.zeros(d)
    auto = plan.power_iterations == "auto"
    planned = 1 if exact else AUTO_MAX + 1 if auto else int(plan.power_iterations) + 1
    history: list[float] = []
    why, first, result = exact or "", None, None
    for done in range(planned):
        if bar is not None:
            bar.step(f"fit: pass {done + 1}{'' if auto and not exact else f'/{planned}'}", 5 + 90 * done / planned)
        sums = _one_pass(db, source, d, None if exact else W, shift, plan.route)
        first = first or sums
        if centre and shift is None:
            shift = sums.mean
        result = step(sums.centred_cross(W, centre), W)
        history.append(float(np.sum(result.singular_values[: plan.k] ** 2)))
        if bar is not None:
            bar.step(f"fit: pass {done + 1} read {sums.n:,} rows", 5 + 90 * (done + 1) / planned)
        if result.rank == 0 or exact:
            break
        if auto:
            more, why = auto_more(history, result.singular_values, plan.k)
            if not more:
                break
        W = result.next_w
    assert result is not None and first is not None
    fitted = finish(result, first, plan.k, centre, len(history) - 1)
    fitted.info.update(passes=len(history), rows_per_pass=first.n, route=plan.route, why=why, exact=bool(exact))
    return fitted


def variance_kept(fitted: Fitted, target: float) -> int | None:
    """The fewest leading components whose explained-variance ratio exceeds ``target`` (scikit-learn's rule,
    ``searchsorted(cumsum(ratio), target, side="right") + 1``); ``None`` where the fitted ones fall short."""
    cumulative = np.cumsum(fitted.explained_variance_ratio)
    kept = int(np.searchsorted(cumulative, target, side="right")) + 1
    return kept if kept <= len(cumulative) else None


def fit_to_variance(
    db: Backend, source: Source, d: int, plan: FitPlan, target: float, bar: CommandBar | None = None
) -> Fitted:
    """The fewest components whose explained-variance ratio exceeds ``target`` (of the total variance, the
    trace of the covariance, summed exactly in the same pass as the means).  Fits ``k =`` :data:`VARIANCE_START`
    (all ``d`` where the exact route applies: the Gram matrix's eigenvalues come all at once), doubling ``k``
    until the fitted components reach the target or span the table's range.  A sketch's top ``j`` singular
    values are at most the table's (``B = Q^T A``), so its count is never below exact PCA's, and may pass it
    where a component's variance is underestimated across the threshold."""
    k, tries = min(d, VARIANCE_START), 0
    if exact_reason(d, oversampled(k, plan.oversample, d), plan.gram):
        k = d
    while True:
        tries += 1
        fitted = run_fit(db, source, d, replace(plan, k=k), bar)
        kept = variance_kept(fitted, target)
        whole = fitted.info["exact"] or k >= d or len(fitted.singular_values) < k
        if kept is not None or whole:
            break
        k = min(d, 2 * k)
        if exact_reason(d, oversampled(k, plan.oversample, d), plan.gram):
            k = d
    kept = kept or len(fitted.singular_values)
    reached = float(np.sum(fitted.explained_variance_ratio[:kept]))
    fitted = replace(fitted, components=fitted.components[:kept], singular_values=fitted.singular_values[:kept])
    fits = f"{tries} fit{'s' if tries > 1 else ''}, the last with k = {k}"
    why = f"--variance {target:g}: kept {kept} of d = {d} components, explaining {reached:.4f} ({fits})"
    fitted.info = {**fitted.info, "kept_why": why}
    return fitted


@dataclass
class FitPlan:
    """What a fit was asked for: ``method`` (``pca`` / ``svd``), ``k``, ``oversample``, ``power_iterations``
    (a count or ``"auto"``), the sketch's ``seed`` and the ``route`` (``sql`` / ``arrow``, decided)."""

    method: str
    k: int
    oversample: int
    power_iterations: int | str
    seed: int | None
    route: str
    gram: str = "auto"


__all__ = [
    "AGGREGATE_BYTES",
    "BATCH_BYTES",
    "BLOCK",
    "FitPlan",
    "GRAM_FACTOR",
    "VARIANCE_START",
    "exact_reason",
    "fit_to_variance",
    "aggregates_per_statement",
    "arrow_pass",
    "batch_rows",
    "choose_route",
    "pass_queries",
    "pilot_row",
    "run_fit",
    "sql_pass",
    "variance_kept",
]
