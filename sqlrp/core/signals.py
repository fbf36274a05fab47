"""Acting on Ctrl-C and SIGTERM the moment they come, with the standard library alone (the light start path,
:mod:`sqlrp.start`, and the command's, :mod:`sqlrp.cli.interrupt`, share it)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def on_signal(act: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a thread calls ``act`` (its errors ignored) as soon as SIGINT or SIGTERM arrives
    (``signal.set_wakeup_fd``): Python runs its own handler only once the main thread is back in Python, and
    an engine such as DuckDB looks for it only between its tasks -- a minute late on a heavy statement.  Off
    the main thread (no wakeup fd there) nothing is watched."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main thread, or no wakeup fd here
        os.close(read)
        os.close(write)
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                data = os.read(read, 64)
            except OSError:
                return
            if done.is_set() or not data:
                return
            if {signal.SIGINT, signal.SIGTERM} & set(data):
                with contextlib.suppress(Exception):
                    act()

    watcher = threading.Thread(target=watch, name="sqlrp-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        done.set()
        with contextlib.suppress(OSError):
            os.write(write, b"\0")
        watcher.join(timeout=5)
        os.close(read)
        os.close(write)


__all__ = ["on_signal"]
