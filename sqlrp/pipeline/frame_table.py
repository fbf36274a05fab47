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
from .frame_admit import FRAME_DECIDES, Admitted, admit


@contextlib.contextmanager
def frame_table(db: Backend, admitted: Admitted) -> Iterator[str]:
    """:meth:`~sqlrp.backends.base.Backend.frame_table` of an admitted frame (:func:`~.frames.admit`:
    its columns decided once, the same on every engine), with sqlrp's errors speaking of "the frame"
    rather than the scratch name it had for the call, of its columns by their own names (a feature
    renamed for the engine), and -- when the rows are keyed by position -- naming rows by the frame's
    ids, not their positions."""
    ids = admitted.ids if admitted.key is not None else None
    with db.frame_table(admitted.frame) as name:

        def speak(text: str) -> str:
            text = text.replace(f"query table {name!r}", "the frame").replace(f"table {name!r}", "the frame")
            text = text.replace(repr(name), "the frame").replace(name, "the frame")
            for engine_name, own in admitted.names.items():
                text = text.replace(repr(engine_name), repr(own))
            if admitted.key is not None:
                text = text.replace(repr(admitted.key), "the row's position")
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


@contextlib.contextmanager
def frame_input(
    db: Backend,
    frame: Any,
    id_column: str,
    options: dict[str, Any],
    keep: tuple[str | None, ...] = (),
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``frame`` as a table of ``db`` for one call of ``tune``, ``evaluate`` or ``search``: admitted
    (:func:`~.frames.admit`, keyed by its own ids) and registered (:func:`frame_table`); yields the
    scratch table's name and ``options`` with the input's options the frame decided (its features by
    name).  Errors raised inside speak of the frame."""
    admitted = admit(frame, id_column, options, keep=keep)
    rest = {k: v for k, v in options.items() if k not in FRAME_DECIDES and k not in ("schema", "catalog")}
    with frame_table(db, admitted) as name:
        yield name, {**rest, **{k: v for k, v in admitted.source.items() if v is not None}}


def by_id(match: re.Match, ids: Any) -> str:
    """``rows with id 3, 7`` (positions) as the frame's ids at those positions."""
    try:
        shown = [repr(ids.iloc[int(p)].item() if hasattr(ids.iloc[int(p)], "item") else ids.iloc[int(p)])
                 for p in match.group(2).split(", ") if p]  # fmt: skip
    except (ValueError, IndexError):
        return match.group(0)
    return match.group(1) + ", ".join(shown)
