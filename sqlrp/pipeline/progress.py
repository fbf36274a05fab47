"""One progress bar over a whole ``project`` command (issue 34), from the first read to the last write.

The bar (tqdm, on stderr) counts percent of the command: planning -- reading the table's columns, the
kurtosis sample, storing the matrix, compiling -- takes the first :data:`PLAN_END` percent, the statement
(or the id-range batches) runs up to :data:`RUN_END` -- DuckDB reports its own progress through it
(``Backend.execute_watched``) -- and the rest is what follows the write: the output check where it is a
separate read, the projection's file beside a written file, the rename or the commit.  Before, the bar
covered only the last statement, and stood at 100% while much of the command was still to run
(docs/benchmarks.md, "Pipeline").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
#: the bar's percent where planning ends and the statement starts
PLAN_END = 5.0
#: the bar's percent where the statement ends (what follows: checks, renames, the commit)
RUN_END = 98.0


class CommandBar:
    """The bar of one command.  ``asked``: what the caller asked for, ``True`` (the engine's own
    progress where it reports it, else id-range batches) or a number of batches."""

    def __init__(self, desc: str, asked: bool | int = True) -> None:
        from tqdm import tqdm

        self.asked = asked
        self.bar = tqdm(total=100, desc=desc, unit="%", bar_format=BAR_FORMAT)

    def step(self, text: str, at: float | None = None) -> None:
        """Show ``text``, and move to ``at`` percent of the command (never back)."""
        self.bar.set_description_str(text)
        self.move(self.bar.n if at is None else at)

    def move(self, at: float) -> None:
        self.bar.update(max(0.0, round(min(at, 100.0), 1) - self.bar.n))

    def statement(self) -> Callable[[float], None]:
        """``report(percent of the statement)``, mapped onto the bar from here to :data:`RUN_END`."""
        start = max(float(self.bar.n), PLAN_END)
        return lambda percent: self.move(start + (RUN_END - start) * max(0.0, min(percent, 100.0)) / 100.0)

    def close(self) -> None:
        self.move(100.0)
        self.bar.close()


@contextlib.contextmanager
def command_bar(progress: bool | int | CommandBar, desc: str) -> Iterator[CommandBar | None]:
    """The command's bar: ``progress`` itself if it is one, a new one if progress was asked for (closed
    at the end, full), else ``None``."""
    if isinstance(progress, CommandBar):
        yield progress
        return
    if not progress:
        yield None
        return
    bar = CommandBar(desc, progress)
    try:
        yield bar
    except BaseException:
        bar.bar.close()  # where it stopped
        raise
    bar.close()


def asked(progress: bool | int | CommandBar) -> bool | int:
    """What ``progress`` asks for: ``True``, a number of batches, or ``False``."""
    return progress.asked if isinstance(progress, CommandBar) else progress


__all__ = ["BAR_FORMAT", "CommandBar", "asked", "command_bar"]
