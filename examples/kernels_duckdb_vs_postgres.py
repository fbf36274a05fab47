"""The acceptance check of the kernel methods, on both backends: P-RP (m = 30; also with s = 1, to show
why s = 3 is the default) and PK-RP (degree 2 and 3, t = 30, p = 6000) at k = 160 on standardised
scikit-learn datasets, projected in DuckDB and in a throw-away PostgreSQL server (or ``--pg-url``);
prints each method's mean distortion in its kernel's feature space (from the SQL output), its ratio
to the JL floor, and how far the two databases' outputs differ.

    python examples/kernels_duckdb_vs_postgres.py [--datasets digits,wine] [--rows 500] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn import datasets
from sklearn.preprocessing import StandardScaler

import sqlrp
from sqlrp.methods import expected_distortion, make_projection
from sqlrp.methods.distortion import kernel_distortion

CASES = [
    ("p-rp", {"m": 30}),
    ("p-rp", {"m": 30, "s": 1}),
    ("pk-rp", {"degree": 2, "t": 30, "p": 6000}),
    ("pk-rp", {"degree": 3, "t": 30, "p": 6000}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="digits", help="scikit-learn loaders: digits, wine, breast_cancer...")
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--k", type=int, default=160)
    parser.add_argument("--pg-url", help="an existing PostgreSQL server (default: start a throw-away one)")
    args = parser.parse_args()
    server = None
    url = args.pg_url
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's testkit/
        from testkit.pgserver import TempPostgres

        server = TempPostgres()
        url = server.start()
    try:
        dbs = {"duckdb": sqlrp.connect(), "postgres": sqlrp.connect(url)}
        floor = expected_distortion(args.k)
        for dataset in args.datasets.split(","):
            X = StandardScaler().fit_transform(getattr(datasets, f"load_{dataset}")().data)[: args.rows]
            frame = pd.DataFrame(X, columns=[f"feature {i}" for i in range(X.shape[1])])
            frame.insert(0, "id", np.arange(len(X)))
            for db in dbs.values():
                db.write_dataframe("data", frame, replace=True)
            print(f"standardised {dataset}, {X.shape[0]} rows x {X.shape[1]}, k = {args.k}, JL floor {floor:.3f}")
            for method, params in CASES:
                values = []
                for seed in [int(s) for s in args.seeds.split(",")]:
                    proj = make_projection(method, X.shape[1], args.k, seed=seed, **params)
                    outs, secs = {}, {}
                    for name, db in dbs.items():
                        t0 = time.perf_counter()
                        out = sqlrp.project(db, "data", "id", proj)
                        secs[name] = time.perf_counter() - t0
                        outs[name] = out.drop(columns="id").to_numpy(dtype=float)
                    values.append(kernel_distortion(X, outs["duckdb"], degree=params.get("degree", 2)))
                    diff = np.abs(outs["duckdb"] - outs["postgres"]).max() / np.abs(outs["duckdb"]).max()
                    print(
                        f"  {method:6s} {params}  seed {seed}: distortion {values[-1]:.3f}  "
                        f"DuckDB {secs['duckdb']:.1f} s, PostgreSQL {secs['postgres']:.1f} s, max rel diff {diff:.1e}"
                    )
                print(f"  {method:6s} {params}  mean {np.mean(values):.3f} = {np.mean(values) / floor:.2f}x floor")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
