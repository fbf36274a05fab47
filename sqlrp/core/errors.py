"""Errors sqlrp raises on bad input.  Every message names the problem and the fix.

**One vocabulary per interface** (issue 35).  A message is written once, naming options as the
command line's flags -- ``--replace``, ``--no-check``, ``--columns``, a value as ``--dtype=float64``
(argparse takes that form too) -- and each interface shows it in its own words: the command line
prints it as written (:func:`cli_words`), Python shows it through :func:`python_words`
(``SqlrpError.__str__``, and :func:`warn_caller`'s warnings): ``replace=True``, ``check=False``,
``columns=``, ``dtype='float64'``."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: the command line's switches (``store_true`` / ``store_false`` options) by the names the Python API
#: takes: ``--replace`` is ``replace=True`` there (``tests/interface/test_vocabulary.py`` checks this
#: against the parser)
SWITCHES = frozenset(
    {"check", "exact", "incremental", "modified", "modified_kernel", "no_progress", "no_sql", "progress",
     "replace", "standardize", "strict", "truncate", "view", "whiten"}
)  # fmt: skip

#: flags whose Python name is not the flag's own (``--no-sql`` is ``in_sql=False``: ``sql`` below)
ALIASES = {
    "kernel-modified": "modified",
    "from": "source",
    "column": "columns",
    "input": "table",
    "batches": "progress",
    "sql": "in_sql",
}

# a flag, and its value when written --x=value (quoted, or up to a space, comma, semicolon or bracket;
# a sentence's closing full stop or colon is not part of it)
_FLAG = re.compile(r"""(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?:=('[^']*'|"[^"]*"|[^\s,;()'"]*[^\s,;()'".:]))?""")
_LITERAL = re.compile(r"-?\d+(\.\d*)?(e-?\d+)?|True|False|None|[A-Z][A-Z_]*")  # numbers, constants, NAME


def python_words(message: str) -> str:
    """``message`` (written in the command line's flags) in the Python API's words: ``--no-x`` ->
    ``x=False``; ``--x=v`` -> ``x=v`` (``v`` quoted unless it is a number, a constant, an upper-case
    placeholder such as ``NAME`` or quoted already); ``--x`` -> ``x=True`` for a switch
    (:data:`SWITCHES`), ``x=`` otherwise; dashes become underscores and :data:`ALIASES` rename."""

    def python(match: re.Match) -> str:
        name, value = match.group(1), match.group(2)
        negated = name.startswith("no-") and value is None
        if negated:
            name = name[3:]
        py = ALIASES.get(name, name).replace("-", "_")
        if negated:
            return f"{py}=False"
        if value is not None:
            quoted = value[0] in "'\"" or _LITERAL.fullmatch(value)
            return f"{py}={value if quoted else repr(value)}"
        return f"{py}=True" if py in SWITCHES else f"{py}="

    return _FLAG.sub(python, message)


def text_value(value: str) -> str:
    """The string ``value`` as a message writes it after ``--x=``: bare where the shell and
    :func:`python_words` both read it as that string (``emb``), else quoted (``'my table'``, ``'2'``)."""
    import shlex

    quoted = shlex.quote(value)
    return f"'{value}'" if quoted == value and _LITERAL.fullmatch(value) else quoted


def cli_words(exc: BaseException | str) -> str:
    """``exc``'s message as written, in the command line's words: a :class:`SqlrpError`'s argument,
    a warning of :func:`warn_caller` as it was given; anything else as ``str`` gives it."""
    if isinstance(exc, SqlrpError):
        return str(exc.args[0]) if exc.args else ""
    return str(getattr(exc, "cli_message", None) or exc)


class SqlrpError(Exception):
    """Base class of every error sqlrp raises on purpose.  Its message is written in the command
    line's words; ``str()`` gives it in Python's (:func:`python_words`), :func:`cli_words` as written."""

    def __str__(self) -> str:
        if len(self.args) == 1:
            return python_words(str(self.args[0]))
        return super().__str__()


class InvalidParameter(SqlrpError, ValueError):
    """A parameter is out of range (k < 1, s < 1, unknown method, ...)."""


class InputError(SqlrpError):
    """The input table does not fit the request (unknown table or column, NULLs, wrong d, ...)."""


class ProjectionNotFound(SqlrpError, KeyError):
    """No stored projection has the given name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return python_words(str(self.args[0])) if self.args else ""


class ProjectionExists(SqlrpError):
    """A stored projection (or an output table) with the given name already exists."""


class EngineLimit(SqlrpError):
    """The target engine would reject this SQL or compute it wrongly (a limit or a missing feature);
    the message names the engine and the reason.  Raised before anything runs."""


class MissingExtra(SqlrpError, ImportError):
    """An optional dependency is not installed; the message gives the ``pip install`` line."""


def overflow_error(
    labels: Iterable[object],
    what: str = "rows with id",
    done: str = "nothing was written",
    kind: str = "float64 sums",
) -> InputError:
    """The error for projected values that overflowed to infinity or NaN: one message for the SQL
    path (the written table, the returned frames) and the in-memory paths
    (:func:`sqlrp.methods.reference.check_outputs`), naming up to five rows (``what``: ``"rows with
    id"``, or ``"rows"`` for positions in an array)."""
    shown = ", ".join(repr(i.item() if hasattr(i, "item") else i) for i in list(labels)[:5])
    return InputError(
        f"the projection overflowed to infinity or NaN ({what} {shown}): the features are too large for "
        f"{kind}; scale the data first (--standardize), {done}"
    )


def refuse_nul(name: str, role: str = "name") -> str:
    """``name``, or :class:`InvalidParameter` if it holds a NUL character: engines written in C end a
    name there (DuckDB reads ``"x\\0y"`` as ``"x"``, another table) and PostgreSQL text cannot hold one."""
    if "\x00" in name:
        raise InvalidParameter(f"the {role} {name!r} contains a NUL character, which no engine keeps; rename it")
    return name


def need(module: str, extra: str, what: str) -> object:
    """Import ``module`` or raise :class:`MissingExtra` naming the ``pip install`` line."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(f"{what} needs {module}: pip install 'sqlrp[{extra}]'") from None


# ---- the command line's contract: one line, and an exit status by kind ----

EXIT_USAGE = 2  # a bad option or parameter (argparse uses 2 as well)
EXIT_INPUT = 3  # the data or the stored projections do not fit the request
EXIT_ENGINE = 4  # the database refused or failed (a limit, a lock, a constraint, a lost connection)

#: modules whose exceptions are the database's own errors: each backend's registration adds its
#: drivers when its class is made (``sqlrp.backends.base.Registration.drivers``)
DRIVER_MODULES: set[str] = set()

# what the engine's words mean for the user: (pattern in the message, the fix)
_HINTS = (
    ("could not set lock on file", "another process has this DuckDB file open for writing; wait for it or use a copy"),
    ("conflicting lock", "another process has this DuckDB file open for writing; wait for it or use a copy"),
    ("database is locked", "another connection is writing this SQLite file; retry when it is done"),
    ("duplicate key", "a row with that key already exists; use --replace or another name"),
    ("unique constraint", "a row with that key already exists; use --replace or another name"),
    ("already exists", "an object of that name already exists (names may differ only in case); choose another"),
    ("could not serialize", "a concurrent transaction changed the same rows; run it again"),
    ("transaction conflict", "a concurrent transaction changed the same table; run it again"),
    ("connection refused", "the database server is not reachable at that address"),
    (
        "out of range for the destination type float",
        "a projected value is beyond float32's range (3.4e38): use "
        "--dtype=float64, or scale the data first (--standardize)",
    ),
    (
        "value out of range: overflow",
        "a value overflowed its SQL type (float32 holds at most 3.4e38, float64 "
        "1.8e308): use --dtype=float64, or scale the data first (--standardize)",
    ),
    (
        "value out of range: underflow",
        "PostgreSQL refuses a double product that underflows below 2.2e-308 (NumPy gives 0): kernel methods on "
        "features of about 1e-160 or less; scale the data first (--standardize) or round such values to 0",
    ),
    (
        "out of memory",
        "the engine ran out of memory; lower --threads or set --memory-limit (rows handed back to Python: "
        "--chunk-rows)",
    ),
)


def exit_status(exc: BaseException) -> int | None:
    """The CLI's exit status for ``exc``, or ``None`` for an unexpected error (a defect in sqlrp)."""
    if isinstance(exc, (InvalidParameter, MissingExtra)):
        return EXIT_USAGE
    if isinstance(exc, EngineLimit):
        return EXIT_ENGINE
    if isinstance(exc, SqlrpError):
        return EXIT_INPUT
    if type(exc).__module__.split(".")[0] in DRIVER_MODULES:
        return EXIT_ENGINE
    if isinstance(exc, OSError):  # files: --out, --to, a database path
        return EXIT_INPUT
    return None


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: sqlrp's own message, or the database's first line and what it means."""
    text = " ".join(cli_words(exc).split()) or type(exc).__name__
    if isinstance(exc, SqlrpError):
        return text
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or text}: {exc.filename!r}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lower = str(exc).lower()
    for pattern, fix in _HINTS:
        if pattern in lower:
            return f"database: {first[:300]} -- {fix}"
    return f"database: {first[:300]}"


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` pointing at the first frame outside sqlrp (the user's call), however deep
    inside sqlrp the warning is raised; ``message``, in the command line's words, reads in Python's
    (:func:`python_words`) and keeps its own as ``cli_message`` (:func:`cli_words`)."""
    import contextlib
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    inside = (package + os.sep, contextlib.__file__)  # sqlrp, and the context managers sqlrp's code runs in
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn_caller's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(inside):
        level, frame = level + 1, frame.f_back
    warning = category(python_words(message))
    warning.cli_message = message  # type: ignore[attr-defined]
    warnings.warn(warning, stacklevel=level)
