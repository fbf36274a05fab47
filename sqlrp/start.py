"""The ``sqlrp`` command's entry (``python -m sqlrp``, the ``sqlrp`` script): the statement cache's fast
path, else the command (:func:`sqlrp.cli.main`).  Issue 42, item 4: a stored projection run again starts
with ``import duckdb`` and the standard library, as the statement run by hand would.

The first run of ``sqlrp project --projection NAME --into FILE`` on a DuckDB database file stores what it
ran (:mod:`sqlrp.cli.statement_cache`): the session's settings, the ``COPY`` of the projection into its
staging file, the bound matrices' rows, the read-back's check, the sidecar's text and the line it printed
-- under a key of the command line, the working folder, the ``SQLRP_*`` environment, whether stderr is a
terminal, and the versions of sqlrp (its sources' sizes and times), DuckDB and Python.  With it, the
fingerprint: queries and the rows they returned then -- the input table's columns and types (and a
view's text), every registry table's columns, and a hash of each registry table's rows (the projection,
its matrix, its pairs plan).

A later run with the same key takes this path: it connects, makes the same settings, runs the
fingerprint's queries, and only if each returns the same rows runs the stored statements, writing the
file and its sidecar under staging names renamed into place, as :func:`sqlrp.pipeline.materialise.
write_file` does.  Anything else -- no entry, an unreadable one, another key, a changed fingerprint, a
small device's budget (its settings follow this process's memory), an output that exists without
``--replace``, a staging file of another writer beside it, any error or a failed check -- removes what it
began and runs the command in full, which gives the result, the error and the messages of a run
without the cache (and stores a new entry).  Ctrl-C: the staging files removed, one line, exit 130.

``SQLRP_STATEMENT_CACHE=off`` turns it off, ``=trace`` says on stderr whether the cache was used;
``SQLRP_CACHE_DIR`` is where the entries are kept (default ``$XDG_CACHE_HOME/sqlrp``, ``~/.cache/sqlrp``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .core.names import host_tag, scratch_name
from .core.signals import on_signal

#: the layout of an entry (another is not read)
FORMAT = 1
PACKAGE = Path(__file__).resolve().parent
EXIT_INTERRUPTED = 130  # as sqlrp.cli.interrupt's
#: the command line of this process's ``sqlrp`` command, once it runs in full (``None``: sqlrp.cli.main was
#: called otherwise, e.g. from Python, and records nothing)
COMMAND: list[str] | None = None


def mode() -> str:
    """``SQLRP_STATEMENT_CACHE``: ``on`` (default), ``off`` or ``trace``."""
    value = os.environ.get("SQLRP_STATEMENT_CACHE", "on").strip().lower()
    return "off" if value in ("0", "off", "false", "no") else "trace" if value == "trace" else "on"


def trace(text: str) -> None:
    """Say on stderr what the cache did (``SQLRP_STATEMENT_CACHE=trace`` only)."""
    if mode() == "trace":
        print(f"statement cache: {text}", file=sys.stderr)


def cache_folder() -> Path:
    """Where the entries are kept."""
    given = os.environ.get("SQLRP_CACHE_DIR")
    base = given or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sqlrp")
    return Path(base) / "statements"


def code_stamp() -> str:
    """A digest of the package's sources (names, sizes, modification times): a changed sqlrp is another key."""
    parts = []
    for root, dirs, _names in os.walk(PACKAGE):
        dirs.sort()
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if entry.name.endswith(".py"):
                st = entry.stat()
                parts.append(f"{entry.path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256(";".join(parts).encode()).hexdigest()


def cache_key(argv: Sequence[str], duckdb_version: str) -> dict[str, Any]:
    """What a run's statements depend on besides the database (that is the fingerprint's)."""
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SQLRP_") and k != "SQLRP_STATEMENT_CACHE"}
    return {
        "format": FORMAT,
        "argv": list(argv),
        "cwd": os.getcwd(),
        "env": env,
        "tty": sys.stderr.isatty(),
        "sqlrp": __version__,
        "code": code_stamp(),
        "duckdb": duckdb_version,
        "python": sys.version,
    }


def entry_path(key: dict[str, Any]) -> Path:
    return cache_folder() / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32] + ".json")


def plain(rows: Any) -> Any:
    """Rows as JSON holds them (tuples as lists; other values as text), for comparing with an entry's."""
    return json.loads(json.dumps(rows, default=str))


def fetch(con: Any, sql: str, params: list | None) -> Any:
    return plain((con.execute(sql, params) if params else con.execute(sql)).fetchall())


def db_state(path: str) -> list[int] | None:
    """The database file's size, modification time and inode, at rest (``None``: a write-ahead log beside it,
    or no file).  DuckDB writes every commit there: the same state is the same catalog and registry."""
    if os.path.exists(path + ".wal"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def small_device() -> bool:
    """Whether the small-device profile applies now (:mod:`sqlrp.backends.resources`, standard library only,
    loaded by itself: the package ``sqlrp.backends`` imports sqlglot)."""
    spec = importlib.util.spec_from_file_location("sqlrp._resources_alone", PACKAGE / "backends" / "resources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return bool(module.budget().small)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``sqlrp`` command: the fast path where it applies (:func:`fast`), else :func:`sqlrp.cli.main`."""
    args = list(sys.argv[1:] if argv is None else argv)
    status = fast(args)
    if status is not None:
        return status
    global COMMAND
    COMMAND = args  # the command line the statement cache records under (sqlrp.cli.statement_cache)
    return importlib.import_module("sqlrp.cli").main(args)


def fast(argv: list[str]) -> int | None:
    """Run ``argv`` from its cache entry; ``None``: the command must run in full."""
    if not argv or argv[0] != "project" or mode() == "off":
        return None
    try:
        import duckdb
    except ImportError:
        return None
    key = cache_key(argv, duckdb.__version__)
    try:
        entry = json.loads(entry_path(key).read_text())
        if entry.get("key") != key:
            raise ValueError("another key")
    except (OSError, ValueError, AttributeError) as exc:
        trace(f"miss ({type(exc).__name__})")
        return None
    try:
        status = Replay(entry, duckdb, entry_path(key).with_suffix(".seen")).run()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a damaged entry
        trace(f"unusable entry ({type(exc).__name__})")
        return None
    if status == 0:
        with contextlib.suppress(OSError):
            os.utime(entry_path(key))  # used: the last to go when the folder is pruned
    return status


class Replay:
    """One entry run again (:meth:`run`)."""

    def __init__(self, entry: dict[str, Any], duckdb: Any, seen: Path | None = None):
        self.entry, self.duckdb, self.seen = entry, duckdb, seen
        self.verified: list[int] | None = None  # the database's state the fingerprint was found to hold in
        self.target = Path(entry["target"])
        stamp = f"sqlrp-{os.getpid()}-{host_tag()}-{uuid.uuid4().hex[:12]}"
        tmp, tmp_definition = entry["program"]["staging"]
        self.tmp = self.target.with_name(tmp.replace("@STAMP@", stamp))
        self.tmp_definition = (
            self.target.with_name(tmp_definition.replace("@STAMP@", stamp)) if tmp_definition else None
        )
        self.names = {old: scratch_name("w") for old in entry["program"]["constants"]}
        self.stamp = stamp
        if not all(entry["program"]["constants"].values()):
            raise ValueError("a bound matrix without rows")  # never recorded: a damaged entry
        # the matrices a statement names otherwise than in FROM: temporary tables
        texts = [*entry["program"]["setup"], entry["program"]["copy"], *entry["program"]["cleanup"]]
        self.tables = {
            new
            for old, new in self.names.items()
            if any(t.count(f'"{old}"') != len(re.findall(rf'\b(?:FROM|JOIN)\s+"{re.escape(old)}"', t)) for t in texts)
        }

    def sub(self, sql: str) -> str:
        """``sql`` with this run's staging stamp and matrix names."""
        sql = sql.replace("@STAMP@", self.stamp)
        for old, new in self.names.items():
            sql = sql.replace(old, new)
        return sql

    def inline(self, sql: str) -> tuple[str, list]:
        """``sql`` (:meth:`sub`'s) with each bound matrix it reads only by name (``FROM "name"``) as a
        sub-query of its values, and the parameters in the text's order: one statement, no table to make
        first.  The others are tables (:attr:`tables`, made by :meth:`write`)."""
        sql, params = self.sub(sql), []
        rows = {new: self.entry["program"]["constants"][old] for old, new in self.names.items()}
        inlined = [n for n in rows if n not in self.tables and sql.count(f'"{n}"')]
        if not inlined:
            return sql, params

        def values(found: re.Match) -> str:
            select, given = matrix_select(rows[found[2]])
            params.extend(given)
            return f'{found[1]} ({select}) AS "{found[2]}"'

        return re.sub(rf'\b(FROM|JOIN)\s+"({"|".join(map(re.escape, inlined))})"', values, sql), params

    def ready(self) -> str | None:
        """Why the entry cannot run now (``None``: it can), before connecting."""
        target, entry = self.target, self.entry
        if not target.parent.is_dir() or target.is_dir() or target.is_symlink():
            return "the output's folder"
        if not entry["replace"] and any(Path(p).exists() for p in entry["existing"]):
            return "the output exists"
        prefix = f".{target.name}.sqlrp-"
        if any(n.startswith(prefix) for n in os.listdir(target.parent)):
            return "staging files beside the output"
        if small_device():
            return "a small device's budget"
        return None

    def run(self) -> int | None:
        """The command run from the entry: its status, or ``None`` (run it in full)."""
        why = self.ready()
        if why is not None:
            trace(f"not used ({why})")
            return None
        outputs = [(label, Path(path)) for label, kind, path in self.entry["things"] if path]
        before = {path: file_state(path) for _, path in outputs}
        main_thread = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
        received.clear()
        con = None
        try:
            try:
                con = self.duckdb.connect(self.entry["db"])
                why = self.write(con)
            except Exception as exc:  # the full command says what is wrong, as without the cache
                if received:  # DuckDB's own error for the interrupt (the handler's KeyboardInterrupt may follow)
                    raise KeyboardInterrupt from exc
                why = f"{type(exc).__name__}"
        except KeyboardInterrupt:
            for s in previous:
                signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C does not cut the cleanup or the line
            self.remove(con)
            print(self.verdict(before), file=sys.stderr)
            return EXIT_INTERRUPTED
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if why is not None:
            self.remove(con)
            trace(f"not used ({why})")
            return None
        con.close()
        if self.verified is not None and self.seen is not None and db_state(self.entry["db"]) == self.verified:
            with contextlib.suppress(OSError):  # the next run skips the fingerprint while the file is at rest
                self.seen.write_text(json.dumps([self.entry["made"], self.verified]))
        trace("used" + (" (fingerprint checked)" if self.verified is not None else " (the database as last checked)"))
        print(self.entry["message"], file=sys.stderr)
        return 0

    def write(self, con: Any) -> str | None:
        """The stored statements on ``con`` once the fingerprint holds; ``None`` when the file is in place."""
        entry, program = self.entry, self.entry["program"]
        for sql in entry["session"]:
            con.execute(sql)
        state = db_state(entry["db"])
        if state is None or self.seen_state() != state:  # else: checked in this very state before
            for sql, params, rows in entry["fingerprint"]:
                if fetch(con, sql, params) != rows:
                    return "the database changed"
            self.verified = state
        for old, rows in program["constants"].items():
            if self.names[old] in self.tables:
                con.execute(*matrix_table(self.names[old], rows))
        for sql in program["setup"]:
            con.execute(*self.inline(sql))
        watched(con, *self.inline(program["copy"]))
        for sql in program["cleanup"]:
            con.execute(*self.inline(sql))
        for sql in program["checks"]:
            if con.execute(self.sub(sql)).fetchall()[0][0]:
                return "a check found rows"  # the command in full names them
        for name in self.tables:
            con.execute(f'DROP TABLE "{name}"')
        if self.tmp_definition is not None:
            self.tmp_definition.write_text(program["sidecar"])
            os.chmod(self.tmp_definition, os.stat(self.tmp).st_mode & 0o777)
            os.replace(self.tmp_definition, entry["definition"])
        os.replace(self.tmp, self.target)
        return None

    def seen_state(self) -> list[int] | None:
        """The database's state in which this entry's fingerprint last held (``None``: none noted)."""
        try:
            made, state = json.loads(self.seen.read_text()) if self.seen else (None, None)
        except (OSError, ValueError, TypeError):
            return None
        return state if made == self.entry["made"] else None

    def remove(self, con: Any) -> None:
        """The staging files and the connection, after a failure or an interrupt."""
        with contextlib.suppress(Exception):
            if con is not None:
                con.close()
        for path in (self.tmp, self.tmp_definition):
            if path is not None:
                with contextlib.suppress(Exception):
                    path.unlink(missing_ok=True)

    def verdict(self, before: dict[Path, Any]) -> str:
        """The line :meth:`sqlrp.cli.interrupt.Watched.verdict` prints, for what this path may write: the
        output files, compared with their state before; the input and the registry, never written here."""
        parts = []
        for label, kind, path in self.entry["things"]:
            if kind == "source":
                parts.append(f"the input {label} is unchanged")
            elif kind == "registry":
                parts.append("the registry is unchanged")
            else:
                parts.append(compare(label, before[Path(path)], file_state(Path(path))))
        return "interrupted: " + "; ".join(parts) + "; no staging table or temporary file left"


def matrix_select(rows: list[list[float]]) -> tuple[str, list]:
    """A bound matrix as a query of its values (and their parameters): the columns ``DuckDBBackend.bound``
    registers, ``_r`` BIGINT (the row's number) and ``c0 .. c{n-1}`` DOUBLE -- each value a parameter, so
    exactly the float it was (a literal would be parsed as a DECIMAL first)."""
    width = len(rows[0])
    row = "(" + ", ".join(["CAST(? AS BIGINT)", *["CAST(? AS DOUBLE)"] * width]) + ")"
    columns = ", ".join(["_r", *(f"c{i}" for i in range(width))])
    select = f"SELECT * FROM (VALUES {', '.join([row] * len(rows))}) AS v({columns})"
    return select, [x for r, values in enumerate(rows) for x in (r, *values)]


def matrix_table(name: str, rows: list[list[float]]) -> tuple[str, list]:
    """The statement (and its parameters) that makes the temporary table ``name`` hold a bound matrix
    (:func:`matrix_select`)."""
    select, params = matrix_select(rows)
    return f'CREATE TEMPORARY TABLE "{name}" AS {select}', params


def compare(label: str, before: Any, after: Any) -> str:
    """One output's part of the interrupt's line (as :func:`sqlrp.cli.interrupt._compare`)."""
    if before is None and after is None:
        return f"{label} was not written"
    if before == after:
        return f"{label} is unchanged"
    if after is None:
        return f"{label} was removed (the command had finished that step)"
    if before is None:
        return f"{label} was written whole (the write had completed)"
    return f"{label} was replaced whole (the write had completed)"


def file_state(path: Path) -> tuple[int, int, int] | None:
    """A file's size, modification time and inode (``None``: no such file), as the interrupt's line compares."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def watched(con: Any, sql: str, params: list | None = None) -> None:
    """Run ``sql``, interrupted the moment a signal comes (``con.interrupt()``, :func:`sqlrp.core.signals.on_signal`),
    as :mod:`sqlrp.cli.interrupt` does."""
    with on_signal(con.interrupt):
        con.execute(sql, params or None)


#: the signals received while the cached run ran (DuckDB may turn the interrupt into an error of its own)
received: list[int] = []


def _stop(signum: int, frame: object) -> None:
    received.append(signum)
    raise KeyboardInterrupt


__all__ = ["Replay", "cache_key", "entry_path", "fast", "main", "plain"]
