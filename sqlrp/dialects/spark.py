"""Spark SQL (rendered for distributed engines): backtick identifiers, 0-based ``x[i]`` arrays,
``ARRAY(...)`` constructors -- all handled by sqlglot's Spark dialect."""

from __future__ import annotations

from sqlglot.dialects.spark import Spark

from .base import SqlrpDialect, extend


class SparkDialect(SqlrpDialect):
    name = "spark"
    sqlglot = extend(Spark)
