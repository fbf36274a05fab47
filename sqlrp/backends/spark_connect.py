"""Spark Connect servers (``sc://host:port``): Apache Spark's own, and servers that speak its protocol
without being Spark.  Measured on Sail 0.7.2 (pip ``pysail``, a Rust server on Apache DataFusion;
``sail spark server --ip 127.0.0.1 --port P``), with PySpark 4.3 as the client; Sail's source is
github.com/lakehq/sail.  What differs there, and what sqlrp does about it:

- **The server's own PySpark**: Sail imports ``pyspark`` *in the server's process* to pick its table of
  Spark settings (``SparkRuntimeConfig::try_new``, crate ``sail-spark-connect``) and knows 3.x, 4.0,
  4.1 and 4.2 there.  Run beside PySpark 4.3, it refuses every session ("invalid argument: unsupported
  PySpark version: 4.3.0"), whatever the client's version; the client is not checked (a 4.3 client
  works with a server beside 4.2).  sqlrp says so in one line on connect (:func:`refusal`).
- **Parameters**: ``SELECT ?`` binds, but a command with parameters (``INSERT ... VALUES (?)``) is
  refused ("command with parameters").  On such a server sqlrp renders each parameter as a Spark
  literal in place of its ``?`` (:func:`bind`: strings quoted by sqlglot's Spark rules, which escape
  with backslashes as Spark's parser reads them; doubles in exponent form, so that they stay DOUBLE
  and not DECIMAL); user text is never pasted into SQL as SQL.
- **DELETE**: Sail's Parquet tables have none ("does not support lake operations"), as Spark's file
  tables: the backend keeps the other rows and writes them back (:mod:`sqlrp.backends.spark`).
- **Renames**: ``ALTER TABLE a RENAME TO b`` is refused ("unsupported ALTER TABLE operation"): ``b``
  is made as a copy of ``a``, then ``a`` dropped (:func:`renamed_by_copy`).
- **Columns**: ``ALTER TABLE ... ADD COLUMN`` is refused too: a new registry is made at its latest
  shape at once (``Backend.adds_columns``); ``INSERT`` takes a value for every column.
- **Settings**: ``SET spark.sql.codegen.hugeMethodLimit = ...`` (what sqlrp sets before a projection
  for Spark's JVM code generator, :mod:`sqlrp.dialects.spark`) fails with "Could not find config
  namespace": Sail has no such code generator; the setting is skipped on the server that refused it.
- **Sessions**: Sail's default catalog keeps table metadata in memory *per session* ("memory"
  catalog; the Parquet files stay in its warehouse folder), and removes a session idle for
  ``spark.session_timeout_secs`` (900 s by default; ``SAIL_SPARK__SESSION_TIMEOUT_SECS``).  Each
  ``sqlrp`` command is a new client, so sqlrp joins one session of its own on such a server (a fixed
  session id, :data:`SHARED_SESSION`) and never releases it: the registry and ``--into`` tables are
  there for the next command while the server runs and the session is used at least every 900 s.
  ``sc://host:port/;session_id=UUID`` joins that session instead (also kept).
- **Detection**: ``SELECT version()`` is ``"4.3.0 <git revision>"`` on Apache Spark (two fields, Spark's
  SQL reference) and Sail's own version alone (``"0.7.2"``) there: :func:`server_kind`.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from ..core.errors import EngineLimit, MissingExtra
from .placeholders import bind_literals, quoting_tokens, scalar_literal
from .values import py

#: the session sqlrp joins on a server whose catalog is per session (module doc): one per server
SHARED_SESSION = str(uuid.uuid5(uuid.NAMESPACE_URL, "sqlrp:spark-connect:shared-session"))

# a ``?`` outside string literals, quoted identifiers and comments (Spark: backslash escapes in strings)
_TOKENS = quoting_tokens(backslash=True, backticks=True)
_SET = re.compile(r"^\s*SET\s", re.IGNORECASE)
_REFUSED_PYSPARK = re.compile(r"unsupported PySpark version: (\S+)")
_CLIENT_CHECKS = (
    "require_minimum_grpc_version",
    "require_minimum_grpcio_status_version",
    "require_minimum_googleapis_common_protos_version",
    "require_minimum_zstandard_version",
)


def need_client() -> None:
    """Refuse in one line when a module the Spark Connect client needs is missing or too old
    (``pyspark[connect]``'s: grpcio, grpcio-status, googleapis-common-protos, and zstandard since PySpark
    4): PySpark's own checks of this client version (``pyspark.sql.connect.utils``), those it has."""
    try:
        from pyspark.sql.connect import utils

        for check in _CLIENT_CHECKS:
            getattr(utils, check, lambda: None)()
    except ImportError as exc:  # PySparkImportError is one
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MissingExtra(
            f"spark: Spark Connect (sc://) needs the client's modules ({detail}): pip install 'pyspark[connect]'"
        ) from None


def literal(value: Any) -> str:
    """``value`` as a Spark SQL literal: NULL, TRUE/FALSE, an integer, a double in exponent form
    (``0.1e0``: Spark reads ``0.1`` as a DECIMAL), NaN and infinities as ``CAST('NaN' AS DOUBLE)``,
    bytes as ``X'..'``, a list as ``array(...)``, anything else a string quoted by sqlglot's Spark rules."""
    value = py(value, dates_as_text=True)
    if isinstance(value, float) and math.isfinite(value):
        text = repr(value)
        return f"({text if 'e' in text else text + 'e0'})"
    if value is not None and not isinstance(value, (bool, int, float, bytes, bytearray, memoryview, list)):
        return exp.Literal.string(str(value)).sql("spark")  # Spark's quoting (backslashes escape there)
    return scalar_literal(
        value, "DOUBLE", lambda raw: f"X'{raw.hex()}'", lambda items: "array(" + ", ".join(map(literal, items)) + ")"
    )


def bind(sql: str, params: Sequence[Any] | None) -> str:
    """``sql`` with each ``?`` outside quotes and comments replaced by the literal of the next parameter."""
    return bind_literals(sql, params, _TOKENS, literal, "spark")


def refuses_parameters(exc: BaseException) -> bool:
    """The server refused a command because it had parameters (Sail: "command with parameters")."""
    return "command with parameters" in str(exc)


def refuses_delete(exc: BaseException, condition: str | None) -> bool:
    """The table has no ``DELETE``: Spark's file tables (``UNSUPPORTED_FEATURE.TABLE_OPERATION``), Sail's
    Parquet tables ("Data source 'parquet' does not support lake operations")."""
    text = str(exc)
    return (
        condition == "UNSUPPORTED_FEATURE.TABLE_OPERATION" and "DELETE" in text
    ) or "support lake operations" in text


def renamed_by_copy(run: Callable[[str], Any], sql: str, exc: BaseException) -> bool:
    """``ALTER TABLE a RENAME TO b`` on a server that has no rename (Sail: "unsupported ALTER TABLE
    operation"): ``b`` made as a Parquet copy of ``a``, then ``a`` dropped; False (nothing run) for any
    other statement or error.  Not atomic, as nothing on file tables is; the staged writes that rename
    (:func:`sqlrp.pipeline.materialise.staged`) rename only a table already built and checked."""
    if "unsupported ALTER TABLE operation" not in str(exc):
        return False
    tree = sqlglot.parse_one(sql, read="spark")
    actions = tree.args.get("actions") or []
    if not isinstance(tree, exp.Alter) or len(actions) != 1 or not isinstance(actions[0], exp.AlterRename):
        return False
    old, new = tree.this, actions[0].this
    if not new.args.get("db") and old.args.get("db"):  # RENAME TO keeps the schema
        new = exp.table_(new.this, db=old.args["db"])
    run(f"CREATE TABLE {new.sql('spark')} USING parquet AS SELECT * FROM {old.sql('spark')}")
    run(f"DROP TABLE {old.sql('spark')}")
    return True


def refuses_setting(sql: str, exc: BaseException) -> bool:
    """The server refused a ``SET`` of a setting it does not have (Sail: "Could not find config namespace")."""
    return bool(_SET.match(sql)) and "Could not find config namespace" in str(exc)


def refusal(exc: BaseException, remote: str) -> EngineLimit | None:
    """The one-line error for a server that refuses every session because of the PySpark installed
    beside it (module doc), else None."""
    found = _REFUSED_PYSPARK.search(str(exc))
    if found is None:
        return None
    return EngineLimit(
        f"spark: the Spark Connect server at {remote} refuses every session: its own Python has pyspark "
        f"{found.group(1)}, and Sail 0.7.2 knows pyspark 3.x to 4.2 there (this client's pyspark is not "
        "checked): run the server in an environment with pyspark<4.3"
    )


def server_kind(session: Any) -> str:
    """``"spark"`` for Apache Spark (``version()`` is a release and a git revision), else ``"other"``
    (Sail answers its own release alone)."""
    text = str(session.sql("SELECT version()").collect()[0][0]).strip()
    return "spark" if len(text.split()) == 2 else "other"


def adds_columns(session: Any) -> bool:
    """Whether the server of a caller's ``session`` takes ``ALTER TABLE ... ADD COLUMN``: a classic
    session's Spark does, and Apache Spark's Connect server; Sail refuses it (module doc)."""
    if not type(session).__module__.startswith("pyspark.sql.connect"):
        return True
    return server_kind(session) == "spark"


def _with_session(remote: str, session_id: str) -> str:
    """``remote`` with ``;session_id=`` set (Spark Connect's URL: ``sc://host:port/;key=value;...``)."""
    base = remote if "/" in remote[len("sc://") :] else remote + "/"
    return f"{base};session_id={session_id}"


def open_session(sql: Any, remote: str, settings: dict[str, str], app_name: str) -> tuple[Any, bool, bool]:
    """A new Spark Connect session on ``remote``, whether it is kept on close (not released: a session
    named in the URL, and sqlrp's own on a server whose catalog is per session, module doc) and whether
    the server is Apache Spark.  ``SparkSession.builder.create()``: every backend its own session, never
    a process-wide default."""
    need_client()

    def build(url: str) -> Any:
        builder = sql.SparkSession.builder.remote(url).appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        return builder.create()

    given, session = "session_id=" in remote, None
    try:
        session = build(remote)  # settings are sent with it: a server that refuses every session fails here
        kind = server_kind(session)
    except Exception as exc:
        found = refusal(exc, remote)
        if session is not None:
            _release(session, keep=given)
        if found is not None:
            raise found from None
        raise
    if kind == "spark" or given:
        return session, given, kind == "spark"
    _release(session, keep=False)
    return build(_with_session(remote, SHARED_SESSION)), True, False


def _release(session: Any, keep: bool) -> None:
    """Close the client; release the server's session unless ``keep``."""
    if keep and hasattr(session, "release_session_on_close"):
        session.release_session_on_close = False
    try:
        session.stop()
    except Exception:  # noqa: BLE001, S110 - stop is best effort (PySpark's own doc)
        pass


__all__ = [
    "SHARED_SESSION",
    "adds_columns",
    "bind",
    "literal",
    "open_session",
    "refusal",
    "refuses_delete",
    "refuses_parameters",
    "refuses_setting",
    "renamed_by_copy",
]
