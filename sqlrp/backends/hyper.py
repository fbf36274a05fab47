"""Tableau Hyper backend: ``tableauhyperapi`` (``pip install 'sqlrp[hyper]'``), a ``.hyper`` file.

By URL ``hyper:///path.hyper`` (the file, created if missing), a path ending in ``.hyper``,
``hyper://`` (a new file in a temporary folder, deleted on :meth:`close`), or a
``tableauhyperapi.Connection`` of the caller's (:meth:`HyperBackend.wrap`: its database, left open).

What differs from the other backends, and why (measured on tableauhyperapi 0.0.26963; the SQL's own
differences are in ``sqlrp/dialects/hyper.py``):

- **A server process.**  The API talks to ``hyperd``, which it starts (``HyperProcess``) with usage
  data not sent and no log file; sqlrp starts one per backend and stops it on :meth:`close`.
- **Placeholders.**  The API binds none: each ``?`` outside quotes and comments is written as a
  literal (:func:`~sqlrp.backends.placeholders.bind_literals`; strings quoted by sqlglot, NaN as a cast).
- **No transactions** (``transactional = False``): DDL is not rolled back with the DML around it
  (``dialects/hyper.py``), so :meth:`transaction` only groups statements and sqlrp stages outputs.
- **Catalogue.**  No ``information_schema``: tables are described through the API's ``catalog``.
- **Frames** are created by ``CREATE TABLE`` (``DOUBLE PRECISION``, ``BIGINT``, ``BOOLEAN``,
  ``TIMESTAMP``, ``BYTEA``, ``TEXT``) and loaded by the API's ``Inserter``; missing values are NULL
  (NaN included, as the other backends load a frame, so sqlrp's NULL check finds them).  A
  list-valued column is refused: the inserter takes no arrays.
- **Results**: NUMERIC values come back as ``Decimal`` (given as floats here), timestamps as the
  API's own class (given as ``datetime``).
"""

from __future__ import annotations

import contextlib
import decimal
import itertools
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import EngineLimit, InvalidParameter, need
from ..core.lazy import pd
from ..core.nodes import ident
from . import catalog
from .base import ColumnInfo, NoTransactions, missing_table, url_path
from .placeholders import bind_literals, quoting_tokens, scalar_literal
from .staging import dropped_on_failure
from .streams import Stream
from .typenames import KIND_TYPES
from .values import frame_rows, value_kind

ENGINE = "hyper"
# a ``?`` outside string literals, quoted identifiers and comments (PostgreSQL's quoting)
_TOKENS = quoting_tokens()
_QUERY = re.compile(r"\s*(\(\s*)*(SELECT|WITH|VALUES|TABLE)\b", re.IGNORECASE)


def literal(value: Any) -> str:
    """``value`` as a Hyper literal (:func:`~sqlrp.backends.placeholders.scalar_literal`): NaN and infinities as
    ``DOUBLE PRECISION`` casts, bytes as ``bytea`` hex."""
    return scalar_literal(value, "DOUBLE PRECISION", lambda b: f"CAST('\\x{b.hex()}' AS BYTEA)")


def bind(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with each ``?`` outside quotes and comments replaced by the literal of the next parameter."""
    return bind_literals(sql, params, _TOKENS, literal, ENGINE)


def _value(value: Any) -> Any:
    """A result value as Python gives it: NUMERIC as float, the API's dates and timestamps as ``datetime``."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if hasattr(value, "to_datetime"):
        return value.to_datetime()
    if hasattr(value, "to_date"):
        return value.to_date()
    return value


class HyperBackend(NoTransactions):
    """One ``.hyper`` database through its own ``hyperd`` process (no transactions: DDL is not rolled
    back with its DML, so sqlrp stages outputs and cleans up itself)."""

    dialect = "hyper"
    registration = catalog.HYPER

    def __init__(self, path: str | None = None, connection: Any = None):
        """Open (or create) the database file ``path`` (``None``: a new file in a temporary folder),
        or use ``connection`` (the caller's)."""
        api = need("tableauhyperapi", "hyper", "Tableau Hyper (hyper://)")
        self._process: Any = None
        self._folder: str | None = None
        #: the streams (:meth:`iter_chunks`) whose result is still open on the connection
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        if connection is not None:
            self._connection, self.owns_connection = connection, False
            self.url = "hyper://(caller's connection)"
            return
        if path is None:
            self._folder = tempfile.mkdtemp(prefix="sqlrp-hyper-")
            path = str(Path(self._folder) / "sqlrp.hyper")
        self.url = f"hyper:///{path}"
        try:
            self._process = api.HyperProcess(
                telemetry=api.Telemetry.DO_NOT_SEND_USAGE_DATA_TO_TABLEAU, parameters={"log_config": ""}
            )
            self._connection = api.Connection(self._process.endpoint, path, api.CreateMode.CREATE_IF_NOT_EXISTS)
        except Exception:
            self._stop()
            raise

    @classmethod
    def open(cls, target: str, **options: Any) -> HyperBackend:
        """``hyper:///path.hyper`` or ``path.hyper``: that file (created if missing); ``hyper://``:
        a new file in a temporary folder, deleted on :meth:`close`."""
        path = url_path(target) if "://" in target else target
        return cls(path if path and path != ":memory:" else None)

    @classmethod
    def wrap(cls, connection: Any, **options: Any) -> HyperBackend:
        """Use the caller's open ``tableauhyperapi.Connection``; :meth:`close` leaves it open."""
        if not hasattr(connection, "execute_query") or not hasattr(connection, "catalog"):
            raise InvalidParameter(
                f"{ENGINE}: cannot use a {type(connection).__name__}: pass a tableauhyperapi.Connection"
            )
        return cls(connection=connection)

    @property
    def connection(self) -> Any:
        """The API's connection, for every statement but a stream's own reads: the open streams are
        read to the end into memory first (:meth:`iter_chunks`)."""
        for stream in list(self._streams):
            stream.drain()
        return self._connection

    # ---- running SQL ----

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run one statement; ``params`` are written as literals in place of the ``?`` (:func:`bind`)."""
        sql = bind(sql, params)
        if _QUERY.match(sql):
            self.fetchall(sql)
        else:
            self.connection.execute_command(sql)

    @contextlib.contextmanager
    def _result(self, sql: str) -> Iterator[tuple[list[str], Iterator[tuple]]]:
        with self.connection.execute_query(sql) as result:
            names = [column.name.unescaped for column in result.schema.columns]
            yield names, (tuple(_value(v) for v in row) for row in result)

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return its rows as tuples (NULL as None)."""
        with self._result(bind(sql, params)) as (_, rows):
            return list(rows)

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame (columns named as the query names them)."""
        with self._result(sql) as (names, rows):
            return pd.DataFrame.from_records(list(rows), columns=names)

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """The result ``rows`` rows at a time, read from the server as it streams them (an empty
        result: one empty frame with the columns).

        The API runs one query at a time on a connection ("The connection is not ready ... all
        inserters and results associated with the connection are closed"): a write between two
        chunks failed.  Before any other statement (:attr:`connection`) an open stream is read to the
        end into memory (:class:`~sqlrp.backends.streams.Stream`, issue 41), and hands the rest over
        from there."""
        rows = max(1, int(rows))
        result = self.connection.execute_query(sql)
        stream = Stream(_Rows(result))
        try:
            names = [column.name.unescaped for column in result.schema.columns]
            self._streams.add(stream)
            sent = False
            while batch := stream.next_rows(rows):
                sent = True
                yield pd.DataFrame.from_records(batch, columns=names)
            if not sent:
                yield pd.DataFrame.from_records([], columns=names)
        finally:
            self._streams.discard(stream)
            with contextlib.suppress(Exception):  # a result of a connection closed since
                stream.close()

    # ---- describing tables ----

    def _table(self, table: str, schema: str | None) -> Any:
        from tableauhyperapi import TableName

        return TableName(schema or "public", table)

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of ``table`` (in ``schema``, default ``public``) from the API's catalogue;
        :class:`InputError` if there is no such table."""
        name = self._table(table, schema)
        if not self._has_schema(schema) or not self.connection.catalog.has_table(name):
            raise missing_table(table, schema, self.table_names(schema) if self._has_schema(schema) else [])
        definition = self.connection.catalog.get_table_definition(name)
        return [ColumnInfo(c.name.unescaped, _type_name(c.type)) for c in definition.columns]

    def _has_schema(self, schema: str | None) -> bool:
        return schema is None or schema in [s.name.unescaped for s in self.connection.catalog.get_schema_names()]

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables of ``schema`` (default ``public``), from the API's catalogue."""
        if not self._has_schema(schema):
            return []
        return [t.name.unescaped for t in self.connection.catalog.get_table_names(schema or "public")]

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """Hyper's catalogue lists tables only: a name it lists is a table."""
        return False

    # ---- loading frames ----

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` from ``df`` (module docstring) and load its rows; ``replace`` drops an
        existing table of that name first.  A list-valued column raises :class:`EngineLimit`."""
        defs = [f"{_quote(str(c))} {_type(df[c], str(c))}" for c in df.columns]
        if not defs:
            raise InvalidParameter(f"{ENGINE}: cannot create a table from a DataFrame without columns")
        if replace:
            self.execute(f"DROP TABLE IF EXISTS {_quote(table)}")
        self.execute(f"CREATE TABLE {_quote(table)} ({', '.join(defs)})")
        with dropped_on_failure(lambda: self.execute(f"DROP TABLE IF EXISTS {_quote(table)}")):
            self.insert_frame(table, df)  # no half-loaded table is left

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to the existing ``table`` (columns matched by name) with the
        API's ``Inserter``; missing values (NaN included) as NULL."""
        from tableauhyperapi import Inserter

        if not len(df.columns):
            return
        for c in df.columns:
            _type(df[c], str(c))  # refuses list-valued columns before anything is written
        rows = frame_rows(df)
        with Inserter(self.connection, self._table(table, None), columns=[str(c) for c in df.columns]) as inserter:
            inserter.add_rows(rows)
            inserter.execute()

    def close(self) -> None:
        """Close the connection and stop the server (a caller's connection stays open)."""
        if self.owns_connection:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            with contextlib.suppress(Exception):
                self._process.close()
            self._process = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


class _Rows:
    """An API result as a cursor (``fetchmany``, ``fetchall``, ``close``) for :class:`Stream`, its
    values as :func:`_value` gives them."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.rows = (tuple(_value(v) for v in row) for row in result)

    def fetchmany(self, size: int) -> list[tuple]:
        return list(itertools.islice(self.rows, size))

    def fetchall(self) -> list[tuple]:
        return list(self.rows)

    def close(self) -> None:
        self.result.close()


#: the API's type names that sqlrp's spelling (``is_numeric_type``) reads otherwise
_NAMES = {"BIG_INT": "bigint", "SMALL_INT": "smallint", "INT": "integer", "DOUBLE": "double precision", "FLOAT": "real"}


def _type_name(sql_type: Any) -> str:
    """A column type as sqlrp names it (``bigint``, ``double precision``, ``numeric(18, 3)``, ``text`` ...)."""
    text = str(sql_type)
    return _NAMES.get(text, text.lower())


def _quote(name: str) -> str:
    """``name`` as a quoted identifier (``"`` doubled, sqlrp's own quoting); a NUL is refused."""
    return ident(name).sql("postgres")


def _type(series: pd.Series, name: str) -> str:
    kind = value_kind(series)
    if kind == "array":
        raise EngineLimit(
            f"{ENGINE}: column {name!r} holds lists, and the Hyper API loads no arrays; store one column per "
            "feature (the wide layout) or (id, feature, value) rows (the long layout)"
        )
    return KIND_TYPES[kind]
