"""PostgreSQL's fence (``dialects/postgres.py``): the fenced sub-queries stay sub-queries (the array is
detoasted once per row, each element read once), a parallel plan can still run every row in the
workers, and the rows are the same either way.  Plans only: no timings here (``bench.probes pg-array``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sqlrp
from sqlrp.compiler import Source, compile_sql
from sqlrp.dialects import get_dialect
from sqlrp.methods import make_projection, reference
from testkit.frames import array_frame

FENCE = "LIMIT ALL"
# make a parallel plan the cheapest even for a small test table (what the fence must not forbid)
FORCE_PARALLEL = ["SET LOCAL parallel_setup_cost = 0", "SET LOCAL parallel_tuple_cost = 0"]
CASES = {  # method, parameters, strategy, fenced sub-queries (detoast, elements, [partial sums], [linear sums])
    "inline": ("achlioptas", {"s": "auto"}, "inline", 2),
    "mailman": ("achlioptas", {"s": 1}, "mailman", 3),
    "kernel": ("p-rp", {"m": 3}, "inline", 3),
    "kernel-mailman": ("p-rp", {"m": 3}, "mailman", 4),
}
# a subscript applied to the detoast itself: the sub-query holding it was flattened
SUBSCRIPTED_DETOAST = re.compile(r"array_cat\([^()]*\)\)\[")


@pytest.fixture
def toasted(pg):
    """300 rows of 400 float8 (3.2 kB each: stored out of line, in TOAST)."""
    X = np.random.default_rng(11).standard_normal((300, 400))
    pg.write_dataframe("arr", array_frame(X))
    pg.execute('ANALYZE "arr"')
    return pg, X


def _explain(db, sql: str, settings: list[str]) -> list[str]:
    with db.transaction():
        for statement in settings:
            db.execute(statement)
        return [r[0] for r in db.fetchall("EXPLAIN (VERBOSE, COSTS OFF) " + sql)]


def test_fence_is_a_null_limit():
    """``OFFSET 0`` would be parsed as int4 cast to int8, a function call the planner does not treat
    as a constant: it would forbid a parallel plan over the sub-query.  ``LIMIT ALL`` is a NULL int8
    constant; ``OFFSET CAST('0' AS BIGINT)`` was one too, but engines other than PostgreSQL refuse it."""
    proj = make_projection("achlioptas", 6, 3, seed=0)
    sql = compile_sql(proj, Source("t", "id", "array", array_column="x"), "postgres", strategy="inline")
    assert sql.count(FENCE) == 2 and "OFFSET" not in sql


def test_settings_only_for_the_postgres_array_layout():
    pg = get_dialect("postgres")
    assert pg.local_settings(Source("t", "id", "array", array_column="x")) == [
        "SET LOCAL min_parallel_table_scan_size = 0"
    ]
    assert pg.local_settings(Source("t", "id", "wide", columns=("a",))) == []
    assert get_dialect("duckdb").local_settings(Source("t", "id", "array", array_column="x")) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_fence_holds_under_a_parallel_plan(toasted, case):
    db, X = toasted
    method, params, strategy, fences = CASES[case]
    proj = make_projection(method, X.shape[1], 8, seed=2, **params)
    plan = sqlrp.plan(db, "arr", "id", proj, layout="array")
    sql = compile_sql(proj, plan.source, "postgres", plan.output, strategy=strategy)
    assert sql.count(FENCE) == fences
    settings = get_dialect("postgres").local_settings(plan.source)
    lines = _explain(db, sql, settings + FORCE_PARALLEL)
    text = "\n".join(lines)
    # every fenced sub-query is still a Subquery Scan: none was pulled up into the outer query
    assert text.count("Subquery Scan") == fences, text
    assert not SUBSCRIPTED_DETOAST.search(text), text  # the subscripts read the detoasted column
    # the whole projection runs in the workers: the Gather is the top node (under OFFSET 0 it sits
    # below the sub-queries, the leader computing every row alone) ...
    assert lines[0].startswith("Gather"), text
    # ... and the detoast is computed at one node, once per row
    assert [line.count("array_cat(") for line in lines if "array_cat(" in line] == [1], text


def test_parallel_rows_equal_serial_rows_and_reference(toasted):
    db, X = toasted
    proj = make_projection("p-rp", X.shape[1], 8, seed=2, m=3)
    want = reference.transform(proj, X)
    outs = []
    for settings in (["parallel_setup_cost", "parallel_tuple_cost"], ["max_parallel_workers_per_gather"]):
        for name in settings:  # this test's session only; project() adds its own SET LOCAL
            db.execute(f"SET {name} = 0")
        db.execute('DROP TABLE IF EXISTS "o"')
        sqlrp.project(db, "arr", "id", proj, layout="array", into="o", check=False)
        outs.append(db.query_df('SELECT * FROM "o" ORDER BY "id"'))
        for name in settings:
            db.execute(f"RESET {name}")
    parallel, serial = outs
    assert list(parallel.columns) == ["id"] + [f"p{j}" for j in range(8)]  # nothing else leaks out
    # the same rows, each to the last bits of its sums: a parallel aggregate adds a row's terms in the order its
    # workers meet them, so floating-point rounding may differ (seen: 4.5e-13 on values ~300, under load)
    assert parallel["id"].equals(serial["id"])
    scale = np.abs(serial.drop(columns="id").to_numpy()).max()
    np.testing.assert_allclose(
        parallel.drop(columns="id").to_numpy(), serial.drop(columns="id").to_numpy(), rtol=0, atol=1e-12 * scale
    )
    got = parallel.drop(columns="id").to_numpy(dtype=float)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


def test_settings_end_with_the_projection(toasted):
    db, X = toasted
    before = db.fetchall("SHOW min_parallel_table_scan_size")[0][0]
    sqlrp.project(db, "arr", "id", make_projection("achlioptas", X.shape[1], 4, seed=0), layout="array", into="o2")
    sqlrp.project(db, "arr", "id", make_projection("achlioptas", X.shape[1], 4, seed=0), layout="array")
    assert db.fetchall("SHOW min_parallel_table_scan_size")[0][0] == before
