"""PostgreSQL: the fence, parallel plans, COPY, the NULL check, inserts."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.compiler import compile_sql
from sqlrp.methods import make_projection

from .common import best, seconds, wide

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

    from testkit.pgserver import TempPostgres

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


@contextmanager
def pg_wide(n: int, d: int):
    """A throw-away PostgreSQL server with one wide table ``t`` of n x d float8 features, vacuumed
    and analysed; yields a connected sqlrp backend."""
    from testkit.pgserver import TempPostgres

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


def pg_copy(d: int = 784, k: int = 200) -> None:
    """Storing a projection on PostgreSQL (issue 14): d = 784, k = 200, s = 1 (156,800 matrix rows)
    through sqlrp's COPY, as one block of COPY text (what ``insert_frame`` does for numeric frames)
    against a ``write_row`` per row (what it did), best of 3 each, in turn."""
    from sqlrp.backends import postgres
    from testkit.pgserver import TempPostgres

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
    from testkit.pgserver import TempPostgres

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
