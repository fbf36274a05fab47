"""The memory and CPUs this process may use, read where the kernel keeps them, and the embedded engine's
settings chosen from them (issue 42: a Raspberry Pi's 512 MB).

A Pi, a container or a systemd service caps a process with a cgroup: v2 (``memory.max``, ``cpu.max``)
or v1 (``memory.limit_in_bytes``, ``cpu.cfs_quota_us``), at the group ``/proc/self/cgroup`` names.
``MemAvailable`` (``/proc/meminfo``) bounds it from the machine's side.  DuckDB reads the cgroup too,
and sets its ``memory_limit`` to 80% of it -- but the memory that kills is outside its buffer pool:
the Parquet reader's buffers (each column chunk of a row group read whole when prefetching), the
Parquet writer's row group, each thread's share, and this Python process.  Measured here (cgroup v1,
512 MB, one CPU; 2,000,000 x 384 float32 Parquet in 100,000-row groups; DESIGN 4e): DuckDB's own
default is killed; ``memory_limit`` 256 MB alone fails inside DuckDB; with prefetching off and the
written row groups small, the same statement finishes at 300 MB of resident memory.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

MIB = 2**20
#: below this budget sqlrp runs the embedded engine in its small-device profile (above it: DuckDB's own
#: defaults, the fastest where memory is plenty)
SMALL_DEVICE = 4096 * MIB
#: the least DuckDB is given (its own floor for a statement of a few hundred columns)
ENGINE_FLOOR = 96 * MIB
#: memory one DuckDB thread needs beside the pool on a wide scan (a Parquet page per column, a
#: row group's vectors, the writer's buffers) -- 2 threads in 1 GB, 1 in 512 MB
PER_THREAD = 320 * MIB


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _groups() -> dict[str, str]:
    """controller -> the cgroup path of this process (``""`` for v2's unified hierarchy)."""
    out: dict[str, str] = {}
    for line in (_read(Path("/proc/self/cgroup")) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2]
    return out


def _candidates(mount: str, relative: str) -> list[Path]:
    """The group's folder (the path ``/proc/self/cgroup`` gives), and the mount's root (a container
    sees its own group there) -- the first that holds the file wins."""
    root = Path("/sys/fs/cgroup") / mount
    return [root / relative.lstrip("/"), root] if relative not in ("", "/") else [root]


def cgroup_memory() -> int | None:
    """The cgroup's memory limit in bytes, or ``None`` (no limit, or none readable)."""
    groups = _groups()
    checks = []
    if "" in groups:
        checks += [(folder / "memory.max") for folder in _candidates("", groups[""])]
    if "memory" in groups:
        checks += [(folder / "memory.limit_in_bytes") for folder in _candidates("memory", groups["memory"])]
    for path in checks:
        text = _read(path)
        if text and text != "max" and text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def cgroup_cpus() -> float | None:
    """The CPUs' time the cgroup allows (quota / period), or ``None``."""
    groups = _groups()
    if "" in groups:
        for folder in _candidates("", groups[""]):
            text = _read(folder / "cpu.max")
            if text:
                quota, _, period = text.partition(" ")
                if quota != "max" and period:
                    return int(quota) / int(period)
    for key in ("cpu", "cpu,cpuacct"):
        if key in groups:
            for folder in _candidates(key, groups[key]):
                quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
                if quota and period and int(quota) > 0:
                    return int(quota) / int(period)
    return None


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (``None`` where there is none)."""
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


def resident() -> int:
    """This process's resident memory now, in bytes (0 where unknown)."""
    text = _read(Path("/proc/self/statm"))
    return int(text.split()[1]) * os.sysconf("SC_PAGE_SIZE") if text else 0


@dataclass(frozen=True)
class Budget:
    """What this process may use: ``memory`` bytes in all (``None``: unbounded as far as is known),
    ``cpus`` CPUs, and the engine's share, ``engine_memory`` and ``threads``."""

    memory: int | None
    cpus: int
    engine_memory: int | None
    threads: int | None

    @property
    def small(self) -> bool:
        """The small-device profile applies: memory is scarce enough for its settings to matter."""
        return self.memory is not None and self.memory < SMALL_DEVICE

    def describe(self) -> str:
        if not self.small:
            return "memory is plenty: the engine's own defaults"
        return (
            f"{self.memory / MIB:.0f} MB for this process: DuckDB memory_limit {self.engine_memory / MIB:.0f} MB, "
            f"{self.threads} thread(s), Parquet read page by page"
        )


def budget() -> Budget:
    """The budget of this process, from the cgroup's limits and the machine's available memory: the
    engine gets half of what this process does not hold yet (the rest is the reader's and writer's
    buffers outside its pool), and a thread per :data:`PER_THREAD` of it."""
    limits = [m for m in (cgroup_memory(), available_memory()) if m]
    memory = min(limits) if limits else None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpus()
    if quota:
        cpus = max(1, min(cpus, math.ceil(quota)))
    if memory is None or memory >= SMALL_DEVICE:
        return Budget(memory, cpus, None, None)
    spare = max(0, memory - resident())
    engine = max(ENGINE_FLOOR, spare // 2)
    threads = max(1, min(cpus, spare // PER_THREAD))
    return Budget(memory, cpus, engine, threads)


def size_bytes(text: str) -> int:
    """DuckDB's printed memory size (``"200.2 MiB"``, ``"1.5 GiB"``, ``"512MB"``) in bytes."""
    import re

    found = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)(i?)B\s*", text, re.IGNORECASE)
    if not found:
        return 0
    base = 1024 if found[3] else 1000
    return int(float(found[1]) * base ** " KMGT".index(found[2].upper() or " "))
