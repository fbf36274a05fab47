"""ClickHouse (in-process through chdb, or a server through clickhouse-connect).

Limits are server settings; sqlrp respects their defaults, from
https://clickhouse.com/docs/operations/settings/settings:

- ``max_query_size`` 262,144 bytes: the longest query the parser reads.
- ``max_ast_elements`` 50,000: nodes of a query's syntax tree (``max_ast_depth`` 1,000).
- columns: no fixed limit.

Arrays are 1-based (``arr[1]``).  There are no transactions (``CREATE TABLE ... AS`` is one
statement: a failure leaves no table; sqlrp materialises under a staging name and renames), every
``CREATE TABLE`` needs an ENGINE, ``ARRAY_AGG(x ORDER BY y)`` is rejected, and ``VALUES`` with
named columns is rendered by sqlglot as ``SELECT ... UNION ALL``.  Float sums overflow to ``inf``
like DuckDB's.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse

from .base import SqlrpDialect, extend


class ClickHouseDialect(SqlrpDialect):
    name = "clickhouse"
    sqlglot = extend(ClickHouse, depth=200)  # max_ast_depth 1,000
    max_statement_bytes = 262_144
    max_ast_nodes = 50_000
    max_expression_depth = 1000
    filter_clause = False
    ordered_array_agg = False
    nan_propagating_sums = True
    # EXISTS with an outer reference is experimental (allow_experimental_correlated_subqueries)
    correlated_subqueries = False
    transactional = False
    executes = True

    def is_nan(self, value: exp.Expression) -> exp.Expression:
        # IEEE comparison: nan = nan is false in ClickHouse; isNaN is the test
        return exp.Anonymous(this="isNaN", expressions=[value])

    def rename(self, old: exp.Table, new: exp.Table) -> str:
        # ClickHouse renames with RENAME TABLE a TO b (no ALTER TABLE ... RENAME TO)
        return f"RENAME TABLE {self.render(old)} TO {self.render(new)}"

    def table_properties(self) -> exp.Properties | None:
        # CREATE TABLE ... AS needs an engine; MergeTree with no sorting key keeps every row
        return exp.Properties(
            expressions=[
                exp.EngineProperty(this=exp.to_identifier("MergeTree")),
                exp.Order(expressions=[exp.Ordered(this=exp.Anonymous(this="tuple"))]),
            ]
        )
