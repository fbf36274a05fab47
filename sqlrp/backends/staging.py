"""Scratch relations and staged loads, for every backend: a relation that exists under a scratch name
while a block runs (a frame an engine reads by name, a view to insert from), and a table that is
dropped again when its load fails, so that no half-loaded table is left behind."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlglot import exp

from ..core.names import orphaned, scratch_name


@contextlib.contextmanager
def registered(
    register: Callable[[str], object], unregister: Callable[[str], object], prefix: str = "frame"
) -> Iterator[str]:
    """A scratch name (:func:`~sqlrp.core.names.scratch_name` of ``prefix``), yielded after
    ``register(name)`` and passed to ``unregister`` when the block ends, however it ends."""
    name = scratch_name(prefix)
    register(name)
    try:
        yield name
    finally:
        unregister(name)


@contextlib.contextmanager
def dropped_on_failure(drop: Callable[[], object]) -> Iterator[None]:
    """Run the block; if it fails, call ``drop`` (an error of its own is suppressed) and re-raise."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            drop()
        raise


def sweep_scratch_tables(db: Any, schema: str | None = None, mine: bool = False) -> list[str]:
    """Drop the scratch tables (:func:`~sqlrp.core.names.scratch_name`) in ``schema`` (default: the current
    one) that processes of this host no longer running left -- a staging table, a calibration sample, a
    query table of a command killed mid-write -- so that the next command writing there leaves the
    database clean; a live writer's (here or on another host) is left alone; with ``mine``, this
    process's own go too.  Every command that writes a table calls it first.  Returns the names dropped."""
    try:
        left = [name for name in db.table_names(schema) if orphaned(name, mine)]
    except Exception:  # noqa: BLE001 - an engine that cannot list its tables: nothing to sweep
        return []
    dropped = []
    for name in left:
        table = exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier(schema) if schema else None)
        with contextlib.suppress(Exception):
            db.execute(db.sql_dialect.render(exp.Drop(tables=[table], kind="TABLE", exists=True)))
            dropped.append(name)
    return dropped


__all__ = ["dropped_on_failure", "registered", "sweep_scratch_tables"]
