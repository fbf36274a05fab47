"""Ctrl-C and SIGTERM (issue 41): one line saying what was and was not written -- checked, not assumed --
and exit status 130, on every command.

Before a command runs, :func:`planned` notes the state of everything it may write (the ``--into`` table or
file and the projection file beside it, an index's three tables, a stored projection, a report folder)
and of the input table.  When the command is interrupted, its connection is closed (a transaction open
is rolled back) and :meth:`Watched.verdict` looks again on a fresh connection: each output is "not
written", "unchanged", or "written whole" (sqlrp's writes are atomic: a transaction, or a staging name
renamed into place), the input unchanged, and a staging table or temporary file a cleanup the interrupt
cut short left behind is removed (and said so).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from sqlglot import exp

from ..backends import LIVE, connect
from ..backends.staging import sweep_scratch_tables
from ..compiler import ident
from ..core.files import definition_path, file_format, output_format, sweep_staging
from ..core.signals import on_signal
from ..search.index import index_table_names

#: the exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)
EXIT_INTERRUPTED = 130

_REGISTRY = {"projection": ("sqlrp_projection", "name"), "index": ("sqlrp_index", "name")}


@dataclass
class Thing:
    """One thing a command may write (or must leave alone, ``source``): what it is, for the message, and
    how to read its state (``None``: absent)."""

    label: str
    state: Callable[[Any], Any]
    kind: str = "output"  # or "source"
    before: Any = None


@dataclass
class Watched:
    """The things a command may write and the input it reads, with their state before it ran."""

    args: argparse.Namespace
    things: list[Thing] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # output files: temporary siblings are looked for
    ready: bool = False  # the states before are known
    stdout: bool = False  # the command prints its rows: what was printed is a cut part of them

    def snapshot(self) -> None:
        """Note each thing's state before the command (on a connection of its own, closed again).  A
        database that cannot be reached is the command's to report: nothing is noted."""
        if self.things:
            try:
                with _connection(self.args) as db:
                    for thing in self.things:
                        thing.before = _quiet(thing.state, db)
            except Exception:  # noqa: BLE001 - the command itself says what is wrong with --db
                return
        self.ready = True

    def verdict(self) -> str:
        """The one line after an interrupt: each output not written / unchanged / written whole, the
        input unchanged, leftovers removed."""
        if not self.ready:
            return "interrupted before the command started: nothing was written"
        parts: list[str] = []
        try:
            with _connection(self.args) as db:
                for thing in self.things:
                    after = _quiet(thing.state, db)
                    parts.append(_compare(thing, after))
                removed = _drop_staging_tables(db)
        except Exception as exc:  # noqa: BLE001 - the line is printed whatever happens; say what is unknown
            return f"interrupted; the outputs could not be checked ({' '.join(str(exc).split())[:200]})"
        removed += _remove_temporary_files(self.files)
        if self.stdout:
            parts.append("the rows printed on stdout stop where the interrupt cut them: incomplete")
        if not parts:
            parts.append("this command writes nothing")
        line = "interrupted: " + "; ".join(parts)
        if removed:
            line += f"; removed {len(removed)} leftover staging " + ("item" if len(removed) == 1 else "items")
            line += f" ({', '.join(removed[:3])}{', ...' if len(removed) > 3 else ''})"
        else:
            line += "; no staging table or temporary file left"
        return line


def _compare(thing: Thing, after: Any) -> str:
    before = thing.before
    if thing.kind == "registry":
        return _registry_change(before or frozenset(), after or frozenset())
    if thing.kind == "source":
        return f"the input {thing.label} is unchanged" if before == after else f"the input {thing.label} changed"
    if before is None and after is None:
        return f"{thing.label} was not written"
    if before == after:
        return f"{thing.label} is unchanged"
    if after is None:
        return f"{thing.label} was removed (the command had finished that step)"
    if before is None:
        return f"{thing.label} was written whole (the write had completed)"
    return f"{thing.label} was replaced whole (the write had completed)"


def _registry_change(before: frozenset, after: frozenset) -> str:
    """What the registry gained or lost (a projection a command stores on its way: ``project`` without a
    stored one)."""
    added = sorted(after - before)
    gone = sorted(before - after)
    said = [f"{kind} {name!r} was stored whole (before the interrupt)" for kind, name in added]
    said += [f"{kind} {name!r} was removed (before the interrupt)" for kind, name in gone]
    return "; ".join(said) or "the registry is unchanged"


def _registry_names(db: Any) -> frozenset | None:
    """Every stored projection and index, as ``("stored projection", name)`` / ``("index", name)``."""
    if db is None:
        return None
    names = set()
    for kind, (table, key) in _REGISTRY.items():
        if db.table_exists(table):
            label = "stored projection" if kind == "projection" else "index"
            names |= {(label, row[0]) for row in db.fetchall(f"SELECT {key} FROM {table}")}
    return frozenset(names)


def _quiet(state: Callable[[Any], Any], db: Any) -> Any:
    try:
        return state(db)
    except Exception as exc:  # noqa: BLE001 - an unreadable state is a state: compared as such
        return ("unreadable", type(exc).__name__)


@contextlib.contextmanager
def _connection(args: argparse.Namespace) -> Iterator[Any]:
    """A fresh connection to ``--db`` (``None`` when the command has none: files only)."""
    url = getattr(args, "db", None)
    if not url or _missing_file(url):  # connecting would make the file
        yield None
        return
    with connect(url) as db:
        yield db


def _missing_file(url: str) -> bool:
    """``url`` names a database file (DuckDB, SQLite, chdb) that does not exist."""
    for scheme in ("duckdb:///", "sqlite:///", "chdb:///"):
        if url.startswith(scheme):
            path = url[len(scheme) :].split("?")[0]
            return path not in ("", ":memory:") and not Path(("/" if scheme == "chdb:///" else "") + path).exists()
    return "://" not in url and url != ":memory:" and not Path(url).exists()


def _table_state(name: str, schema: str | None = None) -> Callable[[Any], Any]:
    """A table's columns and row count (``None``: no such table)."""

    def state(db: Any) -> Any:
        if db is None or not db.table_exists(name, schema):
            return None
        table = exp.Table(this=ident(name), db=ident(schema) if schema else None)
        rows = db.fetchall(db.sql_dialect.render(exp.select(exp.func("COUNT", exp.Star())).from_(table)))[0][0]
        return (tuple(c.name for c in db.columns(name, schema)), int(rows))

    return state


def _file_state(path: Path) -> Callable[[Any], Any]:
    """A file's size and modification time (``None``: no such file)."""

    def state(_db: Any) -> Any:
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return (st.st_size, st.st_mtime_ns, st.st_ino)

    return state


def _folder_state(path: Path) -> Callable[[Any], Any]:
    def state(_db: Any) -> Any:
        if not path.is_dir():
            return None
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir()))

    return state


def _registry_state(kind: str, name: str) -> Callable[[Any], Any]:
    """A stored projection's (or index's) registry row (``None``: not stored)."""
    table, key = _REGISTRY[kind]

    def state(db: Any) -> Any:
        if db is None or not db.table_exists(table):
            return None
        rows = db.fetchall(f"SELECT * FROM {table} WHERE {key} = ?", [name])
        return tuple(tuple(str(v) for v in row) for row in rows) or None

    return state


def _drop_staging_tables(db: Any) -> list[str]:
    """Scratch tables (a staging table, an index's ``_sqlrp_ix_*``) a cut-short cleanup of this process left,
    or a killed one's: dropped (a live writer's are left alone: :func:`~sqlrp.core.names.orphaned`)."""
    if db is None:
        return []
    return [f"table {t!r}" for t in sweep_scratch_tables(db, mine=True)]


def _remove_temporary_files(paths: list[Path]) -> list[str]:
    """The temporary siblings (``.<name>.<stamp>.tmp``, ``.<name>.<stamp>.sqlrp.json``) of output files."""
    return [f"file {str(left)!r}" for path in paths for left in sweep_staging(path, mine=True)]


def planned(args: argparse.Namespace) -> Watched:
    """What ``args``' command may write, and the input it reads (not yet snapshotted)."""
    watched = Watched(args)
    things = watched.things
    command, action = args.command, getattr(args, "action", None)
    schema = getattr(args, "schema", None)
    table = getattr(args, "table", None)
    if table and getattr(args, "db", None) and not file_format(table):
        things.append(Thing(f"table {table!r}", _table_state(table, schema), kind="source"))
    into = getattr(args, "into", None)
    if command == "project" and into:
        if output_format(into) is not None:
            path = Path(into)
            things.append(Thing(f"file {into!r}", _file_state(path)))
            things.append(Thing(f"file {str(definition_path(path))!r}", _file_state(definition_path(path))))
            watched.files.append(path)
        else:
            things.append(Thing(f"{'view' if args.view else 'table'} {into!r}", _table_state(into, schema)))
    elif command == "search" and into:
        things.append(Thing(f"table {into!r}", _table_state(into, schema)))
    elif command in ("project", "search"):
        watched.stdout = True
    elif command == "index":
        things.append(Thing(f"index {args.name!r}", _registry_state("index", args.name)))
        things += [Thing(f"table {t!r}", _table_state(t, schema)) for t in index_table_names(args.name)]
    elif command == "indexes" and action == "drop" and args.name:
        things.append(Thing(f"index {args.name!r}", _registry_state("index", args.name)))
    elif command in ("create", "tune", "fit") or (command == "projections" and action in ("import", "drop")):
        name = args.name if args.name else _tuned_name(args) if command in ("tune", "fit") else None
        if name:
            things.append(Thing(f"stored projection {name!r}", _registry_state("projection", name)))
    elif command == "projections" and action == "export" and args.to:
        things.append(Thing(f"file {args.to!r}", _file_state(Path(args.to))))
        watched.files.append(Path(args.to))
    if command == "evaluate" and getattr(args, "out", None):
        things.append(Thing(f"folder {args.out!r}", _folder_state(Path(args.out))))
    if command == "project" and getattr(args, "db", None):  # it may store a new projection on its way
        things.append(Thing("the registry", _registry_names, kind="registry"))
    return watched


def _tuned_name(args: argparse.Namespace) -> str | None:
    """``tune``'s default name (:func:`sqlrp.api.tune`): ``<table>_<method>_k<k>_seed<seed>``."""
    if not args.table:
        return None
    if args.command == "fit":  # sqlrp.api.fit's: <table>_<method>_k<k>
        return f"{args.table}_{args.method}_k{args.k}"
    return f"{args.table}_{args.baseline}_k{args.k}_seed{args.seed}"


#: the signal that stopped the command, if one did (an engine may turn the ``KeyboardInterrupt`` into an
#: error of its own: DuckDB's "Query interrupted"; this says it was the signal)
received: list[int] = []


def _stop(signum: int, frame: FrameType | None) -> None:
    """SIGINT and SIGTERM handler: note the signal, and raise ``KeyboardInterrupt`` where the command is
    (in Python code, or where an engine checks for signals in its loop, as DuckDB does)."""
    received.append(signum)
    raise KeyboardInterrupt


def was_interrupted(exc: BaseException) -> bool:
    """``exc`` is, or was caused by, Ctrl-C or SIGTERM."""
    return isinstance(exc, KeyboardInterrupt) or bool(received)


@contextlib.contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM stops the command as Ctrl-C does, and either is noted
    (:func:`was_interrupted`).  Main thread only: a handler cannot be installed elsewhere, and ``main()``
    called from a thread keeps the defaults."""
    received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _engines_interrupted():
            yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _engines_interrupted() -> contextlib.AbstractContextManager[None]:
    """A thread that interrupts the running queries of every open connection the moment a signal comes
    (:func:`sqlrp.core.signals.on_signal`): Python runs its handler only when the main thread is back in
    Python, and DuckDB looks for one only between its tasks -- a minute late on a heavy query."""
    return on_signal(_interrupt_queries)


def _interrupt_queries() -> None:
    """Interrupt the running query of every backend :func:`sqlrp.connect` opened that can be
    (DuckDB's ``interrupt()``, safe from another thread); the main thread then gets its error, and the
    signal's ``KeyboardInterrupt``."""
    for db in list(LIVE):
        interrupt = getattr(getattr(db, "_con", None), "interrupt", None)
        if callable(interrupt):
            with contextlib.suppress(Exception):
                interrupt()


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored while the verdict is found and printed (a second Ctrl-C would cut it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


__all__ = ["EXIT_INTERRUPTED", "Watched", "planned", "signals_as_interrupt", "uninterrupted", "was_interrupted"]
