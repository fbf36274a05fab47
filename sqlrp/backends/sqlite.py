"""SQLite backend: Python's standard-library ``sqlite3`` (a file, or ``:memory:``).

By URL ``sqlite:///path.sqlite``, a path ending in ``.sqlite`` / ``.sqlite3``, or a
``sqlite3.Connection`` of the caller's (:meth:`SQLiteBackend.wrap`).

What differs from the other backends, and why:

- **Transactions.**  The connection runs with ``isolation_level = None``, so the ``sqlite3`` module
  never opens or commits a transaction on its own; :meth:`SQLiteBackend.transaction` issues
  ``BEGIN IMMEDIATE`` / ``COMMIT`` / ``ROLLBACK`` itself.  SQLite's DDL is transactional, so a
  failing ``CREATE TABLE ... AS`` inside it leaves no table.  ``IMMEDIATE`` takes the write lock up
  front: a transaction that reads and then writes (the registry's drop) cannot fail half-way with
  ``database is locked`` when another connection writes first.
- **Column types.**  SQLite stores a column's *declared* type as text and types values, not
  columns.  :meth:`SQLiteBackend.columns` reports each column by its affinity
  (https://www.sqlite.org/datatype3.html, 3.1): ``INT`` in the name -> ``integer``; ``REAL``,
  ``FLOA``, ``DOUB`` -> ``double``; ``NUM`` / ``DECIMAL`` -> ``numeric``; anything else keeps its
  name (``TEXT``, ``BLOB``, ``DATE`` ...) and is not a number.  A column with *no* declared type --
  what ``CREATE TABLE ... AS`` gives an expression such as sqlrp's own ``(_x0 + _x1) * CAST(...)``
  outputs, and what a view gives a computed column -- is typed by its values: ``double`` if none is
  text or a blob, else ``(no declared type)``.  That costs one ``EXISTS`` scan per such column.
- **No arrays.**  A list-valued DataFrame column cannot be stored: :class:`sqlrp.core.errors.EngineLimit`.
- **Schemas** are attached databases (``ATTACH 'other.sqlite' AS other``): ``schema="other"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sqlite3
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from ..core import files
from ..core.errors import EngineLimit, InputError, InvalidParameter
from ..core.lazy import pd
from ..core.nodes import ident
from . import catalog
from .base import Backend, ColumnInfo, missing_table, url_path
from .streams import Stream
from .values import frame_rows, py, value_kind

#: storage class of a DataFrame column by what it holds (:func:`~sqlrp.backends.values.value_kind`)
_SQLITE_TYPES = {
    "double": "REAL",
    "bigint": "INTEGER",
    "boolean": "INTEGER",
    "timestamp": "TEXT",
    "blob": "BLOB",
    "text": "TEXT",
}
UNTYPED = "(no declared type)"


def _q(name: str) -> str:
    """``name`` quoted as a SQLite identifier by sqlglot (user text never reaches SQL otherwise)."""
    return ident(str(name)).sql("sqlite")


class SQLiteBackend(Backend):
    """A connection to one SQLite database (file or ``:memory:``) through the standard library."""

    dialect = "sqlite"
    registration = catalog.SQLITE

    def __init__(self, path: str = ":memory:"):
        """Open the SQLite database file ``path``; ``":memory:"`` for a private one.  A file that is not
        there is made by the first statement that writes, not by connecting: until then reads see an
        empty database (what the new file would hold), so reading a mistyped path leaves no empty
        file behind (:attr:`missing_file`)."""
        self.path = path
        self.url = f"sqlite:///{path}"
        self._pending: str | None = None
        if path not in ("", ":memory:") and not path.startswith("file:") and files.creatable(path):
            self._pending = os.path.abspath(path)  # where it would be made, whatever the working folder later
        self._con = _open(":memory:" if self._pending else path)
        self._restore_isolation: object = None
        #: the streams (:meth:`iter_chunks`) whose statement is still stepping on the connection
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()

    @property
    def con(self) -> sqlite3.Connection:
        """The connection, for anything that may write: the open streams are read to the end first
        (:meth:`iter_chunks`), and a file that was missing is made now."""
        for stream in list(self._streams):
            stream.drain()
        if self._pending is not None:
            self._con.close()
            self._con = _open(self._pending)
            self._pending = None
        return self._con

    @property
    def missing_file(self) -> str | None:
        """The path of a database file that was not there when connected and that nothing has written
        yet (reading it is refused by the API's read-only calls, e.g. ``list_projections``)."""
        return self._pending

    @classmethod
    def open(cls, target: str, **options: object) -> SQLiteBackend:
        """The database file ``target`` names (a path or ``sqlite:///path``), else a private one in
        memory; the size and thread options of :func:`sqlrp.connect` do not apply."""
        return cls(url_path(target))

    @classmethod
    def wrap(cls, conn: sqlite3.Connection, **options: object) -> SQLiteBackend:
        """Use an open ``sqlite3`` connection (the caller's: :meth:`close` leaves it open).

        It must not be inside a transaction.  sqlrp switches it to ``isolation_level = None`` (it
        begins and commits its own transactions) and puts the caller's setting back on
        :meth:`close`."""
        if conn.in_transaction:
            raise InvalidParameter("sqlite: the sqlite3 connection is inside a transaction: commit or roll back first")
        if getattr(conn, "autocommit", None) is False:  # Python 3.12+: PEP 249 mode keeps a transaction open
            raise InvalidParameter(
                "sqlite: the sqlite3 connection has autocommit=False; open it with the default autocommit"
            )
        self = cls.__new__(cls)
        self.path = "(caller's connection)"
        self.url = "sqlite:///(caller's connection)"
        self._con = conn
        self._streams = weakref.WeakSet()
        _functions(conn)
        self._pending = None
        self.owns_connection = False
        self._restore_isolation = conn.isolation_level
        conn.isolation_level = None
        return self

    # ---- running SQL ----

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run one statement; ``params`` bind to ``?`` placeholders."""
        cur = self.con.execute(sql, _params(params))
        cur.close()

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return all its rows as tuples (a missing file's reads: an empty database)."""
        cur = self._con.execute(sql, _params(params))
        try:
            return cur.fetchall()
        finally:
            cur.close()

    def query_df(self, sql: str) -> pd.DataFrame:
        """Run a query and return its result as a DataFrame (columns named as the query names them)."""
        cur = self._con.execute(sql)
        try:
            rows = cur.fetchall()
            return _frame(rows, [d[0] for d in cur.description or ()])
        finally:
            cur.close()

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Run a query and yield its result ``rows`` rows at a time (``fetchmany``: SQLite steps the
        statement as rows are fetched, so the whole result is never held at once).

        The statement steps on the connection every other statement uses, so a write between two
        chunks would meet it: SQLite refuses a ``DROP TABLE`` while a read is pending ("database
        table is locked"), a rollback that changed the schema aborts the read, and a write to the
        table being read changes what the read sees.  Before anything writes (:attr:`con`) the open
        streams are therefore read to the end into memory, and hand the rest over from there: the
        write runs as if no stream were open, and the stream yields the rows of the query as it was
        when it began (issue 41)."""
        rows = max(1, int(rows))
        stream = Stream(self._con.cursor())
        try:
            stream.cursor.execute(sql)
            names = [d[0] for d in stream.cursor.description or ()]
            self._streams.add(stream)
            while True:
                batch = stream.next_rows(rows)
                if not batch:
                    break
                yield _frame(batch, names)
        finally:
            self._streams.discard(stream)
            with contextlib.suppress(sqlite3.ProgrammingError):  # a generator dropped after the database closed
                stream.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception (DDL included).  A call
        inside an open transaction joins it: the outermost one commits or rolls back."""
        if self.con.in_transaction:
            yield
            return
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield
        except GeneratorExit:  # abandoned (a signal in ``__exit__``), closed by the collector
            with contextlib.suppress(sqlite3.ProgrammingError):  # closed: SQLite rolled it back itself
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
            raise
        except BaseException:
            if self.con.in_transaction:  # some errors (SQLITE_FULL, IOERR ...) roll back by themselves
                self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    # ---- describing tables ----

    def _check_schema(self, schema: str | None) -> None:
        """Raise :class:`InputError` unless ``schema`` is ``None`` or an attached database."""
        if schema is None:
            return
        attached = [r[1] for r in self.fetchall("PRAGMA database_list")]
        if schema not in attached:
            raise InputError(
                f"sqlite: no attached database (schema) named {schema!r}; attached: {', '.join(attached)}. "
                "ATTACH it first, or leave the schema out"
            )

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of the table or view ``table`` (in attached database ``schema``) in order, typed by
        affinity (module docstring); raises :class:`InputError` if there is no such table."""
        self._check_schema(schema)
        if schema is None:
            rows = self.fetchall("SELECT name, type, hidden FROM pragma_table_xinfo(?) ORDER BY cid", [table])
        else:
            rows = self.fetchall(
                "SELECT name, type, hidden FROM pragma_table_xinfo(?, ?) ORDER BY cid", [table, schema]
            )
        rows = [(name, declared) for name, declared, hidden in rows if hidden != 1]  # 1: virtual-table hidden
        if not rows:
            raise missing_table(table, schema, self.table_names(schema))
        types = [_affinity_type(declared) for _, declared in rows]
        untyped = [name for (name, _), kind in zip(rows, types, strict=True) if kind is None]
        numeric = self._untyped_numeric(table, schema, untyped) if untyped else {}
        out = []
        for (name, _), kind in zip(rows, types, strict=True):
            if kind is None:
                kind = "double" if numeric[name] else UNTYPED
            out.append(ColumnInfo(name, kind))
        return out

    def _untyped_numeric(self, table: str, schema: str | None, names: list[str]) -> dict[str, bool]:
        """For columns without a declared type (``CREATE TABLE AS`` of expressions leaves them so):
        True if no value is text or a blob.  First one pass for all of them, which stops at the
        first text value; only if there is one, an ``EXISTS`` per column finds which.  (An
        ``EXISTS`` per column from the start scans the whole table once per column when all are
        numeric, the usual case: ``bench/engines.py --engines sqlite``, figures in docs/benchmarks.md.)"""
        source = f"{_q(schema)}.{_q(table)}" if schema else _q(table)
        tests = [f"typeof({_q(n)}) IN ('text', 'blob')" for n in names]
        # parenthesised groups of 100: a chain of 784 ORs is deeper than SQLite's 1,000 limit
        anywhere = " OR ".join("(" + " OR ".join(tests[i : i + 100]) + ")" for i in range(0, len(tests), 100))
        if not self.fetchall(f"SELECT 1 FROM {source} WHERE {anywhere} LIMIT 1"):
            return dict.fromkeys(names, True)
        probes = ", ".join(f"EXISTS (SELECT 1 FROM {source} WHERE {test})" for test in tests)
        found = self.fetchall(f"SELECT {probes}")[0]
        return {n: not bool(f) for n, f in zip(names, found, strict=True)}

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views of attached database ``schema`` (default: ``main`` and ``temp``), without
        SQLite's own ``sqlite_*`` tables (``sqlite_master`` exists in every SQLite version)."""
        self._check_schema(schema)
        names: list[str] = []
        for db in [schema] if schema is not None else ["main", "temp"]:
            names += [
                r[0]
                for r in self.fetchall(
                    f"SELECT name FROM {_q(db)}.sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
                )
            ]
        return names

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """True if ``name`` is a view in attached database ``schema`` (default: ``temp``, then
        ``main``, as SQLite resolves an unqualified name), read from ``sqlite_master``."""
        self._check_schema(schema)
        for db in [schema] if schema is not None else ["temp", "main"]:
            rows = self.fetchall(
                f"SELECT type FROM {_q(db)}.sqlite_master WHERE name = ? AND type IN ('table', 'view')", [name]
            )
            if rows:
                return rows[0][0] == "view"
        return False

    # ---- loading frames ----

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` from ``df`` (``INTEGER`` / ``REAL`` / ``TEXT`` / ``BLOB`` columns) and load
        its rows, in one transaction; ``replace`` drops an existing table of that name first.  A
        list-valued column raises :class:`EngineLimit` (SQLite has no array type)."""
        defs = [f"{_q(str(c))} {_sqlite_type(df[c], str(c))}" for c in df.columns]
        if not defs:
            raise InvalidParameter("sqlite: cannot create a table from a DataFrame without columns")
        with self.transaction():
            if replace:
                self.execute(f"DROP TABLE IF EXISTS {_q(table)}")
            self.execute(f"CREATE TABLE {_q(table)} ({', '.join(defs)})")
            self.insert_frame(table, df)

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to the existing ``table`` (columns matched by name) with
        ``executemany``; NumPy scalars become Python numbers, missing values ``NULL``."""
        if not len(df.columns):
            return
        for c in df.columns:
            _sqlite_type(df[c], str(c))  # refuses list-valued columns before anything is written
        cols = ", ".join(_q(str(c)) for c in df.columns)
        marks = ", ".join("?" for _ in df.columns)
        rows = frame_rows(df, dates_as_text=True)
        with self.transaction():
            self.con.executemany(f"INSERT INTO {_q(table)} ({cols}) VALUES ({marks})", rows)

    def close(self) -> None:
        """Close the connection; a caller's connection stays open, with its isolation level put back."""
        if self.owns_connection:
            self._con.close()
        else:
            with contextlib.suppress(sqlite3.ProgrammingError):  # the caller closed it already
                self._con.isolation_level = self._restore_isolation  # type: ignore[assignment]


def _md5(text: str | None) -> str | None:
    return None if text is None else hashlib.md5(str(text).encode("utf-8")).hexdigest()


def _functions(con: sqlite3.Connection) -> None:
    """SQL functions SQLite lacks and sqlrp's SQL uses: ``md5`` (the seeded sample of ``tune`` and
    ``evaluate`` orders ids by ``md5('<seed>:' || id)``; lower-case hex as DuckDB's and PostgreSQL's,
    so every engine draws the same rows); and ``cos`` (random Fourier features' output function) where
    the library was built without its math functions (``SQLITE_ENABLE_MATH_FUNCTIONS``, 3.35+), checked
    here, when connecting: Python's ``math.cos``, the C library's as NumPy's."""
    con.create_function("md5", 1, _md5, deterministic=True)
    try:
        con.execute("SELECT cos(0.0)").fetchall()
    except sqlite3.OperationalError:  # no such function: cos
        con.create_function("cos", 1, _cos, deterministic=True)


def _cos(value: float | None) -> float | None:
    return None if value is None else math.cos(value)


def _open(path: str) -> sqlite3.Connection:
    """``sqlite3.connect(path)`` in sqlrp's mode (no implicit transactions), checked to be a database."""
    con = None
    try:
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("SELECT count(*) FROM sqlite_master").fetchall()  # a file that is no database fails here
        _functions(con)
    except sqlite3.DatabaseError as exc:
        if con is not None:
            con.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise  # another writer holds it: the engine's condition (CLI exit status 4, with the hint)
        raise InvalidParameter(f"sqlite: cannot open {path!r} as a SQLite database: {exc}") from None
    return con


def _params(params: Sequence[Any] | None) -> Sequence[Any]:
    """Bind parameters as ``sqlite3`` accepts them (NumPy scalars as Python numbers, dates as text)."""
    if params is None:
        return ()
    return [py(v, dates_as_text=True) for v in params]


def _sqlite_type(series: pd.Series, name: str) -> str:
    """The declared type of a DataFrame column (:func:`~sqlrp.backends.values.value_kind`);
    :class:`EngineLimit` for list-valued columns."""
    kind = value_kind(series)
    if kind == "array":
        raise EngineLimit(
            f"sqlite: column {name!r} holds lists, and SQLite has no array type; store one column per "
            "feature (the wide layout) or (id, feature, value) rows (the long layout)"
        )
    return _SQLITE_TYPES[kind]


def _affinity_type(declared: str | None) -> str | None:
    """The type sqlrp reports for a SQLite declared type, by the affinity rules of
    https://www.sqlite.org/datatype3.html (3.1); ``None`` for no declared type (typed by values)."""
    text = (declared or "").strip()
    if not text:
        return None
    upper = text.upper()
    if "INT" in upper:
        return "integer"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return text
    if "BLOB" in upper:
        return text
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "double"
    if upper.startswith(("NUM", "DECIMAL")):
        return "numeric"
    return text  # NUMERIC affinity by rule 5 (BOOLEAN, DATE, DATETIME ...): values are often text


def _frame(rows: list[tuple], names: list[str]) -> pd.DataFrame:
    """A DataFrame of ``rows`` with column ``names`` (kept even when there are no rows)."""
    if not rows:
        return pd.DataFrame(columns=names)
    return pd.DataFrame.from_records(rows, columns=names)
