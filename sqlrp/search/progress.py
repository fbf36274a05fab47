"""Progress of index builds, refreshes and searches on the terminal (issue 33), as ``project``
shows its own: a tqdm bar on stderr, one step per stage, and the engine's own percentage of the
longest statement (writing every row's code) where it reports one (DuckDB).  Off unless asked for:
the CLI asks when stderr is a terminal."""

from __future__ import annotations

from typing import Any

from ..backends import Backend


class Steps:
    """``with Steps(enabled, "index docs_idx", ["sample", "k-means", ...]) as steps: steps.start("k-means")``."""

    def __init__(self, enabled: bool, what: str, stages: list[str]) -> None:
        self.bar: Any = None
        self.stages = stages
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=100 * len(stages),
                desc=what,
                unit="%",
                bar_format="{desc}: {percentage:3.0f}% |{bar}| {postfix} [{elapsed}]",
            )
        self._at = -1

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            if exc[0] is None:
                self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()

    def start(self, stage: str) -> None:
        """The stage ``stage`` begins: the ones before it are done."""
        if self.bar is None:
            return
        at = self.stages.index(stage) if stage in self.stages else self._at + 1
        self._at = at
        self.bar.update(max(0, 100 * at - self.bar.n))
        self.bar.set_postfix_str(stage)

    def execute(self, db: Backend, sql: str) -> None:
        """Run ``sql``, the current stage's percentage following the engine's report where it gives one."""
        if self.bar is None or not db.reports_progress:
            db.execute(sql)
            return
        base = 100 * max(self._at, 0)

        def report(percent: float) -> None:
            self.bar.update(max(0.0, base + min(percent, 100.0) - self.bar.n))

        db.execute_watched(sql, report)


__all__ = ["Steps"]
