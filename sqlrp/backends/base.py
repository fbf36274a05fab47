"""What a backend does: run SQL, describe tables, load DataFrames, stream results -- and how
:func:`sqlrp.connect` reaches it (its :class:`Registration`)."""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from sqlglot import exp

from ..core import files
from ..core.errors import DRIVER_MODULES, InputError, InvalidParameter, need, text_value
from ..core.lazy import pd
from ..core.names import scratch_name
from ..dialects import SqlrpDialect, get_dialect


@dataclass(frozen=True)
class Registration:
    """How :func:`sqlrp.connect` reaches one backend, declared by the backend class (``registration =
    ...`` in its body: a built-in engine's entry of :mod:`sqlrp.backends.catalog`, or a
    ``Registration(...)`` of its own): ``connect`` walks the registrations.  Strings are matched without
    importing any driver, nor a built-in backend's module: a URL by its scheme, a bare string by
    :attr:`patterns` then by its file ending, a connection object by the module of its class."""

    name: str  # the engine, as messages name it ("PostgreSQL")
    schemes: tuple[str, ...] = ()  # URL schemes before "://" (a "+driver" suffix is read apart)
    url_drivers: tuple[str, ...] | None = None  # the "+driver" suffixes it takes; None: any
    files: tuple[str, ...] = ()  # endings of a bare path that is a database file of this engine
    patterns: tuple[str, ...] = ()  # regular expressions (matched at the start, any case): other strings it takes
    connections: tuple[str, ...] = ()  # "module." prefixes of the connection classes it wraps (names only)
    drivers: tuple[str, ...] = ()  # driver modules: the first must import to open a URL; all raise the engine's errors
    extra: str | None = None  # the extra that installs the driver: pip install 'sqlrp[extra]'
    example: str = ""  # a URL, for messages and the engines table
    default: bool = False  # the database of connect() without a URL
    fallback: bool = False  # takes every URL no other registration takes (SQLAlchemy)
    magic: bytes = b""  # the first bytes of its database files: another engine given one is refused
    backend: str = ""  # "module:Class" of a built-in backend, imported on first use (sqlrp.backends.catalog)

    def matches(self, text: str) -> bool:
        """True if the bare string ``text`` (no ``://``) matches one of :attr:`patterns`."""
        return any(re.match(pattern, text, re.IGNORECASE) for pattern in self.patterns)


#: every registration and its backend class, in the order the classes were made (Backend.__init_subclass__)
REGISTERED: list[tuple[Registration, type[Backend]]] = []


@dataclass(frozen=True)
class URL:
    """The parts of ``driver[+dbapi]://user:password@host:port/database?key=value`` (SQLAlchemy's
    URL, read with the standard library: the engines sqlrp runs itself need no SQLAlchemy)."""

    drivername: str
    username: str | None = None
    password: str | None = None
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: dict[str, str] = field(default_factory=dict)

    def render_as_string(self, hide_password: bool = True) -> str:
        """The URL again (the password as ``***`` unless ``hide_password=False``)."""
        auth = quote(self.username or "", safe="")
        if self.password is not None:
            auth += ":" + ("***" if hide_password else quote(self.password, safe=""))
        host = f"[{self.host}]" if self.host and ":" in self.host else (self.host or "")
        netloc = (auth + "@" if auth else "") + host + (f":{self.port}" if self.port else "")
        query = ("?" + urlencode(self.query)) if self.query else ""
        return f"{self.drivername}://{netloc}/{self.database or ''}{query}"


def parse_url(text: str) -> URL:
    """``text`` as a :class:`URL`; ``database`` is the path after the host's ``/`` (``duckdb:///a.db``:
    ``a.db``; ``duckdb:////tmp/a.db``: ``/tmp/a.db``), user and password are percent-decoded."""
    parts = urlsplit(text)
    if not parts.scheme or "://" not in text:
        raise InvalidParameter(f"cannot parse database URL {text!r}")
    try:
        port = parts.port
    except ValueError:
        raise InvalidParameter(f"cannot parse database URL {text!r}: the port is not a number") from None
    return URL(
        drivername=text.split("://", 1)[0].lower(),
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
        host=parts.hostname or None,
        port=port,
        database=unquote(parts.path[1:]) or None,
        query=dict(parse_qsl(parts.query)),
    )


def url_path(target: str) -> str:
    """The database file of ``target``: the path of a URL (``scheme:///path``), or ``target`` itself;
    ``:memory:`` for none."""
    path = parse_url(target).database if "://" in target else target
    return path or ":memory:"


def client_options(url: URL, known: dict[str, type]) -> tuple[dict[str, Any], dict[str, str]]:
    """``url`` as a client library's keyword arguments -- ``host``, ``port``, ``username``, ``password``
    and ``database`` where given, and each query option named in ``known`` as its type (a flag
    ``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off`` as a bool, for a ``str`` option
    too) -- and the other query options, as text (the engine's settings)."""
    options: dict[str, Any] = {}
    rest: dict[str, str] = {}
    for key, value in url.query.items():
        text = value if isinstance(value, str) else value[-1]
        if key not in known:
            rest[key] = text
            continue
        flag = text.strip().lower()
        kind = known[key]
        if kind is bool or (kind is str and flag in ("true", "false", "1", "0", "yes", "no", "on", "off")):
            options[key] = flag in ("1", "true", "yes", "on")
        else:
            options[key] = kind(text)
    given = {"host": url.host, "port": url.port, "username": url.username, "database": url.database}
    options.update({key: value for key, value in given.items() if value})
    if url.password is not None:
        options["password"] = str(url.password)
    return options, rest


_NUMERIC = re.compile(
    r"^(tinyint|smallint|integer|int|bigint|hugeint|utinyint|usmallint|uinteger|ubigint|uhugeint|"
    r"int2|int4|int8|float|float4|float8|real|double|double precision|decimal|numeric)\b",
    re.IGNORECASE,
)


def memory_size(text: str) -> str:
    """A memory size such as ``1GB`` or ``512MB`` (``memory_limit=`` of :func:`sqlrp.connect`),
    checked before it goes into a SET statement; :class:`InvalidParameter` otherwise."""
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", text, re.IGNORECASE):
        raise InvalidParameter(f"memory limit must look like '1GB' or '512MB', got {text!r}")
    return text.strip()


def memory_bytes(size: str) -> int:
    """A memory size such as ``"1GB"`` or ``"512MiB"`` (:func:`memory_size`) in bytes."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B", memory_size(size), re.IGNORECASE)
    assert m is not None  # memory_size checked the spelling
    power = " KMGT".index(m[2].upper() or " ")
    return int(float(m[1]) * (1024 if m[3] else 1000) ** power)


def is_numeric_type(type_name: str) -> bool:
    """True for SQL number types (integers, floats, decimals) in DuckDB or PostgreSQL spelling."""
    return bool(_NUMERIC.match(type_name.strip()))


@dataclass(frozen=True)
class ColumnInfo:
    """A column of a table: its name, SQL type, and what sqlrp can do with it."""

    name: str
    type: str
    element_type: str | None = None  # for arrays: the element type
    length: int | None = None  # fixed-size arrays (DuckDB ARRAY)

    @property
    def numeric(self) -> bool:
        return self.element_type is None and is_numeric_type(self.type)

    @property
    def numeric_array(self) -> bool:
        return self.element_type is not None and is_numeric_type(self.element_type)


class Backend(ABC):
    """A live connection to one database."""

    dialect: str  # the sqlrp dialect name (sqlrp.dialects.get_dialect)
    url: str
    #: how sqlrp.connect() reaches this backend (None: only by constructing it)
    registration: ClassVar[Registration | None] = None

    reports_progress = False  # the engine reports a running statement's progress (execute_watched)
    transactional = True  # statements inside ``transaction()`` commit or roll back together
    adds_columns = True  # ALTER TABLE ... ADD COLUMN works (else a new registry is made at its latest shape)
    owns_connection = True  # False for a connection the caller passed in: close() leaves it open
    binds_constants = False  # statements may read dense matrices from relations registered by bound()
    streams_arrow = False  # an in-process engine: iter_arrow hands record batches over without a copy

    @property
    def sql_dialect(self) -> SqlrpDialect:
        """This engine's dialect object (rendering, limits, profile): what the compiler takes, so that
        callers hand it the object rather than re-reading the name (``get_dialect(self.dialect)``, cached
        there)."""
        return get_dialect(self.dialect)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class that declares its own :attr:`registration` is registered as it is made: its drivers'
        exceptions become the engine's errors (:data:`sqlrp.core.errors.DRIVER_MODULES`), and
        :func:`sqlrp.connect` reaches it."""
        super().__init_subclass__(**kwargs)
        registration = cls.__dict__.get("registration")
        if registration is not None:
            REGISTERED.append((registration, cls))
            DRIVER_MODULES.update(registration.drivers)

    @classmethod
    def open(cls, target: str, **options: Any) -> Backend:
        """Connect to ``target``: a URL of one of the registration's schemes, or a string it takes
        (a file path, a pattern); ``options`` are :func:`sqlrp.connect`'s (each backend takes the
        ones it knows)."""
        raise NotImplementedError(f"{cls.__name__} does not open URLs")

    @classmethod
    def wrap(cls, connection: Any, **options: Any) -> Backend:
        """Use the caller's open ``connection`` (one of the registration's connection classes);
        :meth:`close` leaves it open."""
        raise NotImplementedError(f"{cls.__name__} does not wrap connections")

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run a statement.  ``params`` bind to ``?`` placeholders (internal queries only)."""

    def execute_watched(self, sql: str, report: Callable[[float], None]) -> None:
        """Run a statement, calling ``report(percent)`` while it runs (engines with
        ``reports_progress``); by default only once, with 100, when it is done."""
        self.execute(sql)
        report(100.0)

    @contextlib.contextmanager
    def bound(self, constants: dict[str, Any]) -> Iterator[None]:
        """Register ``constants`` (name -> 2-D array) as relations ``(_r, c0 .. c{d-1})`` while the
        block runs (:func:`sqlrp.compiler.lists.binding`); only backends with ``binds_constants``."""
        if constants:
            raise NotImplementedError(f"{type(self).__name__} does not bind constants")
        yield

    @contextlib.contextmanager
    def reading_few_rows(self) -> Iterator[None]:
        """Statements inside read a few rows of a possibly large input (the kurtosis sample, an array's
        length): where the engine reads ahead, it is told not to (DuckDB: Parquet column chunks whole)."""
        yield

    def lock(self, key: str) -> None:
        """Wait for, then hold until the current transaction ends, an exclusive lock named ``key``
        (one writer per output table, one migrating process).  PostgreSQL takes an advisory lock;
        an engine without one relies on its own write rules: DuckDB lets one process at a time open
        a file for writing (``tests/interface/test_cli.py``)."""
        return None  # no lock of its own here

    def streaming_reader(self) -> contextlib.AbstractContextManager[None]:
        """The settings under which Python consumes a long stream of this engine's rows (none here)."""
        return contextlib.nullcontext()

    @abstractmethod
    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return all rows."""

    @abstractmethod
    def query_df(self, sql: str) -> pd.DataFrame:
        """Run a query and return the result as a DataFrame."""

    @abstractmethod
    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Run a query and yield its result ``rows`` rows at a time."""

    def query_arrow(self, sql: str) -> Any:
        """Run a query and return the result as a ``pyarrow.Table`` (here: through pandas; DuckDB
        hands Arrow over directly)."""
        pa = need("pyarrow", "arrow", "Arrow output")
        return pa.Table.from_pandas(self.query_df(sql), preserve_index=False)

    def iter_arrow(self, sql: str, rows: int = 100_000) -> Iterator[Any]:
        """:meth:`iter_chunks` as ``pyarrow.Table`` chunks."""
        pa = need("pyarrow", "arrow", "Arrow output")
        for chunk in self.iter_chunks(sql, rows):
            yield pa.Table.from_pandas(chunk, preserve_index=False)

    @abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """All statements inside commit together or not at all."""

    @abstractmethod
    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of ``table`` in order; raises :class:`InputError` if there is no such table."""

    @abstractmethod
    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` from ``df`` (bulk load; list-valued columns become arrays)."""

    @contextlib.contextmanager
    def frame_table(self, frame: Any) -> Iterator[str]:
        """``frame`` (pandas, polars, ``pyarrow.Table``) as a table of this engine while the block runs,
        under a scratch name that is yielded: here written with :meth:`write_dataframe` and dropped on
        exit; DuckDB registers the frame instead (no copy)."""
        name = scratch_name("frame")
        self.write_dataframe(name, frame if isinstance(frame, pd.DataFrame) else frame.to_pandas())
        try:
            yield name
        finally:
            drop = exp.Drop(tables=[exp.Table(this=exp.to_identifier(name))], kind="TABLE", exists=True)
            with contextlib.suppress(Exception):
                self.execute(self.sql_dialect.render(drop))

    @abstractmethod
    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to an existing ``table`` (columns matched by name)."""

    def insert_columns(self, table: str, columns: dict[str, Any]) -> None:
        """Append rows given column by column: NumPy arrays of one length, or scalars repeated on
        every row.  The default goes through :meth:`insert_frame`; DuckDB reads the arrays without
        pandas (``sqlrp.core.lazy``: the registry is written on the ``project --into`` path)."""
        self.insert_frame(table, pd.DataFrame(columns))

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views in ``schema`` (default: the current schema)."""
        rows = self.fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = coalesce(?, current_schema())",
            [schema],
        )
        return [r[0] for r in rows]

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """True if ``name`` is a view (then ``replace`` drops it with DROP VIEW).  The default reads
        ``information_schema.tables``; an engine without it says no (views are then dropped as tables)."""
        try:
            rows = self.fetchall(
                "SELECT table_type FROM information_schema.tables WHERE table_name = ? "
                "AND table_schema = coalesce(?, current_schema())",
                [name, schema],
            )
        except Exception:  # noqa: BLE001 - no information_schema here
            return False
        return bool(rows) and "VIEW" in str(rows[0][0]).upper()

    def estimate_rows(self, table: str, schema: str | None = None, catalog: str | None = None) -> int | None:
        """The engine's own estimate of a table's row count, from its catalogue (never a scan), or
        ``None`` if it keeps none.  It only sizes planning effort (``Source.rows``)."""
        return None

    def table_exists(self, table: str, schema: str | None = None) -> bool:
        try:
            self.columns(table, schema)
        except InputError:
            return False
        return True

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


class NoTransactions(Backend):
    """A backend whose engine has no transactions (``transactional = False``): :meth:`transaction`
    only groups statements, which run one by one, and sqlrp compensates where it must (the registry
    cleans up after a failure, outputs are staged)."""

    transactional = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """No transaction: the statements inside run one by one."""
        yield


def missing_table(
    table: str,
    schema: str | None,
    available: list[str],
    reads_files: bool = False,
    catalog: str | None = None,
    schemas: list[str] | None = None,
) -> InputError:
    """The error for a table that is not there, naming the tables that are and, for a dotted name, the
    schema-qualified reading; ``reads_files`` (DuckDB reads a file named as the table): a name that
    looks like a file which is not there is named first, with a close name beside it (issue 35).  With
    ``schema`` (and ``catalog``): a schema that does not exist is said so, with the ``schemas`` there when
    the engine listed them, and an empty one by name -- not "the database has no tables" (issue 41)."""
    where = ".".join(part for part in (catalog, schema, table) if part)
    place = " in " + ".".join(f"{p}" for p in (catalog, schema) if p) if (schema or catalog) else " here"
    if schema and schemas is not None and schema.lower() not in {s.lower() for s in schemas}:
        inside = f" in catalog {catalog!r}" if catalog else ""
        return InputError(
            f"no table named {where!r}: there is no schema {schema!r}{inside} (schemas: "
            f"{', '.join(sorted(schemas)[:20]) or 'none'}); check --schema"
        )
    if available:
        hint = f" Tables{place}: {', '.join(sorted(available)[:20])}."
    elif schema:
        hint = f" Schema {schema!r} holds no tables{f' (or does not exist in {catalog!r})' if catalog else ''}."
    else:
        hint = f" {'Catalog ' + repr(catalog) if catalog else 'The database'} has no tables."
    if "." in table and schema is None:
        first, _, rest = table.partition(".")
        hint += f" For a table in another schema, pass --schema={text_value(first)} with --table={text_value(rest)}."
    lead = ""
    if reads_files and schema is None and files.looks_like_a_file(table) and not files.is_remote(table):
        lead = "" if files.matching(table) else f"{files.no_such_file(table)}, and "
    return InputError(f"{lead}no table named {where!r}.{hint}")
