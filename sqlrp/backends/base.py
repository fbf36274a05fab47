"""What a backend does: run SQL, describe tables, load DataFrames, stream results."""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, InvalidParameter, need
from ..lazy import pd

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

    reports_progress = False  # the engine reports a running statement's progress (execute_watched)
    transactional = True  # statements inside ``transaction()`` commit or roll back together
    owns_connection = True  # False for a connection the caller passed in: close() leaves it open
    binds_constants = False  # statements may read dense matrices from relations registered by bound()

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

    def lock(self, key: str) -> None:
        """Wait for, then hold until the current transaction ends, an exclusive lock named ``key``
        (one writer per output table, one migrating process).  PostgreSQL takes an advisory lock;
        an engine without one relies on its own write rules: DuckDB lets one process at a time open
        a file for writing (``tests/test_cli.py``)."""
        return None  # no lock of its own here

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

    @abstractmethod
    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to an existing ``table`` (columns matched by name)."""

    def insert_columns(self, table: str, columns: dict[str, Any]) -> None:
        """Append rows given column by column: NumPy arrays of one length, or scalars repeated on
        every row.  The default goes through :meth:`insert_frame`; DuckDB reads the arrays without
        pandas (``sqlrp.lazy``: the registry is written on the ``project --into`` path)."""
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


def missing_table(table: str, schema: str | None, available: list[str]) -> InputError:
    where = f"{schema}.{table}" if schema else table
    hint = f" Tables here: {', '.join(sorted(available)[:20])}." if available else " The database has no tables."
    if "." in table and schema is None:
        first, _, rest = table.partition(".")
        hint += f" For a table in another schema, pass --schema {first} --table {rest}."
    return InputError(f"no table named {where!r}.{hint}")
