"""Backends: a live connection to one engine, chosen by URL, file path or connection object.

``connect(url)`` (the CLI's ``--db``, default ``$SQLRP_DB``) walks the backends' registrations
(:class:`~sqlrp.backends.base.Registration`; the built-in ones in :mod:`.catalog`, as strings, so
that only the chosen engine's module is imported): a URL goes to the backend that declares its scheme,
a bare string to the one whose pattern or file ending it matches, a connection object to the one
that declares its class's module; ``None`` or ``""`` is the default engine in memory, and any other
URL goes to SQLAlchemy.  :func:`engines_table` lists them all.  A connection you pass in is used
and never closed.  A string that is none of these is an error: it never becomes a new database
file.  A driver suffix names the driver: ``postgresql+psycopg`` is the driver sqlrp has, while
``postgresql+asyncpg`` (another driver of an engine sqlrp runs natively) is refused with the URL to
use instead.

How to add an engine
--------------------
1. ``sqlrp/dialects/<engine>.py``: a :class:`~sqlrp.dialects.base.SqlrpDialect` subclass with its
   ``name`` and ``aliases``, its sqlglot dialect (``extend(...)`` of the closest one if sqlglot has
   none of that name), its limits and features, each with its source, and ``executes = True``.
   Where the engine's ``CREATE TABLE`` differs, override the registry hooks ``registry_type``,
   ``registry_constraints`` and ``registry_create`` (``keeps_registry = False``: no registry there).
2. ``sqlrp/backends/<engine>.py``: a :class:`~sqlrp.backends.base.Backend` subclass with
   ``dialect = "<engine>"`` and ``registration = catalog.<ENGINE>``, its entry in ``catalog.py`` (URL
   schemes, file endings, connection classes, driver modules, the pip extra, and ``backend=
   "module:Class"``: the module is imported only when the engine is used), ``open()``, ``wrap()`` and
   the abstract methods (an engine without transactions subclasses ``base.NoTransactions``).  A backend
   made outside sqlrp (a plugin's) declares a ``Registration(...)`` of its own in its body instead.
   Shared machinery needs no copy: ``values.py`` types and converts DataFrame columns, ``arrow.py`` moves them as Arrow,
   ``placeholders.py`` binds ``?`` for clients that do not, ``staging.py`` keeps scratch relations,
   ``typenames.py`` and ``drivers.py`` hold type names and driver packages.  Import the driver inside
   functions, never at the top: :func:`registered` (the engines table) imports every backend module,
   with or without its driver.
3. ``tests/engines/test_engine_<engine>.py``: the shared matrix of ``testkit/engine_cases.py`` (``run_case``)
   and the engine's own behaviour.
4. ``pyproject.toml``: the extra that installs the driver; and the engine's page in the docs.
Nothing else: ``connect()`` and ``get_dialect()`` find the classes, the registry's tables are
rendered by the dialect's hooks from ``sqlrp/registry/schema.py`` (``python -m migrations <engine>``
writes them out for a DBA to read), and ``tests/engines/test_engine_registration.py`` builds a whole engine
in one test file.
"""

from __future__ import annotations

import importlib
import os
import weakref
from typing import Any

from ..core.errors import InvalidParameter, need, refuse_nul
from .base import REGISTERED, URL, Backend, ColumnInfo, Registration, parse_url, url_path
from .catalog import BUILT_IN

#: every backend :func:`connect` opened and not yet collected: Ctrl-C interrupts their running queries
#: (:mod:`sqlrp.cli.interrupt`; DuckDB otherwise notices a signal only between its tasks)
LIVE: weakref.WeakSet[Backend] = weakref.WeakSet()


def registrations() -> list[Registration]:
    """Every registration, the latest made first (a plugin's, or a test's, before the built-in ones of
    :mod:`.catalog`), without importing any backend module that is not imported yet."""
    built_in = {id(reg) for reg in BUILT_IN}
    made = [reg for reg, _ in REGISTERED if id(reg) not in built_in]
    return [*reversed(made), *reversed(BUILT_IN)]


def backend_of(reg: Registration) -> type[Backend]:
    """The backend class of ``reg``: the class made with it (a plugin's, a test's, a built-in one already
    imported), else the one :attr:`Registration.backend` names (``module:Class``), imported now."""
    for made, backend in reversed(REGISTERED):
        if made is reg:
            return backend
    module, _, name = reg.backend.partition(":")
    backend = getattr(importlib.import_module(module), name)
    if backend.__dict__.get("registration") is not reg:
        raise TypeError(f"{reg.backend} does not declare the registration of {reg.name}")
    return backend


def registered() -> list[tuple[Registration, type[Backend]]]:
    """Every registration and its backend class, in the order of :func:`registrations`: every backend
    module is imported (none imports its driver at import time).  For the engines table and the
    tests; :func:`connect` imports only the module of the engine it opens."""
    return [(reg, backend_of(reg)) for reg in registrations()]


def examples() -> list[str]:
    """Every registration's example URL, in the engines table's order (for help and messages; no
    backend module is imported)."""
    return [reg.example for reg in _listed(registrations()) if reg.example]


def connect(url: object = None, **options: Any) -> Backend:
    """Open the database at ``url``: a URL string, a file path, or a connection object (module
    docstring; :func:`engines_table` lists what each engine takes).

    Small-device profile: ``threads=``, ``memory_limit=`` (e.g. ``"1GB"``) and ``temp_directory=`` set
    DuckDB's settings of those names; DuckDB then streams and spills to disk (into ``temp_directory``)
    to stay inside the budget.
    PostgreSQL accepts ``threads=`` (``max_parallel_workers_per_gather``) and ``memory_limit=``
    (``work_mem``) for its own session; Spark takes ``conf=`` (settings of a session sqlrp starts);
    other engines ignore them.

    :param url: a URL (``duckdb:///digits.db``, ``postgresql://...``; any other scheme goes to
        SQLAlchemy), a file path (by its ending), a connection object (used, never closed), a
        :class:`~sqlrp.backends.base.Backend` (returned as it is), or ``None`` / ``""``: the default
        engine (DuckDB) in memory.
    :param options: the engine's own settings -- ``threads``, ``memory_limit``, ``temp_directory``,
        ``conf`` as above.
    :returns: the backend; usable as a context manager, which closes a connection sqlrp opened.
    """
    if isinstance(url, Backend):
        return url
    engines = registrations()
    if url is not None and not isinstance(url, str):
        return _from_object(url, engines, **options)
    text = refuse_nul((url or "").strip(), "database URL")  # C drivers end the path there: another file
    if not text:
        return backend_of(next(reg for reg in engines if reg.default)).open("", **options)
    if "://" in text:
        return _from_url(text, engines, **options)
    for reg in engines:
        if reg.matches(text):
            return _open(reg, text, repr(text), **options)
    for reg in engines:
        if reg.files and text.lower().endswith(reg.files):
            return _open(reg, text, f"the file {text!r}", **options)
    endings = [ending for reg in _listed(engines) for ending in reg.files]
    raise InvalidParameter(
        f"cannot tell which database {text!r} is: use a URL ({', '.join(examples())}) or a file ending in "
        f"{', '.join(endings)}"
    )


def _from_url(text: str, engines: list[Registration], **options: Any) -> Backend:
    """A URL: the backend that declares its scheme (refusing another driver of it), else the fallback."""
    scheme = text.split("://", 1)[0].lower()
    base, _, driver = scheme.partition("+")
    fallback = next(reg for reg in engines if reg.fallback)
    reg = next((reg for reg in engines if base in reg.schemes), fallback)
    if driver and reg.url_drivers is not None and driver not in reg.url_drivers:
        raise InvalidParameter(
            f"sqlrp runs {reg.schemes[0]} through its own driver ({reg.url_drivers[0]}), not {driver!r}: "
            f"use {reg.example} (drop '+{driver}'), or pass a {fallback.name} Engine built with that driver"
        )
    return _open(reg, text, f"a {scheme}:// URL", **options)


def _open(reg: Registration, text: str, what: str, **options: Any) -> Backend:
    """The backend's ``open(text)``, once its driver imports (else :class:`MissingExtra` with the pip line)."""
    if reg.extra and reg.drivers:
        need(reg.drivers[0], reg.extra, f"{what} ({reg.name})")
    if reg.files:  # an engine of database files: a path it cannot be, or a file of another engine
        _check_path(reg, url_path(text) if "://" in text else text, text)
    db = backend_of(reg).open(text, **options)
    LIVE.add(db)
    return db


def _check_path(reg: Registration, path: str, text: str) -> None:
    """Refuse, in one line, a database path that would open another file than the one named (a backslash,
    read as a folder separator by an engine on a POSIX system: ``x\\0y`` opened ``x/0y``), one no file can
    have (a part longer than the file system's 255 bytes), and a file another engine wrote (by its first
    bytes, :attr:`Registration.magic`: a SQLite file given to another engine, which tried to download an
    extension to read it)."""
    if path in ("", ":memory:") or path.startswith((":memory:", "md:")):
        return
    if os.sep == "/" and "\\" in path:
        raise InvalidParameter(
            f"the database path {path!r} holds a backslash, which is read as a folder separator (it would "
            f"open {path.replace(chr(92), '/')!r}, another file): rename the file"
        )
    if any(len(part.encode()) > 255 for part in path.split(os.sep)):
        raise InvalidParameter(f"the database path in {text!r} has a part longer than 255 bytes: no file is named so")
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError:
        return  # missing (made on the first write, or refused by the command) or unreadable: the engine says
    for other in registrations():
        if other.magic and head.startswith(other.magic) and other.name != reg.name:
            scheme = f"{other.schemes[0]}:///" if other.schemes else other.example
            raise InvalidParameter(
                f"{path!r} is a {other.name} database, not a {reg.name} one: open it with {scheme}{path}"
            )


def _from_object(obj: object, engines: list[Registration], **options: Any) -> Backend:
    """A connection the caller already has (never closed by sqlrp), by its class's module."""
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    for reg in engines:
        if reg.connections and kind.startswith(reg.connections):
            return backend_of(reg).wrap(obj, **options)
    known = [f"{reg.name} ({', '.join(reg.connections)})" for reg in _listed(engines) if reg.connections]
    raise InvalidParameter(f"cannot use a {kind} as a database: pass a URL, or a connection of {'; '.join(known)}")


def _listed(engines: list[Registration]) -> list[Registration]:
    """``engines`` in the order messages and tables list them: the default first, the fallback last."""
    return sorted(reversed(engines), key=lambda reg: (not reg.default, reg.fallback))


def engines_table() -> list[dict[str, str]]:
    """One row per registered backend -- engine, dialect, example URL, URL schemes, file endings,
    connection classes, install line -- for the documentation's engines table."""
    rows = []
    for reg in _listed(registrations()):
        dialect = getattr(backend_of(reg), "dialect", None)
        rows.append(
            {
                "engine": reg.name,
                "dialect": dialect if isinstance(dialect, str) else "(the URL's)",
                "url": reg.example,
                "schemes": ", ".join(f"{s}://" for s in reg.schemes) or ("any other URL" if reg.fallback else ""),
                "files": ", ".join(reg.files),
                "connections": ", ".join(reg.connections),
                "install": f"pip install 'sqlrp[{reg.extra}]'" if reg.extra else "(with sqlrp)",
            }
        )
    return rows


def default_url() -> str | None:
    """The database the CLI uses without ``--db``: ``$SQLRP_DB``."""
    return os.environ.get("SQLRP_DB") or None


__all__ = [
    "URL",
    "Backend",
    "ColumnInfo",
    "Registration",
    "backend_of",
    "connect",
    "default_url",
    "engines_table",
    "examples",
    "need",
    "parse_url",
    "registered",
    "registrations",
]
