"""Small tables, interactively (issue 24): kernel projections through the CLI against a linear one, and
DuckDB's strategies for small wide tables.

    PYTHONPATH=. python bench/small_tables.py             # both parts, ~5 min on 2 shared cores
    PYTHONPATH=. python bench/small_tables.py --smoke     # tiny sizes, one run each (~30 s)
    PYTHONPATH=. python bench/small_tables.py --only cli  # or: strategies, fit

``cli``: wall time of ``sqlrp project --into`` as a user runs it (a new process each, so imports and
start-up count; best of ``--runs``) on a ~200 x 500 table of a DuckDB file, k = 160: linear
(Achlioptas, its defaults), P-RP m = 10 and PK-RP degree 2 (their defaults), each with the strategy
``auto`` picks (``list_transform`` on all three at this size), then the kernels with ``--strategy
lookup`` (``auto``'s choice before it); ratios to the linear projection measured in the same run.
Then ``python -c "import sqlrp.cli"``: the start-up every command pays.

``strategies``: PK-RP degree 2, d = 784, k = 160 (p = 3,200) of a stored projection into a table
(``sqlrp.project(..., into=...)``, best of ``--runs``) at 189, 2,000 and 5,000 rows: ``list_transform``
against ``lookup`` (the table unnested) and ``inline``, and what ``auto`` picks.

``fit``: the list_transform time of several matrices and row counts, the figures behind the
constants of ``sqlrp/compiler/strategies.py`` (:func:`~sqlrp.compiler.strategies.list_transform_seconds`).

Timings are wall seconds on a machine shared with other work: compare ratios within one run.
Nothing is asserted.  One run (``--runs 3``, 2 cores shared with other sessions' tests):

    CLI 200 x 500 -> 160: linear 1.08 s; P-RP m = 10 1.13 s (1.05x); PK-RP degree 2 1.47 s (1.36x);
    with lookup, auto's choice before: P-RP 1.45 s (1.34x), PK-RP 1.84 s (1.71x); start-up 0.18 s.
    Of PK-RP's 1.86 s under cProfile, 0.98 s is the kurtosis scan that picks s (``sqlrp/pipeline/moments.py``,
    which the linear default runs too) and 0.31 s the projection's SQL.
    PK-RP d = 784, k = 160 into a table, list_transform / lookup / inline: 189 rows 0.55 / 0.96 /
    3.13 s; 2,000 rows 2.80 / 5.85 / 3.66 s; 5,000 rows 6.54 / 13.71 / 4.00 s (auto: list_transform,
    list_transform, inline).

After the kurtosis scan became one statement on DuckDB (2026-11-25 10:15, idle machine, ``--runs 3``):
the linear projection fell to 0.68 s, so the kernels' ratios rose although their own times did not:
P-RP m = 10 1.18 s (1.72x), PK-RP degree 2 1.03 s (1.50x); start-up 0.22 s.  Of P-RP's run, the
projection's statement is 0.61 s and saving its 3,200-vector matrix in the registry 0.18 s.

After the dense weight rows were bound to the statement instead of written into it as a 1.7 MB string
(``sqlrp/compiler/lists.py``, :func:`~sqlrp.compiler.lists.binding`; 2026-11-25 10:50, idle machine,
``PYTHONPATH=. python bench/small_tables.py --only cli --runs 5``): linear 0.82 s; P-RP m = 10 1.03 s
(1.26x); PK-RP degree 2 1.08 s (1.31x); with lookup 1.64 s and 1.64 s; start-up 0.24 s.  P-RP's statement
fell from 0.62 s to 0.27 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

import sqlrp
from sqlrp import api
from sqlrp.compiler.strategies import choose


def best(fn: Callable[[], object], runs: int) -> float:
    """The fastest of ``runs`` wall times of ``fn`` (the machine is shared)."""
    spent = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - start)
    return min(spent)


def table(rows: int, d: int, seed: int = 0) -> pd.DataFrame:
    """Standard normal features ``f0 .. f{d-1}`` and an ``id``."""
    X = np.random.default_rng(seed).standard_normal((rows, d))
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(rows, dtype=np.int64))
    return frame


def cli(rows: int, d: int, k: int, runs: int) -> None:
    """Wall seconds of ``sqlrp project`` (new process each) per method, and the ratio to linear."""
    folder = Path(tempfile.mkdtemp())
    path = folder / "small.duckdb"
    db = sqlrp.connect(str(path))
    db.write_dataframe("t", table(rows, d))
    db.close()
    print(f"CLI: sqlrp project --into, {rows} x {d} -> k = {k} in a DuckDB file, wall seconds, best of {runs}")
    prp, pkrp = ["--method", "p-rp", "--m", "10"], ["--method", "pk-rp", "--degree", "2"]
    methods = (
        ("linear", []),
        ("p-rp m=10", prp),
        ("pk-rp deg 2", pkrp),
        ("p-rp, lookup", [*prp, "--strategy", "lookup"]),  # what auto picked before list_transform
        ("pk-rp, lookup", [*pkrp, "--strategy", "lookup"]),
    )
    base = None
    for label, extra in methods:
        command = [sys.executable, "-m", "sqlrp", "project", "--db", str(path), "--table", "t", "--id-column", "id",
                   "--k", str(k), "--into", "o", "--replace", "--no-progress", *extra]
        subprocess.run(command, check=True, capture_output=True)  # warm the page cache, check it runs
        spent = best(lambda c=command: subprocess.run(c, check=True, capture_output=True), runs)
        base = base or spent
        print(f"  {label:14s} {spent:6.2f} s  {spent / base:5.2f}x linear")
    start = best(lambda: subprocess.run([sys.executable, "-c", "import sqlrp.cli"], check=True), runs)
    print(f"  start-up (python -c 'import sqlrp.cli'): {start:.2f} s")


def strategies(row_counts: tuple[int, ...], d: int, k: int, runs: int) -> None:
    """PK-RP degree 2 into a table: list_transform vs lookup vs inline, seconds and auto's choice."""
    print(f"DuckDB, PK-RP degree 2, d = {d}, k = {k}, stored, into a table: seconds, best of {runs}")
    for rows in row_counts:
        db = sqlrp.connect(threads=2)
        db.write_dataframe("t", table(rows, d))
        proj = sqlrp.create_projection(db, "pk", "pk-rp", d=d, k=k, seed=0, degree=2)
        plan = sqlrp.plan(db, "t", "id", "pk")
        picked = choose(proj, plan.source, "duckdb", matrix="registry")
        spent = {}
        for strategy in ("list_transform", "lookup", "inline"):
            spent[strategy] = best(
                lambda st=strategy, b=db: api.project(b, "t", "id", "pk", into="o", replace=True, strategy=st), runs
            )
        fastest = min(spent, key=spent.get)
        print(f"  rows {rows:5,d}  p {proj.linear.p:5,d}  nnz {proj.linear.nnz:7,d}  "
              + "  ".join(f"{s} {t:6.2f}" for s, t in spent.items())
              + f"  fastest {fastest}, auto picks {picked}")
        db.close()


FIT_CASES = (
    ("pk-rp", 784, 160, {"degree": 2}),
    ("pk-rp", 500, 160, {"degree": 2}),
    ("p-rp", 500, 160, {"m": 10}),
    ("achlioptas", 500, 160, {"s": 3}),
    ("pk-rp", 100, 64, {"degree": 2, "t": 4}),
)


def fit(row_counts: tuple[int, ...], runs: int) -> None:
    """list_transform and inline seconds (into a table, check off) over matrices and row counts."""
    print(f"DuckDB into a table, check off: seconds, best of {runs}")
    for rows in row_counts:
        db = sqlrp.connect(threads=2)
        for method, d, k, params in FIT_CASES:
            db.write_dataframe("t", table(rows, d), replace=True)
            proj = sqlrp.make_projection(method, d, k, seed=0, **params)
            spent = {}
            for strategy in ("list_transform", "inline"):
                spent[strategy] = best(
                    lambda st=strategy, b=db, p=proj: api.project(b, "t", "id", p, into="o", replace=True,
                                                                  strategy=st, check=False),
                    runs,
                )
            print(f"  rows {rows:5,d}  {method:10s} d {d:4d}  p {proj.linear.p:5,d}  nnz {proj.linear.nnz:7,d}  "
                  + "  ".join(f"{s} {t:6.2f}" for s, t in spent.items()))
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run each")
    parser.add_argument("--only", choices=("cli", "strategies", "fit"), help="one part only")
    parser.add_argument("--runs", type=int, default=2, help="runs per timing (the best is kept)")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    if args.only in (None, "cli"):
        cli(*((40, 50, 16) if args.smoke else (200, 500, 160)), runs=runs)
    if args.only in (None, "strategies"):
        strategies((40,) if args.smoke else (189, 2000, 5000), *((50, 16) if args.smoke else (784, 160)), runs=runs)
    if args.only == "fit":
        fit((40,) if args.smoke else (189, 1000, 3000), runs=runs)


if __name__ == "__main__":
    main()
