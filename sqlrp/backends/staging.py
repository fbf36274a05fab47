"""Scratch relations and staged loads, for every backend: a relation that exists under a scratch name
while a block runs (a frame an engine reads by name, a view to insert from), and a table that is
dropped again when its load fails, so that no half-loaded table is left behind."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..core.names import scratch_name


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


__all__ = ["dropped_on_failure", "registered"]
