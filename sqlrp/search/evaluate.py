"""``evaluate --index``: Recall@K of a similarity-search index against exact k-NN, and how it grows
with the number of candidates re-ranked (at the index's default probes), ending with every list
probed and every row re-ranked (the exact answer: recall 1 unless something is wrong).

A seeded sample of the indexed rows is the query set.  Both the search (:func:`sqlrp.search.lookup.search`)
and the exact brute force (``search(..., exact=True)``, the same distance in SQL) ask for ``K + 1``
neighbours; each query's own row is dropped from both and the first ``K`` kept, so that a row
finding itself is not counted.  Recall@K is ``|found & exact| / K`` averaged over the queries
(paper 002 (``docs/reference/papers.md``) Eq. 12, with the exact neighbours in the original space as the truth).

Files written to ``out``: ``search_metrics.csv``, ``search_metrics.json``, ``recall_vs_candidates.png``.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..backends.staging import sweep_scratch_tables
from ..compiler import col, table_ref
from ..core.errors import InvalidParameter, need
from ..core.files import replacing, writable_folder
from ..core.lazy import pd
from ..core.names import scratch_name
from ..core.params import count, counts
from ..pipeline import targets
from ..pipeline.materialise import output_table
from .index import Index, load_index
from .lookup import search
from .reference import result_recall
from .sql import METRICS


@dataclass
class SearchReport:
    """Recall@K and seconds per number of candidates, for one index and one query sample."""

    index: str
    top: int
    queries: int
    metric: str
    table: pd.DataFrame  #: probes, candidates, recall_at_k, seconds (and the exact brute force's seconds)
    exact_seconds: float
    files: list[str] = field(default_factory=list)
    calibration: str = ""  #: the index's stored calibration curves (:mod:`sqlrp.search.calibrate`)

    def __str__(self) -> str:
        head = f"index {self.index!r}: Recall@{self.top} over {self.queries} sampled queries ({self.metric})"
        body = f"{head}\n{self.table.to_string(index=False)}\nexact brute force in SQL: {self.exact_seconds:.2f} s"
        return f"{body}\n{self.calibration}" if self.calibration else body


def default_candidates(top: int, rows: int) -> list[int]:
    """``K, 2K, 5K, 10K, ...`` up to the table's size (each at most ``rows``)."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            c = top * m * scale
            if c >= rows:
                return sorted(set(out + [max(rows, top)]))
            out.append(c)
        scale *= 10


def _without_self(result: pd.DataFrame, top: int) -> pd.DataFrame:
    kept = result[result["query_id"] != result["id"]]
    return kept.groupby("query_id", sort=False).head(top)


def evaluate_search(
    db: Backend,
    index: str,
    queries: int = 100,
    top: int = 10,
    candidates: list[int] | None = None,
    metric: str | None = None,
    seed: int = 0,
    out: str | Path | None = None,
) -> SearchReport:
    """Recall@``top`` of ``search`` on ``index`` for each number of ``candidates`` (default
    :func:`default_candidates`) at the index's default probes, then with every list probed and every
    row re-ranked, on ``queries`` rows sampled (seeded) from the indexed table.

    :param db: the connection holding the index and its table.
    :param index: the index's name (:func:`sqlrp.build_index`).
    :param queries: how many rows of the indexed table to sample as queries (at most all of them).
    :param top: ``K`` of Recall@K, the neighbours asked for per query (at most the table's rows less one).
    :param candidates: the numbers of rows re-ranked exactly per query to sweep (default ``K, 2K, 5K,
        10K, ...`` up to the table's size).
    :param metric: the distance, ``euclidean`` or ``angular``: it must be the index's own (``None``: the
        index's).
    :param seed: the seed of the query sample.
    :param out: a folder to write ``search_metrics.csv``, ``search_metrics.json`` and
        ``recall_vs_candidates.png`` into (needs ``sqlrp[eval]``; ``None``: nothing written).
    :returns: the report: one row per setting of probes and candidates with its recall and seconds, the
        exact brute force's seconds, and the files written.
    """
    queries = count("queries", queries)  # every count before any work, in its range (sqlrp.core.params.LIMITS)
    top = count("top", top)
    candidates = counts("candidates", candidates)
    count("seed", seed)
    if metric is not None and metric not in METRICS:
        raise InvalidParameter(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if out is not None:
        need("matplotlib", "eval", "evaluate's plots (--out)")
        writable_folder(out)
    idx = load_index(db, index)
    if metric is not None and metric != idx.metric:
        raise InvalidParameter(f"index {index!r} was built for {idx.metric} distances, not {metric}")
    metric = idx.metric
    src = idx.source
    if out is not None:
        targets.refuse_report(db, out, REPORT_FILES, src)
    dialect = db.sql_dialect
    ids = [r[0] for r in db.fetchall(dialect.render(exp.select(col(src.id_column)).from_(table_ref(src))))]
    if len(ids) < 2:
        raise InvalidParameter(f"the indexed table {src.table!r} has {len(ids)} rows: too few to evaluate a search")
    top = min(top, len(ids) - 1)
    rng = np.random.default_rng(seed)
    picked = [ids[i] for i in sorted(rng.choice(len(ids), size=min(queries, len(ids)), replace=False))]
    sweep_scratch_tables(db, src.schema)  # the samples killed evaluations left (issue 42)
    sample = scratch_name("eval")
    target = output_table(src, sample)
    rows = exp.select(exp.Star()).from_(table_ref(src))
    rows = rows.where(exp.In(this=col(src.id_column), expressions=[exp.convert(v) for v in picked]))
    sweep: list[tuple[int | None, int | None]] = [(None, None)] if idx.calibration is not None else []
    sweep += [(idx.probes, max(int(c), top + 1)) for c in (candidates or default_candidates(top + 1, len(ids)))]
    sweep.append((idx.lists, len(ids)))  # everything: the exact answer
    try:
        db.execute(dialect.render(exp.Create(this=target, kind="TABLE", expression=rows)))
        records, exact_seconds = _sweep(db, idx, sample, top, sweep)
    finally:
        db.execute(dialect.render(exp.Drop(tables=[target], kind="TABLE", exists=True)))
    table = pd.DataFrame(records, columns=["probes", "candidates", f"recall_at_{top}", "seconds"])
    report = SearchReport(index, top, len(picked), metric, table, exact_seconds)
    if idx.calibration is not None:
        report.calibration = idx.calibration.curve_text()
    if out is not None:
        report.files = write_search_report(report, out)
    return report


def _sweep(
    db: Backend, idx: Index, sample: str, top: int, sweep: list[tuple[int | None, int | None]]
) -> tuple[list[tuple], float]:
    """The exact search of the ``sample`` table's rows (its seconds), then one search per ``(probes,
    candidates)`` of ``sweep`` (``None``: the index's default): its recall against the exact one and
    its seconds."""
    src = idx.source
    start = time.perf_counter()
    exact = search(db, idx.name, sample, src.id_column, top=top + 1, schema=src.schema, exact=True)
    exact_seconds = time.perf_counter() - start
    truth = _without_self(exact, top)
    records = []
    for probes, c in sweep:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fewer than K found: it shows in the recall
            found = search(
                db, idx.name, sample, src.id_column, top=top + 1, candidates=c, probes=probes, schema=src.schema
            )
        seconds = time.perf_counter() - start
        setting = "defaults" if probes is None else f"{probes}"
        shown = c if c is not None else idx.calibration.default_candidates(top + 1)
        records.append((setting, shown, result_recall(_without_self(found, top), truth), seconds))
    return records, exact_seconds


#: the files :func:`write_search_report` writes into its folder
REPORT_FILES = ("search_metrics.csv", "search_metrics.json", "recall_vs_candidates.png")


def write_search_report(report: SearchReport, out: str | Path) -> list[str]:
    """``search_metrics.csv`` / ``.json`` and ``recall_vs_candidates.png`` in the folder ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(out)
    with replacing(folder / "search_metrics.csv") as tmp:  # each file whole or not at all (issue 42)
        report.table.to_csv(tmp, index=False)
    meta = {
        "index": report.index,
        "top": report.top,
        "queries": report.queries,
        "metric": report.metric,
        "exact_seconds": report.exact_seconds,
        "calibration": report.calibration,
        "sweep": report.table.to_dict(orient="records"),
    }
    with replacing(folder / "search_metrics.json") as tmp:
        tmp.write_text(json.dumps(meta, indent=2))
    fig, ax = plt.subplots(figsize=(6, 4))
    at_default = report.table.iloc[:-1]
    at_default = at_default[at_default["probes"] != "defaults"]
    recall = at_default[f"recall_at_{report.top}"]
    ax.plot(at_default["candidates"], recall, "o-", label=f"{report.index}, default probes")
    ax.axhline(0.9, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("candidates re-ranked per query (C)")
    ax.set_ylabel(f"Recall@{report.top} against exact k-NN")
    ax.set_title(f"{report.queries} sampled queries, {report.metric}")
    ax.legend()
    fig.tight_layout()
    with replacing(folder / "recall_vs_candidates.png") as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return [str(folder / n) for n in ("search_metrics.csv", "search_metrics.json", "recall_vs_candidates.png")]


__all__ = ["SearchReport", "default_candidates", "evaluate_search", "write_search_report"]
