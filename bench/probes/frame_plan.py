"""A DataFrame projected directly against the same rows written to a DuckDB table first: the strategy each
route chooses and its wall time (``PYTHONPATH=. python bench/probes/frame_plan.py [rows] [d] [k] [method]``).

Measured (2 shared cores, load 2-3), 50,000 x 300, k = 256: before the fix the frame planned ``inline``
(no row estimate for a registered view) where the table planned ``list_transform``: gaussian 31.7 s
against 4.9 s, rff 30.0 s against 5.1 s; after, both ``list_transform``: 5.4 s / 6.6 s and 5.8 s / 7.6 s
(frame / table)."""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.core.layout import Formulation
from sqlrp.pipeline.plan import decide, plan


def strategy(db, table: str, projection) -> str:
    """The strategy ``auto`` decides for ``projection`` over ``table`` (its row estimate included)."""
    return decide(db, plan(db, table, "id", projection, store=False), Formulation()).how.strategy


def main(n: int = 50_000, d: int = 300, k: int = 256, method: str = "gaussian") -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.standard_normal((n, d)), columns=[f"x{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    projection = sqlrp.create_projection(
        None, None, method, d, k, seed=1, **({"gamma": 1.0 / d} if method == "rff" else {})
    )
    db = sqlrp.connect("duckdb:///:memory:")
    db.write_dataframe("t", frame)
    with db.frame_table(frame) as name:
        print(f"rows estimated: table {db.estimate_rows('t')}, frame {db.estimate_rows(name)}")
        print(f"strategy: table {strategy(db, 't', projection)}, frame {strategy(db, name, projection)}")
    ref = sqlrp.methods.reference.transform(projection, frame.drop(columns="id").to_numpy())
    for label, table in (("table", "t"), ("frame", frame)):
        start = time.perf_counter()
        out = sqlrp.project(db, table, "id", projection)
        seconds = time.perf_counter() - start
        err = np.abs(out.drop(columns="id").to_numpy() - ref).max() / np.abs(ref).max()
        print(f"{label}: {seconds:.2f} s, max relative error {err:.1e}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:3]), *args[3:4])
