"""The acceptance check of the kernel methods, on both backends: P-RP (m = 30) and PK-RP (degree 2 and
3, t = 30, p = 6000) at k = 160 on standardised digits, projected in DuckDB and in a throw-away
PostgreSQL server (or ``--pg-url``); prints each method's mean distortion in its kernel's feature space
(from the SQL output), the JL floor, and how far the two databases' outputs differ.

    python examples/kernels_duckdb_vs_postgres.py [--rows 500] [--seeds 1,2,3] [--pg-url URL]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

import sqlrp
from sqlrp.kernels import kernel_distortion
from sqlrp.methods import expected_distortion, make_projection

CASES = [
    ("p-rp", {"m": 30}),
    ("pk-rp", {"degree": 2, "t": 30, "p": 6000}),
    ("pk-rp", {"degree": 3, "t": 30, "p": 6000}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--k", type=int, default=160)
    parser.add_argument("--pg-url", help="an existing PostgreSQL server (default: start a throw-away one)")
    args = parser.parse_args()
    X = StandardScaler().fit_transform(load_digits().data)[: args.rows]
    frame = pd.DataFrame(X, columns=[f"pixel {i}" for i in range(X.shape[1])])
    frame.insert(0, "id", np.arange(len(X)))
    server = None
    url = args.pg_url
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from pgserver import TempPostgres

        server = TempPostgres()
        url = server.start()
    try:
        dbs = {"duckdb": sqlrp.connect(), "postgres": sqlrp.connect(url)}
        for db in dbs.values():
            db.write_dataframe("digits", frame, replace=True)
        floor = expected_distortion(args.k)
        print(f"standardised digits, {len(X)} rows, k = {args.k}, JL floor {floor:.3f}")
        for method, params in CASES:
            for seed in [int(s) for s in args.seeds.split(",")]:
                proj = make_projection(method, X.shape[1], args.k, seed=seed, **params)
                outs, secs = {}, {}
                for name, db in dbs.items():
                    t0 = time.perf_counter()
                    out = sqlrp.project(db, "digits", "id", proj)
                    secs[name] = time.perf_counter() - t0
                    outs[name] = out.drop(columns="id").to_numpy(dtype=float)
                dist = kernel_distortion(X, outs["duckdb"], degree=params.get("degree", 2))
                diff = np.abs(outs["duckdb"] - outs["postgres"]).max() / np.abs(outs["duckdb"]).max()
                print(
                    f"{method:6s} {params}  seed {seed}: distortion {dist:.3f} ({dist / floor:.2f}x floor)  "
                    f"DuckDB {secs['duckdb']:.1f} s, PostgreSQL {secs['postgres']:.1f} s, max rel diff {diff:.1e}"
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
