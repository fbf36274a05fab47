"""Errors sqlrp raises on bad input.  Every message names the problem and the fix."""

from __future__ import annotations


class SqlrpError(Exception):
    """Base class of every error sqlrp raises on purpose."""


class InvalidParameter(SqlrpError, ValueError):
    """A parameter is out of range (k < 1, s < 1, unknown method, ...)."""


class InputError(SqlrpError):
    """The input table does not fit the request (unknown table or column, NULLs, wrong d, ...)."""


class ProjectionNotFound(SqlrpError, KeyError):
    """No stored projection has the given name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ProjectionExists(SqlrpError):
    """A stored projection (or an output table) with the given name already exists."""


class EngineLimit(SqlrpError):
    """The target engine would reject this SQL or compute it wrongly (a limit or a missing feature);
    the message names the engine and the reason.  Raised before anything runs."""


class MissingExtra(SqlrpError, ImportError):
    """An optional dependency is not installed; the message gives the ``pip install`` line."""
