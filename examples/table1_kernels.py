"""Re-run the shape of Table 1 of López-Sánchez et al. (``../shared/seeds/000_c47bc8cab23513e9.txt``)
on bundled real data, with every projection computed by SQL inside DuckDB.

For each dataset (standardised; ``n`` random samples, as the paper's 200) and k = 40, 80, 120, 160:
mean pairwise distortion of squared distances in the degree-g polynomial kernel's feature space
(000 Eq. 22, feature-space distances by the kernel trick, Eq. 23) for

- explicit phi + RP: ``phi(X)`` (000 Eq. 7) written to DuckDB as a long table, projected by an
  Achlioptas RP in SQL (join with the stored matrix) -- the paper's "explicit approach"; s = 3 for
  degree 2, s = sqrt(dim phi) for degree 3 (dim phi = 45,760 for digits: s = 3 would join ~0.5 G rows);
- P-RP with m = 1, 2, 10, 30 (degree 2, s = 3);
- PK-RP with several t (p = 6000, balanced index, s = 3), degree 2 and 3.

Mean and standard deviation over seeds; wall times (generate + SQL) per cell.  Writes
``table1_<dataset>.csv`` and ``table1_<dataset>.png`` (distortion against k, and at k = 160 against
m / t) into the folder given on the command line.

    python examples/table1_kernels.py out/ --datasets digits,breast_cancer --seeds 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.methods import expected_distortion, make_projection
from sqlrp.methods.distortion import kernel_distortion
from sqlrp.methods.kernels import explicit_feature_map

KS = (40, 80, 120, 160)


def load(name: str, n: int, seed: int) -> np.ndarray:
    from sklearn import datasets

    X = getattr(datasets, f"load_{name}")().data.astype(float)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    rng = np.random.default_rng(seed)
    return X[rng.choice(len(X), min(n, len(X)), replace=False)]


def sql_project(db, table: str, proj, layout: str = "wide") -> np.ndarray:
    options = {"layout": layout}
    out = sqlrp.project(db, table, "id", proj, check=False, **options)
    return out.iloc[:, 1:].to_numpy(dtype=float)


def configurations(degree: int, ts: list[int]) -> list[tuple[str, str, dict]]:
    rows: list[tuple[str, str, dict]] = [(f"phi(.)+RP g={degree}", "explicit", {"degree": degree})]
    if degree == 2:
        rows += [(f"P-RP (m={m})", "p-rp", {"m": m}) for m in (1, 2, 10, 30)]
    rows += [(f"PK-RP g={degree} (t={t})", "pk-rp", {"degree": degree, "t": t, "p": 6000}) for t in ts]
    return rows


def run_dataset(name: str, args: argparse.Namespace, db) -> pd.DataFrame:
    records = []
    for seed in range(args.seeds):
        X = load(name, args.n, seed)
        n, d = X.shape
        db.write_dataframe("x", pd.DataFrame(X, columns=[f"f{i}" for i in range(d)]).assign(id=np.arange(n)))
        phis = {}
        for degree in (2, 3):
            phi = explicit_feature_map(X, degree=degree)
            rows, cols = np.nonzero(phi)
            long = pd.DataFrame({"id": rows, "feature": cols, "value": phi[rows, cols]})
            db.write_dataframe(f"phi{degree}", long, replace=True)
            phis[degree] = phi.shape[1]
        for degree in (2, 3):
            for label, method, params in configurations(degree, args.t):
                for k in KS:
                    t0 = time.perf_counter()
                    if method == "explicit":
                        # stored, so the long layout joins the registry's matrix rows (no inlined VALUES)
                        s = 3 if degree == 2 else "auto"
                        stored = f"explicit_g{degree}_k{k}"
                        sqlrp.create_projection(db, stored, "achlioptas", phis[degree], k, seed=seed, s=s, replace=True)
                        Y = sql_project(db, f"phi{degree}", stored, layout="long")
                    else:
                        proj = make_projection(method, d, k, seed=seed, **params)
                        Y = sql_project(db, "x", proj)
                    seconds = time.perf_counter() - t0
                    dist = kernel_distortion(X, Y, degree=degree)
                    records.append(
                        {"dataset": name, "method": label, "k": k, "seed": seed, "distortion": dist, "seconds": seconds}
                    )
                    print(f"{name} seed={seed} {label:22s} k={k:3d} {dist:.3f} {seconds:6.2f}s", file=sys.stderr)
        db.execute('DROP TABLE "x"')
    return pd.DataFrame(records)


def table(frame: pd.DataFrame) -> pd.DataFrame:
    g = frame.groupby(["method", "k"], sort=False)
    cell = g["distortion"].agg(["mean", "std"]).join(g["seconds"].mean())
    cell["text"] = [
        f"{m:.3f} ± {s:.3f} ({t:.2f}s)"
        for m, s, t in zip(cell["mean"], cell["std"].fillna(0), cell["seconds"], strict=True)
    ]
    return cell["text"].unstack("k")[list(KS)]


def plot(frame: pd.DataFrame, name: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    mean = frame.groupby(["method", "k"], sort=False)["distortion"].mean().unstack("k")
    for method, row in mean.iterrows():
        a.plot(KS, row[list(KS)], marker="o", label=method)
    a.plot(KS, [expected_distortion(k) for k in KS], "k--", label="JL floor E|chi2_k/k - 1|")
    a.set_xlabel("k")
    a.set_ylabel("mean distortion")
    a.set_title(f"{name}: distortion against k (SQL output, DuckDB)")
    a.legend(fontsize=7)
    at160 = frame[frame.k == 160].groupby("method", sort=False)["distortion"].mean()
    prp = at160[at160.index.str.startswith("P-RP")]
    b.plot([int(s.split("=")[1].rstrip(")")) for s in prp.index], prp.values, marker="o", label="P-RP vs m")
    for degree in (2, 3):
        pk = at160[at160.index.str.startswith(f"PK-RP g={degree}")]
        ts = [int(s.split("t=")[1].rstrip(")")) for s in pk.index]
        b.plot(ts, pk.values, marker="s", label=f"PK-RP g={degree} vs t")
    b.axhline(expected_distortion(160), color="k", ls="--", label="JL floor")
    b.set_xscale("log")
    b.set_xlabel("m (P-RP) / t (PK-RP)")
    b.set_title("k = 160")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"table1_{name}.png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the CSV and PNG files")
    parser.add_argument("--datasets", default="digits,breast_cancer")
    parser.add_argument("--n", type=int, default=200, help="samples per dataset (the paper: 200)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--t", default="1,5,30", help="PK-RP values of t")
    args = parser.parse_args(argv)
    args.t = [int(v) for v in args.t.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    db = sqlrp.connect()
    started = time.perf_counter()
    for name in args.datasets.split(","):
        t0 = time.perf_counter()
        frame = run_dataset(name, args, db)
        frame.to_csv(args.out / f"table1_{name}.csv", index=False)
        plot(frame, name, args.out)
        print(f"\n## {name} (standardised, n = {args.n}, {args.seeds} seeds; mean ± std (mean wall time))")
        print(table(frame).to_string())
        print(f"{name}: {time.perf_counter() - t0:.1f} s")
    print("\nJL floor: " + ", ".join(f"k={k}: {expected_distortion(k):.3f}" for k in KS))
    print(f"total wall time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
