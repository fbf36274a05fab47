"""The statement cache's recording side (issue 42, item 4; the fast path that reads it: :mod:`sqlrp.start`).

A run of ``sqlrp project --projection NAME --into FILE`` on a DuckDB database file, started as the
``sqlrp`` command, stores what it ran once it has succeeded: the session's settings
(:func:`~sqlrp.backends.duckdb_settings.session_statements`), what :func:`sqlrp.pipeline.materialise.
write_file` ran (its ``RECORDERS``), the line printed, the interrupt line's parts
(:func:`sqlrp.cli.interrupt.planned`) and the fingerprint (:func:`fingerprint`).  Only where the
statements follow from the command line, the catalog and the registry alone:

- the options are among :data:`ALLOWED`, every other one at its default (a new option: not cached until
  listed here) -- so no new matrix, no ``--standardize`` (statistics of the rows), no view or top-up;
- the input is a table or view of the database (not a file), the database file existed, the output a file;
- no progress bar, no warning, nothing read from the input's rows before the write (a NULL pre-scan: its
  answer would have to be asked again), the bound matrices float64, and the budget not a small device's
  (its settings follow this process's memory at the time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from .. import start
from ..backends.base import url_path
from ..backends.duckdb_settings import QUIET, session_statements
from ..core.files import definition_path, file_format, output_format
from ..pipeline import materialise
from .interrupt import planned

#: options an entry may hold at any value: they change the statements only, which the entry stores
ALLOWED = frozenset(
    ("db", "table", "id_column", "projection", "into", "replace", "check", "no_progress", "strategy", "block")
    + ("matrix", "output", "prefix", "dtype", "threads", "memory_limit", "temp_directory", "columns", "exclude")
    + ("nulls", "route")  # route: only a run that took the SQL route wrote through write_file, and is stored
)
#: the entries kept (each command line its own; the oldest written are removed past this)
KEEP = 64
#: the parser's bookkeeping, not options
BOOKKEEPING = frozenset(("command", "func", "table_required", "input_dests", "method_params", "handed_on"))
#: every other option of ``project``, at the default an entry requires
DEFAULTS: dict[str, Any] = {
    **dict.fromkeys(("input", "schema", "catalog", "column", "array_column", "group_column", "index"), None),
    **dict.fromkeys(("method", "k", "seed", "d", "batches", "chunk_rows", "modified", "distribution"), None),
    **dict.fromkeys(("s", "m", "degree", "t", "p", "c", "up", "up_k", "down_s", "sampling", "base"), None),
    **dict.fromkeys(("truncate", "kernel", "gamma", "weights", "new_db_file"), None),
    **dict.fromkeys(("standardize", "view", "incremental", "progress"), False),
    "layout": "wide",
    "feature_column": "feature",
    "value_column": "value",
}


def eligible(args: argparse.Namespace, progress: object) -> bool:
    """Whether this run's statements may be stored (the module's list), before it runs."""
    if start.COMMAND is None or start.mode() == "off" or args.command != "project" or progress:
        return False
    db, table, into = args.db or "", args.table or "", args.into or ""
    if not db.startswith("duckdb:///") or url_path(db) in ("", ":memory:") or "?" in db:
        return False
    if not (table and into and args.projection and output_format(into)) or file_format(table):
        return False
    options = {k: v for k, v in vars(args).items() if k not in BOOKKEEPING and k not in ALLOWED}
    return all(k in DEFAULTS and DEFAULTS[k] == v for k, v in options.items())


@contextlib.contextmanager
def recording(args: argparse.Namespace, db: Any, progress: object) -> Iterator[Callable[[str], None]]:
    """Around the command: yields ``done(message)``, to be called once the file is written and ``message``
    printed, which stores the entry if the run was one to store."""
    if not eligible(args, progress):
        yield lambda message: None
        return
    programs: list[dict] = []
    reads: list[str] = []
    warned: list[object] = []
    shown, fetchall = warnings.showwarning, db.fetchall

    def note_read(sql: str, params: Any = None) -> list[tuple]:
        reads.append(sql)
        return fetchall(sql) if params is None else fetchall(sql, params)

    def note_warning(*a: Any, **k: Any) -> None:
        warned.append(a)
        shown(*a, **k)

    def done(message: str) -> None:
        (program,) = programs if len(programs) == 1 else (None,)
        if program is None or warned or not (program["stamped"] and program["exact"]):
            return
        if any(f'"{args.table}"' in sql for sql in reads):  # the compiler's SQL quotes the names it reads
            return  # a read of the input's rows (a NULL pre-scan): its answer is not the catalog's
        if getattr(db, "budget", None) is None or db.budget.small:
            return
        with contextlib.suppress(Exception):  # a cache that cannot be written is no cache
            store(args, db, program, message)

    materialise.RECORDERS.append(programs.append)
    warnings.showwarning = note_warning
    db.fetchall = note_read
    try:
        yield done
    finally:
        materialise.RECORDERS.remove(programs.append)
        warnings.showwarning = shown
        del db.fetchall


def store(args: argparse.Namespace, db: Any, program: dict, message: str) -> None:
    """Write the entry of this run (atomically: a reader sees the old one or the new one)."""
    assert start.COMMAND is not None
    key = start.cache_key(start.COMMAND, duckdb.__version__)
    into = Path(args.into)
    paths = {f"file {args.into!r}": args.into, f"file {str(definition_path(into))!r}": str(definition_path(into))}
    entry = {
        "key": key,
        "made": os.urandom(8).hex(),  # a fast run notes the database's state for this entry only (sqlrp.start)
        "db": os.path.abspath(url_path(args.db)),
        "target": program["target"],
        "definition": program["definition"],
        "existing": [program["target"], str(definition_path(program["target"]))],
        "replace": bool(args.replace),
        "session": [*session_statements(db.budget, args.threads, args.memory_limit, args.temp_directory), *QUIET],
        "fingerprint": fingerprint(db.con, args.table),
        "program": program,
        "message": message,
        "things": [(t.label, t.kind, paths.get(t.label)) for t in planned(args).things],
    }
    path = start.entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    kept = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in kept[KEEP:]:  # the least recently used go: the folder stays small
        old.unlink(missing_ok=True)
        old.with_suffix(".seen").unlink(missing_ok=True)


def fingerprint(con: Any, table: str) -> list[tuple[str, list, Any]]:
    """The queries whose rows the fast path asks again, and their rows now (two: each query's first run on a
    connection costs more than its rows): the columns and types of the input and of the registry's tables;
    a view's text, and each registry table's rows as a count and a sum of row hashes (the projection, its
    matrix, its pairs plan; the indexes' table aside)."""
    columns = (
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = current_schema() AND (lower(table_name) = lower(?) OR table_name LIKE 'sqlrp%') "
        "ORDER BY lower(table_name) = lower(?) DESC, table_name, column_index"
    )
    found = start.fetch(con, columns, [table, table])
    registry = sorted({name for name, _, _ in found if name.startswith("sqlrp_") and name != "sqlrp_index"})
    parts = [
        "SELECT 0 AS q, database_name || '.' || schema_name AS t, 0 AS n, sql AS h FROM duckdb_views() "
        "WHERE lower(view_name) = lower(?)"
    ]
    parts += [
        f"SELECT 1, '{name}', count(*), sum(hash(_sqlrp_row))::VARCHAR FROM \"{name}\" _sqlrp_row" for name in registry
    ]
    rows = f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY ALL"
    return [(columns, [table, table], found), (rows, [table], start.fetch(con, rows, [table]))]


__all__ = ["eligible", "fingerprint", "recording", "store"]
