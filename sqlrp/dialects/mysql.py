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
- **The registry** (stored projections, plans, indexes: :mod:`sqlrp.registry.schema`) is kept here as
  InnoDB tables whose text is ``utf8mb4`` under ``utf8mb4_bin`` -- compared by code point, not by the
  server's case-insensitive default (:meth:`MySQLDialect.registry_create`).  A TEXT column cannot be a
  key without a prefix length ("BLOB/TEXT column used in key specification without a key length"), so
  key columns are ``VARCHAR(255)``: a name is at most 255 characters.  ``utf8mb4_bin`` is PAD SPACE in
  MariaDB and MySQL alike (``'a' = 'a '``), so a name ending in a space would be the key of the name
  without it: such names are refused (:meth:`MySQLDialect.check_registry_key`).  Identifiers are
  quoted (``reads`` is a reserved word here).  DDL commits on its own: a failed store deletes what it
  wrote (``transactional = False``: :meth:`sqlrp.registry.store.Registry._atomic`).
- **Search codes**: ``BIT_COUNT(BIGINT)`` counts the 64 bits of the two's complement
  (``BIT_COUNT(-1)`` = 64; mariadb.com/kb "BIT_COUNT"); an index's row hash is the first 64 bits of
  ``SHA2`` over the row's values as ``QUOTE``d text (no 64-bit hash function is built in).
- No arrays, no aggregate ``FILTER``, no ``ARRAY_AGG ... ORDER BY``; ``VALUES ROW(...)`` names its
  columns ``column_0 ..`` (sqlglot renders ``UNION ALL``).
"""

from __future__ import annotations

import copy

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL

from .base import SqlrpDialect, extend

#: sqlrp's own names of a key in the SQL it writes (the search's query id ``_qid`` joins the id ``_id``):
#: an equality of two of them is a key comparison though their names differ
KEY_ALIASES = frozenset({"_id", "_qid", "_key"})

#: marks a node :func:`exact_keys` has made exact already (render is called again on the same nodes)
_EXACT = "sqlrp_exact_key"

#: room for the packet's header and the protocol's command byte under ``max_allowed_packet``
PACKET_HEADROOM = 1024

#: longest name of a stored projection or index (a key column is VARCHAR(255): module docstring)
MAX_KEY_CHARS = 255

#: the registry's tables: InnoDB (transactions for DML, row locks), text compared by code point
REGISTRY_TABLE_OPTIONS = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

#: most columns of a table sqlrp creates here: a row of DOUBLEs must fit InnoDB's 8,126 bytes (half a
#: 16 KiB page; "Row size too large (> 8126)"), measured on MariaDB 10.11: 996 DOUBLEs and a BIGINT key
#: fit, 994 with a TEXT key -- so 994 outputs and the key (a wider key, VARCHAR(255), holds fewer: the
#: server then refuses the table itself, before any row is written)
MAX_TABLE_COLUMNS = 995


def _bytes(value: exp.Expression) -> exp.Cast:
    """``CAST(value AS BINARY)``: a text value as its bytes (no collation, no padding); a number as its
    text, one per value."""
    return exp.Cast(this=value.copy(), to=exp.DataType.build("BINARY"))


def _same_columns(left: exp.Expression, right: exp.Expression) -> bool:
    """Two columns of one name (the key of two relations), or two of sqlrp's names of a key
    (:data:`KEY_ALIASES`)."""
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return False
    return left.name == right.name or {left.name, right.name} <= KEY_ALIASES


def _exact_order_or_membership(node: exp.LT | exp.GT | exp.In) -> None:
    """:func:`exact_keys` of an order or a membership of keys (sqlrp's names of a key,
    :data:`KEY_ALIASES`: a feature's -0.0 and 0.0 must stay equal), in place:

    - ``a.k < b.k`` (each pair of rows once: the evaluation's pairs) is ``a.k < b.k OR (a.k = b.k AND
      bytes(a.k) < bytes(b.k))``: a strict total order again where the collation ties look-alikes;
    - ``q.k IN (SELECT k ...)`` is ``(q.k, bytes(q.k)) IN (SELECT k, bytes(k) ...)``."""
    node.meta[_EXACT] = True
    if isinstance(node, exp.In):
        query = node.args.get("query")
        select = query.this if isinstance(query, exp.Subquery) else None
        if not (isinstance(select, exp.Select) and len(select.expressions) == 1):
            return
        inner = select.expressions[0].unalias()
        if not (_same_columns(node.this, inner) and inner.name in KEY_ALIASES):
            return
        select.set("expressions", [select.expressions[0], _bytes(inner)])
        node.set("this", exp.Tuple(expressions=[node.this.copy(), _bytes(node.this)]))
        return
    left, right = node.this, node.expression
    if not (_same_columns(left, right) and left.name in KEY_ALIASES):  # a key: a number or a text, never -0.0
        return
    tie = exp.EQ(this=left.copy(), expression=right.copy())
    tie.meta[_EXACT] = True  # already within the refinement: left as it is by a second render
    by_bytes = type(node)(this=_bytes(left), expression=_bytes(right))
    by_bytes.meta[_EXACT] = True
    refined = exp.Or(this=node.copy(), expression=exp.Paren(this=exp.And(this=tie, expression=by_bytes)))
    node.replace(exp.Paren(this=refined))


def _exact_key_order(order: exp.Order) -> None:
    """``ORDER BY k`` of a key (:data:`KEY_ALIASES`) in the order NumPy and DuckDB give: a number by
    value, a text by its bytes (code points), in place.  ``CHARSET(k)`` is ``binary`` for a number:
    ``ORDER BY CASE WHEN CHARSET(k) = 'binary' THEN k END, CAST(k AS BINARY)`` (the first is NULL, a
    tie, for every text; the second orders texts, and ties nothing two numbers did not tie)."""
    order.meta[_EXACT] = True
    keys: list[exp.Expression] = []
    for ordered in order.expressions:
        if not isinstance(ordered, exp.Ordered):  # ORDER BY k, as sqlglot's order_by() builds it
            ordered = exp.Ordered(this=ordered.copy())
        key = ordered.this
        if not (isinstance(key, exp.Column) and key.name in KEY_ALIASES):
            keys.append(ordered)
            continue
        binary = exp.Anonymous(this="CHARSET", expressions=[key.copy()]).eq(exp.Literal.string("binary"))
        number = exp.Case(ifs=[exp.If(this=binary, true=key.copy())])
        by_number = ordered.copy()
        by_number.set("this", number)
        keys.append(by_number)
        by_bytes = ordered.copy()
        by_bytes.set("this", _bytes(key))
        keys.append(by_bytes)
    order.set("expressions", keys)


def exact_keys(statement: exp.Expression) -> exp.Expression:
    """``statement`` with every key comparison made exact (byte for byte), in place:

    - each column of a ``GROUP BY`` or a window's ``PARTITION BY`` is followed by its bytes (``GROUP BY
      k, CAST(k AS BINARY)``);
    - an equality of two columns of one name (a join on the key of two relations, an incremental
      top-up's ``NOT EXISTS (... WHERE done.k = t.k)``) also requires equal bytes;
    - ``COUNT(DISTINCT k)`` counts distinct ``(k, bytes of k)``;
    - ``ORDER BY`` one of sqlrp's names of a key orders numbers by value and texts by their bytes
      (:func:`_exact_key_order`);
    - an order of two columns of one name, and a key's membership in a select of one column of its
      name, are made exact too (:func:`_exact_order_or_membership`).

    A column compared with another of another name (the long layout's ``m.feature = s._f``) or with a
    literal is left as it is: those are numbers.  Idempotent (the nodes are marked)."""
    kinds = (exp.Group, exp.Window, exp.Order, exp.EQ, exp.LT, exp.GT, exp.In, exp.Distinct)
    for node in list(statement.find_all(*kinds)):  # one walk of a large tree
        if node.meta.get(_EXACT):
            continue
        if isinstance(node, exp.Order):
            _exact_key_order(node)
            continue
        if isinstance(node, (exp.LT, exp.GT, exp.In)):
            _exact_order_or_membership(node)
            continue
        if isinstance(node, (exp.Group, exp.Window)):  # GROUP BY k, a window's PARTITION BY k
            arg = "expressions" if isinstance(node, exp.Group) else "partition_by"
            refined: list[exp.Expression] = []
            for key in node.args.get(arg) or []:
                refined.append(key)
                if isinstance(key, exp.Column):
                    refined.append(_bytes(key))
            if refined:
                node.set(arg, refined)
            node.meta[_EXACT] = True
        elif isinstance(node, exp.EQ):
            left, right = node.this, node.expression
            if not _same_columns(left, right):
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
    values_relation = True  # the long layout's inlined matrix: a UNION ALL of SELECTs (tested on MariaDB)
    percentile_aggregate = False  # PERCENTILE_CONT is a window function in MariaDB, absent in MySQL
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

    @property
    def keeps_registry(self) -> bool:
        """The registry's tables are rendered for MySQL/MariaDB and tested on MariaDB (module docstring)."""
        return True

    def registry_create(self, create: exp.Create, key: tuple[exp.Identifier, ...]) -> str:
        """InnoDB, text under ``utf8mb4_bin``, TEXT key columns as ``VARCHAR(255)`` (an index on TEXT
        needs a prefix length), every identifier quoted (module docstring)."""
        create = create.copy()
        keys = {k.name for k in key}
        for column in create.find_all(exp.ColumnDef):
            kind = column.args.get("kind")
            if column.name in keys and isinstance(kind, exp.DataType) and kind.is_type("text"):
                column.set("kind", exp.DataType.build(f"VARCHAR({MAX_KEY_CHARS})"))
        for identifier in create.find_all(exp.Identifier):
            identifier.set("quoted", True)
        return super().registry_create(create, key) + REGISTRY_TABLE_OPTIONS

    def check_registry_key(self, name: str, role: str) -> None:
        """Refuse a ``name`` the registry's keys cannot hold apart: longer than a key column, or ending
        in a space (PAD SPACE: ``'a '`` is the key ``'a'``)."""
        if len(name) > MAX_KEY_CHARS:
            raise self.refuse(f"a {role} of {len(name):,} characters is too long (at most {MAX_KEY_CHARS} here)")
        if name != name.rstrip(" "):
            raise self.refuse(
                f"the {role} {name!r} ends in a space, and the server compares names without trailing spaces "
                "(it would be the name without them): drop the trailing spaces"
            )

    def popcount(self, word: exp.Expression) -> exp.Expression:
        # BIT_COUNT(BIGINT) counts the 64 bits of the two's complement: BIT_COUNT(-1) = 64 (module docstring)
        return exp.Anonymous(this="BIT_COUNT", expressions=[word])

    def row_hash(self, values: list[exp.Expression]) -> exp.Expression:
        # the first 16 hex digits of SHA2(256) of the values as QUOTE()d text (QUOTE(NULL) is the word NULL,
        # a string 'NULL' is quoted: the two differ), as a BIGINT UNSIGNED; the sum over a table is a DECIMAL
        quoted = [exp.Anonymous(this="QUOTE", expressions=[v]) for v in values]
        text = exp.Anonymous(this="CONCAT_WS", expressions=[exp.Literal.string(","), *quoted])
        digest = exp.Anonymous(this="SHA2", expressions=[text, exp.Literal.number(256)])
        hexa = exp.Anonymous(this="LEFT", expressions=[digest, exp.Literal.number(16)])
        number = exp.Anonymous(this="CONV", expressions=[hexa, exp.Literal.number(16), exp.Literal.number(10)])
        return exp.Cast(this=number, to=exp.DataType.build("BIGINT UNSIGNED", dialect="mysql"))

    def with_packet_limit(self, max_allowed_packet: int) -> MySQLDialect:
        """This profile for a server whose ``max_allowed_packet`` is that many bytes: statements up to
        it, less :data:`PACKET_HEADROOM` (the compiler splits a longer one, or refuses it naming the
        limit)."""
        profile = copy.copy(self)
        profile.max_statement_bytes = max(int(max_allowed_packet) - PACKET_HEADROOM, 1)
        return profile
