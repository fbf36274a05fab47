"""SQLite (the standard library's ``sqlite3``).

Limits, from https://www.sqlite.org/limits.html (defaults of the library as Python ships it):

- ``SQLITE_MAX_COLUMN`` 2,000: columns in a table or a select's result.
- ``SQLITE_MAX_SQL_LENGTH`` 1,000,000,000 bytes per statement.
- ``SQLITE_MAX_EXPR_DEPTH`` 1,000: ``a + b + c ...`` parses left-deep, one level per term, so a sum
  of more than 1,000 terms fails to prepare ("Expression tree is too large").  Sums are therefore
  rendered as nested groups of at most 100 terms (:func:`sqlrp.core.nodes.signed_sum_sql`).

No array type (the array layout and array output are refused).  ``VALUES`` drops the column names
of an alias (``(VALUES ...) AS m(vector, feature, weight)`` is not even accepted, and sqlglot
renders it as ``AS "m"``, whose columns are ``column1..3``: the join on ``"feature"`` then compares
against a string literal and returns no rows -- the silent empty result of issue 11), so an inline
matrix is rendered as ``SELECT ... UNION ALL SELECT ...``.  Aggregate ``FILTER (WHERE ...)``
exists since 3.30.0, but the portable ``SUM(CASE ...)`` is used.  Transactions cover DDL.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.sqlite import SQLite

from .base import SqlrpDialect, extend

DEPTH = 100  # terms per group of a sum: 10 groups of 100 stay far below SQLITE_MAX_EXPR_DEPTH


class SQLiteDialect(SqlrpDialect):
    name = "sqlite"
    # "Built-In Mathematical SQL Functions" (3.35+, SQLITE_ENABLE_MATH_FUNCTIONS); where the library lacks
    # them, Python's math.cos is registered when connecting (backends/sqlite.py)
    cos_function = "cos"
    aliases = ("sqlite3",)
    sqlglot = extend(SQLite, depth=DEPTH)
    max_columns = 2000
    max_statement_bytes = 1_000_000_000
    max_expression_depth = 1000
    arrays = False
    filter_clause = False
    ordered_array_agg = False
    values_column_names = False
    # quoted names match ignoring ASCII case only (sqlite3StrICmp folds A-Z), measured with Python's sqlite3
    quoted_case_fold = "ascii"
    executes = True
    # ---- what varies between engines (dialects/portable.py), stated with its source ----
    # no arrays (above), so no array base and no UNNEST; 1.5e-3 is a REAL ("Literal Values",
    # https://www.sqlite.org/lang_expr.html); no fence (the base's)
    exponent_literals = True

    def is_nan(self, value: exp.Expression) -> exp.Expression:
        # SQLite has no NaN: it stores one as NULL (which the NULL check finds), and CAST('NaN' AS
        # REAL) is 0.0 -- comparing with it refused every row holding a zero
        return exp.false()

    def not_a_number(self, value: exp.Expression) -> exp.Expression | None:
        # type affinity is advisory: a REAL column may hold the text '12abc', which CAST reads as 12.0
        kinds = [exp.Literal.string(k) for k in ("integer", "real", "null")]
        return exp.Not(this=exp.In(this=exp.Anonymous(this="typeof", expressions=[value]), expressions=kinds))

    def registry_type(self, name: str, null: bool) -> exp.DataType:
        # JSON as TEXT: a declared type JSON would have NUMERIC affinity (https://www.sqlite.org/datatype3.html)
        return exp.DataType.build("TEXT" if name == "JSON" else name)

    def registry_create(self, create: exp.Create, key: tuple[exp.Identifier, ...]) -> str:
        # rows keyed by several columns are stored once, in the key's b-tree, instead of in a rowid table
        # plus a key index (https://www.sqlite.org/withoutrowid.html)
        return super().registry_create(create, key) + (" WITHOUT ROWID" if len(key) > 1 else "")
