"""``evaluate``: how good is a stored projection on this table?  A metrics table and PNG plots.

On a seeded sample of rows (the same rows for the Python and the SQL numbers):

- pairwise distortion (``000`` Eq. 22, or in a kernel's feature space with Eq. 23): mean, median,
  p95, max -- in NumPy and, with ``in_sql``, computed inside the database;
- Recall@K with a query / database split (``002`` Eq. 12), in NumPy and in SQL;
- ``Q_NX`` / ``R_NX`` curves and their AUC (``002`` Eq. 13-15);
- distortion against k (fresh Achlioptas projections of the same ``s``) next to the JL floor
  ``E|chi2_k/k - 1|``;
- kernel NRMSE (``001``) when a kernel is given; linear-classifier accuracy (``000`` Table 6
  protocol) when a label column is given.

Files written to ``out``: ``metrics.csv``, ``metrics.json``, ``distortion_hist.png``,
``distortion_vs_k.png``, ``rnx.png``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler import col, table_ref
from ..core.errors import InputError, InvalidParameter, ProjectionNotFound, need
from ..core.files import existing_database, replacing, writable_folder
from ..core.lazy import pd
from ..core.options import EVALUATE_DEFAULTS, EvaluateOptions, names, refuse_unknown, take
from ..core.params import count, counts, finite, positive_int, whole
from ..methods import reference
from ..methods.linear import achlioptas, expected_distortion
from ..methods.rff import ShiftKernel
from ..pipeline import targets
from ..pipeline.frame_table import frame_input
from ..pipeline.frames import is_frame
from ..pipeline.plan import plan, registry_of
from .metrics import (
    Kernel,
    auc_rnx,
    kernel_nrmse,
    linear_classifier_accuracy,
    pairwise_distortion,
    q_nx,
    r_nx,
    recall_at_k,
    resolve_kernel,
    same_method,
)
from .sql import fetch_sample, sample_ids_query, sample_table, sql_distortion, sql_kernel_nrmse, sql_recall_at_k

__all__ = ["Report", "evaluate", "write_report"]


@dataclass
class Report:
    """Metrics of one projection on one table, and the curves behind the plots."""

    projection: str | None
    metrics: dict[str, Any]
    table: pd.DataFrame
    distortions: np.ndarray
    rnx: np.ndarray
    distortion_vs_k: pd.DataFrame
    files: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.table.to_string(index=False)


def _fetch_labels(db: Backend, source, label_column: str, ids: list, seed: int) -> np.ndarray:
    """Labels of the sampled rows only."""
    in_sample = exp.select(exp.column("_id")).from_(sample_ids_query(source, seed, len(ids)).subquery("_ids"))
    q = exp.select(col(source.id_column), col(label_column)).from_(table_ref(source))
    q = q.where(col(source.id_column).isin(query=in_sample))
    rows = dict(db.fetchall(db.sql_dialect.render(q)))
    return np.array([rows[i] for i in ids])


def evaluate(
    db: Backend,
    table: str,
    id_column: str,
    projection: str,
    out: str | Path | None = None,
    **options: Unpack[EvaluateOptions],
) -> Report:
    """Evaluate the stored ``projection`` on a seeded sample of ``sample`` rows of ``table``; the first
    ``queries`` sampled rows are Recall@K queries, the rest their database.

    :param db: the connection.
    :param table: a table, or a DataFrame or Arrow table (registered for the call).
    :param id_column: the rows' key.
    :param projection: the stored projection's name.
    :param out: a folder: the metrics table (CSV, JSON) and the plots are written there (:func:`write_report`).
    :param options: :class:`~sqlrp.core.options.EvaluateOptions` -- ``sample`` (default 300), ``queries``
        (100), ``recall_k`` (5), ``seed`` (0), ``ks`` (the k of the distortion-versus-k curve), ``kernel``
        (the feature space of the distortion: by default the kernel the projection approximates, ``None``
        the input space; :func:`sqlrp.evaluation.metrics.resolve_kernel`), ``label_column`` (adds
        nearest-neighbour accuracies), ``in_sql`` (the same metrics computed in SQL too), and the
        input's options (:class:`~sqlrp.core.layout.SourceOptions`).
    :returns: the report (its metrics table, and the files written).
    """
    refuse_unknown("evaluate", options, names(EvaluateOptions))
    if is_frame(table):
        label = (options.get("label_column"),)
        with frame_input(db, table, id_column, dict(options), keep=label) as (registered, decided):
            return evaluate(db, registered, id_column, projection, out=out, **decided)
    given: dict[str, Any] = {**EVALUATE_DEFAULTS, **options}
    sample, queries, recall_k, seed = take(given, "sample", "queries", "recall_k", "seed")
    ks, kernel, label_column, in_sql = take(given, "ks", "kernel", "label_column", "in_sql")
    source_options = given  # the input's
    sample, queries, recall_k, ks = _checked_counts(sample, queries, recall_k, ks, seed, kernel)
    proj, source, kernel = _prepared(db, table, id_column, projection, kernel, label_column, out, source_options)
    ids, X = fetch_sample(db, proj, source, sample, seed)
    if len(ids) < 3 or recall_k > len(ids) - queries:  # the table held fewer rows than the sample
        raise InvalidParameter(
            f"the table gave {len(ids)} sample rows: too few for {queries} queries and Recall@{recall_k} "
            f"(needs at least queries + recall_k = {queries + recall_k}, and 3); lower --queries or --recall-k"
        )
    Y = reference.transform(proj, X)
    dist = pairwise_distortion(X, Y, kernel)
    Q = q_nx(X, Y, kernel)
    R = r_nx(Q)
    rows = _metric_rows(X, Y, ids, dist, Q, R, proj.k, queries, recall_k)
    if in_sql and source.layout != "long":
        sql_values = _in_sql(db, proj, source, (ids, X), (sample, queries, recall_k, seed), kernel)
        rows = [(name, py, sql_values.get(name)) for name, py, _ in rows]
    if kernel is not None:
        in_db = sql_values.get("kernel_nrmse") if in_sql and source.layout != "long" else None
        rows.append(("kernel_nrmse", kernel_nrmse(Y @ Y.T, kernel.gram(X)), in_db))
    if label_column is not None:
        rows += _accuracies(X, Y, _fetch_labels(db, source, label_column, ids, seed), proj, kernel)
    vs_k = _distortion_vs_k(X, proj, kernel, ks, seed)
    table_df = pd.DataFrame(rows, columns=["metric", "python", "sql"])
    metrics = {name: py for name, py, _ in rows}
    metrics["sql"] = {name: v for name, _, v in rows if v is not None}
    metrics["projection"] = proj.describe()
    metrics["sample"] = {"rows": len(ids), "queries": queries, "seed": seed, "table": table}
    if kernel is not None:
        metrics["kernel"] = kernel.describe()
    report = Report(proj.name, metrics, table_df, dist, R, vs_k)
    if out is not None:
        write_report(report, out)
    return report


def _in_sql(
    db: Backend,
    proj: Any,
    source: Any,
    read: tuple[list, np.ndarray],
    sizes: tuple[int, int, int, int],
    kernel: Kernel | None,
) -> dict[str, float]:
    """The metrics computed in SQL, by name: on the table, or on the sample ``read`` where the table is a
    file whose row groups the engine cannot hold (:func:`sample_table`, issue 42).  ``sizes``: the sample,
    the queries, Recall's k, the seed."""
    sample, queries, recall_k, seed = sizes
    planned = getattr(db, "common_subexpressions", contextlib.nullcontext)  # DuckDB: its CSE pass, on
    with sample_table(db, source, *read) as where, planned():
        sd = sql_distortion(db, proj, where, sample, seed, kernel)
        srec = sql_recall_at_k(db, proj, where, queries, sample - queries, recall_k, seed)
        nrmse = {} if kernel is None else {"kernel_nrmse": sql_kernel_nrmse(db, proj, where, sample, seed, kernel)}
    return {
        **nrmse,
        "pairs": sd["n_pairs"],
        "distortion_mean": sd["mean"],
        "distortion_median": sd["median"],
        "distortion_p95": sd["p95"],
        "distortion_max": sd["max"],
        f"recall@{recall_k}": srec,
    }


def _checked_counts(
    sample: int, queries: int, recall_k: int, ks: list[int] | None, seed: int, kernel: Kernel | str | None
) -> tuple[int, int, int, list[int] | None]:
    """Every count of :func:`evaluate`, checked before any work (:mod:`sqlrp.core.params`)."""
    sample = whole("sample", count("sample", sample), 3)  # R_NX needs n >= 3; the bounds: core.params.LIMITS
    queries = count("queries", queries)
    recall_k = count("recall_k", recall_k)
    ks = counts("ks", ks, limit="k")
    count("seed", seed)
    if isinstance(kernel, Kernel):
        finite("the kernel constant c", kernel.c)
    if queries >= sample:
        raise InvalidParameter(f"queries ({queries}) must be smaller than the sample ({sample})")
    positive_int("recall_k", recall_k, upper=sample - queries, bound="the sample's database rows, sample - queries")
    return sample, queries, recall_k, ks


def _prepared(  # noqa: PLR0913 - evaluate's
    db: Backend,
    table: str,
    id_column: str,
    projection: str,
    kernel: Kernel | str | None,
    label_column: str | None,
    out: str | Path | None,
    source_options: dict,
) -> tuple[Any, Any, Kernel | None]:
    """The stored projection, the source and the kernel of :func:`evaluate`; the label column, the
    report folder and the extras it needs checked before the work, not after it."""
    existing_database(db)
    if isinstance(projection, str) and not registry_of(db).exists(projection):
        raise ProjectionNotFound(f"no stored projection named {projection!r}; evaluate needs a stored one")
    wide = source_options.get("layout", "wide") == "wide"
    if label_column is not None and wide and not source_options.get("columns"):
        # the labels are not a feature: the default columns are the numeric ones but the id and the label
        keys = {id_column, label_column, source_options.get("group_column")}
        info = db.columns(table, source_options.get("schema"))
        source_options["columns"] = [c.name for c in info if c.numeric and c.name not in keys] or None
    p = plan(db, table, id_column, projection=projection, **source_options)
    proj, source = p.projection, p.source
    kernel = resolve_kernel(kernel, proj)
    if label_column is not None:
        names = [c.name for c in db.columns(source.table, source.schema)]
        if label_column not in names:
            raise InputError(
                f"table {source.table!r} has no column {label_column!r} for --label-column (columns: "
                f"{', '.join(names[:12])}{', ...' if len(names) > 12 else ''})"
            )
    if out is not None:
        need("matplotlib", "eval", "evaluate's plots (--out)")
        writable_folder(out)
        targets.refuse_report(db, out, REPORT_FILES, source)
    if label_column is not None:
        need("sklearn", "sklearn", "evaluate's classifier accuracy (--label-column)")
    return proj, source, kernel


def _metric_rows(  # noqa: PLR0913 - the sample and what was computed on it
    X: np.ndarray,
    Y: np.ndarray,
    ids: list,
    dist: np.ndarray,
    Q: np.ndarray,
    R: np.ndarray,
    k: int,
    queries: int,
    recall_k: int,
) -> list[tuple[str, Any, Any]]:
    """``(metric, NumPy's value, None)``: distortion, Recall@K of the first ``queries`` sampled rows
    against the rest (in id order), the neighbourhood measures, the JL floor."""
    db_order = np.argsort(np.array(ids[queries:], dtype=object), kind="stable")
    Xq, Yq = X[:queries], Y[:queries]
    Xd, Yd = X[queries:][db_order], Y[queries:][db_order]
    return [
        ("rows_sampled", len(ids), None),
        ("pairs", int(len(dist)), None),
        ("distortion_mean", float(dist.mean()), None),
        ("distortion_median", float(np.percentile(dist, 50)), None),
        ("distortion_p95", float(np.percentile(dist, 95)), None),
        ("distortion_max", float(dist.max()), None),
        (f"recall@{recall_k}", recall_at_k(Xq, Xd, Yq, Yd, recall_k), None),
        (f"Q_NX({recall_k})", float(Q[recall_k - 1]), None),
        (f"R_NX({recall_k})", float(R[recall_k - 1]) if recall_k <= len(R) else None, None),
        ("AUC(R_NX)", auc_rnx(R), None),
        ("jl_floor_mean_distortion", expected_distortion(k), None),
    ]


def _accuracies(X: np.ndarray, Y: np.ndarray, y: np.ndarray, proj: Any, kernel: Kernel | None) -> list[tuple]:
    """A linear classifier's accuracy on the raw, the projected and (for a kernel of at most 200
    features) the explicit kernel features; 70% of the sample trains it."""
    cut = int(0.7 * len(y))
    rows = [
        ("accuracy_raw", linear_classifier_accuracy(X[:cut], y[:cut], X[cut:], y[cut:]), None),
        ("accuracy_projected", linear_classifier_accuracy(Y[:cut], y[:cut], Y[cut:], y[cut:]), None),
    ]
    if isinstance(kernel, ShiftKernel):  # random Fourier features beside the exact kernel machine
        rows.append(("accuracy_exact_kernel_svm", exact_kernel_accuracy(X, y, kernel, cut), None))
    elif kernel is not None and proj.d <= 200:
        from sklearn.preprocessing import PolynomialFeatures

        phi = PolynomialFeatures(kernel.degree, include_bias=False).fit_transform(X)
        acc = linear_classifier_accuracy(phi[:cut], y[:cut], phi[cut:], y[cut:])
        rows.append(("accuracy_explicit_kernel", acc, None))
    return rows


def exact_kernel_accuracy(X: np.ndarray, y: np.ndarray, kernel: ShiftKernel, cut: int) -> float:
    """Test accuracy of an SVM on the exact kernel (``SVC(kernel="precomputed")``, ``C = 1``) trained on the
    first ``cut`` rows: what random Fourier features plus a linear model approximate (Random Kitchen Sinks)."""
    need("sklearn", "sklearn", "the exact kernel SVM's accuracy")
    from sklearn.svm import SVC

    model = SVC(kernel="precomputed").fit(kernel.gram(X[:cut]), y[:cut])
    return float(np.mean(model.predict(kernel.gram(X[cut:], X[:cut])) == y[cut:]))


def _distortion_vs_k(X: np.ndarray, proj: Any, kernel: Kernel | None, ks: list[int] | None, seed: int) -> pd.DataFrame:
    """The mean distortion of a fresh projection of the same method at each ``k`` of ``ks`` (default
    k/4, k/2, k, 2k) beside the JL floor: the distortion-vs-k plot."""
    s = float(proj.params.get("s", np.sqrt(proj.d)))
    if ks is None:
        ks = sorted({max(1, proj.k // 4), max(1, proj.k // 2), proj.k, 2 * proj.k})
    curve = []
    for kk in ks:
        fresh = achlioptas(proj.d, kk, s=s, seed=seed) if kernel is None else same_method(proj, kk, seed)
        curve.append(
            {
                "k": kk,
                "rp_mean_distortion": float(pairwise_distortion(X, reference.transform(fresh, X), kernel).mean()),
                "jl_floor": expected_distortion(kk),
            }
        )
    return pd.DataFrame(curve)


#: the files :func:`write_report` writes into its folder
REPORT_FILES = ("metrics.csv", "metrics.json", "distortion_hist.png", "distortion_vs_k.png", "rnx.png")


@contextmanager
def _plot(plt: Any, path: Path, title: str) -> Iterator[Any]:
    """The axes of one plot of the report; then the plot titled, with its legend, saved as ``path``
    (6 x 4 inches, 110 dpi) and closed."""
    fig, ax = plt.subplots(figsize=(6, 4))
    try:
        yield ax
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        with replacing(path) as tmp:  # whole or not at all (issue 42)
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)


def write_report(report: Report, out: str | Path) -> list[str]:
    """Write ``metrics.csv``, ``metrics.json`` and the three PNG plots into the folder ``out``."""
    need("matplotlib", "eval", "the report's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = writable_folder(out)
    files = []
    with replacing(folder / "metrics.csv") as tmp:  # each file whole or not at all (issue 42)
        report.table.to_csv(tmp, index=False)
    with replacing(folder / "metrics.json") as tmp:
        tmp.write_text(json.dumps(report.metrics, indent=2, default=_json))
    files += [str(folder / "metrics.csv"), str(folder / "metrics.json")]
    title = report.projection or "projection"

    with _plot(plt, folder / "distortion_hist.png", f"{title}: distortion distribution") as ax:
        ax.hist(report.distortions, bins=60, color="#4477aa")
        ax.axvline(report.distortions.mean(), color="k", ls="--", label=f"mean {report.distortions.mean():.3f}")
        ax.set_xlabel("pairwise distortion |d'^2 - d^2| / d^2")
        ax.set_ylabel("pairs")

    with _plot(plt, folder / "distortion_vs_k.png", f"{title}: mean distortion against k") as ax:
        vs = report.distortion_vs_k
        fresh = "same method, kernel space" if "kernel" in report.metrics else "Achlioptas RP (same s)"
        ax.plot(vs["k"], vs["rp_mean_distortion"], "o-", label=f"{fresh}, this sample")
        ax.plot(vs["k"], vs["jl_floor"], "k--", label="JL floor E|chi2_k/k - 1|")
        k_here = report.metrics["projection"]["k"]
        ax.plot([k_here], [report.metrics["distortion_mean"]], "r*", ms=12, label=title)
        ax.set_xscale("log")
        ks = sorted({int(v) for v in vs["k"]} | {int(k_here)})
        ax.set_xticks(ks, [str(v) for v in ks])  # the k measured, as integers (no 10^x labels)
        ax.minorticks_off()
        ax.set_xlabel("k")
        ax.set_ylabel("mean distortion")

    with _plot(plt, folder / "rnx.png", f"{title}: neighbourhood preservation R_NX(K)") as ax:
        K = np.arange(1, len(report.rnx) + 1)
        ax.plot(K, report.rnx, label=f"{title} (AUC {report.metrics['AUC(R_NX)']:.3f})")
        ax.set_xscale("log")
        ax.set_xlabel("K (log scale)")
        ax.set_ylabel("R_NX(K)")
    files += [str(folder / n) for n in ("distortion_hist.png", "distortion_vs_k.png", "rnx.png")]
    report.files = files
    return files


def _json(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)
