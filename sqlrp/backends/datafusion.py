"""Apache DataFusion backend: a ``datafusion.SessionContext`` in this process, its tables in memory.

By URL ``datafusion://`` (a new, empty session), or a ``SessionContext`` of the caller's
(:meth:`DataFusionBackend.wrap`: its tables are sqlrp's input, and :meth:`close` leaves it as it is).
There is no file: what sqlrp writes, outputs and its registry included, lives as long as the session.

What differs from the other backends, and why (measured on datafusion 55.0.0):

- **Errors.**  DataFusion raises Python's own ``Exception`` and ``ValueError`` ("DataFusion error:
  ...", "Error during planning: ..."), which cannot be told from a defect in sqlrp.  Every call into
  the session turns them into :class:`DataFusionError` (whose module is the driver's, so the CLI
  reports it as the engine's error, exit status 4).
- **Placeholders.**  DataFusion binds ``$1``-style parameters, but an ``INSERT ... VALUES ($1)``
  stores the parameter's own Arrow type, not the column's (an Int64 in an Int32 column, a Utf8 in a
  Utf8View one), and later queries on the table fail.  :func:`bind` therefore writes each parameter
  as a literal (sqlglot's quoting; ``NaN`` and infinities as casts) in place of the ``?`` tokens that
  stand outside quotes and comments -- user text is never pasted into SQL as SQL.
- **No transactions** (``transactional = False``): :meth:`transaction` only groups statements.
- **No ALTER TABLE.**  The two sqlrp issues are done here: ``ALTER TABLE a RENAME TO b`` re-registers
  the table under its new name through the catalogue (no copy), and ``ALTER TABLE t ADD COLUMN``
  (a registry upgrade) builds the table again with the new column, from the ``CREATE TABLE`` it was
  made by (so its ``NOT NULL`` and ``DEFAULT`` clauses stay), copies the rows and swaps it in.
- **Frames** are loaded through Arrow: a DataFrame becomes a ``MemTable`` by
  ``CREATE TABLE ... AS`` from a relation registered under a private name; float columns are
  ``Float64``, lists and arrays ``List(Float64)``, missing values NULL (NaN included, as DuckDB
  reads a frame, so sqlrp's NULL check finds them).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from ..core.errors import InputError, InvalidParameter, need
from ..core.lazy import pd
from ..core.names import scratch_name
from ..core.nodes import ident
from . import catalog
from .arrow import arrow_rows, arrow_table, column_info, recut_batches, sql_type
from .base import ColumnInfo, NoTransactions, memory_bytes, missing_table
from .placeholders import bind_literals, quoting_tokens, scalar_literal
from .staging import registered

if TYPE_CHECKING:
    import pyarrow as pa

ENGINE = "datafusion"
PIP = "pip install 'sqlrp[datafusion]'"


class DataFusionError(Exception):
    """An error DataFusion raised (as a plain ``Exception`` or ``ValueError``), re-raised with its
    message.  Its module is the driver's, so that :func:`sqlrp.errors.exit_status` counts it as the
    engine's (the registration's ``drivers``)."""


DataFusionError.__module__ = "datafusion"


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    """Turn the builtin exceptions DataFusion raises into :class:`DataFusionError`."""
    try:
        yield
    except (InputError, InvalidParameter):
        raise
    except ValueError as exc:  # DataFusion's planning and parsing errors
        raise DataFusionError(str(exc)) from exc
    except Exception as exc:
        if type(exc) is Exception:  # DataFusion's execution errors are bare Exceptions
            raise DataFusionError(str(exc)) from exc
        raise


# ----------------------------------------------------------------------------------------------
# SQL text: literals, placeholders, identifiers

# a ``?`` outside string literals, quoted identifiers and comments (standard SQL: quotes doubled)
_TOKENS = quoting_tokens()


def literal(value: Any) -> str:
    """``value`` as a DataFusion literal (:func:`~sqlrp.backends.placeholders.scalar_literal`): NaN and
    infinities as ``DOUBLE PRECISION`` casts, bytes as ``X'..'``, a list as ``make_array(...)``."""
    return scalar_literal(value, "DOUBLE PRECISION", lambda b: f"X'{b.hex()}'", _array_literal)


def _array_literal(items: list) -> str:
    return "make_array(" + ", ".join(map(literal, items)) + ")"


def bind(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with each ``?`` outside quotes and comments replaced by the literal of the next
    parameter (:func:`~sqlrp.backends.placeholders.bind_literals` with this engine's quoting)."""
    return bind_literals(sql, params, _TOKENS, literal, ENGINE)


def quote(name: str) -> str:
    """``name`` as a quoted identifier (``"`` doubled, sqlrp's own quoting); a NUL is refused."""
    return ident(name).sql("postgres")


# ----------------------------------------------------------------------------------------------
# the backend

_ALTER = re.compile(r"\s*ALTER\s+TABLE\b", re.IGNORECASE)
_CREATE = re.compile(r"\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?(\"(?:[^\"]|\"\")*\"|[\w.]+)\s*\(", re.IGNORECASE)


class DataFusionBackend(NoTransactions):
    """A DataFusion ``SessionContext``: ``datafusion://`` (a new one), or the caller's."""

    dialect = "datafusion"
    registration = catalog.DATAFUSION

    def __init__(self, ctx: Any = None, threads: int | None = None, memory_limit: str | None = None):
        """A new session (``threads``: DataFusion's target partitions; ``memory_limit``: a size such
        as ``"1GB"`` for its memory pool, beyond which a query spills or fails), or ``ctx``."""
        datafusion = need("datafusion", "datafusion", "DataFusion (datafusion://)")
        if ctx is None:
            config = datafusion.SessionConfig().with_information_schema(True)
            if threads:
                config = config.with_target_partitions(int(threads))
            runtime = None
            if memory_limit:
                runtime = datafusion.RuntimeEnvBuilder().with_greedy_memory_pool(memory_bytes(memory_limit))
            ctx = datafusion.SessionContext(config, runtime)
            self.url = "datafusion://"
        else:
            self.url = "datafusion://(caller's session)"
            self.owns_connection = False
        self.ctx = ctx
        self._created: dict[tuple[str, str], str] = {}  # (schema, table) -> the CREATE TABLE it was made by
        self._defaults: dict[str, str] = {}

    @classmethod
    def open(cls, target: str, **options: Any) -> DataFusionBackend:
        """``datafusion://``: a new session in memory.  DataFusion keeps no database file, so a path
        is refused; ``threads=`` and ``memory_limit=`` of :func:`sqlrp.connect` size the session."""
        rest = target.split("://", 1)[1] if "://" in target else target
        if rest.strip("/"):
            raise InvalidParameter(
                f"{ENGINE}: sqlrp runs DataFusion in memory and keeps no file ({target!r}): use datafusion://, "
                "or pass a datafusion.SessionContext with your tables registered"
            )
        threads = options.get("threads")
        memory_limit = options.get("memory_limit")
        return cls(threads=int(threads) if threads else None, memory_limit=str(memory_limit) if memory_limit else None)

    @classmethod
    def wrap(cls, ctx: Any, **options: Any) -> DataFusionBackend:
        """Use the caller's ``datafusion.SessionContext`` (its tables, its settings)."""
        if not hasattr(ctx, "sql") or not hasattr(ctx, "catalog"):
            raise InvalidParameter(f"{ENGINE}: cannot use a {type(ctx).__name__}: pass a datafusion.SessionContext")
        return cls(ctx)

    # ---- running SQL ----

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run one statement; ``params`` are written as literals in place of the ``?`` (:func:`bind`).
        ``ALTER TABLE`` (which DataFusion lacks) is done here (module docstring)."""
        sql = bind(sql, params)
        if _ALTER.match(sql):
            self._alter(sql)
            return
        with _engine_errors():
            self.ctx.sql(sql).collect()
        created = _CREATE.match(sql)
        if created:
            table = exp.to_table(created.group(2), dialect="postgres")
            self._created[self._key(table)] = sql

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run a query and return its rows as tuples (NULL as None, arrays as lists)."""
        with _engine_errors():
            table = self.ctx.sql(bind(sql, params)).to_arrow_table()
        return arrow_rows(table)

    def query_arrow(self, sql: str) -> pa.Table:
        """The result as a ``pyarrow.Table`` (DataFusion's own)."""
        with _engine_errors():
            return self.ctx.sql(sql).to_arrow_table()

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame (Arrow's conversion: NULL numbers as NaN, lists as arrays)."""
        return _frame(self.query_arrow(sql))

    def iter_arrow(self, sql: str, rows: int = 100_000) -> Iterator[pa.Table]:
        """Stream the result as Arrow tables of ``rows`` rows, the last one shorter (``execute_stream``:
        DataFusion computes record batches as they are read)."""
        with _engine_errors():
            stream = self.ctx.sql(sql).execute_stream()
        with _engine_errors():
            yield from recut_batches((chunk.to_pyarrow() for chunk in stream), rows)

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """:meth:`iter_arrow` as DataFrames."""
        for table in self.iter_arrow(sql, rows):
            yield _frame(table)

    # ---- ALTER TABLE, done here ----

    def _alter(self, sql: str) -> None:
        """``ALTER TABLE a RENAME TO b`` and ``ALTER TABLE t ADD COLUMN c ...`` (module docstring)."""
        alter = exp.maybe_parse(sql, dialect="postgres")
        actions = alter.args.get("actions") or [] if isinstance(alter, exp.Alter) else []
        if len(actions) == 1 and isinstance(actions[0], exp.AlterRename):
            new = actions[0].this
            self._rename(alter.this, exp.Table(this=new.this, db=alter.this.args.get("db")))
            return
        if len(actions) == 1 and isinstance(actions[0], exp.ColumnDef):
            self._add_column(alter.this, actions[0])
            return
        raise DataFusionError(f"{ENGINE}: ALTER TABLE is not supported, and sqlrp does only RENAME TO and ADD COLUMN")

    def _key(self, table: exp.Table) -> tuple[str, str]:
        return (table.db or self._default("schema"), table.name)

    def _default(self, what: str) -> str:
        """The session's default catalog or schema (``datafusion.catalog.default_<what>``), read once;
        DataFusion's own defaults where the session has no ``information_schema``."""
        if what not in self._defaults:
            fallback = "datafusion" if what == "catalog" else "public"
            try:
                rows = self.fetchall(
                    "SELECT value FROM information_schema.df_settings WHERE name = ?",
                    [f"datafusion.catalog.default_{what}"],
                )
            except DataFusionError:  # a session made with_information_schema(False)
                rows = []
            self._defaults[what] = str(rows[0][0]) if rows and rows[0][0] else fallback
        return self._defaults[what]

    def _schema(self, schema: str | None) -> Any | None:
        """The catalogue's schema ``schema`` (default: the session's), or None if there is none."""
        with _engine_errors():
            catalog = self.ctx.catalog(self._default("catalog"))
            name = schema or self._default("schema")
            return catalog.schema(name) if name in catalog.names() else None

    def _name(self, table: exp.Table) -> str:
        return ".".join(quote(part) for part in (table.db, table.name) if part)

    def _provider(self, table: exp.Table) -> Any:
        """The catalogue's table ``table`` (its Arrow ``schema``, its ``kind``)."""
        schema = self._schema(table.db or None)
        if schema is None or table.name not in schema.names():
            raise missing_table(table.name, table.db or None, self.table_names(table.db or None))
        with _engine_errors():
            return schema.table(table.name)

    def _rename(self, old: exp.Table, new: exp.Table) -> None:
        """Register the table ``old`` under ``new`` (the same data, no copy) and drop the old name."""
        if self.table_exists(new.name, new.db or None):
            raise DataFusionError(f"{ENGINE}: cannot rename {old.name!r} to {new.name!r}: that table already exists")
        provider = self._provider(old)
        with _engine_errors():
            self.ctx.register_table(self._name(new), provider)
            self.ctx.deregister_table(self._name(old))
        ddl = self._created.pop(self._key(old), None)
        if ddl is not None:
            self._created[self._key(new)] = ddl

    def _add_column(self, table: exp.Table, column: exp.ColumnDef) -> None:
        """Build ``table`` again with ``column`` added, copy its rows, and swap it in."""
        names = [c.name for c in self.columns(table.name, table.db or None)]
        staging = exp.Table(this=exp.to_identifier(scratch_name("alter")), db=table.args.get("db"))
        ddl = self._created.get(self._key(table))
        if ddl is not None:
            create = exp.maybe_parse(ddl, dialect="postgres")
            create.this.set("this", staging)
            create.this.append("expressions", column)
            create.set("exists", False)
            self.execute(create.sql("postgres"))
            cols = ", ".join(quote(n) for n in names)
            self.execute(f"INSERT INTO {self._name(staging)} ({cols}) SELECT {cols} FROM {self._name(table)}")
        else:  # a table sqlrp did not create: its clauses are unknown, the column is NULL
            kind = column.args.get("kind")
            value = exp.Cast(this=exp.null(), to=kind) if kind is not None else exp.null()
            self.execute(
                f"CREATE TABLE {self._name(staging)} AS SELECT *, {value.sql('postgres')} AS {quote(column.name)} "
                f"FROM {self._name(table)}"
            )
        self.execute(f"DROP TABLE {self._name(table)}")
        self._rename(staging, table)
        if ddl is not None:
            create.this.set("this", table)
            self._created[self._key(table)] = create.sql("postgres")

    # ---- describing tables ----

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns of the table or view ``table`` (in ``schema``, default the session's) in order,
        typed from its Arrow schema (:func:`column_info`); :class:`InputError` if there is none."""
        provider = self._provider(exp.Table(this=exp.to_identifier(table), db=schema))
        return [column_info(field.name, field.type) for field in provider.schema]

    def table_exists(self, table: str, schema: str | None = None) -> bool:
        found = self._schema(schema)
        return found is not None and table in found.names()

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views of ``schema`` (default: the session's default schema), read from the
        session's catalogue (a session need not have ``information_schema``)."""
        found = self._schema(schema)
        return sorted(found.names()) if found is not None else []

    def is_view(self, name: str, schema: str | None = None) -> bool:
        found = self._schema(schema)
        if found is None or name not in found.names():
            return False
        with _engine_errors():
            return found.table(name).kind == "view"

    # ---- loading frames ----

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` holding ``df`` (``CREATE TABLE ... AS`` from the frame's Arrow table);
        ``replace`` drops an existing table or view of that name first."""
        if not len(df.columns):
            raise InvalidParameter(f"{ENGINE}: cannot create a table from a DataFrame without columns")
        with self._registered(df) as relation:
            if replace:
                kind = "VIEW" if self.is_view(table) else "TABLE"
                self.execute(f"DROP {kind} IF EXISTS {quote(table)}")
            self.execute(f"CREATE TABLE {quote(table)} AS SELECT * FROM {relation}")

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append the rows of ``df`` to ``table`` (columns matched by name; DataFusion casts each to
        the table's type, and refuses a NULL in a ``NOT NULL`` column)."""
        if not len(df) or not len(df.columns):
            return
        cols = ", ".join(quote(str(c)) for c in df.columns)
        with self._registered(df) as relation:
            self.execute(f"INSERT INTO {quote(table)} ({cols}) SELECT {cols} FROM {relation}")

    @contextlib.contextmanager
    def _registered(self, df: pd.DataFrame) -> Iterator[str]:
        """``df`` as a relation of the session under a private name while the block runs."""
        data = arrow_table(df)
        # from_arrow registers the table under name (an empty frame keeps its schema)
        register = _engine_errors()(lambda name: self.ctx.from_arrow(data, name=name))
        unregister = _engine_errors()(lambda name: self.ctx.deregister_table(quote(name)))
        with registered(register, unregister) as name:
            yield quote(name)

    def close(self) -> None:
        """Forget the session (its tables go with it); a caller's session is left as it is."""
        if self.owns_connection:
            self.ctx = None


def _frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a DataFrame (column names kept even when two are equal, or there are no rows)."""
    return table.to_pandas()


__all__ = ["DataFusionBackend", "DataFusionError", "arrow_table", "bind", "column_info", "literal", "sql_type"]
