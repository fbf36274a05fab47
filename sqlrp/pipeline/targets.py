"""Where a writer may write: the one check every sqlrp writer calls before any work (issue 31).

A writer -- ``project --into`` (a table or a file), ``search --into``, an index build or refresh,
``projections export``, an evaluation's report -- must not write what the same operation reads, nor
what sqlrp owns: the registry's tables, an index's tables (``<name>``, ``<name>__lists``,
``<name>__tops``), a projection definition (``*.sqlrp.json``), the database file itself.  What is
read includes what a view among the inputs reads: the tables and files of its defining query (parsed with
sqlglot), views of views too.  Names are compared as the engine resolves them, never as spelled:

* **tables** by catalogue entry: an unqualified name is in the connection's current catalog and
  schema (``current_schema()``, ClickHouse's ``currentDatabase()``), and two names are one table
  where the engine takes them for one (:meth:`~sqlrp.dialects.base.SqlrpDialect.same_identifier`:
  ``"Out"`` is ``out`` on DuckDB, not on PostgreSQL);
* **files** by the file they reach (``os.path.samefile``: through symlinks, ``..`` and hard links).

A refusal is one :class:`~sqlrp.core.errors.InvalidParameter` line naming the conflict.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

from ..backends import Backend
from ..core import files
from ..core.errors import InvalidParameter
from ..core.files import database_files, refuse_files
from ..registry.store import REGISTRY_TABLES
from ..registry.transfer import is_projection_file, sidecar

#: the registry table that lists the indexes (``sqlrp.search.index.INDEX_TABLE``)
INDEX_REGISTRY = "sqlrp_index"
#: an index's tables: its rows, then its two levels of centroids (``__bands``: an older sqlrp's)
INDEX_SUFFIXES = (("", "rows"), ("__lists", "lists"), ("__tops", "centroids"), ("__bands", "bands"))
#: the ending sqlrp gives a projection definition (``sqlrp.registry.transfer.JSON_ENDING``)
DEFINITION_ENDING = ".sqlrp.json"

# the connection's current (catalog, schema): where an unqualified table name lives
_CURRENT = {
    "duckdb": "SELECT current_database(), current_schema()",
    "postgres": "SELECT current_database(), current_schema()",
    "clickhouse": "SELECT NULL, currentDatabase()",
    "spark": "SELECT current_catalog(), current_database()",
}


@dataclass(frozen=True)
class Table:
    """A table as a writer names it, and what it is to this operation (for the refusal)."""

    name: str
    schema: str | None = None
    catalog: str | None = None
    role: str = "a table"


def _current(db: Backend) -> tuple[str | None, str | None]:
    """The connection's current catalog and schema (``None``: not known here)."""
    if db.dialect == "sqlite":
        return None, "main"
    sql = _CURRENT.get(db.dialect)
    if sql is None:
        return None, None
    with contextlib.suppress(Exception):
        catalog, schema = db.fetchall(sql)[0]
        return (None if catalog is None else str(catalog)), (None if schema is None else str(schema))
    return None, None


def _same(db: Backend, a: Table, b: Table, current: tuple[str | None, str | None]) -> bool:
    """True if the engine takes ``a`` and ``b`` for one catalogue entry.  A part not known on either
    side (no current schema on this engine) is taken as the same: a refusal, never an overwrite."""
    dialect = db.sql_dialect
    if not dialect.same_identifier(a.name, b.name):
        return False
    for x, y in ((a.schema or current[1], b.schema or current[1]), (a.catalog or current[0], b.catalog or current[0])):
        if x is not None and y is not None and not dialect.same_identifier(x, y):
            return False
    return True


def same_table(db: Backend, a: Table, b: Table) -> bool:
    """True if the engine takes ``a`` and ``b`` for one catalogue entry (module docstring)."""
    return _same(db, a, b, _current(db))


def index_tables(name: str, schema: str | None, catalog: str | None) -> list[Table]:
    """The tables of the index ``name`` whose source is in ``schema`` / ``catalog``."""
    return [Table(name + suffix, schema, catalog, f"index {name!r}'s {what} table") for suffix, what in INDEX_SUFFIXES]


def owned_tables(db: Backend, besides: str | None = None) -> list[Table]:
    """The tables sqlrp owns in ``db``: the registry's, and every stored index's but ``besides``'s
    (the index being rebuilt or refreshed writes its own).  Reads the registry, never creates it."""
    owned = [Table(name, role=f"sqlrp's registry table {name!r}") for name in sorted(REGISTRY_TABLES)]
    try:
        registered = db.table_exists(INDEX_REGISTRY)
    except Exception:  # noqa: BLE001 - an engine that cannot say: no index to protect
        registered = False
    if not registered:
        return owned
    for name, source in db.fetchall(f"SELECT name, source FROM {INDEX_REGISTRY}"):
        if name == besides:
            continue
        try:
            src = json.loads(source) if source else {}
        except ValueError:
            src = {}
        src = src if isinstance(src, dict) else {}
        owned += index_tables(name, src.get("schema"), src.get("catalog"))
    return owned


# a view's defining query, by (name, schema, catalog), where the catalogue keeps it
_VIEW_SQL = {
    "duckdb": "SELECT sql FROM duckdb_views() WHERE view_name = ? AND schema_name = coalesce(?, current_schema()) "
    "AND database_name = coalesce(?, current_database()) UNION ALL SELECT sql FROM duckdb_views() "
    "WHERE view_name = ? AND ? IS NULL AND ? IS NULL AND database_name = 'temp'",
    "postgres": "SELECT pg_get_viewdef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname = ? AND n.nspname = coalesce(?, current_schema()) AND c.relkind IN ('v', 'm') "
    "AND CAST(? AS text) IS NULL",
    "clickhouse": "SELECT as_select FROM system.tables WHERE name = ? AND database = coalesce(?, currentDatabase()) "
    "AND engine IN ('View', 'MaterializedView') AND ? IS NULL",
    "sqlite": "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ? AND ? IS NULL AND ? IS NULL",
}


def _view_reads(db: Backend, table: Table) -> tuple[list[Table], list[str]]:
    """The tables and the files (DuckDB's ``read_parquet('...')``) the view ``table`` reads: none if it
    is no view, or on an engine whose views sqlrp cannot look into.  Its defining query is parsed,
    its table names taken where the engine would."""
    sql = _VIEW_SQL.get(db.dialect)
    if sql is None:
        return [], []
    params = [table.name, table.schema, table.catalog]
    try:
        rows = db.fetchall(sql, params * 2 if db.dialect == "duckdb" else params)
    except Exception:  # noqa: BLE001 - a catalogue that cannot say: nothing more is known
        return [], []
    tables: list[Table] = []
    paths: list[str] = []
    for (text,) in rows:
        try:
            tree = sqlglot.parse_one(str(text), read=db.sql_dialect.sqlglot)
        except Exception:  # noqa: BLE001 - a view sqlglot cannot read: its own name stays protected
            continue
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        for node in tree.find_all(exp.Table):
            if isinstance(node.this, exp.Identifier) and node.name not in ctes:
                role = f"the table under the view {table.name!r}"
                tables.append(Table(node.name, node.db or table.schema, node.catalog or table.catalog, role))
            elif isinstance(node.this, exp.Func):  # read_parquet('a'), read_csv(['a', 'b'], ...)
                for literal in node.this.find_all(exp.Literal):
                    if literal.is_string and isinstance(literal.parent, (exp.Func, exp.Array)):
                        paths.append(literal.this)
    return tables, paths


def _with_views(db: Backend, reads: Iterable[Table], depth: int = 8) -> tuple[list[Table], list[str]]:
    """``reads`` and, for each view among them, the tables it reads, to ``depth`` views deep; and the
    files those views read."""
    out: list[Table] = []
    paths: list[str] = []
    todo = list(reads)
    for _ in range(depth):
        out += todo
        found = [_view_reads(db, table) for table in todo]
        todo = [t for tables, _ in found for t in tables]
        paths += [p for _, ps in found for p in ps]
        if not todo:
            break
    return out, paths


def refuse_tables(
    db: Backend, writes: Sequence[Table], reads: Iterable[Table] = (), *, besides: str | None = None
) -> None:
    """Refuse (one line) if a table in ``writes`` is one of ``reads`` (or a table a view among them
    reads) or one sqlrp owns (:func:`owned_tables`, but the index ``besides``).  Before any work."""
    reads, _ = _with_views(db, reads)
    current = _current(db)
    why = {"reads": "which this operation reads (sqlrp never writes the source, nor anything it reads)"}
    why["owned"] = "which sqlrp owns"
    for kind, others in (("reads", reads), ("owned", owned_tables(db, besides))):
        for target in writes:
            clash = next((other for other in others if _same(db, target, other, current)), None)
            if clash is not None:
                raise InvalidParameter(
                    f"{db.dialect}: cannot write {_label(target)}: it is {clash.role}, {why[kind]}; choose another name"
                )


def _label(table: Table) -> str:
    parts = [p for p in (table.catalog, table.schema, table.name) if p]
    return f"{table.role} {'.'.join(parts)!r}"


# ----------------------------------------------------------------------------------------------
# files


def table_files(db: Backend, table: str, schema: str | None = None, catalog: str | None = None) -> list[str]:
    """The local files behind the table ``table``: a file or glob read as a table (DuckDB,
    :mod:`sqlrp.core.files`; ``--input PATH`` too), else none."""
    if schema is not None or catalog is not None:
        return []
    known = getattr(db, "_files", {}).get(table)
    path = known[0] if known else (table if files.file_format(table) is not None else None)
    if path is None or files.is_remote(path):
        return []
    return files.matching(path)


def projection_files(projection: object) -> list[str]:
    """The files a projection named by a path is read from (a CSV export: the matrix and its sidecar)."""

    if not isinstance(projection, (str, os.PathLike)) or not is_projection_file(projection):
        return []
    path = Path(projection)
    return [str(path), str(sidecar(path))] if path.suffix.lower() == ".csv" else [str(path)]


def input_files(
    db: Backend, table: str, projection: object = None, schema: str | None = None, catalog: str | None = None
) -> list[tuple[str, str]]:
    """What an operation on ``table`` (with the projection ``projection``) reads from files, each with
    what it is: ``(path, "the input file")``, ``(path, "the projection file")``."""
    found = [(p, "the input file") for p in table_files(db, table, schema, catalog)]
    under, paths = _with_views(db, [Table(table, schema, catalog)])
    for t in under[1:]:  # the tables and files the input reads, if it is a view
        found += [(p, f"a file under the view {table!r}") for p in table_files(db, t.name, t.schema, t.catalog)]
    for path in paths:
        if not files.is_remote(path):
            found += [(p, f"a file under the view {table!r}") for p in files.matching(path)]
    return found + [(p, "the projection file") for p in projection_files(projection)]


def refuse_output_file(db: Backend, target: Path, definition: Path | None, reads: Iterable[tuple[str, str]]) -> None:
    """A projected file's checks: not a definition's name (``*.sqlrp.json``, which sqlrp writes beside
    an output); neither it nor its ``definition`` is a file read (``reads``) or the database file."""
    if target.name.lower().endswith(DEFINITION_ENDING):
        raise InvalidParameter(
            f"cannot write rows to {str(target)!r}: a name ending in {DEFINITION_ENDING} is a projection "
            "definition, which sqlrp writes beside an output; choose another file"
        )
    writes: list[tuple[str | os.PathLike[str], str]] = [(target, "the output file")]
    if definition is not None:
        writes.append((definition, "the output's projection definition"))
    refuse_files(writes, [*reads, *((p, "the database file") for p in database_files(db))])


def refuse_report(db: Backend, out: str | os.PathLike[str], names: Sequence[str], source: object) -> None:
    """A report's files (``names`` in the folder ``out``) are none of the files the evaluated table
    ``source`` (a :class:`~sqlrp.compiler.Source`) reads, nor the database file."""
    reads = input_files(db, source.table, None, source.schema, source.catalog)  # type: ignore[attr-defined]
    reads += [(p, "the database file") for p in database_files(db)]
    refuse_files([(Path(out) / name, "the report file") for name in names], reads)


__all__ = [
    "Table",
    "database_files",
    "index_tables",
    "input_files",
    "owned_tables",
    "projection_files",
    "refuse_files",
    "refuse_output_file",
    "refuse_report",
    "refuse_tables",
    "same_table",
    "table_files",
]
