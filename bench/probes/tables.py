"""Small and high-dimensional tables, and the round trip through Python."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import sqlrp

from .common import best, wide


def roundtrip(n: int = 200_000, d: int = 784, k: int = 200) -> None:
    """The round trip's parts (s = sqrt(d)), each timed twice: the first touch of new memory is slow
    on this machine.  Fetching as a DataFrame gives a column-major float block for free."""
    from bench.run import make_dense, sklearn_sparse, write_back

    db = sqlrp.connect(threads=2)
    make_dense(db, n, d)
    srp = sklearn_sparse(k, np.sqrt(d), d)
    for attempt in (1, 2):
        t0 = time.perf_counter()
        frame = db.con.execute('SELECT * FROM "t"').df()
        X = frame.drop(columns="id").to_numpy()
        t1 = time.perf_counter()
        Y = srp.transform(X)
        t2 = time.perf_counter()
        write_back(db, frame["id"].to_numpy(), Y)
        t3 = time.perf_counter()
        res = db.con.execute('SELECT * FROM "t"').fetchnumpy()
        Xc = np.empty((n, d), order="F")
        for i in range(d):
            Xc[:, i] = res[f"f{i}"]
        t4 = time.perf_counter()
        print(
            f"  run {attempt}: fetch .df() {t1 - t0:5.2f} s (column-major: {X.flags['F_CONTIGUOUS']})  "
            f"transform {t2 - t1:5.2f} s  write back {t3 - t2:5.2f} s  "
            f"[fetchnumpy + column-by-column copy {t4 - t3:5.2f} s]"
        )
        del frame, X, Y, res, Xc


def small(d: int = 500, k: int = 160) -> None:
    """Small wide tables (issue 12): DuckDB, a stored projection of ``rows`` x d, the inline query
    against the table unnested and looked up (``lookup``), best of 2, for rows from 189 to 2,000 --
    where the join's time per row and non-zero overtakes the inline query's binding time per term.
    Then the CLI end to end (``sqlrp project --into``, new process each, best of 2) on 189 rows:
    linear k = 160 (s = sqrt(d)) against PK-RP degree 2 and P-RP m = 10, with the strategy ``auto``
    picks."""
    import subprocess
    import tempfile

    from sqlrp import api

    print(f"DuckDB, d = {d}, k = {k}: seconds, inline against lookup (the table unnested), best of 2")
    for rows in (189, 700, 2000):
        db = sqlrp.connect(threads=2)
        db.write_dataframe("t", wide(rows, d))
        for method, params in (("pk-rp", {}), ("p-rp", dict(m=10)), ("achlioptas", dict(s=3))):
            proj = sqlrp.create_projection(db, f"{method}_{rows}", method, d=d, k=k, seed=0, **params)
            spent = {}
            for strategy in ("inline", "lookup"):
                spent[strategy] = best(
                    lambda st=strategy, p=proj, b=db: api.project(b, "t", "id", p, strategy=st), runs=2
                )
            print(f"  rows {rows:5d} {method:10s} {proj.linear.nnz:7,d} terms  inline {spent['inline']:6.2f}"
                  f"  lookup {spent['lookup']:6.2f}")
        db.close()
    folder = Path(tempfile.mkdtemp())
    path = folder / "small.duckdb"
    db = sqlrp.connect(str(path))
    db.write_dataframe("t", wide(189, d))
    db.close()
    print(f"CLI, 189 x {d} -> {k} into a table of a DuckDB file, seconds (best of 2, each a new process)")
    base = None
    methods = (("linear", []), ("pk-rp", ["--method", "pk-rp"]), ("p-rp m=10", ["--method", "p-rp", "--m", "10"]))
    for label, extra in methods:
        command = [sys.executable, "-m", "sqlrp", "project", "--db", str(path), "--table", "t", "--id-column", "id",
                   "--k", str(k), "--into", "o", "--replace", "--no-progress", *extra]
        spent = best(lambda c=command: subprocess.run(c, check=True, capture_output=True), runs=2)
        base = base or spent
        print(f"  {label:10s} {spent:5.2f} s  {spent / base:4.1f}x linear")


def highd(rows: int = 64, d: int = 6830, k: int = 160) -> None:
    """Every method with its defaults through the CLI on a ``rows`` x ``d`` table of a DuckDB file
    (issue 12: d = 6,830 like the gene-expression table, peak RSS under 2 GB): standardised 83 x 83
    grey patches of the bundled photographs cut to d columns.  Wall seconds and peak RSS of each
    ``sqlrp project --into`` process (``/usr/bin/time``), and the output checked against NumPy."""
    import subprocess
    import tempfile

    from examples.kernel_frontier import image_patches, standardise
    from testkit.frames import wide_frame

    X = standardise(image_patches(83, rows))[:, :d]
    frame = wide_frame(X)
    path = Path(tempfile.mkdtemp()) / "highd.duckdb"
    db = sqlrp.connect(str(path))
    db.write_dataframe("t", frame)
    db.close()
    print(f"CLI, {rows} x {d} -> k into a DuckDB file: wall seconds, peak RSS, max relative error against NumPy")
    cases = [
        ("achlioptas", []),
        ("p-rp", []),
        ("p-rp", ["--m", "10"]),
        ("p-rp", ["--m", "10", "--k", "40"]),
        ("pk-rp", []),
        ("pk-rp", ["--degree", "3"]),
        ("cbp", []),
        ("maclaurin", []),
        ("craftmap", []),
        ("gaussian", []),
    ]
    for method, extra in cases:
        name = f"{method}{''.join(extra)}".replace("-", "_")
        command = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "sqlrp", "project", "--db", str(path),
                   "--table", "t", "--id-column", "id", "--method", method, "--projection", name,
                   *([] if "--k" in extra else ["--k", str(k)]), *extra, "--into", "o", "--replace", "--no-progress"]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"  {method:10s} {' '.join(extra):18s} FAILED: {done.stderr.strip().splitlines()[-2:]}")
            continue
        wall, rss = done.stderr.strip().splitlines()[-1].split()
        db = sqlrp.connect(str(path))
        proj = sqlrp.load_projection(db, name)
        res = db.con.execute('SELECT * FROM "o" ORDER BY "id"').fetchnumpy()
        db.close()
        Y = np.column_stack([res[c] for c in res if c != "id"])
        R = sqlrp.transform(proj, X)
        error = np.abs(Y - R).max() / max(np.abs(R).max(), 1e-300)
        print(f"  {method:10s} {' '.join(extra):18s} {float(wall):6.2f} s  {int(rss) / 1024:7.0f} MB  {error:.1e}")
