"""Spark SQL backend: local mode, a standalone cluster, or Spark Connect, through PySpark.

``SparkBackend(session)`` uses a ``SparkSession`` you already have (sqlrp never stops it);
``SparkBackend.from_master("local[2]" | "spark://host:7077" | "sc://host:15002")`` builds one, with
its warehouse and metastore folders in a temporary folder that :meth:`close` removes.

What Spark does differently, and what this backend does about it (each measured on Spark 4.3):

- No transactions: :meth:`transaction` only groups statements (``transactional = False``); the
  registry compensates on failure (``sqlrp.registry.store.Registry._atomic``).
- Parameters: ``spark.sql(sql, args=[...])`` binds ``?`` placeholders (positional since Spark 3.5).
- No ``information_schema``: ``SELECT ... FROM information_schema.tables`` fails with
  ``TABLE_OR_VIEW_NOT_FOUND``; tables and columns come from the catalog API instead.
- File-source tables (``USING parquet``, the default) refuse ``DELETE``: ``[UNSUPPORTED_FEATURE.
  TABLE_OPERATION] ... does not support DELETE``, and ``INSERT OVERWRITE t SELECT ... FROM t``
  fails with ``[UNSUPPORTED_OVERWRITE.TABLE] Can't overwrite the target that is also being read
  from``.  :meth:`execute` therefore runs ``DELETE FROM t WHERE c`` natively where the table
  supports it (Delta, Iceberg) and otherwise keeps the other rows in a staging table and writes
  them back with ``INSERT OVERWRITE`` (not atomic: nothing on file tables is).
- ``PRIMARY KEY`` is refused (``does not support CONSTRAINT``); ``NOT NULL`` is accepted but
  dropped (``SHOW CREATE TABLE`` omits it and NULLs insert); ``DEFAULT current_timestamp`` works.
- Identifiers are quoted with backticks.  Column names may hold spaces, quotes and unicode, but the
  session catalog stores table and schema names of letters, digits and ``_`` only
  (``[INVALID_SCHEMA_OR_RELATION_NAME]``, raised before anything is written): that error is raised
  as :class:`~sqlrp.core.errors.InvalidParameter` naming the engine.
- Arrow moves frames both ways (sessions sqlrp starts); like DuckDB's scan of a DataFrame, it
  stores a NaN in a float column as NULL.  Spark Connect servers that are not Spark (Sail): :mod:`.spark_connect`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.errors import InvalidParameter, need
from ..core.lazy import pd
from ..core.names import scratch_name
from ..core.nodes import ident
from . import catalog, spark_connect
from .base import ColumnInfo, NoTransactions, missing_table
from .staging import registered
from .values import frames, kind_series, py, value_kind

_LOCAL = re.compile(catalog.SPARK.patterns[0])
_DELETE = re.compile(r"^\s*DELETE\s+FROM\s", re.IGNORECASE)
_QUERY = re.compile(r"^\s*\(*\s*(SELECT|WITH|VALUES|FROM|TABLE)\b", re.IGNORECASE)
#: PySpark logs every analysis error with its full JVM stack trace at ERROR (``pyspark.errors.
#: exceptions.base._log_exception``); silenced only around probes whose failure sqlrp expects
_QUERY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _pyspark_sql() -> Any:
    return need("pyspark.sql", "spark", "the Spark backend")


class SparkBackend(NoTransactions):
    """A ``SparkSession``: the caller's (``SparkBackend(spark)``, never stopped by sqlrp) or one
    sqlrp built (:meth:`from_master`, stopped by :meth:`close`)."""

    dialect = "spark"
    registration = catalog.SPARK

    def __init__(self, spark: Any, url: str | None = None) -> None:
        _pyspark_sql()
        self.spark = spark
        self.owns_connection = False
        self._tmp: str | None = None
        self._no_delete: set[str] = set()  # tables that refused a native DELETE
        self._no_setting: set[str] = set()  # SET statements the server refused (a setting it lacks)
        self._literal_params = self._keep_session = False  # Spark Connect servers: see .spark_connect
        if url is None:
            try:
                url = spark.conf.get("spark.master")
            except Exception:  # noqa: BLE001 - Spark Connect hides some settings
                url = "spark (caller's session)"
        self.url = url

    # ---- building a session ----

    @classmethod
    def open(cls, target: str, conf: dict[str, str] | None = None, **options: object) -> SparkBackend:
        """:meth:`from_master` of ``target``; ``conf``: settings of the session (``spark.driver.memory`` ...)."""
        return cls.from_master(target, conf=conf)

    @classmethod
    def wrap(cls, session: Any, **options: object) -> SparkBackend:
        """Use the caller's ``SparkSession`` (never stopped by sqlrp)."""
        self = cls(session)
        self.adds_columns = spark_connect.adds_columns(session)  # False on Sail (module .spark_connect)
        return self

    @classmethod
    def from_master(
        cls,
        master: str,
        conf: dict[str, str] | None = None,
        app_name: str = "sqlrp",
        shuffle_partitions: int = 4,
    ) -> SparkBackend:
        """Start a session for ``master``: ``local``, ``local[N]``, ``local[*]``, ``spark://host:port``
        (a standalone cluster) or ``sc://host:port`` (Spark Connect).  The warehouse and the Derby
        metastore (used only if you set ``spark.sql.catalogImplementation=hive`` in ``conf``) go to a
        fresh temporary folder, removed by :meth:`close`: the tables live as long as the backend.
        The driver binds to ``$SPARK_LOCAL_IP``; for ``local`` and a master on this machine that
        defaults to ``127.0.0.1`` (set in the environment the JVM starts with).  The web UI is off.
        ``conf`` adds or overrides settings; its ``spark.driver.extraJavaOptions`` are appended to
        sqlrp's (the Derby location).

        Spark runs one SparkContext per process: if one is already running for the same master it
        is used (and left running by :meth:`close`); for another master this raises."""
        sql = _pyspark_sql()
        master = master.strip()
        if not (_LOCAL.match(master) or master.startswith(("spark://", "sc://"))):
            raise InvalidParameter(
                f"not a Spark master: {master!r} (use local[N], spark://host:port or sc://host:port)"
            )
        if master.startswith("sc://"):
            return cls._connect(sql, master, conf, app_name, shuffle_partitions)
        running = _running_context()
        if running is not None:
            if running.master != master:
                raise InvalidParameter(
                    f"spark: this process already runs a SparkContext for {running.master!r}, and Spark allows "
                    f"one per process; pass that SparkSession to sqlrp.connect() or stop it before connecting "
                    f"to {master!r}"
                )
            return cls(sql.SparkSession.builder.getOrCreate(), url=master)
        if _LOCAL.match(master) or re.match(r"^spark://(127\.0\.0\.1|localhost)(:\d+)?$", master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # every socket of the JVM on loopback
        tmp = tempfile.mkdtemp(prefix="sqlrp-spark-")
        host = os.environ.get("SPARK_LOCAL_IP")  # unset only for a remote master: Spark's own choice
        settings = {
            "spark.sql.warehouse.dir": Path(tmp, "warehouse").as_uri(),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={Path(tmp, 'derby')}",  # + conf's, below
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={Path(tmp, 'metastore_db')};create=true"
            ),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
        }
        if host:
            settings.update({"spark.driver.host": host, "spark.driver.bindAddress": host})
        for key, value in (conf or {}).items():
            java = key == "spark.driver.extraJavaOptions"
            settings[key] = f"{settings[key]} {value}" if java else value
        builder = sql.SparkSession.builder.master(master).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        try:
            with _pandas_quiet():
                spark = builder.getOrCreate()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        spark.sparkContext.setLogLevel("ERROR")
        self = cls(spark, url=master)
        self.owns_connection = True
        self._tmp = tmp
        return self

    @classmethod
    def _connect(
        cls, sql: Any, remote: str, conf: dict[str, str] | None, app_name: str, shuffle_partitions: int
    ) -> SparkBackend:
        """A Spark Connect session (``sc://host:port``; servers other than Spark's: :mod:`.spark_connect`)."""
        settings = {"spark.sql.shuffle.partitions": str(int(shuffle_partitions)), **(conf or {})}
        with _pandas_quiet():
            session, keep, spark = spark_connect.open_session(sql, remote, settings, app_name)
        self = cls(session, url=remote)
        self.owns_connection = True
        self._keep_session, self.adds_columns = keep, spark  # Sail: no ALTER TABLE ... ADD COLUMN
        return self

    # ---- running SQL ----

    def _sql(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """``sql`` bound to ``params``, or with them as literals once the server refused that (Sail)."""
        with _names_checked():
            if params is None:
                return self.spark.sql(sql)
            if self._literal_params:
                return self.spark.sql(spark_connect.bind(sql, params))
            try:
                with _quiet():
                    return self.spark.sql(sql, args=[py(v) for v in params])
            except Exception as exc:  # noqa: BLE001 - only the refusal of parameters is handled
                if not spark_connect.refuses_parameters(exc):
                    raise
            self._literal_params = True
            return self.spark.sql(spark_connect.bind(sql, params))

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        """Run a statement.  Commands run when submitted; a query is computed in full and its rows
        discarded (the ``noop`` sink).  ``DELETE`` on a table that lacks it is emulated (module doc)."""
        if _DELETE.match(sql):
            self._delete(sql, params)
            return
        if sql in self._no_setting:
            return
        try:
            frame = self._sql(sql, params)
        except Exception as exc:  # a setting or a rename the server lacks (Sail): module .spark_connect
            if spark_connect.refuses_setting(sql, exc):
                return self._no_setting.add(sql)
            if not spark_connect.renamed_by_copy(self._sql, sql, exc):
                raise
            return
        if _QUERY.match(sql):
            frame.write.format("noop").mode("overwrite").save()

    def fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        return [tuple(row) for row in self._sql(sql, params).collect()]

    def query_df(self, sql: str) -> pd.DataFrame:
        """The result as a DataFrame (through Arrow where PySpark can; it falls back by itself)."""
        frame = self._sql(sql)
        with _pandas_quiet():
            out = frame.toPandas()
        out.columns = list(frame.columns)
        return out

    def iter_chunks(self, sql: str, rows: int = 100_000) -> Iterator[pd.DataFrame]:
        """Stream the result a partition at a time (``toLocalIterator``), cut into ``rows``-row frames.
        An ``ORDER BY`` query keeps its order."""
        frame = self._sql(sql)
        yield from frames(frame.toLocalIterator(prefetchPartitions=True), list(frame.columns), rows)

    # ---- DELETE on tables without it ----

    def _delete(self, sql: str, params: Sequence[Any] | None) -> None:
        """``DELETE FROM t [WHERE c]``: native where the table supports it, else ``CREATE TABLE s AS
        SELECT * FROM t WHERE NOT coalesce(c, false)``, ``INSERT OVERWRITE t SELECT * FROM s``, drop
        ``s`` -- skipped when no row matches."""
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(sql, read="spark")
        if not isinstance(tree, exp.Delete) or not isinstance(tree.this, exp.Table):
            raise InvalidParameter(f"spark: cannot run this DELETE statement: {sql[:200]}")
        target = tree.this.sql("spark")
        where = tree.args.get("where")
        condition = where.this.sql("spark") if where is not None else "TRUE"
        if target not in self._no_delete:
            try:
                with _quiet():
                    self._sql(sql, params)
                return
            except Exception as exc:  # noqa: BLE001 - only "does not support DELETE" is handled
                if not spark_connect.refuses_delete(exc, _condition(exc)):
                    raise
                self._no_delete.add(target)
        if not self.fetchall(f"SELECT 1 FROM {target} WHERE {condition} LIMIT 1", params):
            return
        staging = _quote(scratch_name("keep"))
        self._sql(
            f"CREATE TABLE {staging} USING parquet AS SELECT * FROM {target} WHERE NOT coalesce({condition}, false)",
            params,
        )
        try:
            self.spark.sql(f"INSERT OVERWRITE TABLE {target} SELECT * FROM {staging}")
        finally:
            self.spark.sql(f"DROP TABLE IF EXISTS {staging}")

    # ---- the catalog ----

    def _name(self, table: str, schema: str | None = None) -> str:
        return f"{_quote(schema)}.{_quote(table)}" if schema else _quote(table)

    def columns(self, table: str, schema: str | None = None) -> list[ColumnInfo]:
        """Columns from the table's Spark schema; ``array<double>`` has element type ``double``."""
        name = self._name(table, schema)
        if not self._exists(name, schema):
            raise missing_table(table, schema, self.table_names(schema) if self._schema_exists(schema) else [])
        out = []
        for field in self.spark.table(name).schema.fields:
            kind = field.dataType
            element = getattr(kind, "elementType", None)
            out.append(
                ColumnInfo(field.name, kind.simpleString(), element.simpleString() if element is not None else None)
            )
        return out

    def _exists(self, name: str, schema: str | None) -> bool:
        if not self._schema_exists(schema):
            return False
        try:
            with _quiet():
                return bool(self.spark.catalog.tableExists(name))
        except Exception:  # noqa: BLE001 - a name Spark cannot parse is not a table here
            return False

    def _schema_exists(self, schema: str | None) -> bool:
        if schema is None:
            return True
        with _quiet():
            return bool(self.spark.catalog.databaseExists(_quote(schema)))

    def table_names(self, schema: str | None = None) -> list[str]:
        """Tables and views of ``schema`` (default: the current one), temporary views included."""
        rows = self.fetchall(f"SHOW TABLES IN {_quote(schema)}" if schema else "SHOW TABLES")
        return [r[1] for r in rows]

    def is_view(self, name: str, schema: str | None = None) -> bool:
        """True if ``name`` is a view (temporary or stored), from the catalog."""
        if not self._schema_exists(schema):
            return False
        for table in self.spark.catalog.listTables(dbName=_quote(schema) if schema else None):
            if table.name.lower() == name.lower():  # the session catalog stores names lower-cased
                return table.tableType in ("VIEW", "TEMPORARY") or bool(table.isTemporary)
        return False

    # ---- loading DataFrames ----

    def _frame(self, df: pd.DataFrame) -> Any:
        """``df`` as a Spark DataFrame with an explicit schema: integers BIGINT, floats DOUBLE,
        booleans BOOLEAN, list/array cells ``ARRAY<DOUBLE>``, anything else STRING."""
        types = need("pyspark.sql.types", "spark", "the Spark backend")
        fields, data = [], {}
        for name in df.columns:
            kind = value_kind(df[name])
            fields.append(types.StructField(str(name), _spark_type(types, kind), nullable=True))
            data[str(name)] = kind_series(df[name], kind).reset_index(drop=True)  # by position, whatever df's index
        schema = types.StructType(fields)
        frame = pd.DataFrame(data, index=range(len(df)), columns=[str(c) for c in df.columns])
        with _pandas_quiet():
            return self.spark.createDataFrame(frame, schema=schema)

    def write_dataframe(self, table: str, df: pd.DataFrame, replace: bool = False) -> None:
        """Create ``table`` (parquet) from ``df``; ``replace=True`` overwrites an existing one."""
        writer = self._frame(df).write.format("parquet").mode("overwrite" if replace else "error")
        with _names_checked():
            writer.saveAsTable(self._name(table))

    def insert_frame(self, table: str, df: pd.DataFrame) -> None:
        """Append ``df`` to ``table``, matching columns by name (columns it lacks take their defaults)."""
        cols = ", ".join(_quote(str(c)) for c in df.columns)
        with registered(self._frame(df).createOrReplaceTempView, self.spark.catalog.dropTempView) as view:
            self.spark.sql(f"INSERT INTO {self._name(table)} ({cols}) SELECT {cols} FROM {_quote(view)}")

    def close(self) -> None:
        """Stop the session if sqlrp started it (and remove its temporary folder)."""
        if not self.owns_connection:
            return
        try:
            if self._keep_session:
                self.spark.release_session_on_close = False
            self.spark.stop()
        finally:
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
            self.owns_connection = False


def _quote(name: str) -> str:
    """``name`` as one Spark identifier (backticks), quoted by sqlglot like every other name."""
    return ident(name).sql("spark")


def _spark_type(types: Any, kind: str) -> Any:
    """The Spark type of a column of ``kind`` (:func:`~sqlrp.backends.values.value_kind`; :meth:`_frame`)."""
    if kind == "array":
        return types.ArrayType(types.DoubleType(), containsNull=True)
    return {"boolean": types.BooleanType, "bigint": types.LongType, "double": types.DoubleType}.get(
        kind, types.StringType
    )()


def _running_context() -> Any:
    """The SparkContext running in this process, if any."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    return SparkContext._active_spark_context


def _condition(exc: BaseException) -> str | None:
    """Spark's error condition (``TABLE_OR_VIEW_NOT_FOUND`` ...) of a PySpark exception, else None."""
    get = getattr(exc, "getCondition", None)
    try:
        return get() if callable(get) else None
    except Exception:  # noqa: BLE001 - an exception that cannot say
        return None


@contextlib.contextmanager
def _pandas_quiet() -> Iterator[None]:
    """PySpark 4.3 warns on every pandas conversion under pandas 3 (its version check, and a
    ``copy=`` keyword pandas 3 deprecates): noise about PySpark, not about the user's call."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        warnings.filterwarnings("ignore", message="The copy keyword is deprecated")
        yield


@contextlib.contextmanager
def _names_checked() -> Iterator[None]:
    """Spark's session catalog takes only names of letters, digits and ``_`` for tables and schemas
    (``[INVALID_SCHEMA_OR_RELATION_NAME]``, raised before anything is written): say so as sqlrp's
    error, naming the engine."""
    try:
        yield
    except Exception as exc:
        if _condition(exc) != "INVALID_SCHEMA_OR_RELATION_NAME":
            raise
        detail = str(exc).splitlines()[0]
        raise InvalidParameter(
            f"spark: {detail} Spark's session catalog stores table and schema names of letters, digits and _ "
            "only: choose such a name"
        ) from exc


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Mute PySpark's ERROR log of analysis errors around a probe sqlrp expects may fail."""
    try:  # PySpark's own logger class: a plain logging.Logger of that name would break its calls
        from pyspark.logger import PySparkLogger
    except ImportError:
        yield
        return
    loggers = [PySparkLogger.getLogger(name) for name in _QUERY_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before, strict=True):
            lg.disabled = was
