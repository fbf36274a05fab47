"""DuckDB running sqlrp's SQL: planning, additions per row, strategies, the progress bar."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import sqlrp
from sqlrp.compiler import compile_sql
from sqlrp.methods import make_projection

from .common import best, seconds, wide


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


def pairs() -> None:
    """Additions per row of d = 784, k = 200 Achlioptas matrices: inline, mailman's blocks, and the
    pairs plan on the matrix and on its transpose (partials, how often they are read back, depth,
    the time to plan in Python, once per matrix, and the estimated cost against inline's)."""
    from sqlrp.compiler.pairs import plan_pairs, plan_pairs_transposed
    from sqlrp.compiler.strategies import best_mailman, inline_cost, pairs_cost

    for s in (1, 3, "auto"):
        proj = make_projection("achlioptas", 784, 200, seed=0, s=s)
        lin = proj.linear
        mm = best_mailman(lin)
        mm_adds = sum(len(t[0]) - 1 for t in mm.terms) + sum(len(p[0]) - 1 for p in mm.partials)
        print(f"s={s!s:4}  inline {lin.nnz - lin.p:7d}  mailman {mm_adds:7d}")
        for label, planner in (("pairs", plan_pairs), ("pairs transposed", plan_pairs_transposed)):
            t0 = time.perf_counter()
            plan = planner(lin)
            spent = time.perf_counter() - t0
            print(
                f"      {label:17s} {plan.additions:7d} ({len(plan.partials)} partials "
                f"read {plan.partial_reads} times, depth {plan.depth}; planned in {spent:.2f} s; "
                f"cost vs inline {pairs_cost(plan) / inline_cost(lin):.2f})"
            )
    pairs_sql()


def _carried(plan, level: np.ndarray) -> int:
    """Columns the nested selects pass on, summed over levels, for partials placed at ``level``."""
    d, depth = plan.d, int(level.max())
    defined = np.concatenate([np.zeros(d, dtype=np.int64), level])
    last = np.zeros(d + len(plan.partials), dtype=np.int64)
    for q, (cols, _) in enumerate(plan.partials):
        np.maximum.at(last, cols, level[q])
    for cols, _ in plan.terms:
        last[cols] = depth + 1
    return sum(int(((defined < lev) & (last > lev)).sum()) for lev in range(1, depth + 1))


def pairs_sql() -> None:
    """The pairs query for s = 1 and 3 (d = 784, k = 200): columns carried between levels with each
    partial placed as early / as late as possible, the size of the SQL and DuckDB's parse time with
    and without ``* EXCLUDE``, and the compile time with Python's cyclic GC running / paused."""
    import gc
    import types

    import duckdb

    from sqlrp.compiler import Source
    from sqlrp.compiler.pairs import earliest_levels
    from sqlrp.compiler.strategies import best_pairs
    from sqlrp.core import nodes
    from sqlrp.dialects.duckdb import DuckDBDialect

    con = duckdb.connect()
    src = Source("t", "id", "wide", tuple(f"f{i}" for i in range(784)))
    for s in (3, 1):
        proj = make_projection("achlioptas", 784, 200, seed=0, s=s)
        plan = best_pairs(proj.linear)
        early = earliest_levels(plan.d, plan.partials)
        print(
            f"s={s}: carried columns, partials as early as possible {_carried(plan, early)}, "
            f"as late as possible (sqlrp) {_carried(plan, plan.level)}"
        )
        for star in (False, True):
            DuckDBDialect.star_exclude = star
            sql = compile_sql(proj, src, "duckdb", strategy="pairs", pretty=False)
            parse = best(lambda q=sql: con.extract_statements(q), 2)
            how = "* EXCLUDE" if star else "columns named"
            print(f"  {how}: {len(sql):,} characters, DuckDB parses in {parse:.2f} s")
        for paused in (False, True):
            # nodes.gc_paused leaves the GC alone when it reports itself disabled: fake that to keep it running
            nodes.gc = gc if paused else types.SimpleNamespace(isenabled=lambda: False)
            spent = min(
                seconds(lambda p=proj: compile_sql(p, src, "duckdb", strategy="pairs", pretty=False)) for _ in range(3)
            )
            print(f"  compile with the GC {'paused' if paused else 'running'}: {spent:.2f} s")
        nodes.gc = gc


def footprint(n: int = 1_000_000) -> None:
    """DuckDB time per addition as the number of addition nodes in one select grows (k sums of 28
    columns drawn from 32, one thread, summed so nothing is written).  Each node writes its own
    2,048-row vector (16 KB) per chunk; once all of them outgrow the last-level cache every addition
    goes to memory.  The s = sqrt(d) projection (d = 784, k = 200) has 5,400 nodes."""
    import duckdb

    con = duckdb.connect(config={"threads": 1})
    con.execute(f"CREATE TABLE t AS SELECT {', '.join(f'random() AS f{i}' for i in range(32))} FROM range({n})")
    rng = np.random.default_rng(0)
    print(f"DuckDB, {n} rows, one thread: sums of 28 of 32 columns, SELECT sum(...) of each")
    for k in (1, 4, 16, 32, 64, 200):
        exprs = ", ".join(
            "(" + " + ".join(f"f{i}" for i in rng.choice(32, 28, replace=False)) + f") AS p{j}" for j in range(k)
        )
        query = f"SELECT {', '.join(f'sum(p{j})' for j in range(k))} FROM (SELECT {exprs} FROM t)"
        con.execute(query).fetchall()
        spent = best(lambda q=query: con.execute(q).fetchall())
        nodes = k * 27
        print(
            f"  k={k:4d}  {nodes:5d} nodes  {nodes * 16 / 1024:6.1f} MB of vectors  "
            f"{spent / (nodes * n) * 1e9:5.2f} ns per addition"
        )


def progress(n: int = 200_000, d: int = 784) -> None:
    """DuckDB, n x d -> 200 with s = 3 (pairs, planned before timing): materialising without a bar,
    with ``progress=True`` (one statement, DuckDB's ``query_progress``), and in 10 id-range batches
    (each planned anew; a batch inside one row group runs on one thread)."""
    from bench.run import make_dense
    from sqlrp import api

    db = sqlrp.connect(threads=2)
    make_dense(db, n, d)
    proj = make_projection("achlioptas", d, 200, seed=0, s=3)
    api.project(db, "t", "id", proj, into="o", check=False)  # plans the pairs once
    print(f"DuckDB, {n} x {d} -> 200, s = 3")
    for label, opt, runs in (("no progress bar", False, 2), ("progress=True", True, 2), ("10 batches", 10, 1)):
        spent = []
        for _ in range(runs):
            db.execute('DROP TABLE IF EXISTS "o"')
            spent.append(seconds(lambda o=opt: api.project(db, "t", "id", proj, into="o", check=False, progress=o)))
        print(f"  {label:18s} {' '.join(f'{x:6.2f}' for x in spent)} s")


def floor(n: int = 200_000, d: int = 784, k: int = 200) -> None:
    """The least time DuckDB's expression executor could take for s = sqrt(d), against the peers
    measured in the same run.  A lower bound, built from two parts that each under-count:

    - writing: ``CREATE TABLE AS`` of k outputs that are each one feature times the scale (k
      columns scanned and written, no additions; the projection scans all d);
    - adding: every addition of the projection at the rate of additions whose vectors all fit the
      cache (16 sums of 28 of 32 columns, 432 nodes, on 10^6 rows; the same select of 16 plain
      columns subtracted; written to a table or summed, whichever is cheaper).

    Both on 2 threads.  Against scikit-learn on column-major input and the round trip, this bound
    decides whether the s = sqrt(d) targets are reachable with any SQL that DuckDB runs as one
    vector per expression node."""
    from bench.run import make_dense, sklearn_sparse, write_back
    from sqlrp import api
    from sqlrp.compiler.pairs import signs_of

    db = sqlrp.connect(threads=2)
    make_dense(db, n, d)
    proj = make_projection("achlioptas", d, k, seed=0, s="auto")
    additions = int(np.abs(signs_of(proj.linear)).sum(1).clip(min=1).sum() - k)

    def ctas(select: str) -> Callable[[], None]:
        return lambda: db.execute(f'CREATE OR REPLACE TABLE "o" AS {select}')

    write = best(ctas("SELECT id, " + ", ".join(f"f{j} * 0.5 AS p{j}" for j in range(k)) + ' FROM "t"'))
    m = 1_000_000  # rows for the rate: 8 row groups keep both threads busy to the end
    db.execute(f"CREATE TABLE s AS SELECT {', '.join(f'random() AS c{i}' for i in range(32))} FROM range({m})")
    rng = np.random.default_rng(0)
    sums = ", ".join(
        "(" + " + ".join(f"c{i}" for i in rng.choice(32, 28, replace=False)) + f") * 0.5 AS p{j}" for j in range(16)
    )
    plain = ", ".join(f"c{j} * 0.5 AS p{j}" for j in range(16))
    summed = ", ".join(f"sum(p{j})" for j in range(16))
    rate = min(  # written to a table, or summed and not written: whichever is cheaper per addition
        best(ctas(f"SELECT {sums} FROM s")) - best(ctas(f"SELECT {plain} FROM s")),
        best(lambda: db.fetchall(f"SELECT {summed} FROM (SELECT {sums} FROM s)"))
        - best(lambda: db.fetchall(f"SELECT {summed} FROM (SELECT {plain} FROM s)")),
    ) / (16 * 27 * m)
    bound = write + additions * n * rate

    srp = sklearn_sparse(k, np.sqrt(d), d)
    frame = db.con.execute('SELECT * FROM "t"').df()
    X = frame.drop(columns="id").to_numpy()  # column-major: scikit-learn's fast layout
    sk = best(lambda: srp.transform(X))
    del frame

    def round_trip() -> None:
        frame = db.con.execute('SELECT * FROM "t"').df()
        write_back(db, frame["id"].to_numpy(), srp.transform(frame.drop(columns="id").to_numpy()))

    trip = best(round_trip, runs=2)
    actual = best(lambda: api.project(db, "t", "id", proj, into="o", check=False, replace=True), runs=2)
    print(f"DuckDB, {n} x {d} -> {k}, s = sqrt(d): {additions:,} additions per row, 2 threads")
    print(f"  write k outputs, no additions      {write:6.3f} s")
    print(f"  additions at the in-cache rate     {additions * n * rate:6.3f} s  ({rate * 1e9:.2f} ns each, wall)")
    print(f"  lower bound                        {bound:6.3f} s   (sqlrp now: {actual:.3f} s)")
    print(f"  scikit-learn, column-major input   {sk:6.3f} s   bound / it = {bound / sk:.2f} (target <= 0.7)")
    print(f"  round trip                         {trip:6.3f} s   it / bound = {trip / bound:.2f} (target >= 10)")


def overhead(d: int = 784, k: int = 200) -> None:
    """DuckDB's time before the first row for the s = 3 projection (d x k) under ``pairs`` and
    ``inline``: parsing (``extract_statements``), then binding and the optimizers as DuckDB's own
    profiler reports them for a ``CREATE TABLE AS`` over 10 rows (so execution is nothing).  A fixed
    cost per expression node, not per row."""
    import json
    import tempfile

    from sqlrp import api

    db = sqlrp.connect(threads=2)
    features = ", ".join(f"random() AS f{i}" for i in range(d))
    db.execute(f"CREATE TABLE t AS SELECT range AS id, {features} FROM range(10)")
    proj = make_projection("achlioptas", d, k, seed=0, s=3)
    profile = Path(tempfile.mkdtemp()) / "profile.json"
    print(f"DuckDB, d = {d}, k = {k}, s = 3: seconds before the first row (best of 3)")
    for strategy in ("pairs", "inline"):
        sql = api.compile_projection(db, api.plan(db, "t", "id", proj), into="o", strategy=strategy)
        terms = sql.count(" + ") + sql.count(" - ")
        parse = best(lambda q=sql: db.con.extract_statements(q))
        runs = []
        for _ in range(3):
            db.execute('DROP TABLE IF EXISTS "o"')
            db.execute(f"SET enable_profiling = 'json'; SET profiling_output = '{profile}'")
            db.execute("SET profiling_mode = 'detailed'")
            total = seconds(lambda q=sql: db.execute(q))
            db.execute("PRAGMA disable_profiling")
            report = json.loads(profile.read_text())
            runs.append((total, report["planner"]["binding_time"], report["optimizer"]["total_time"]))
        total, binding, optimizer = min(runs)
        print(
            f"  {strategy:7s} {terms:6,d} + and -   total {total:5.2f}  parse {parse:4.2f}  bind {binding:4.2f}"
            f" ({binding / terms * 1e6:4.1f} us per term)  optimise {optimizer:4.2f}"
        )


def worth(rows: int = 189) -> None:
    """The numbers behind ``compiler.strategies``' planning rule.  (1) The pairs planner on kernel
    and Achlioptas stages: ``p * density^2`` (a pair's expected outputs), planning seconds, and the
    plan's estimated cost against inline's.  (2) DuckDB's fixed cost per output term: EXPLAIN
    (parse, bind, optimise; no rows) of the inline query over a ``rows`` x 500 table, in
    microseconds per term, and the run over the same rows."""
    from sqlrp import api
    from sqlrp.compiler.strategies import best_pairs, inline_cost, pairs_cost

    print("pairs planner: max(p, d) * density^2, planning seconds, plan cost / inline cost (both orientations)")
    for method, d, k, params in (
        ("pk-rp", 784, 160, dict(s="auto")),
        ("pk-rp", 500, 160, dict(s="auto")),
        ("pk-rp", 400, 160, dict(s="auto")),
        ("pk-rp", 250, 160, dict(s="auto")),
        ("pk-rp", 784, 60, dict(s=9.0)),
        ("achlioptas", 784, 200, dict(s=3)),
        ("achlioptas", 200, 60, dict(s=3)),
        ("achlioptas", 500, 40, dict(s=3)),
        ("achlioptas", 784, 200, dict(s="auto")),
    ):
        lin = make_projection(method, d, k, seed=0, **params).linear
        expected = max(lin.p, lin.d) * (lin.nnz / (lin.d * lin.p)) ** 2
        start = time.perf_counter()
        plan = best_pairs(lin)
        spent = time.perf_counter() - start
        print(f"  {method:10s} d={d:4d} k={k:3d} {params}  {expected:5.1f}  {spent:6.2f} s  "
              f"{pairs_cost(plan) / inline_cost(lin):.3f}")
    db = sqlrp.connect(threads=2)
    features = ", ".join(f"random() AS f{i}" for i in range(500))
    db.execute(f"CREATE TABLE t AS SELECT range AS id, {features} FROM range({rows})")
    print(f"DuckDB, inline query over {rows} x 500 rows, best of 2: EXPLAIN and run, microseconds per term")
    cases = (("achlioptas", dict(s="auto")), ("achlioptas", dict(s=3)), ("pk-rp", {}), ("p-rp", dict(m=10)))
    for method, params in cases:
        proj = make_projection(method, 500, 160, seed=0, **params)
        sql = api.compile_projection(db, api.plan(db, "t", "id", proj), strategy="inline")
        terms = proj.linear.nnz
        explain = best(lambda q=sql: db.fetchall("EXPLAIN " + q), runs=2)
        run = best(lambda q=sql: db.fetchall(q), runs=2)
        print(f"  {method:10s} {params}  {terms:7,d} terms  EXPLAIN {explain:5.2f} s ({explain / terms * 1e6:4.1f} us)"
              f"  run {run:5.2f} s ({run / terms * 1e6:4.1f} us)")


def orientation(n: int = 200_000, d: int = 784, k: int = 200) -> None:
    """DuckDB, n x d -> k for s = 3 and s = 1: the pairs query from Paar's greedy on the matrix and
    from the greedy on its transpose (the plan ``auto`` keeps when it is cheaper), run in turn three
    times each so both see the same machine."""
    import copy

    from bench.run import make_dense
    from sqlrp import api
    from sqlrp.compiler import compile_statements
    from sqlrp.compiler.pairs import plan_pairs, plan_pairs_transposed
    from sqlrp.core.layout import Formulation, Target

    db = sqlrp.connect(threads=2)
    make_dense(db, n, d)
    print(f"DuckDB, {n} x {d} -> {k}, 2 threads: seconds of three runs each, in turn")
    for s in (3, 1):
        base = make_projection("achlioptas", d, k, seed=0, s=s)
        queries = {}
        for label, planner in (("on the matrix", plan_pairs), ("transposed", plan_pairs_transposed)):
            proj = copy.deepcopy(base)
            plan = planner(proj.linear)  # handed to the compiler in the plan's formulation
            how = Formulation(matrix="values", strategy="pairs", pairs=plan)
            planned = dataclasses.replace(api.plan(db, "t", "id", proj), how=how)
            sql = compile_statements(planned, "duckdb", Target(into="o")).main
            queries[f"{label} ({plan.additions:,} additions)"] = sql
        spent: dict[str, list[float]] = {label: [] for label in queries}
        for _ in range(3):
            for label, sql in queries.items():
                db.execute('DROP TABLE IF EXISTS "o"')
                spent[label].append(seconds(lambda q=sql: db.execute(q)))
        for label, times in spent.items():
            print(f"  s={s}  {label:34s} {' '.join(f'{x:5.2f}' for x in times)}")
