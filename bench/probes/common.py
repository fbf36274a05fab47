"""What every probe shares: the repository's root, a wide table and the timers (run from the
repository's root: ``PYTHONPATH=. python -m bench.probes NAME``, which finds ``testkit`` and
``bench.run``'s tables)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent.parent


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best(fn, runs: int = 3) -> float:
    """The fastest of ``runs`` timings of ``fn`` (the machine is shared)."""
    return min(seconds(fn) for _ in range(runs))


def wide(n: int, d: int, seed: int = 0) -> pd.DataFrame:
    from testkit.frames import wide_frame

    return wide_frame(np.random.default_rng(seed).standard_normal((n, d)))
