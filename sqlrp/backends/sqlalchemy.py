"""Any engine SQLAlchemy reaches: a SQLAlchemy ``Engine`` or ``Connection``, or a URL (``from_url``).

    db = sqlrp.connect(engine)                   # or SQLAlchemyBackend(engine): sqlrp opens a connection
    db = sqlrp.connect(connection)               # the caller's connection: db.close() leaves it open
    db = SQLAlchemyBackend.from_url("snowflake://user@account/db/schema")

The SQL sqlrp compiles is rendered for :attr:`SQLAlchemyBackend.dialect`, the sqlrp/sqlglot name of
SQLAlchemy's dialect (``postgresql`` -> ``postgres``, ``mssql`` -> ``tsql`` ...; :data:`DIALECTS`).

Statements without parameters (everything the compiler emits, with the user's quoted identifiers)
go to the driver as they are (``exec_driver_sql`` with ``no_parameters``): SQLAlchemy does not look
for ``:name`` binds in them and the driver does not look for ``%s`` or ``?``.  sqlrp's internal
queries with ``?`` placeholders become ``text()`` with binds ``:p0, :p1 ...`` (a ``?`` inside a quoted
identifier, a string literal or a comment stays as it is; a ``:name`` already in the text is
escaped so that SQLAlchemy does not take it for a bind).

Transactions: outside :meth:`~SQLAlchemyBackend.transaction` every call commits when it is done
(SQLAlchemy 2 begins a transaction on first use); ``transaction()`` is the connection's ``begin()``,
and nested calls join the outer one.  A connection passed in must not be inside a transaction:
sqlrp would otherwise commit the caller's work.  SQLite's Python driver does not begin a transaction
before DDL, so there sqlrp emits ``BEGIN`` itself: a failed materialisation leaves no table.
Engines whose DDL commits on its own (:data:`NON_TRANSACTIONAL`), and connections in ``AUTOCOMMIT``
mode, have ``transactional = False``: the registry then cleans up after a failure instead.

MySQL and MariaDB (``sqlrp/dialects/mysql.py``): the server's ``max_allowed_packet`` is read on
connect and is the profile's statement limit for this connection (:attr:`SQLAlchemyBackend.sql_dialect`:
the compiler splits a longer statement, or refuses it naming the limit), and a statement longer than it
is refused before it is sent (the server would drop the connection: "server has gone away").  On an
engine without NaN (:attr:`~sqlrp.dialects.base.SqlrpDialect.holds_nan`) a frame holding NaN or
infinity is refused before anything is written, naming the column and the row.  Both checks:
:mod:`sqlrp.backends.mysql_limits`.  SQLAlchemy's dialect and type names in sqlrp's spelling:
:mod:`sqlrp.backends.sqlalchemy_names`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidParameter
from ..core.lazy import pd
from ..dialects import dialect_names, get_dialect
from ..dialects.base import ALIASES, SqlrpDialect
from ..dialects.postgres import ADVISORY_LOCK
from . import catalog
from .base import Backend, ColumnInfo, missing_table
from .drivers import missing_dialect, missing_driver
from .mysql_limits import named_lock, packet_batches, packet_limit, refuse_non_finite, refuse_oversized
from .placeholders import to_named
from .sqlalchemy_names import column_info, frame_type, sqlrp_dialect
from .streams import Stream
from .values import frame_rows, py

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

#: sqlrp dialects whose DDL commits on its own (or that have no multi-statement transactions)
NON_TRANSACTIONAL = frozenset({"snowflake", "bigquery", "spark", "databricks", "trino", "clickhouse", "mysql"})

_ROWS_PER_INSERT = 10_000  # rows per executemany batch


def __getattr__(name: str) -> Any:
    """``DIALECTS``: the SQLAlchemy names sqlrp maps to another dialect name (kept for callers of the
    table that used to stand here; the dialect files declare their aliases)."""
    if name == "DIALECTS":
        dialect_names()  # every dialect file imported: every alias declared
        return {alias: sqlrp_dialect(alias) for alias in sorted(ALIASES) if sqlrp_dialect(alias) != alias}
    raise AttributeError(name)


# ----------------------------------------------------------------------------------------------
# the backend


class SQLAlchemyBackend(Backend):
    """A database reached through SQLAlchemy: an ``Engine`` (sqlrp opens one connection and closes it
    in :meth:`close`) or a ``Connection`` (the caller's: never closed by sqlrp)."""

    registration = catalog.SQLALCHEMY

    def __init__(self, bind: Engine | Connection):
        from sqlalchemy.engine import Connection, Engine

        self._engine_owned = False  # set by from_url: close() disposes of the engine too
        if isinstance(bind, Engine):
            self.engine = bind
            self.conn = bind.connect()
            self.owns_connection = True
        elif isinstance(bind, Connection):
            if bind.closed:
                raise InvalidParameter("the SQLAlchemy connection is closed")
            if bind.in_transaction():
                raise InvalidParameter(
                    "the SQLAlchemy connection is inside a transaction: commit or roll back first "
                    "(sqlrp commits its own statements, and would commit yours with them)"
                )
            self.engine = bind.engine
            self.conn = bind
            self.owns_connection = False
        else:
            raise InvalidParameter(
                f"SQLAlchemyBackend takes a SQLAlchemy Engine or Connection, not a {type(bind).__name__}"
            )
        try:
            self._setup()
        except BaseException:
            if self.owns_connection:
                self.conn.close()
            raise

    def _setup(self) -> None:
        self.sa_dialect = self.conn.dialect.name
        self.dialect = sqlrp_dialect(self.sa_dialect)
        self.url = self.engine.url.render_as_string(hide_password=True)
        self._depth = 0  # transaction() nesting
        self._stream: Stream | None = None  # the stream whose transaction is open (iter_chunks)
        self.transactional = self.dialect not in NON_TRANSACTIONAL and not self._autocommit()
        self._brackets = self.dialect == "tsql"  # [quoted identifiers]
        self._backslash = self.dialect == "mysql"  # backslash escapes in string literals
        self._profile: SqlrpDialect | None = None  # this connection's own profile (the server's limits)
        self._max_statement_bytes: int | None = None  # longer statements are refused before they are sent
        if self.dialect == "mysql":
            packet = packet_limit(self)  # the server's max_allowed_packet (sqlrp.backends.mysql_limits)
            if packet is not None:
                self._profile = get_dialect("mysql").with_packet_limit(packet)  # type: ignore[attr-defined]
                self._max_statement_bytes = packet
        if self.dialect == "postgres":
            # as in PostgresBackend: LLVM JIT compiles each generated expression, for minutes on large
            # projections, where interpreting them takes seconds.  A server without JIT (before
            # PostgreSQL 11, or a fork) refuses the setting: it only concerns speed, so go on.
            from sqlalchemy.exc import DBAPIError

            with contextlib.suppress(DBAPIError):
                self.execute("SET jit = off")

    @property
    def sql_dialect(self) -> SqlrpDialect:
        """This engine's dialect, with the limits its server reports (MySQL's ``max_allowed_packet``)."""
        return self._profile if self._profile is not None else super().sql_dialect

    @classmethod
    def open(cls, target: str, **options: object) -> SQLAlchemyBackend:
        """:meth:`from_url`: any URL no other backend takes."""
        return cls.from_url(target)

    @classmethod
    def wrap(cls, connection: Any, **options: object) -> SQLAlchemyBackend:
        """Use the caller's SQLAlchemy ``Engine`` (sqlrp opens a connection) or ``Connection``."""
        return cls(connection)

    @classmethod
    def from_url(cls, url: str, **engine_options: Any) -> SQLAlchemyBackend:
        """Create a SQLAlchemy engine for ``url`` (``snowflake://...``, ``mysql+pymysql://...``) and
        connect; :meth:`close` closes the connection and disposes of the engine.  A driver or
        SQLAlchemy dialect that is not installed raises :class:`MissingExtra` naming the package."""
        from sqlalchemy import create_engine
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        scheme = url.split("://", 1)[0]
        try:
            engine = create_engine(url, **engine_options)
        except NoSuchModuleError:
            raise missing_dialect(scheme) from None
        except ImportError as exc:
            raise missing_driver(exc, scheme) from None
        except ArgumentError as exc:
            raise InvalidParameter(f"cannot use database URL for {scheme}://: {exc}") from None
        try:
            self = cls(engine)
        except BaseException:
            engine.dispose()
            raise
        self._engine_owned = True
        return self

    # ---- transactions ----------------------------------------------------------------------

    def _autocommit(self) -> bool:
        """True if the connection commits every statement by itself (``AUTOCOMMIT`` isolation).
        SQLite is never taken as such: sqlrp emits ``BEGIN`` there itself."""
        if self.dialect == "sqlite":
            return False
        level = self.conn.get_execution_options().get("isolation_level")
        if level is None:
            try:
                level = self.conn.get_isolation_level()
            except Exception:  # noqa: BLE001 - a driver that cannot tell: assume transactions
                level = None
        return str(level).upper() == "AUTOCOMMIT"

    def _check_idle(self) -> None:
        if self.conn.in_transaction():
            raise InvalidParameter(
                "the SQLAlchemy connection is inside a transaction sqlrp did not begin: commit or roll back first"
            )

    @contextlib.contextmanager
    def _statement(self) -> Iterator[None]:
        """Around one call: inside :meth:`transaction` nothing; outside, commit when it is done (roll
        back on error), so that no transaction SQLAlchemy began on first use stays open."""
        if self._depth:
            yield
            return
        self._end_stream()
        self._check_idle()
        try:
            yield
        except BaseException:
            if self.conn.in_transaction():
                self.conn.rollback()
            raise
        if self.conn.in_transaction():
            self.conn.commit()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A real transaction (the connection's ``begin()``); nested calls join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._end_stream()
        self._check_idle()
        tx = self.conn.begin()
        self._depth = 1
        try:
            self._begin_driver()
            yield
        except BaseException:
            if tx.is_active:
                tx.rollback()
            raise
        else:
            tx.commit()
        finally:
            self._depth = 0
            if getattr(self, "_named_locks", False):  # MySQL's GET_LOCK outlives a transaction: release it
                self._named_locks = False
                with contextlib.suppress(Exception):  # a lost connection has released it already
                    self.fetchall("SELECT RELEASE_ALL_LOCKS()")

    def _begin_driver(self) -> None:
        """SQLite's Python driver begins a transaction only before INSERT/UPDATE/DELETE, so DDL would
        commit on its own: begin it explicitly (unless the driver, or an event hook, already did)."""
        if self.dialect != "sqlite":
            return
        raw = self.conn.connection.dbapi_connection
        if raw is not None and not getattr(raw, "in_transaction", True):
            self.conn.exec_driver_sql("BEGIN", execution_options={"no_parameters": True})

    # ---- statements ------------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] | None, **options: Any) -> Any:
        """Execute ``sql``: as it is without ``params``, else as ``text()`` with ``?`` bound."""
        refuse_oversized(sql, self._max_statement_bytes, self.dialect)
        if params is None:
            return self.conn.exec_driver_sql(sql, execution_options={"no_parameters": True, **options})
        from sqlalchemy import bindparam, text
        from sqlalchemy.types import NULLTYPE

        named, names = to_named(sql, self._brackets, self._backslash)
        values = list(params)
        if len(names) != len(values):
            raise InvalidParameter(f"the statement has {len(names)} placeholders but {len(values)} parameters")
        # untyped binds: the driver gets the Python values as they are (like the other backends)
        binds = [bindparam(n, py(v), type_=NULLTYPE) for n, v in zip(names, values, strict=True)]
        return self.conn.execute(text(named).bindparams(*binds), execution_options=options)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run a statement (``?`` placeholders bind ``params``)."""
        with self._statement():
            self._run(sql, params).close()

    def lock(self, key: str) -> None:
        if self.dialect == "postgres":  # the advisory lock of backends/postgres.py, through this driver
            self.fetchall(ADVISORY_LOCK, [key])
        elif self.dialect == "mysql" and self._depth:  # a named lock, released as the transaction ends
            self._named_locks = self.fetchall("SELECT GET_LOCK(?, 600)", [named_lock(key)])[0][0] == 1

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return all rows as tuples."""
        with self._statement():
            result = self._run(sql, params)
            return [tuple(row) for row in result.fetchall()]

    def query_df(self, sql: str) -> pd.DataFrame:
        """Run a query and return the result as a DataFrame."""
        with self._statement():
            result = self._run(sql, None)
            names = list(result.keys())
            return pd.DataFrame.from_records([tuple(r) for r in result.fetchall()], columns=names)

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result ``rows`` rows at a time (``yield_per``: a server-side cursor where the
        driver has one), in a transaction of the stream's own.

        A stream never owns the transaction other work runs in (issue 41: statements run between
        chunks joined the stream's transaction, a failed one was not rolled back by itself, and a
        stream that failed rolled back those that had succeeded).  Before any other statement on the
        connection (:meth:`_statement`, :meth:`transaction`) an open stream is read to the end into
        memory and its transaction committed (:class:`~sqlrp.backends.streams.Stream`); the stream
        then hands the rest over from memory."""
        rows = max(1, int(rows))
        own = not self._depth  # inside a transaction of sqlrp's (never from a caller): read within it
        if own:
            self._end_stream()
            self._check_idle()
            tx = self.conn.begin()

        def finish(ok: bool) -> None:  # the stream's own transaction: it holds nothing else
            if own and tx.is_active:
                tx.commit() if ok else tx.rollback()

        stream: Stream | None = None
        ok = True
        try:
            if own:
                self._begin_driver()
            result = self._run(sql, None, yield_per=rows)
            stream = Stream(result, finish)
            if own:
                self._stream = stream
            names = list(result.keys())
            while batch := stream.next_rows(rows):
                yield pd.DataFrame.from_records([tuple(r) for r in batch], columns=names)
        except GeneratorExit:  # the caller stopped early: not a failure
            raise
        except BaseException:
            ok = False
            raise
        finally:
            if self._stream is stream:
                self._stream = None
            stream.close(ok) if stream is not None else finish(ok)

    def _end_stream(self) -> None:
        """Read the open stream, if any, to the end into memory and commit its transaction: the
        statement about to run gets a transaction of its own (:meth:`iter_chunks`)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.drain()

    # ---- tables ----------------------------------------------------------------------------

    def _inspector(self) -> Any:
        from sqlalchemy import inspect

        return inspect(self.conn)  # a new one each time: its cache would hide tables made since

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of ``table`` (SQLAlchemy's reflection), with number types named so that
        :func:`~sqlrp.backends.base.is_numeric_type` knows them: integers ``bigint``, floats and
        decimals ``double``, arrays by their element type."""
        from sqlalchemy.exc import NoSuchTableError

        with self._statement():
            try:
                reflected = self._inspector().get_columns(table, schema=schema)
            except NoSuchTableError:
                reflected = []
        if not reflected:
            raise missing_table(table, schema, self.table_names(schema))
        return [column_info(c["name"], c["type"], self.conn.dialect) for c in reflected]

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views in ``schema`` (default: the connection's)."""
        with self._statement():
            inspector = self._inspector()
            names = list(inspector.get_table_names(schema=schema))
            with contextlib.suppress(NotImplementedError):
                names += [v for v in inspector.get_view_names(schema=schema) if v not in names]
        return names

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """True if ``name`` is a view (SQLAlchemy's reflection: no ``information_schema`` needed)."""
        with self._statement():
            try:
                return name in self._inspector().get_view_names(schema=schema)
            except NotImplementedError:
                return False

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """``CREATE TABLE`` from the DataFrame's dtypes (floats ``DOUBLE``, integers ``BIGINT``,
        lists ``DOUBLE PRECISION[]`` on PostgreSQL), then its rows, in one transaction."""
        from sqlalchemy import Column, MetaData, Table

        # SQLAlchemy quotes a name only where it must (upper case, spaces, reserved words): lower-case
        # names stay unquoted, so an engine that upper-cases them (Snowflake) stores what sqlrp folds to
        columns = [Column(str(name), frame_type(df[name], self.sql_dialect, self.dialect)) for name in df.columns]
        refuse_non_finite(table, df, self.sql_dialect, self.dialect)
        target = Table(table, MetaData(), *columns)
        with self.transaction():
            if replace:
                target.drop(self.conn, checkfirst=True)
            target.create(self.conn)
            self._insert_rows(target, df)

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to ``table`` (an ``INSERT`` run as executemany, in batches)."""
        from sqlalchemy import column
        from sqlalchemy import table as table_clause

        target = table_clause(table, *[column(str(name)) for name in df.columns])
        refuse_non_finite(table, df, self.sql_dialect, self.dialect)
        with self._statement():
            self._insert_rows(target, df)

    def _insert_rows(self, target: Any, df: pd.DataFrame) -> None:
        if not len(df):
            return
        names, statement = [str(c) for c in df.columns], target.insert()
        rows, header = frame_rows(df, nan_as_null=False), len(str(target)) + 4 * sum(map(len, names)) + 64
        # within the server's packet (MySQL: sqlrp.backends.mysql_limits), else _ROWS_PER_INSERT a batch
        for batch in packet_batches(rows, _ROWS_PER_INSERT, self._max_statement_bytes, header, self.dialect):
            self.conn.execute(statement, [dict(zip(names, row, strict=True)) for row in batch])

    def close(self) -> None:
        """Close the connection sqlrp opened (a caller's connection stays open), and dispose of an
        engine :meth:`from_url` created."""
        if self.owns_connection and not self.conn.closed:
            if self.conn.in_transaction():
                self.conn.rollback()
            self.conn.close()
        if self._engine_owned:
            self.engine.dispose()


__all__ = ["NON_TRANSACTIONAL", "SQLAlchemyBackend", "sqlrp_dialect", "to_named"]
