"""PostgreSQL.  The difference that matters: ``float8[]`` values wider than ~2 kB are TOASTed and
every ``x[i]`` subscript on a TOASTed value detoasts the whole array (``../shared/DESIGN.md`` §4:
784 subscripts per row did not finish in 5 minutes on 50,000 rows).  The compiler therefore detoasts
once per row, in a sub-query fenced with ``OFFSET 0`` so the planner cannot flatten it back into the
subscripts; ``array_cat`` with an empty array returns its input detoasted.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from .base import SqlrpDialect, extend


class PostgresDialect(SqlrpDialect):
    name = "postgres"
    sqlglot = extend(Postgres)
    max_columns = 1600  # a select may produce 1,664 columns and a table hold 1,600

    def array_source(self, column: exp.Expression) -> exp.Expression:
        empty = exp.cast(exp.Array(expressions=[]), exp.DataType.build("DOUBLE[]", dialect="postgres"))
        return exp.Anonymous(this="array_cat", expressions=[column, empty])

    def needs_materialised_array(self) -> bool:
        return True

    def fence(self, select: exp.Select) -> exp.Select:
        return select.offset(0, copy=False)
