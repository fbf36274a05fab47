"""A DataFrame or Arrow table as a table of the database for one call of :func:`sqlrp.api.project`
(:meth:`~sqlrp.backends.base.Backend.frame_table`), with sqlrp's errors and warnings speaking of "the
frame" and of its own ids rather than of the scratch table and the rows' positions."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from typing import Any

from ..backends import Backend
from ..core.errors import SqlrpError, cli_words, warn_caller


@contextlib.contextmanager
def frame_table(db: Backend, frame: Any, ids: Any = None) -> Iterator[str]:
    """:meth:`~sqlrp.backends.base.Backend.frame_table`, with sqlrp's errors speaking of "the frame"
    rather than the scratch name it had for the call, and -- when the rows are keyed by position
    (``ids``: the frame's own ids) -- naming rows by the frame's ids, not their positions."""
    with db.frame_table(frame) as name:

        def speak(text: str) -> str:
            text = text.replace(f"table {name!r}", "the frame").replace(repr(name), "the frame")
            if ids is not None:
                text = re.sub(r"(rows? (?:with id )?)((?:-?\d+(?:, )?)+)", lambda m: by_id(m, ids), text)
            return text

        caught: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:  # sqlrp's warnings, spoken of the frame too
                warnings.simplefilter("always")
                yield name
        except SqlrpError as exc:  # its message as written (cli_words): str() would give Python's words
            if speak(cli_words(exc)) == cli_words(exc):
                raise
            raise type(exc)(speak(cli_words(exc))) from None
        finally:
            for w in caught:
                if speak(cli_words(w.message)) != cli_words(w.message):
                    warn_caller(speak(cli_words(w.message)), w.category)
                else:  # not about the frame: as it was raised, where it was raised
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def by_id(match: re.Match, ids: Any) -> str:
    """``rows with id 3, 7`` (positions) as the frame's ids at those positions."""
    try:
        shown = [repr(ids.iloc[int(p)].item() if hasattr(ids.iloc[int(p)], "item") else ids.iloc[int(p)])
                 for p in match.group(2).split(", ") if p]  # fmt: skip
    except (ValueError, IndexError):
        return match.group(0)
    return match.group(1) + ", ".join(shown)
