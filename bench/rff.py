"""Random Fourier features (issue 44): how well and how fast each choice of directions does, against
scikit-learn's ``RBFSampler``.

    PYTHONPATH=. python bench/rff.py                      # fidelity, then speed (200,000 x 300 -> 256)
    PYTHONPATH=. python bench/rff.py --smoke              # CI size: a few rows, one seed (~20 s)
    PYTHONPATH=. python bench/rff.py --only fidelity      # or: speed
    PYTHONPATH=. python bench/rff.py --only fidelity --seeds 20
    PYTHONPATH=. python bench/rff.py --only speed --rows 200000 --weights signs,structured

``fidelity``: the relative Frobenius error ``||Z Z^T - K||_F / ||K||_F`` of the features against the exact
Gaussian kernel, on 300 rows of scikit-learn's ``load_digits``, ``load_breast_cancer`` and ``load_wine``
(standardised) and of a binary table (Bernoulli(0.1) fingerprints, 512 bits), at ``gamma = 1 / (d Var(X))``
(``"scale"``) and ``k`` = 64, 256, 1024, mean of 5 seeds; every ``weights`` beside ``RBFSampler`` (same
gamma, k and seeds).  The features are computed by the NumPy reference (:func:`sqlrp.transform`), which the
SQL matches to 1e-9 (``tests/projection/test_rff.py``).

``speed``: a ``rows`` x 300 float32 Parquet file to Parquet, ``k = 256``, wall seconds (median of ``--runs``), the
load average beside each line:

- ``sqlrp project --method rff`` as a user runs it (a new process: imports, the variance pass of
  ``gamma="scale"`` when asked, storing nothing: files in, files out), on its default route (printed: ``arrow``,
  the linear sums by BLAS, :mod:`sqlrp.pipeline.arrow_route`, for dense weights) and, where that is not the SQL
  route, again with ``--route sql``;
- the same SQL run by hand: ``sqlrp compile`` prints it, DuckDB's ``COPY (<sql>) TO 'out.parquet'`` runs it;
- ``RBFSampler``: pyarrow read, ``fit_transform``, pyarrow write (float32 out, as sqlrp writes float32 for
  float32 input).

Timings are wall seconds on a machine shared with other work (2 cores): compare ratios within one run.
Nothing is asserted.  Figures of the runs behind the default (``docs/guide/methods.md``, "Random Fourier
features"), 2026-12-02, on 2 cores shared with 7 other sessions (load average 7-18):

``--only fidelity --seeds 20``, kernel error as a ratio to ``RBFSampler``'s over the 12 (table, k) cells:
gaussian 0.94-1.02x, orthogonal 0.87-0.99x (below in every cell), structured 0.91-1.34x (wine, d = 13
padded to 16, k = 1,024: 1.34x), signs 0.97-1.22x (digits k = 1,024: 1.22x).  With 5 seeds: gaussian
0.94-1.06x, orthogonal 0.80-0.995x.

``--only speed --rows 200000 --weights orthogonal,signs`` (200,000 x 300 float32 -> 256), the ratio to
``RBFSampler`` timed just before (its own time swung from 16 to 80 s with the load):

- first run (unpaired, RBFSampler 143 s): orthogonal ``sqlrp project`` 318 s (2.22x), by hand 355 s
  (2.47x); signs 98 s (0.68x), by hand 72 s (0.50x); default weights with ``gamma=scale`` 153 s (1.07x);
- paired: orthogonal ``sqlrp project`` 99.6 s / 79.8 s (1.25x), by hand 116.4 s / 73.1 s (1.59x); signs
  24.8 s / 16.5 s (1.50x), by hand 30.5 s / 31.7 s (0.96x);
- paired, load falling to 5: orthogonal ``sqlrp project`` 83.1 s / 83.1 s (1.00x), by hand 40.5 s / 24.1 s
  (1.68x); signs 14.7 s / 14.1 s (1.04x), by hand 15.0 s / 13.9 s (1.08x).

With the Arrow route (``project --route auto``, :mod:`sqlrp.pipeline.arrow_route`), 2026-12-02, load 5-9:

- ``--only speed --weights orthogonal --runs 3`` (medians): ``sqlrp project`` (default: arrow route) 14.26 s /
  25.35 s (0.56x, load 5.7); ``--route sql`` 46.38 s / 13.66 s (3.40x); by hand 56.29 s / 17.06 s (3.30x);
- ``--only speed`` (one run each): gaussian arrow 1.20x (a test suite beside it), sql 1.94x, by hand 2.76x;
  orthogonal arrow 0.55x, sql 2.88x, by hand 2.02x; structured arrow 0.94x, sql 1.86x, by hand 2.24x; signs
  arrow 1.21x, sql 1.42x, by hand 0.73x.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WEIGHTS = ("gaussian", "orthogonal", "structured", "signs")


def tables(rows: int = 300) -> dict[str, np.ndarray]:
    """The fidelity tables: three standardised real ones and a binary one, ``rows`` rows each."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.preprocessing import StandardScaler

    out = {}
    for name, loader in (("digits", load_digits), ("breast_cancer", load_breast_cancer), ("wine", load_wine)):
        X = loader().data[:rows].astype(np.float64)
        out[name] = StandardScaler().fit_transform(X)
    rng = np.random.default_rng(12)
    out["binary"] = (rng.random((rows, 512)) < 0.1).astype(np.float64)
    return out


def kernel_error(Z: np.ndarray, K: np.ndarray) -> float:
    return float(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))


def fidelity(ks: list[int], seeds: int, rows: int) -> list[dict]:
    """Mean kernel error per table, k and weights (and ``rbfsampler``)."""
    from sklearn.kernel_approximation import RBFSampler

    import sqlrp
    from sqlrp.methods.rff import kernel_matrix

    results = []
    for name, X in tables(rows).items():
        d = X.shape[1]
        gamma = 1.0 / (d * X.var())
        K = kernel_matrix(X, X, "rbf", gamma)
        for k in ks:
            row = {"table": name, "d": d, "k": k}
            for weights in WEIGHTS:
                made = [sqlrp.make_projection("rff", d, k, seed=s, gamma=gamma, weights=weights) for s in range(seeds)]
                errors = [kernel_error(sqlrp.transform(projection, X), K) for projection in made]
                row[weights] = float(np.mean(errors))
            errors = [
                kernel_error(RBFSampler(gamma=gamma, n_components=k, random_state=s).fit_transform(X), K)
                for s in range(seeds)
            ]
            row["rbfsampler"] = float(np.mean(errors))
            results.append(row)
            cells = "  ".join(f"{w} {row[w]:.4f} ({row[w] / row['rbfsampler']:.3f}x)" for w in WEIGHTS)
            print(f"{name:14s} d={d:4d} k={k:5d}  RBFSampler {row['rbfsampler']:.4f}  {cells}", flush=True)
    return results


def _write_input(path: Path, rows: int, d: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, d), dtype=np.float32)
    columns = {"id": pa.array(np.arange(rows, dtype=np.int64))}
    columns.update({f"f{i}": pa.array(X[:, i]) for i in range(d)})
    pq.write_table(pa.table(columns), path)


def _median(run, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def _default_route(src: Path, k: int, weights: str, gamma: float) -> str:
    """The route ``sqlrp project`` takes by default (``route="auto"``) for this file and projection."""
    import sqlrp
    from sqlrp.core.layout import Target
    from sqlrp.pipeline.arrow_route import choose_route

    db = sqlrp.connect("duckdb://")
    try:
        p = sqlrp.plan(db, str(src), "id", method="rff", k=k, weights=weights, gamma=gamma, store=False)
        return choose_route(db, p, Target(into="out.parquet"), False)
    finally:
        db.close()


def _rbfsampler(src: Path, out: Path, k: int, gamma: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sklearn.kernel_approximation import RBFSampler

    table = pq.read_table(src)
    X = np.column_stack([table.column(n).to_numpy() for n in table.column_names[1:]])
    Z = RBFSampler(gamma=gamma, n_components=k, random_state=0).fit_transform(X).astype(np.float32)
    columns = {"id": table.column("id")}
    columns.update({f"p{j}": pa.array(Z[:, j]) for j in range(k)})
    pq.write_table(pa.table(columns), out)


def _cli(src: Path, k: int, *options: str) -> list[str]:
    return [sys.executable, "-m", "sqlrp", "project", "--input", str(src), "--id-column", "id", "--method", "rff",
            "--k", str(k), *options]  # fmt: skip


def speed(rows: int, d: int, k: int, runs: int, weights: list[str], scale: bool = False) -> None:
    """``sqlrp project`` (CLI), its SQL by hand, and ``RBFSampler``, Parquet to Parquet.  ``RBFSampler`` is
    timed again right before each contender and each ratio is to that time: on a shared machine the load
    drifts over minutes, a pair shares it.  ``scale``: the default weights with ``gamma=scale`` too (one
    more pass over the table, for the variance)."""
    import duckdb

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory() as folder:
        src, out = Path(folder, "in.parquet"), Path(folder, "out.parquet")
        _write_input(src, rows, d)
        gamma = 1.0 / d  # "scale" of standard normal data; given, so every contender uses the same

        def cli_run(cli: list[str]) -> None:
            subprocess.run([*cli, "--into", str(out), "--replace"], check=True, env=env, capture_output=True)

        def by_hand(sql: str) -> None:
            out.unlink(missing_ok=True)
            con = duckdb.connect()
            con.execute(f"COPY ({sql.strip().rstrip(';')}) TO '{out}' (FORMAT parquet)")
            con.close()

        def paired(label: str, run) -> None:  # noqa: ANN001
            base = _median(lambda: _rbfsampler(src, out, k, gamma), runs)
            took = _median(run, runs)
            load = os.getloadavg()[0]
            print(
                f"  {label:52s} {took:7.2f} s   RBFSampler just before {base:7.2f} s   {took / base:.2f}x   "
                f"(load {load:.1f})",
                flush=True,
            )

        print(f"{rows:,} x {d} float32 Parquet -> Parquet, k = {k}, median of {runs}:", flush=True)
        for w in weights:
            cli = _cli(src, k, "--weights", w, "--gamma", repr(gamma))
            route = _default_route(src, k, w, gamma)
            paired(f"weights={w}: sqlrp project (default: {route} route)", lambda cli=cli: cli_run(cli))
            if route != "sql":
                sql_cli = [*cli, "--route", "sql"]
                paired(f"weights={w}: sqlrp project --route sql", lambda cli=sql_cli: cli_run(cli))
            sql = subprocess.run(
                [*cli[:3], "compile", *cli[4:]], check=True, env=env, capture_output=True, text=True
            ).stdout
            paired(f"weights={w}: its SQL by hand (DuckDB COPY)", lambda sql=sql: by_hand(sql))
        if scale:
            paired("default weights, gamma=scale: sqlrp project", lambda: cli_run(_cli(src, k, "--gamma", "scale")))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="CI size")
    p.add_argument("--only", choices=["fidelity", "speed"])
    p.add_argument("--rows", type=int, default=200_000, help="speed: rows of the Parquet input")
    p.add_argument("--runs", type=int, default=1, help="speed: the median of this many runs")
    p.add_argument("--weights", default=",".join(WEIGHTS), help="speed: the weights to time")
    p.add_argument("--seeds", type=int, default=5, help="fidelity: the mean over this many seeds")
    p.add_argument("--scale", action="store_true", help="speed: also the default weights with gamma=scale")
    args = p.parse_args(argv)
    ks, seeds, fidelity_rows, rows, d = [64, 256, 1024], args.seeds, 300, args.rows, 300
    if args.smoke:
        ks, seeds, fidelity_rows, rows, d = [16], 1, 40, 2_000, 20
    if args.only in (None, "fidelity"):
        fidelity(ks, seeds, fidelity_rows)
    if args.only in (None, "speed"):
        speed(rows, d, 16 if args.smoke else 256, args.runs, args.weights.split(","), args.scale or args.smoke)


if __name__ == "__main__":
    main()
