"""Probe: how many AST elements ClickHouse counts for sqlrp's inline sums, against
``sqlrp.compiler.limits.estimate_nodes`` (which must never count fewer).  Bisects the smallest
``max_ast_elements`` under which ``EXPLAIN AST`` accepts the statement, in chdb.

    PYTHONPATH=. python bench/clickhouse_ast.py
"""

import chdb

from sqlrp.compiler import Source, compile_sql
from sqlrp.compiler.limits import estimate_nodes
from sqlrp.methods import make_projection

con = chdb.connect(":memory:")
cur = con.cursor()
cur.execute("CREATE TABLE t (id Int64, " + ", ".join(f"f{i} Float64" for i in range(100)) + ") ENGINE=Memory")


def need(sql):
    lo, hi = 10, 10_000_000
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            cur.execute(f"EXPLAIN AST {sql} SETTINGS max_ast_elements = {mid}")
            hi = mid
        except Exception as e:
            if "TOO_BIG_AST" in str(e) or "too big" in str(e).lower():
                lo = mid + 1
            else:
                raise
    return lo


for k, s in [(5, 1), (20, 1), (20, 3)]:
    p = make_projection("achlioptas", 100, k, seed=1, s=s)
    sql = compile_sql(
        p, Source("t", "id", "wide", tuple(f"f{i}" for i in range(100))), "clickhouse", strategy="inline", pretty=False
    )
    print(f"k = {k:3d}, s = {s}: {p.linear.nnz:5d} terms, estimate {estimate_nodes(sql):6d}, clickhouse {need(sql):6d}")
