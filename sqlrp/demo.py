"""``sqlrp demo``: project a real bundled dataset (the UCI digits, 1,797 x 64, :mod:`sqlrp.datasets`)
inside a database (a DuckDB file by default; any ``--db``) for several k and compare the mean pairwise
distortion with the JL floor."""

from __future__ import annotations

import time
from collections.abc import Sequence

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
    echo=print,
) -> pd.DataFrame:
    """Load digits into ``db_path``, project it in SQL for each k and seed, and report distortion."""
    ks = positive_ints("ks", ks)  # before the file is made (sqlrp.core.params)
    X, _ = load_digits()
    frame = pd.DataFrame(X, columns=[f"pixel_{i}" for i in range(X.shape[1])])
    frame.insert(0, "id", np.arange(len(X), dtype=np.int64))
    rows = []
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
                create_projection(db, name, "achlioptas", d=X.shape[1], k=k, seed=seed, s=s, replace=True)
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
    echo(
        f"(mean over seeds {list(seeds)}; s = {s}; wrote the tables {written} and {len(ks) * len(seeds)} stored "
        f"projections demo_digits_k*_seed* to {where})"
    )
    return report
