"""The ``sqlrp`` command.  Each command is a thin wrapper over the function of the same name in
:mod:`sqlrp.api` (``tests/interface/test_cli.py`` checks ``MIRROR`` both ways).  A command and its options live
together, one module per concern: :mod:`.project` (``project``, ``compile``), :mod:`.projections`
(``create``, ``projections``, ``migrate``, ``demo``), :mod:`.evaluate` (``tune``, ``evaluate``) and
:mod:`.search` (``index``, ``search``, ``indexes``); the option groups they share are in
:mod:`.options`.  ``--db`` defaults to ``$SQLRP_DB``."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..core.errors import EXIT_USAGE, cli_words, exit_status, one_line
from . import dbt, evaluate, fit, project, projections, search
from .interrupt import EXIT_INTERRUPTED, Watched, planned, signals_as_interrupt, uninterrupted, was_interrupted
from .options import input_table, settle_new_db

__all__ = ["MIRROR", "build_parser", "main"]


#: each command (and action) of the command line and the Python function of ``sqlrp`` that does the same,
#: name for name where the CLI's grammar allows (``tests/interface/test_cli.py`` checks both ways)
MIRROR: dict[str, str] = {
    "project": "project",
    "compile": "compile_projection",
    "create": "create_projection",
    "projections list": "list_projections",
    "projections show": "load_projection",
    "projections copy": "copy_projection",
    "projections export": "export_projection",
    "projections import": "import_projection",
    "projections drop": "drop_projection",
    "projections accept": "accept_projection",
    "tune": "tune",
    "fit": "fit",
    "evaluate": "evaluate",
    "evaluate --index": "evaluate_search",
    "index": "build_index",
    "search": "search",
    "indexes list": "list_indexes",
    "indexes show": "load_index",
    "indexes drop": "drop_index",
    "migrate": "migrate",
    "demo": "demo",
    "dbt": "dbt_model",
}


class _Parser(argparse.ArgumentParser):
    """argparse with sqlrp's error format: a usage error is one line (``error: argument --k: ...``)
    and exit status 2, like every other error, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {' '.join(message.split())} (see {self.prog} --help)\n")


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """``warnings.showwarning`` of the command: one line, ``warning: ...``, without Python's source
    location (a site-packages path and line number mean nothing to the user); sqlrp's warnings in the
    command line's words (:func:`~sqlrp.core.errors.cli_words`), as its errors."""
    print(f"warning: {' '.join(cli_words(message).split())}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sqlrp", description="Random projections compiled to SQL.")
    parser.add_argument("--version", action="version", version=f"sqlrp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        project.add_project,
        project.add_compile,
        projections.add_create,
        projections.add_projections,
        evaluate.add_tune,
        fit.add_fit,
        evaluate.add_evaluate,
        search.add_index,
        search.add_search,
        search.add_indexes,
        projections.add_migrate,
        projections.add_demo,
        dbt.add_dbt,
    ):
        add(sub)
    return parser


def _interrupted(watched: Watched | None) -> int:
    """After Ctrl-C or SIGTERM: one line saying what was and was not written, checked on a fresh connection
    (:meth:`~sqlrp.cli.interrupt.Watched.verdict`), and exit status 130."""
    with uninterrupted():
        verdict = watched.verdict() if watched else "interrupted before the command started: nothing was written"
        print(verdict, file=sys.stderr)
    return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error: argparse printed it; a status, as for the errors below
        if not exc.code:
            raise  # --help, --version
        return int(exc.code)
    if args.command == "projections" and args.action in ("show", "copy", "export", "drop") and not args.name:
        parser.error(f"projections {args.action} needs a NAME")
    if args.command == "indexes" and args.action in ("show", "drop") and not args.name:
        parser.error(f"indexes {args.action} needs a NAME")
    status = EXIT_USAGE
    try:
        status = _run(args)
    finally:  # a failed command, or one that wrote nothing there, leaves no new database file (issue 42)
        settle_new_db(args, status)
    return status


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command: its status, every expected error as one line and a status by kind."""
    watched = None
    try:
        with warnings.catch_warnings(), signals_as_interrupt():
            warnings.showwarning = _warning_line
            input_table(args)
            watched = planned(args)  # what the command may write: its state now, checked after an interrupt
            watched.snapshot()
            return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (signals_as_interrupt)
        return _interrupted(watched)
    except BrokenPipeError:  # e.g. `sqlrp project ... | head`
        sys.stderr.close()
        return 0
    except Exception as exc:  # noqa: BLE001 - every expected error: one line, a status by kind
        if was_interrupted(exc):  # an engine's own error for the interrupt (DuckDB: "Query interrupted")
            return _interrupted(watched)
        status = exit_status(exc)
        if status is None:
            raise  # a defect in sqlrp: the traceback is what a bug report needs
        print(f"error: {one_line(exc)}", file=sys.stderr)  # sqlrp's own errors in the CLI's words: cli_words
        return status
