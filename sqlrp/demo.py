"""``sqlrp demo``: project a real bundled dataset (the UCI digits, 1,797 x 64, :mod:`sqlrp.datasets`)
inside a database (a DuckDB file by default; any ``--db``) for several k and compare the mean pairwise
distortion with the JL floor."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from .api import create_projection, project
from .backends import connect
from .core.lazy import pd
from .core.params import positive_ints
from .datasets import load_digits
from .evaluation.metrics import mean_distortion
from .methods import expected_distortion


def run_demo(
    db_path: str = "sqlrp_demo.duckdb",
    ks: Sequence[int] = (20, 40, 80, 160),
    seeds: Sequence[int] = (0, 1, 2),
    s: str | float = "auto",
    echo: Callable[[str], object] = print,
) -> pd.DataFrame:
    """Load digits into ``db_path``, project it in SQL for each k and seed, and report distortion.

    :param db_path: the database to write into: a DuckDB file path or any URL :func:`sqlrp.connect` takes.
        The table ``digits``, one ``digits_rp_k<k>`` per k and the projections ``demo_digits_k<k>_seed<seed>``
        are (re)written there.
    :param ks: the output dimensions to try.
    :param seeds: the seeds of each k's projections; the distortion is averaged over them.
    :param s: the Achlioptas sparsity (``auto``: ``sqrt(d)``, 8 for the 64 features).
    :param echo: where the progress and the table are printed (a function of one string).
    :returns: one row per k: ``k``, ``mean_distortion``, ``sd_over_seeds``, ``jl_floor``
        (:func:`sqlrp.expected_distortion`) and ``sql_seconds`` (the mean time of one projection in SQL).
    """
    ks = positive_ints("ks", ks)  # before the file is made (sqlrp.core.params)
    X, _ = load_digits()
    frame = pd.DataFrame(X, columns=[f"pixel_{i}" for i in range(X.shape[1])])
    frame.insert(0, "id", np.arange(len(X), dtype=np.int64))
    rows, drawn = [], s
    with connect(db_path) as db:
        registration = type(db).registration
        engine = registration.name if registration is not None else db.dialect
        where = f"{engine} {db.url}"
        echo(f"sqlrp demo: scikit-learn digits ({X.shape[0]} rows x {X.shape[1]} features) -> {where}")
        db.write_dataframe("digits", frame, replace=True)
        for k in ks:
            dist, secs = [], []
            for seed in seeds:
                name = f"demo_digits_k{k}_seed{seed}"
                stored = create_projection(db, name, "achlioptas", d=X.shape[1], k=k, seed=seed, s=s, replace=True)
                drawn = stored.params.get("s", s)  # auto with no table to measure: sqrt(d)
                t0 = time.perf_counter()
                project(db, "digits", "id", name, into=f"digits_rp_k{k}", replace=True)
                secs.append(time.perf_counter() - t0)
                Y = db.query_df(f'SELECT * FROM "digits_rp_k{k}" ORDER BY id').drop(columns="id").to_numpy()
                dist.append(mean_distortion(X, Y))
            rows.append(
                {
                    "k": k,
                    "mean_distortion": float(np.mean(dist)),
                    "sd_over_seeds": float(np.std(dist)),
                    "jl_floor": expected_distortion(k),
                    "sql_seconds": float(np.mean(secs)),
                }
            )
    report = pd.DataFrame(rows)
    echo(report.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    written = ", ".join(["digits", *(f"digits_rp_k{k}" for k in ks)])
    shown = f"auto (sqrt(d) = {float(drawn):g})" if s == "auto" else s
    echo(
        f"(mean over seeds {list(seeds)}; s = {shown}; wrote the tables {written} and {len(ks) * len(seeds)} stored "
        f"projections demo_digits_k*_seed* to {where})"
    )
    return report
