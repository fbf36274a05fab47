"""MySQL and MariaDB: reached through SQLAlchemy (``mysql+pymysql://``), rendered with the portable
core (:mod:`.portable`), run and tested on a real MariaDB 10.11 (``tests/engines/test_engine_mariadb.py``).

Limits and differences, each with its source:

- **Text keys compare under the column's collation.**  MariaDB's default, ``utf8mb4_general_ci``
  (Debian's ``50-server.cnf``), ignores case, accents and -- PAD SPACE -- trailing spaces (measured,
  10.11: ``'a' = 'A' = 'a '`` and ``'e' = 'é'``); MySQL 8's ``utf8mb4_0900_ai_ci`` ignores case and
  accents.  ``GROUP BY id`` then merges such ids into one output row holding their summed features,
  and a join on the key matches each with all of them.  Even ``utf8mb4_bin`` pads in MariaDB.  NumPy
  (:mod:`sqlrp.methods.reference`) compares ids exactly, so every key a statement groups by, joins on
  or counts is compared here as its bytes as well (:func:`exact_keys`): ``GROUP BY k, CAST(k AS
  BINARY)`` -- a refinement, which only splits groups whose bytes differ, so a number key groups as it
  did (equal numbers of one column have one text) -- ``a.k = b.k AND CAST(a.k AS BINARY) = CAST(b.k AS
  BINARY)`` and ``COUNT(DISTINCT k, CAST(k AS BINARY))``.
- **No NaN, no infinity** in a DOUBLE column (measured, MariaDB 10.11: ``CAST('NaN' AS DOUBLE)`` is 0,
  so ``x = CAST('NaN' AS DOUBLE)`` finds every zero; PyMySQL refuses to send ``nan`` or ``inf``: "nan
  can not be used with MySQL").  The input check tests for NULL (and infinity) only
  (:attr:`~.base.SqlrpDialect.holds_nan`), and a NaN in a frame is refused before it is written
  (:meth:`sqlrp.backends.sqlalchemy.SQLAlchemyBackend.write_dataframe`).  An overflowing DOUBLE
  expression raises ("DOUBLE value is out of range") rather than giving infinity.
- **Statement size**: a statement is one packet of at most ``max_allowed_packet`` bytes; a longer one
  ends the connection ("MySQL server has gone away").  The default is 16 MiB in MariaDB
  (mariadb.com/kb, "Server System Variables": max_allowed_packet, 16 MiB from 10.2.4) and 64 MiB in
  MySQL 8.0 (dev.mysql.com, "Server System Variables"); the profile takes the smaller, and a connected
  backend reads the server's own value (:meth:`with_packet_limit`).
- **Columns**: InnoDB tables hold at most 1,017 columns (dev.mysql.com, "Limits on Table Column Count
  and Row Size"; mariadb.com/kb, "InnoDB Limitations"; measured on MariaDB 10.11: 1,018 is "Too many
  columns"), and a row at most 8,126 bytes inline ("Row size too large (> 8126)"): 995 DOUBLE columns,
  key included (:data:`MAX_TABLE_COLUMNS`, measured).  A table sqlrp would create wider than that is
  refused before it runs; rows handed back are not limited (a select of 3,000 columns runs).
- No arrays, no aggregate ``FILTER``, no ``ARRAY_AGG ... ORDER BY``; ``VALUES ROW(...)`` names its
  columns ``column_0 ..`` (sqlglot renders ``UNION ALL``).
"""

from __future__ import annotations

import copy

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL

from .base import SqlrpDialect, extend

#: marks a node :func:`exact_keys` has made exact already (render is called again on the same nodes)
_EXACT = "sqlrp_exact_key"

#: room for the packet's header and the protocol's command byte under ``max_allowed_packet``
PACKET_HEADROOM = 1024

#: most columns of a table sqlrp creates here: a row of DOUBLEs must fit InnoDB's 8,126 bytes (half a
#: 16 KiB page; "Row size too large (> 8126)"), measured on MariaDB 10.11: 996 DOUBLEs and a BIGINT key
#: fit, 994 with a TEXT key -- so 994 outputs and the key (a wider key, VARCHAR(255), holds fewer: the
#: server then refuses the table itself, before any row is written)
MAX_TABLE_COLUMNS = 995


def _bytes(value: exp.Expression) -> exp.Cast:
    """``CAST(value AS BINARY)``: a text value as its bytes (no collation, no padding); a number as its
    text, one per value."""
    return exp.Cast(this=value.copy(), to=exp.DataType.build("BINARY"))


def exact_keys(statement: exp.Expression) -> exp.Expression:
    """``statement`` with every key comparison made exact (byte for byte), in place:

    - each column of a ``GROUP BY`` is followed by its bytes (``GROUP BY k, CAST(k AS BINARY)``);
    - an equality of two columns of one name (a join on the key of two relations, an incremental
      top-up's ``NOT EXISTS (... WHERE done.k = t.k)``) also requires equal bytes;
    - ``COUNT(DISTINCT k)`` counts distinct ``(k, bytes of k)``.

    A column compared with another of another name (the long layout's ``m.feature = s._f``) or with a
    literal is left as it is: those are numbers.  Idempotent (the nodes are marked)."""
    for node in list(statement.find_all(exp.Group, exp.EQ, exp.Distinct)):  # one walk of a large tree
        if node.meta.get(_EXACT):
            continue
        if isinstance(node, exp.Group):
            refined: list[exp.Expression] = []
            for key in node.expressions:
                refined.append(key)
                if isinstance(key, exp.Column):
                    refined.append(_bytes(key))
            node.set("expressions", refined)
            node.meta[_EXACT] = True
        elif isinstance(node, exp.EQ):
            left, right = node.this, node.expression
            if not (isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.name == right.name):
                continue
            node.meta[_EXACT] = True  # the copy below keeps the mark: a second render leaves it as it is
            exact = exp.EQ(this=_bytes(left), expression=_bytes(right))
            node.replace(exp.Paren(this=exp.And(this=node.copy(), expression=exact)))
        elif isinstance(node.parent, exp.Count):  # COUNT(DISTINCT k)
            keys = list(node.expressions)
            node.set("expressions", [*keys, *[_bytes(k) for k in keys if isinstance(k, exp.Column)]])
            node.meta[_EXACT] = True
    return statement


class MySQLDialect(SqlrpDialect):
    name = "mysql"
    cos_function = "COS"  # MySQL / MariaDB "Mathematical Functions": COS(X)
    aliases = ("mariadb",)
    sqlglot = extend(MySQL)
    max_columns = 1017  # InnoDB's limit per table (module docstring)
    max_statement_bytes = 16 * 1024 * 1024 - PACKET_HEADROOM  # MariaDB's default max_allowed_packet
    arrays = False
    filter_clause = False  # no aggregate FILTER clause
    ordered_array_agg = False
    values_column_names = False  # VALUES ROW(...) names columns column_0..; sqlglot renders UNION ALL
    holds_nan = False  # no NaN in a DOUBLE column; CAST('NaN' AS DOUBLE) is 0 (module docstring)

    def render(self, expression: exp.Expression, pretty: bool = False) -> str:
        """The SQL of ``expression`` with its key comparisons exact (:func:`exact_keys`); a ``CREATE
        TABLE ... AS SELECT`` of more columns than an InnoDB row holds is refused (:data:`MAX_TABLE_COLUMNS`)."""
        if isinstance(expression, exp.Create) and str(expression.args.get("kind", "")).upper() == "TABLE":
            select = expression.expression
            width = len(select.expressions) if isinstance(select, exp.Select) else 0
            if width > MAX_TABLE_COLUMNS and not select.is_star:
                raise self.refuse(
                    f"a table of {width:,} columns does not fit an InnoDB row (at most {MAX_TABLE_COLUMNS:,} "
                    "DOUBLE columns, key included: 8,126 bytes a row); use a smaller k, or take the rows "
                    "back instead of writing a table"
                )
        return super().render(exact_keys(expression), pretty=pretty)

    def with_packet_limit(self, max_allowed_packet: int) -> MySQLDialect:
        """This profile for a server whose ``max_allowed_packet`` is that many bytes: statements up to
        it, less :data:`PACKET_HEADROOM` (the compiler splits a longer one, or refuses it naming the
        limit)."""
        profile = copy.copy(self)
        profile.max_statement_bytes = max(int(max_allowed_packet) - PACKET_HEADROOM, 1)
        return profile
