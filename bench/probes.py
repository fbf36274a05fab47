"""One-off measurements behind statements in the README, docstrings and notes (not part of run.py).

    PYTHONPATH=. python bench/probes.py pg-copy      # PostgreSQL: storing 156,800 matrix rows, COPY block vs rows
    PYTHONPATH=. python bench/probes.py pg-read      # PostgreSQL: reading 50,000 x 200 results, binary COPY vs rows
    PYTHONPATH=. python bench/probes.py planning     # DuckDB planning of a big kernel projection, CSE on/off
    PYTHONPATH=. python bench/probes.py pg-array     # PostgreSQL array layout: detoast, fence and parallel variants
    PYTHONPATH=. python bench/probes.py pg-fence     # PostgreSQL mailman / kernel relations: OFFSET 0 vs the new fence
    PYTHONPATH=. python bench/probes.py scatter      # DuckDB cost of sums over scattered vs few columns
    PYTHONPATH=. python bench/probes.py dtrp         # DT-RP wall time, n=500, d=784, k=200, 4000 iterations
    PYTHONPATH=. python bench/probes.py pairs        # additions per row: inline vs the pairs plan, planning time
    PYTHONPATH=. python bench/probes.py footprint    # DuckDB ns per addition vs the number of addition nodes
    PYTHONPATH=. python bench/probes.py roundtrip    # the round trip's parts: fetch, transform, write back
    PYTHONPATH=. python bench/probes.py pg-insert    # PostgreSQL: CREATE TABLE AS vs INSERT, serial vs staged
    PYTHONPATH=. python bench/probes.py progress     # DuckDB: no bar, the engine-reported bar, 10 id-range batches
    PYTHONPATH=. python bench/probes.py pg-check     # PostgreSQL NULL/NaN check: LIMIT 5 (serial) vs count (parallel)
    PYTHONPATH=. python bench/probes.py floor        # s = sqrt(d): DuckDB's least possible time vs the peers
    PYTHONPATH=. python bench/probes.py overhead     # s = 3: DuckDB's parse, bind and optimise time per strategy
    PYTHONPATH=. python bench/probes.py orientation  # pairs planned on the matrix vs on its transpose, in DuckDB
    PYTHONPATH=. python bench/probes.py worth        # pairs planning time vs its gain; DuckDB's cost per term
    PYTHONPATH=. python bench/probes.py small        # small wide tables: inline vs unnested lookup; the CLI
    PYTHONPATH=. python bench/probes.py highd        # every method on 64 x 6,830 through the CLI: time, peak RSS
    PYTHONPATH=. python bench/probes.py reference    # the NumPy reference's parts on PK-RP: BLAS vs scipy.sparse
    PYTHONPATH=. python bench/probes.py kernel-floor # PK-RP: DuckDB's floor against the author's algorithm
    PYTHONPATH=. python bench/probes.py search-exact # exact k-NN brute force in DuckDB: sqlrp's SQL vs hand-written
    PYTHONPATH=. python bench/probes.py pg-bands     # PostgreSQL: an index's band rows, UNION ALL vs UNNEST

Each prints seconds measured in this run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import sqlrp  # noqa: E402
from sqlrp.compiler import compile_sql  # noqa: E402
from sqlrp.methods import make_projection  # noqa: E402


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best(fn, runs: int = 3) -> float:
    """The fastest of ``runs`` timings of ``fn`` (the machine is shared)."""
    return min(seconds(fn) for _ in range(runs))


def wide(n: int, d: int, seed: int = 0) -> pd.DataFrame:
    from conftest import wide_frame

    return wide_frame(np.random.default_rng(seed).standard_normal((n, d)))


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


# the fence sqlrp writes (LIMIT ALL since issue 32), the one before it (OFFSET CAST('0' AS BIGINT): the same
# plan, refused by other engines), and the usual one (OFFSET 0, which forbids the parallel plan)
OLD_FENCE, CAST_FENCE, FENCE = "OFFSET 0", "OFFSET CAST('0' AS BIGINT)", "LIMIT ALL"


def plan_shape(db, sql: str) -> str:
    """Where EXPLAIN puts the Gather: on top (every row computed in the workers), under another node
    (workers only read the table; the leader computes alone), or nowhere (serial)."""
    lines = [r[0] for r in db.fetchall("EXPLAIN " + sql)]
    gather = next((i for i, line in enumerate(lines) if "Gather" in line), None)
    if gather is None:
        return "serial"
    workers = next(line.split(":")[1].strip() for line in lines if "Workers Planned" in line)
    if gather == 0:
        return f"Gather on top, {workers} workers"
    return f"Gather under {lines[0].split('  (')[0]}, {workers} workers"


@contextmanager
def pg_tables(n: int):
    """A throw-away PostgreSQL server holding the same n x 784 rows twice: ``wide`` (784 float8
    columns) and ``arr`` (one float8[] column, TOASTed); yields a connected sqlrp backend."""
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
        yield db
        db.close()
    finally:
        server.stop()


def pg_run(db, label: str, sql: str, settings: list[str]) -> None:
    """Time ``sql`` (a CREATE TABLE o AS ...) in one transaction after ``settings``; print the plan shape."""
    with db.transaction():
        for statement in settings:
            db.execute(statement)
        shape = plan_shape(db, sql)
        spent = seconds(lambda: db.execute(sql))
        db.execute("DROP TABLE o")
    print(f"  {label:38s} {spent:6.2f} s   {shape}")


def pg_array(n: int = 20_000) -> None:
    """n x 784 -> 200 (s = sqrt(d)) into a table on PostgreSQL: wide table; the array query as sqlrp
    runs it (fence ``LIMIT ALL`` and ``SET LOCAL min_parallel_table_scan_size = 0``); the same without
    that setting; with the fence ``OFFSET CAST('0' AS BIGINT)`` sqlrp wrote until issue 32; with the old
    fence ``OFFSET 0``; without the fence around the element
    relation; without the detoast.  Each line says where EXPLAIN puts the Gather."""
    from sqlrp.dialects import get_dialect

    with pg_tables(n) as db:
        proj = make_projection("achlioptas", 784, 200, seed=0)
        pw, pa = sqlrp.plan(db, "wide", "id", proj), sqlrp.plan(db, "arr", "id", proj, layout="array")
        settings = get_dialect("postgres").local_settings(pa.source)
        array_sql = compile_sql(proj, pa.source, "postgres", pa.output, into="o")
        old_fence = array_sql.replace(FENCE, OLD_FENCE)
        cast_fence = array_sql.replace(FENCE, CAST_FENCE)
        unfenced = array_sql.replace(f"\n  {FENCE}\n) AS src", "\n) AS src")
        no_detoast = array_sql.replace('ARRAY_CAT("_a0", CAST(ARRAY[] AS DOUBLE PRECISION[]))', '"_a0"')
        assert settings and len({array_sql, old_fence, unfenced, no_detoast}) == 4
        print(f"PostgreSQL, {n} rows x 784 -> 200; settings for the array layout: {'; '.join(settings)}")
        pg_run(db, "wide table", compile_sql(proj, pw.source, "postgres", pw.output, into="o"), [])
        pg_run(db, "array, as sqlrp runs it", array_sql, settings)
        pg_run(db, "array, without the setting", array_sql, [])
        pg_run(db, "array, fence OFFSET CAST('0' AS BIGINT)", cast_fence, settings)
        pg_run(db, "array, old fence OFFSET 0", old_fence, settings)
        pg_run(db, "array, element relation unfenced", unfenced, settings)
        pg_run(db, "array, no detoast", no_detoast, settings)


def pg_fence(n: int = 20_000) -> None:
    """The other fenced relations on PostgreSQL, n x 784 -> 200, old fence ``OFFSET 0`` against
    ``OFFSET CAST('0' AS BIGINT)`` and ``LIMIT ALL`` (with sqlrp's settings for the layout): mailman's partial sums
    (wide, s = 1) and a kernel method's linear sums (P-RP m = 4, wide, and array, which also fences the
    detoast and the elements)."""
    from sqlrp.dialects import get_dialect

    cases = [
        ("wide, s = 1 mailman", "wide", "wide", make_projection("achlioptas", 784, 200, seed=0, s=1), "mailman"),
        ("wide, P-RP m = 4", "wide", "wide", make_projection("p-rp", 784, 200, seed=0, m=4), "auto"),
        ("array, P-RP m = 4", "arr", "array", make_projection("p-rp", 784, 200, seed=0, m=4), "auto"),
    ]
    with pg_tables(n) as db:
        print(f"PostgreSQL, {n} rows x 784 -> 200")
        for label, table, layout, proj, strategy in cases:
            plan = sqlrp.plan(db, table, "id", proj, layout=layout)
            settings = get_dialect("postgres").local_settings(plan.source)
            sql = compile_sql(proj, plan.source, "postgres", plan.output, into="o", strategy=strategy)
            print(f" {label}: {sql.count(FENCE)} fenced sub-queries")
            pg_run(db, "old fence OFFSET 0", sql.replace(FENCE, OLD_FENCE), settings)
            pg_run(db, "fence OFFSET CAST('0' AS BIGINT)", sql.replace(FENCE, CAST_FENCE), settings)
            pg_run(db, "fence LIMIT ALL", sql, settings)


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
    from sqlrp.methods.tuning import tune_matrix

    X = np.random.default_rng(0).random((500, 784))
    print("DT-RP, n=500, d=784, k=200, s=sqrt(d), 4000 iterations")
    for seed in range(3):
        t0 = time.perf_counter()
        result = tune_matrix(X, 200, s="auto", iterations=4000, seed=seed)
        spent = time.perf_counter() - t0
        print(f"  seed {seed}: {spent:5.2f} s, loss {result.initial_loss:.4f} -> {result.loss:.4f}")


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


def roundtrip(n: int = 200_000, d: int = 784, k: int = 200) -> None:
    """The round trip's parts (s = sqrt(d)), each timed twice: the first touch of new memory is slow
    on this machine.  Fetching as a DataFrame gives a column-major float block for free."""
    from run import make_dense, sklearn_sparse, write_back

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


@contextmanager
def pg_wide(n: int, d: int):
    """A throw-away PostgreSQL server with one wide table ``t`` of n x d float8 features, vacuumed
    and analysed; yields a connected sqlrp backend."""
    from pgserver import TempPostgres

    server = TempPostgres()
    url = server.start()
    try:
        pg = sqlrp.connect(url)
        pg.write_dataframe("t", wide(n, d))
        pg.execute("VACUUM ANALYZE")
        yield pg
        pg.close()
    finally:
        server.stop()


def pg_insert(n: int = 50_000, d: int = 784) -> None:
    """PostgreSQL, n x d -> 200 (s = sqrt(d)): ``CREATE TABLE AS`` (parallel), an incremental run
    into an empty table and 10 progress batches, each inserting by plain ``INSERT ... SELECT``
    (serial in PostgreSQL 15) and staged through ``CREATE TEMPORARY TABLE AS`` (sqlrp's way)."""
    from sqlrp import api
    from sqlrp.dialects.postgres import PostgresDialect

    with pg_wide(n, d) as pg:
        proj = make_projection("achlioptas", d, 200, seed=0, s="auto")

        def fresh() -> None:
            pg.execute('DROP TABLE IF EXISTS "o"')

        def emptied() -> None:
            fresh()
            api.project(pg, "t", "id", proj, into="o", check=False)
            pg.execute('DELETE FROM "o"')

        print(f"PostgreSQL, {n} x {d} -> 200, s = sqrt(d), best of 2")
        for staged in (False, True):
            PostgresDialect.parallel_insert = not staged
            label = "staged (temp table)" if staged else "plain INSERT ... SELECT"
            runs = {
                "CREATE TABLE AS": (fresh, dict()),
                "incremental into empty": (emptied, dict(incremental=True)),
                "10 progress batches": (fresh, dict(progress=10)),
            }
            for name, (setup, opts) in runs.items():
                best = np.inf
                for _ in range(2):
                    setup()
                    best = min(
                        best, seconds(lambda o=opts: api.project(pg, "t", "id", proj, into="o", check=False, **o))
                    )
                print(f"  {label:24s} {name:24s} {best:6.2f} s")
        PostgresDialect.parallel_insert = False


def progress(n: int = 200_000, d: int = 784) -> None:
    """DuckDB, n x d -> 200 with s = 3 (pairs, planned before timing): materialising without a bar,
    with ``progress=True`` (one statement, DuckDB's ``query_progress``), and in 10 id-range batches
    (each planned anew; a batch inside one row group runs on one thread)."""
    from run import make_dense

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


def pg_check(n: int = 50_000, d: int = 784) -> None:
    """PostgreSQL, the NULL/NaN check of a clean n x d table: the query with ``LIMIT 5`` (planned
    serially) against ``count(*)`` (parallel workers), and ``api.check_source`` as it is now."""
    from sqlrp import api
    from sqlrp.compiler import Source

    with pg_wide(n, d) as pg:
        nan = "CAST('NaN' AS DOUBLE PRECISION)"
        cond = " OR ".join(f'"f{i}" IS NULL OR CAST("f{i}" AS DOUBLE PRECISION) = {nan}' for i in range(d))
        proj = make_projection("achlioptas", d, 200, seed=0, s="auto")
        src = Source("t", "id", "wide", tuple(f"f{i}" for i in range(d)))
        print(f"PostgreSQL, {n} x {d}, clean table, best of 2")
        for label, fn in (
            ("SELECT id ... LIMIT 5", lambda: pg.fetchall(f'SELECT "id" FROM "t" WHERE {cond} LIMIT 5')),
            ("SELECT count(*) ...", lambda: pg.fetchall(f'SELECT count(*) FROM "t" WHERE {cond}')),
            ("api.check_source", lambda: api.check_source(pg, proj, src)),
        ):
            print(f"  {label:24s} {best(fn, 2):6.2f} s")


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
    from run import make_dense, sklearn_sparse, write_back

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

    sys.path.insert(0, str(ROOT / "examples"))
    from conftest import wide_frame
    from kernel_frontier import image_patches, standardise

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


def reference_speed(n: int = 20_000, d: int = 784, k: int = 160) -> None:
    """The NumPy reference (the oracle, and the transformer's in-memory path) on PK-RP degree 2 with
    its defaults, n x d: the linear stage by dense BLAS against scipy.sparse, then the combiner;
    best of 3 each."""
    import scipy.sparse as sp

    from sqlrp.methods import reference

    X = np.random.default_rng(0).normal(size=(n, d))
    proj = make_projection("pk-rp", d, k, seed=0)
    lin = proj.linear
    W = np.zeros((d, lin.p))
    W[lin.feature, lin.vector] = lin.weight
    S = sp.csc_matrix((lin.weight, (lin.feature, lin.vector)), shape=(d, lin.p))
    K = X @ W
    print(f"NumPy reference, PK-RP degree 2, {n} x {d} -> {k} ({lin.p} vectors, {lin.nnz:,} non-zeros), best of 3")
    print(f"  linear stage, dense BLAS    {best(lambda: X @ W):6.2f} s")
    print(f"  linear stage, scipy.sparse  {best(lambda: np.asarray(X @ S)):6.2f} s")
    print(f"  linear stage, as used       {best(lambda: reference.linear_outputs(lin, X)):6.2f} s")
    print(f"  combiner                    {best(lambda: reference.combine(proj.combiner, K)):6.2f} s")
    print(f"  transform, in all           {best(lambda: reference.transform(proj, X)):6.2f} s")


def kernel_floor(n: int = 50_000, side: int = 28, k: int = 160) -> None:
    """Issue 12's PK-RP speed targets against a floor for any inline query DuckDB runs.  On the
    bench's kernel table (n standardised photo patches, d = 784), PK-RP degree 2 with its defaults
    (the fewest additions that keep the accuracy bar: ``examples/kernel_frontier.py``):

    - DuckDB's fixed cost: EXPLAIN of the query (parse, bind, optimise; no rows);
    - its execution at the cache-resident rate: the same query, same shape and number of terms,
      with every feature index folded onto the first 32 columns (so every vector fits the cache),
      its run minus its EXPLAIN;
    - the floor is their sum; against the author's PK-RP (003 Pseudocode 1 with numba) and
      scikit-learn's PolynomialCountSketch in the same run, and sqlrp's own run.  Best of 2 each."""
    import dataclasses

    import kernel_peers
    from run import photo_patches
    from sklearn.kernel_approximation import PolynomialCountSketch

    from sqlrp import api
    from sqlrp.compiler import Source, compile_sql

    X = photo_patches(n, side)
    d = X.shape[1]
    db = sqlrp.connect(threads=2)
    from conftest import wide_frame

    db.write_dataframe("t", wide_frame(X))
    proj = make_projection("pk-rp", d, k, seed=0)
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(d)))
    folded = dataclasses.replace(proj, linear=dataclasses.replace(proj.linear, feature=proj.linear.feature % 32))
    sql = compile_sql(proj, source, "duckdb", strategy="inline")
    cached = compile_sql(folded, source, "duckdb", strategy="inline")

    def ctas(q: str) -> Callable[[], None]:
        return lambda: db.execute(f'CREATE OR REPLACE TABLE "o" AS {q}')

    bind = best(lambda: db.fetchall("EXPLAIN " + sql), runs=2)
    run_sql = best(ctas(sql), runs=2)
    cached_exec = best(ctas(cached), runs=2) - best(lambda: db.fetchall("EXPLAIN " + cached), runs=2)
    kernel_peers.warm_up()
    author = kernel_peers.author_config(d, k)
    author_s = best(lambda: kernel_peers.author_pk_rp(X, author), runs=2)
    sketch = PolynomialCountSketch(degree=2, n_components=k, random_state=0)
    sketch_s = best(lambda: sketch.fit(X[:2]).transform(X), runs=2)
    project_s = best(lambda: api.project(db, "t", "id", proj, into="o2", replace=True, check=False), runs=2)
    floor_s = bind + cached_exec
    print(f"PK-RP degree 2, {n} x {d} -> {k}, {proj.linear.nnz:,} additions a row (s = sqrt(d), p = {proj.linear.p})")
    print(f"  DuckDB EXPLAIN (parse, bind, optimise)       {bind:6.2f} s")
    print(f"  execution at the cache-resident rate         {cached_exec:6.2f} s")
    print(f"  floor (their sum)                            {floor_s:6.2f} s")
    print(f"  the query as compiled, CREATE TABLE AS       {run_sql:6.2f} s")
    print(f"  sqlrp.project(..., into=)                    {project_s:6.2f} s")
    print(f"  author's PK-RP (Pseudocode 1, numba)         {author_s:6.2f} s   floor / it {floor_s / author_s:5.2f}x")
    print(f"  PolynomialCountSketch                        {sketch_s:6.2f} s   floor / it {floor_s / sketch_s:5.2f}x")
    # P-RP m = 10 (s = 3, its default: s = sqrt(d) doubles its distortion on digits, the frontier):
    # DuckDB's fixed cost alone against the same matrix in memory
    prp = make_projection("p-rp", d, k, seed=0, m=10)
    prp_sql = compile_sql(prp, source, "duckdb", strategy="inline")
    prp_bind = best(lambda: db.fetchall("EXPLAIN " + prp_sql), runs=1)
    in_memory = best(lambda: kernel_peers.in_memory_p_rp(X, prp), runs=2)
    print(f"P-RP m = 10, {prp.linear.nnz:,} additions a row (s = 3)")
    print(f"  DuckDB EXPLAIN of the inline query           {prp_bind:6.2f} s")
    ratio = prp_bind / in_memory
    print(f"  the same matrix in memory (BLAS)             {in_memory:6.2f} s   EXPLAIN / it {ratio:5.2f}x")


def orientation(n: int = 200_000, d: int = 784, k: int = 200) -> None:
    """DuckDB, n x d -> k for s = 3 and s = 1: the pairs query from Paar's greedy on the matrix and
    from the greedy on its transpose (the plan ``auto`` keeps when it is cheaper), run in turn three
    times each so both see the same machine."""
    import copy

    from run import make_dense

    from sqlrp import api
    from sqlrp.compiler.pairs import plan_pairs, plan_pairs_transposed
    from sqlrp.compiler.strategies import remember_pairs

    db = sqlrp.connect(threads=2)
    make_dense(db, n, d)
    print(f"DuckDB, {n} x {d} -> {k}, 2 threads: seconds of three runs each, in turn")
    for s in (3, 1):
        base = make_projection("achlioptas", d, k, seed=0, s=s)
        queries = {}
        for label, planner in (("on the matrix", plan_pairs), ("transposed", plan_pairs_transposed)):
            proj = copy.deepcopy(base)
            plan = planner(proj.linear)
            remember_pairs(proj.linear, "duckdb", plan)
            sql = api.compile_projection(db, api.plan(db, "t", "id", proj), into="o", strategy="pairs")
            queries[f"{label} ({plan.additions:,} additions)"] = sql
        spent: dict[str, list[float]] = {label: [] for label in queries}
        for _ in range(3):
            for label, sql in queries.items():
                db.execute('DROP TABLE IF EXISTS "o"')
                spent[label].append(seconds(lambda q=sql: db.execute(q)))
        for label, times in spent.items():
            print(f"  s={s}  {label:34s} {' '.join(f'{x:5.2f}' for x in times)}")


def pg_copy(d: int = 784, k: int = 200) -> None:
    """Storing a projection on PostgreSQL (issue 14): d = 784, k = 200, s = 1 (156,800 matrix rows)
    through sqlrp's COPY, as one block of COPY text (what ``insert_frame`` does for numeric frames)
    against a ``write_row`` per row (what it did), best of 3 each, in turn."""
    from pgserver import TempPostgres

    from sqlrp.backends import postgres

    server = TempPostgres()
    url = server.start()
    try:
        db = sqlrp.connect(url)
        proj = sqlrp.make_projection("achlioptas", d, k, seed=1, s=1)

        def save() -> None:
            sqlrp.registry.store.Registry(db).save(proj, "copy_probe", replace=True)

        block = best(save)
        try:  # the per-row path: the frame's numbers hidden as objects, so the block path is skipped
            orig = postgres.PostgresBackend.insert_frame

            def per_row(self, table, df):  # noqa: ANN001
                return orig(self, table, df.astype(object))

            postgres.PostgresBackend.insert_frame = per_row
            rows = best(save)
        finally:
            postgres.PostgresBackend.insert_frame = orig
        print(f"store {proj.linear.nnz:,} matrix rows on PostgreSQL: COPY block {block:.2f} s, row by row {rows:.2f} s")
        db.close()
    finally:
        server.stop()


def pg_read(n: int = 50_000, k: int = 200) -> None:
    """Reading a projection's result from PostgreSQL (issue 14): an ``n x k`` table of doubles and a
    bigint id, ``SELECT * ... ORDER BY id`` into a DataFrame through binary COPY parsed by NumPy
    (``query_df`` now) against ``fetchall()`` tuples (what it did), best of 3 each, in turn; the two
    frames are compared."""
    from pgserver import TempPostgres

    server = TempPostgres()
    url = server.start()
    try:
        db = sqlrp.connect(url)
        cols = ", ".join(f"random() AS p{j}" for j in range(k))
        db.execute(f"CREATE TABLE o AS SELECT i::bigint AS id, {cols} FROM generate_series(0, {n - 1}) AS g(i)")
        sql = "SELECT * FROM o ORDER BY id"

        def rows() -> pd.DataFrame:
            with db.conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute(sql.encode())
                return pd.DataFrame.from_records(cur.fetchall(), columns=[d.name for d in cur.description])

        times: dict[str, list[float]] = {"binary COPY": [], "fetchall": []}
        frames = {}
        for _ in range(3):
            for label, fn in (("binary COPY", lambda: db.query_df(sql)), ("fetchall", rows)):
                t0 = time.perf_counter()
                frames[label] = fn()
                times[label].append(time.perf_counter() - t0)
        pd.testing.assert_frame_equal(frames["binary COPY"], frames["fetchall"])
        a, b = min(times["binary COPY"]), min(times["fetchall"])
        print(f"read {n:,} x {k} from PostgreSQL: binary COPY {a:.2f} s, fetchall {b:.2f} s ({b / a:.1f}x)")
        db.close()
    finally:
        server.stop()


def search_exact(n: int = 200_000, queries: int = 100) -> None:
    """Exact k-NN by brute force in DuckDB, the baseline of bench/search.py, on an embedding-like
    ``FLOAT[128]`` table: sqlrp's own SQL (``search(..., exact=True)``: ``array_distance`` and
    ``min_by(id, (distance, id), K)``, ties by id) against the one statement a user writes,
    ``min_by(id, array_distance(b.v, q.v), 10)`` (no tie rule), on the same tables.  Seconds per query."""
    import pyarrow as pa
    from search_peers import embedding_like

    X, Q = embedding_like(n, 128, queries)
    db = sqlrp.connect(threads=2)
    for name, key, M in (("points", "id", X), ("queries", "qid", Q)):
        arr = pa.FixedSizeListArray.from_arrays(pa.array(M.ravel()), M.shape[1])
        db.con.register("_f", pa.table({key: pa.array(np.arange(len(M))), "v": arr}))
        db.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _f")
        db.con.unregister("_f")
    sqlrp.build_index(db, "points", "id", "idx", lists=16, layout="array", array_column="v")
    forms = {
        "sqlrp search(exact=True)": lambda: sqlrp.search(db, "idx", "queries", "qid", top=10, exact=True),
        "min_by(id, array_distance, 10)": lambda: db.fetchall(
            "SELECT q.qid, min_by(p.id, array_distance(p.v, q.v), 10) FROM queries q, points p GROUP BY q.qid"
        ),
    }
    print(f"exact 10-NN by brute force in DuckDB, {queries} queries x {n:,} rows x 128 (FLOAT[128])")
    for label, fn in forms.items():
        t = seconds(fn)
        print(f"  {label:<34} {t:8.2f} s  {t / queries:.4f} s per query")


def rabitq(n: int = 200_000, lists: int = 448, probes: int = 32, queries: int = 200) -> None:
    """The code behind the search's estimates, in NumPy on the embedding-like table (``sqlrp.search.ivf``'s
    estimator, the SQL's oracle): Recall@10 after re-ranking the ``C`` best estimates of the probed
    lists, for the randomized Hadamard rotation with 2 rounds and 1 round at 256 bits, and 2 rounds
    at 128 bits.  The ceiling is the share of true neighbours in the probed lists.  (A first probe
    in a throw-away script, before this one, measured a sparse Achlioptas projection of the
    residuals, s = sqrt(d), far worse: 0.611 at C = 200 with 128 bits against 0.870 for a dense
    orthogonal rotation; so the rotation is orthogonal.)"""
    from search_peers import embedding_like

    from sqlrp.search.ivf import estimates, query_planes, reference_codes, train_lists
    from sqlrp.search.rotation import rotate, rotation_signs

    X, Q = embedding_like(n, 128, queries)
    X, Q = X.astype(np.float64), Q.astype(np.float64)
    import faiss

    flat = faiss.IndexFlatL2(128)
    flat.add(X.astype(np.float32))
    truth = flat.search(Q.astype(np.float32), 10)[1]
    rng = np.random.default_rng(0)
    L = train_lists(X[rng.choice(n, 40 * lists, replace=False)], lists, 0)

    def rotations():
        yield "Hadamard, 2 rounds", 256, rotation_signs(256, 1, 2)
        yield "Hadamard, 1 round", 256, rotation_signs(256, 1, 1)
        yield "Hadamard, 2 rounds", 128, rotation_signs(128, 1, 2)

    for label, size, signs in rotations():
        rotated = rotate(L.leaves, signs)
        codes = reference_codes(X, L, signs, rotated)
        RQ = rotate(Q, signs)
        found = {c: [] for c in (50, 100, 200, 400)}
        ceiling = []
        for qi in range(len(Q)):
            dist = ((Q[qi] - L.leaves) ** 2).sum(axis=1)
            rows_, est_ = [], []
            planes, lo, delta, hsum = query_planes(RQ[qi])  # once per query, as the SQL
            for lst in np.argsort(dist)[:probes]:
                rows = np.flatnonzero(codes.lists == lst)
                rows_.append(rows)
                usum = hsum - rotated[lst].sum()
                est_.append(estimates(codes, rows, planes, lo, delta, usum, float(dist[lst])))
            rows, est = np.concatenate(rows_), np.concatenate(est_)
            ceiling.append(len(set(rows) & set(truth[qi])) / 10)
            for c in found:
                best = rows[np.argsort(est)[:c]]
                exact = best[np.argsort(((X[best] - Q[qi]) ** 2).sum(1))[:10]]
                found[c].append(len(set(exact) & set(truth[qi])) / 10)
        cells = ", ".join(f"C {c}: {np.mean(v):.3f}" for c, v in found.items())
        print(f"  {label:<20} {size} bits  {cells}  (ceiling {np.mean(ceiling):.3f})", flush=True)


PROBES = {
    "rabitq": rabitq,
    "search-exact": search_exact,
    "pg-copy": pg_copy,
    "pg-read": pg_read,
    "planning": planning,
    "pg-array": pg_array,
    "pg-fence": pg_fence,
    "scatter": scatter,
    "dtrp": dtrp,
    "pairs": pairs,
    "footprint": footprint,
    "roundtrip": roundtrip,
    "pg-insert": pg_insert,
    "progress": progress,
    "pg-check": pg_check,
    "floor": floor,
    "overhead": overhead,
    "orientation": orientation,
    "worth": worth,
    "small": small,
    "highd": highd,
    "reference": reference_speed,
    "kernel-floor": kernel_floor,
}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe", choices=sorted(PROBES))
    PROBES[parser.parse_args().probe]()
