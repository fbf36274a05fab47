"""One-off measurements behind statements in the README, docstrings and notes (not part of run.py).

    PYTHONPATH=. python bench/probes.py planning     # DuckDB planning of a big kernel projection, CSE on/off
    PYTHONPATH=. python bench/probes.py pg-array     # PostgreSQL array layout: detoast and fence variants
    PYTHONPATH=. python bench/probes.py scatter      # DuckDB cost of sums over scattered vs few columns
    PYTHONPATH=. python bench/probes.py dtrp         # DT-RP wall time, n=500, d=784, k=200, 4000 iterations
    PYTHONPATH=. python bench/probes.py pairs        # additions per row: inline vs the pairs plan, planning time

Each prints seconds measured in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import sqlrp  # noqa: E402
from sqlrp.compiler import compile_sql  # noqa: E402
from sqlrp.methods import make_projection  # noqa: E402


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def wide(n: int, d: int, seed: int = 0) -> pd.DataFrame:
    X = np.random.default_rng(seed).standard_normal((n, d))
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    return frame


def planning() -> None:
    """P-RP m = 30, k = 160 on 200 rows x 64: compile time, then EXPLAIN (planning only) with DuckDB's
    common-subexpression pass on and off, then the whole projection as sqlrp runs it."""
    db = sqlrp.connect()
    db.write_dataframe("src", wide(200, 64))
    proj = make_projection("p-rp", 64, 160, seed=0, m=30)
    plan = sqlrp.plan(db, "src", "id", proj)
    sql = ""

    def build() -> None:
        nonlocal sql
        sql = compile_sql(proj, plan.source, "duckdb", plan.output)

    print(f"P-RP m=30 k=160: {proj.linear.p} linear sums, {proj.linear.nnz} non-zeros")
    print(f"  compile                      {seconds(build):6.2f} s")
    for label, setting in [
        ("plan, CSE on ", "RESET disabled_optimizers"),
        ("plan, CSE off", "SET disabled_optimizers = 'common_subexpressions'"),
    ]:
        db.execute(setting)
        print(f"  {label}                {seconds(lambda: db.execute('EXPLAIN ' + sql)):6.2f} s")
    db.execute("RESET disabled_optimizers")
    print(f"  project, CSE on (before)     {seconds(lambda: db.query_df(sql)):6.2f} s")
    db.execute("SET disabled_optimizers = 'common_subexpressions'")  # what DuckDBBackend sets
    print(f"  sqlrp.project (CSE off)      {seconds(lambda: sqlrp.project(db, 'src', 'id', proj)):6.2f} s")


def pg_array(n: int = 20_000) -> None:
    """n x 784 -> 200 (s = sqrt(d)) into a table on PostgreSQL: wide table, the compiled array query,
    the same without the fence around the element relation, and without the detoast."""
    import psycopg
    from pgserver import TempPostgres

    server = TempPostgres()
    url = server.start()
    try:
        X = wide(n, 784).drop(columns="id").to_numpy()
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("CREATE TABLE arr (id bigint, x float8[])")
            with con.cursor().copy("COPY arr (id, x) FROM STDIN") as copy:
                for i in range(n):
                    copy.write_row([i, X[i].tolist()])
            con.execute("CREATE TABLE wide (id bigint, " + ", ".join(f"f{i} float8" for i in range(784)) + ")")
            with con.cursor().copy("COPY wide FROM STDIN") as copy:
                for i in range(n):
                    copy.write_row([i, *X[i].tolist()])
            con.execute("ANALYZE")
        db = sqlrp.connect(url)
        proj = make_projection("achlioptas", 784, 200, seed=0)

        def run(sql: str) -> float:
            spent = seconds(lambda: db.execute(sql))
            db.execute("DROP TABLE o")
            return spent

        pw, pa = sqlrp.plan(db, "wide", "id", proj), sqlrp.plan(db, "arr", "id", proj, layout="array")
        array_sql = compile_sql(proj, pa.source, "postgres", pa.output, into="o")
        unfenced = array_sql.replace("\n  OFFSET 0\n) AS src", "\n) AS src")
        no_detoast = array_sql.replace('ARRAY_CAT("_a0", CAST(ARRAY[] AS DOUBLE PRECISION[]))', '"_a0"')
        assert unfenced != array_sql and no_detoast != array_sql
        print(f"PostgreSQL, {n} rows x 784 -> 200")
        wide_sql = compile_sql(proj, pw.source, "postgres", pw.output, into="o")
        print(f"  wide table                   {run(wide_sql):6.2f} s")
        print(f"  array, as compiled           {run(array_sql):6.2f} s")
        print(f"  array, element relation unfenced {run(unfenced):6.2f} s")
        print(f"  array, no detoast            {run(no_detoast):6.2f} s")
    finally:
        server.stop()


def scatter(n: int = 200_000) -> None:
    """200 sums of 28 columns each (5,600 additions a row) into a table, drawn from 784 or from 64 of
    the table's 784 columns: the cost of DuckDB reading scattered column vectors."""
    db = sqlrp.connect()
    db.write_dataframe("src", wide(n, 784))

    def ctas(pick) -> float:
        exprs = ", ".join("(" + " + ".join(f"f{pick(i, j)}" for i in range(28)) + f") AS m{j}" for j in range(200))
        spent = seconds(lambda: db.execute(f"CREATE TABLE o AS SELECT {exprs} FROM src"))
        db.execute("DROP TABLE o")
        return spent

    copy = ", ".join(f"f{j} AS m{j}" for j in range(200))
    spent = seconds(lambda: db.execute(f"CREATE TABLE o AS SELECT {copy} FROM src"))
    db.execute("DROP TABLE o")
    print(f"DuckDB, {n} rows x 784 columns, CREATE TABLE AS of 200 outputs")
    print(f"  copy 200 columns             {spent:6.2f} s")
    print(f"  sums over 784 columns        {ctas(lambda i, j: (i * 28 + j * 13) % 784):6.2f} s")
    print(f"  sums over 64 columns         {ctas(lambda i, j: (j * 3 + i * 7) % 64):6.2f} s")


def dtrp() -> None:
    from sqlrp.tuning import tune_matrix

    X = np.random.default_rng(0).random((500, 784))
    print("DT-RP, n=500, d=784, k=200, s=sqrt(d), 4000 iterations")
    for seed in range(3):
        t0 = time.perf_counter()
        result = tune_matrix(X, 200, s="auto", iterations=4000, seed=seed)
        spent = time.perf_counter() - t0
        print(f"  seed {seed}: {spent:5.2f} s, loss {result.initial_loss:.4f} -> {result.loss:.4f}")


def pairs() -> None:
    """Additions per row of d = 784, k = 200 Achlioptas matrices: inline, mailman's blocks, the pairs
    plan (partials, depth), and the time to plan (Python, once per matrix)."""
    from sqlrp.compiler.pairs import plan_pairs
    from sqlrp.compiler.strategies import best_mailman

    for s in (1, 3, "auto"):
        proj = make_projection("achlioptas", 784, 200, seed=0, s=s)
        lin = proj.linear
        t0 = time.perf_counter()
        plan = plan_pairs(lin)
        spent = time.perf_counter() - t0
        mm = best_mailman(lin)
        mm_adds = sum(len(t[0]) - 1 for t in mm.terms) + sum(len(p[0]) - 1 for p in mm.partials)
        print(
            f"s={s!s:4}  inline {lin.nnz - lin.p:7d}  mailman {mm_adds:7d}  pairs {plan.additions:7d} "
            f"({len(plan.partials)} partials, depth {plan.depth}; planned in {spent:.2f} s)"
        )


PROBES = {"planning": planning, "pg-array": pg_array, "scatter": scatter, "dtrp": dtrp, "pairs": pairs}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", choices=sorted(PROBES))
    PROBES[parser.parse_args().probe]()
