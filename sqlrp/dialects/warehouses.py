"""Profiles of engines sqlrp renders for but has no backend of its own (reach them through
SQLAlchemy with their own driver: ``sqlrp.connect(engine)``).  Each limit with its source.
"""

from __future__ import annotations

from sqlglot.dialects.bigquery import BigQuery
from sqlglot.dialects.snowflake import Snowflake
from sqlglot.dialects.trino import Trino
from sqlglot.dialects.tsql import TSQL

from .base import SqlrpDialect, extend


class SnowflakeDialect(SqlrpDialect):
    name = "snowflake"
    cos_function = "COS"  # docs.snowflake.com, "COS"
    sqlglot = extend(Snowflake)
    # "The maximum size of a SQL statement is 1 MB" (docs.snowflake.com, "Query size limits")
    max_statement_bytes = 1_000_000
    identifier_case = "upper"  # unquoted identifiers are stored upper-cased ("Identifier resolution")
    ordered_array_agg = False  # ARRAY_AGG ... WITHIN GROUP, ARRAY_POSITION is 0-based
    filter_clause = False
    transactional = False  # DDL commits the open transaction (docs: "DDL statements ... implicit commit")
    # "VALUES ... can be used in the FROM clause" with column aliases (docs.snowflake.com, "VALUES")
    values_relation = True


class BigQueryDialect(SqlrpDialect):
    name = "bigquery"
    cos_function = "COS"  # cloud.google.com/bigquery, "Mathematical functions": COS
    sqlglot = extend(BigQuery)
    # "Maximum query length: 1,024K characters" (cloud.google.com/bigquery/quotas, "Query jobs")
    max_statement_bytes = 1_024 * 1_024
    # "Maximum number of columns in a table ... 10,000" (same page, "Tables")
    max_columns = 10_000
    array_base = 0  # arr[OFFSET(i)]
    ordered_array_agg = False
    filter_clause = False
    transactional = False


class TSQLDialect(SqlrpDialect):
    name = "tsql"
    cos_function = "COS"  # learn.microsoft.com, "COS (Transact-SQL)"
    aliases = ("mssql", "sqlserver")
    sqlglot = extend(TSQL)
    # "Columns per SELECT statement: 4,096" (learn.microsoft.com, "Maximum capacity specifications
    # for SQL Server"); "Length of a string containing SQL statements (batch size): 65,536 * network
    # packet size" (256 MB at the default 4 KB packets); nested sub-queries: 32
    max_columns = 4096
    max_statement_bytes = 65_536 * 4096
    # a table value constructor in FROM, "(VALUES ...) AS t(a, b)" (learn.microsoft.com, "Table Value Constructor")
    values_relation = True
    arrays = False
    filter_clause = False
    ordered_array_agg = False
    values_column_names = True
    # SQL Server's float(53) "is not exactly IEEE 754 ... neither NaN (Not-a-Number) nor infinity is used"
    # (learn.microsoft.com, XQuery "Numeric Values"); since SQL Server 2005 such values are refused on
    # insert: there is no NaN to test for (CAST('NaN' AS FLOAT) is a conversion error)
    holds_nan = False


class TrinoDialect(SqlrpDialect):
    name = "trino"
    cos_function = "cos"  # trino.io/docs, "Mathematical functions": cos(x)
    aliases = ("presto",)
    sqlglot = extend(Trino)
    # query.max-length: 1,000,000 characters by default (trino.io/docs, "Query management properties")
    max_statement_bytes = 1_000_000
    values_relation = True  # "VALUES ... can be used anywhere a query can" with column aliases (trino.io, "VALUES")
    ordered_array_agg = False  # array_agg(x ORDER BY y) exists, but lookup is measured on DuckDB/PostgreSQL only
    transactional = False
