"""Spark SQL (local mode, a standalone cluster, or Spark Connect).

- Arrays are 0-based under ``x[i]`` (sqlglot converts literal subscripts) but ``ARRAY_POSITION``
  and ``element_at`` are 1-based, and ANSI mode (the default since Spark 4.0) raises
  ``INVALID_ARRAY_INDEX`` on an index out of range: the ``lookup`` strategy, which mixed the two,
  is refused here (long tables use ``join``).
- Whole-stage code generation gives up on a plan whose generated method exceeds
  ``spark.sql.codegen.hugeMethodLimit`` (65,535 bytes of bytecode; Spark's ``SQLConf``) and the
  plan then runs interpreted.  Deep nested selects (the ``pairs`` plans) cost Spark far more than
  DuckDB (d = 784, k = 200, s = 3 on 20,000 rows: 405 s against 60 s for ``s = sqrt(d)`` inline;
  ``../shared/DESIGN.md`` 4b), so ``auto`` never chooses them here.
- No transactions: ``CREATE TABLE ... AS`` is one job (a failed job leaves no table).
- Table names: only letters, digits and ``_`` (``[INVALID_SCHEMA_OR_RELATION_NAME] `out 1` is not a
  valid name for tables/schemas``, Spark 4.3, session catalog); columns may hold anything quoted.
"""

from __future__ import annotations

from sqlglot.dialects.spark import Spark

from .base import SqlrpDialect, extend


class SparkDialect(SqlrpDialect):
    name = "spark"
    # a left-deep sum of 784 terms (s = 1, d = 784) overflows the parser's stack (java.lang.
    # StackOverflowError, Spark 4.3 local, default 1 MB thread stacks): groups of at most 100 terms
    sqlglot = extend(Spark, depth=100)
    max_expression_depth = 100
    array_base = 0
    ordered_array_agg = False
    transactional = False
    executes = True
    table_name_pattern = r"[A-Za-z0-9_]+"
