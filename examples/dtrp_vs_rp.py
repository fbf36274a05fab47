"""Evidence: data-tuned RP (DT-RP) against plain sparse RP and against "best of n RPs".

Reproduces the shape of 002 Fig. 2 / Table 3 on data bundled with scikit-learn (no network):

1. Recall@5 over many runs for training sets of 50, 100, 200, 500 rows (box plot): each run draws a
   training set from the training pool, tunes with DT-RP (4,000 iterations, s = sqrt(d)) starting
   from the run's own Achlioptas matrix, and measures Recall@5 of 200 held-out queries searched in a
   held-out database, for the starting RP and for the tuned matrix.
2. DT-RP against best-of-n at matched time (n = 500 training rows): best-of-n draws as many matrices
   as fit in DT-RP's wall time.
3. DT-RP wall time at the paper's size: n = 500, d = 784, k = 200, 4,000 iterations (synthetic
   MNIST-like data).

    python examples/dtrp_vs_rp.py --out dtrp_evidence [--runs 20] [--datasets digits,breast_cancer]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sqlrp.evaluation import recall_at_k
from sqlrp.methods.linear import achlioptas
from sqlrp.methods.tuning import best_of_n, tune_matrix


def load(name: str) -> tuple[np.ndarray, int]:
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    if name == "digits":
        return datasets.load_digits().data.astype(float), 16  # d = 64 -> k = 16
    if name == "breast_cancer":
        X = StandardScaler().fit_transform(datasets.load_breast_cancer().data)  # features differ by 1e4 in scale
        return X, 8  # d = 30 -> k = 8
    raise SystemExit(f"unknown dataset {name!r}")


def recall(R: np.ndarray, s: float, X: np.ndarray, q: np.ndarray, db: np.ndarray) -> float:
    Y = X @ R * math.sqrt(s / R.shape[1])
    return float(recall_at_k(X[q], X[db], Y[q], Y[db], 5))


def training_size_runs(name: str, runs: int, iterations: int, sizes: list[int]) -> pd.DataFrame:
    X, k = load(name)
    n_all, d = X.shape
    split = np.random.default_rng(12345).permutation(n_all)
    n_test = min(1000, n_all // 2)
    test, pool = split[:n_test], split[n_test:]
    n_q = n_test // 5
    queries, database = test[:n_q], test[n_q:]
    rows = []
    for n in sizes:
        if n > len(pool):
            print(f"  {name}: skip n = {n} (training pool has {len(pool)} rows)")
            continue
        for run in range(runs):
            rng = np.random.default_rng([run, n])
            train = rng.choice(pool, size=n, replace=False)
            seed = 1000 * n + run
            res = tune_matrix(X[train], k, s="auto", iterations=iterations, seed=seed)
            R0 = achlioptas(d, k, s=res.s, seed=seed).linear.dense()
            rows.append(
                {
                    "dataset": name,
                    "n": n,
                    "run": run,
                    "method": "RP",
                    "recall@5": recall(R0, res.s, X, queries, database),
                }
            )
            rows.append(
                {
                    "dataset": name,
                    "n": n,
                    "run": run,
                    "method": "DT-RP",
                    "recall@5": recall(res.R, res.s, X, queries, database),
                    "seconds": res.seconds,
                    "loss_before": res.initial_loss,
                    "loss_after": res.loss,
                }
            )
        print(f"  {name}: n = {n} done ({runs} runs)")
    return pd.DataFrame(rows)


def matched_time(name: str, runs: int, iterations: int, n: int = 500) -> pd.DataFrame:
    X, k = load(name)
    n_all, d = X.shape
    split = np.random.default_rng(12345).permutation(n_all)
    n_test = min(1000, n_all // 2)
    test, pool = split[:n_test], split[n_test:]
    n = min(n, len(pool))
    queries, database = test[: n_test // 5], test[n_test // 5 :]
    rows = []
    for run in range(runs):
        train = np.random.default_rng([run, 77]).choice(pool, size=n, replace=False)
        dt = tune_matrix(X[train], k, iterations=iterations, seed=run)
        bo = best_of_n(X[train], k, n=None, seed=10_000 * (run + 1), time_budget=dt.seconds)
        rows.append(
            {
                "dataset": name,
                "run": run,
                "dtrp_recall@5": recall(dt.R, dt.s, X, queries, database),
                "dtrp_seconds": dt.seconds,
                "dtrp_loss": dt.loss,
                "bestofn_recall@5": recall(bo.R, bo.s, X, queries, database),
                "bestofn_seconds": bo.seconds,
                "bestofn_draws": bo.iterations,
                "bestofn_loss": bo.loss,
            }
        )
    return pd.DataFrame(rows)


def paper_size_timing(repeats: int = 3) -> list[float]:
    rng = np.random.default_rng(0)
    n, d = 500, 784
    # MNIST-like: non-negative, sparse (about 19% non-zero), low-rank strokes, values 0..255
    Z = rng.standard_normal((n, 30))
    B = rng.standard_normal((30, d)) * (rng.random(d) < 0.8)
    X = np.clip(Z @ B, 0, None)
    X = np.minimum(255, X / X.max() * 600).round()
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        tune_matrix(X, 200, s="auto", iterations=4000, seed=r)
        times.append(time.perf_counter() - t0)
    return times


def box_plot(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(frame["dataset"]))
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        sub = frame[frame["dataset"] == name]
        sizes = sorted(sub["n"].unique())
        data, labels, colors = [], [], []
        rp_all = sub[sub["method"] == "RP"]["recall@5"].to_numpy()
        data.append(rp_all)
        labels.append("RP")
        colors.append("#bbbbbb")
        for n in sizes:
            data.append(sub[(sub["n"] == n) & (sub["method"] == "DT-RP")]["recall@5"].to_numpy())
            labels.append(f"DT-RP\nn={n}")
            colors.append("#4477aa")
        box = ax.boxplot(data, patch_artist=True)
        for patch, c in zip(box["boxes"], colors, strict=True):
            patch.set_facecolor(c)
        ax.set_xticks(range(1, len(labels) + 1), labels)
        ax.set_ylabel("Recall@5 (held-out queries)")
        ax.set_title(f"{name}: DT-RP vs RP ({len(rp_all)} RP runs)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="dtrp_evidence")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--datasets", default="digits,breast_cancer")
    parser.add_argument("--sizes", default="50,100,200,500")
    parser.add_argument("--matched-runs", type=int, default=10)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")]
    pd.set_option("display.width", 160)

    frames = [training_size_runs(name, args.runs, args.iterations, sizes) for name in args.datasets.split(",")]
    runs = pd.concat(frames, ignore_index=True)
    runs.to_csv(out / "recall_runs.csv", index=False)
    box_plot(runs, out / "recall_boxplot.png")
    table = runs.pivot_table(index=["dataset", "n"], columns="method", values="recall@5", aggfunc=["mean", "std"])
    wins = (
        runs.pivot_table(index=["dataset", "n", "run"], columns="method", values="recall@5")
        .eval("win = `DT-RP` > RP")
        .groupby(level=[0, 1])["win"]
        .mean()
    )
    table[("DT-RP wins", "share of runs")] = wins
    print("\nRecall@5, mean and std over runs (RP = the run's starting matrix):")
    print(table.round(4).to_string())

    matched = pd.concat([matched_time(name, args.matched_runs, args.iterations) for name in args.datasets.split(",")])
    matched.to_csv(out / "matched_time.csv", index=False)
    print("\nDT-RP vs best-of-n at matched wall time (n = 500 training rows, or the whole pool):")
    print(matched.groupby("dataset").mean(numeric_only=True).drop(columns="run").round(4).to_string())

    times = paper_size_timing()
    print(f"\nDT-RP wall time, n=500 d=784 k=200, 4000 iterations: {', '.join(f'{t:.2f}' for t in times)} s")
    (out / "timing.txt").write_text("\n".join(f"{t:.3f}" for t in times) + "\n")
    print(f"\nwrote {out / 'recall_runs.csv'}, {out / 'recall_boxplot.png'}, {out / 'matched_time.csv'}")


if __name__ == "__main__":
    main()
