"""Run a command under a memory (and CPU) limit, as a Raspberry Pi would: a cgroup of its own.

cgroup v2 (``/sys/fs/cgroup/cgroup.controllers``) or v1 (``/sys/fs/cgroup/memory``), whichever the
machine mounts; root only.  The child moves itself into the group before ``exec``, so every byte it
and its threads touch is counted; the peak is read from the group (v1 ``memory.max_usage_in_bytes``,
v2 ``memory.peak``) and an OOM kill is told from the group's counters, not guessed from the status.
No swap: ``memory.memsw`` (v1) / ``memory.swap.max`` (v2) is set where the kernel has it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass
class Limited:
    """What a limited run did: its exit status, seconds, the group's peak memory, whether the OOM killer
    ended it, and its output."""

    status: int
    seconds: float
    peak_mb: float
    oom_killed: bool
    stdout: str
    stderr: str
    #: the process's own peak resident memory (``ru_maxrss``): the group's peak counts the page cache too
    rss_mb: float = 0.0
    #: the group's peak anonymous memory (v1 ``rss`` of ``memory.stat``, v2 ``anon``), sampled every 20 ms:
    #: what the processes hold themselves, without the page cache the kernel drops under the limit
    anon_mb: float = 0.0

    @property
    def finished(self) -> bool:
        return self.status == 0 and not self.oom_killed


def version() -> int | None:
    """2, 1, or ``None`` (no memory controller writable here)."""
    if (ROOT / "cgroup.controllers").exists() and "memory" in (ROOT / "cgroup.controllers").read_text():
        return 2
    if (ROOT / "memory" / "memory.limit_in_bytes").exists():
        return 1
    return None


def available() -> bool:
    return version() is not None and os.geteuid() == 0


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _anon(group: Path, v: int) -> int:
    """The group's anonymous memory now, in bytes (0 where unreadable)."""
    try:
        text = (group / "memory.stat").read_text()
    except OSError:
        return 0
    key = "anon" if v == 2 else "total_rss"
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def run_limited(
    argv: list[str], memory_mb: int, cpus: float | None = None, env: dict | None = None, timeout: float = 3600
) -> Limited:
    """Run ``argv`` with at most ``memory_mb`` MiB of memory (and ``cpus`` CPUs' time), no swap."""
    v = version()
    if v is None or os.geteuid() != 0:
        raise RuntimeError("no writable memory cgroup here (cgroup v1 or v2, as root)")
    name = f"sqlrp-{uuid.uuid4().hex[:8]}"
    limit = str(memory_mb * 1024 * 1024)
    if v == 2:
        group = ROOT / name
        group.mkdir()
        _write(ROOT / "cgroup.subtree_control", "+memory +cpu")
        _write(group / "memory.max", limit)
        _write(group / "memory.swap.max", "0")
        if cpus:
            _write(group / "cpu.max", f"{int(cpus * 100000)} 100000")
        procs = [group / "cgroup.procs"]
        groups = [group]
    else:
        group = ROOT / "memory" / name
        group.mkdir()
        _write(group / "memory.limit_in_bytes", limit)
        _write(group / "memory.memsw.limit_in_bytes", limit)
        _write(group / "memory.swappiness", "0")
        procs, groups = [group / "cgroup.procs"], [group]
        if cpus:
            cpu = ROOT / "cpu" / name
            cpu.mkdir()
            _write(cpu / "cpu.cfs_period_us", "100000")
            _write(cpu / "cpu.cfs_quota_us", str(int(cpus * 100000)))
            procs.append(cpu / "cgroup.procs")
            groups.append(cpu)
    enter = " && ".join(f"echo $$ > {p}" for p in procs)
    started = time.perf_counter()
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen(
                ["sh", "-c", f'{enter} && exec "$@"', "sh", *argv], stdout=out, stderr=err, env=env
            )
            deadline = started + timeout
            anon = 0
            while True:
                pid, status, usage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    break
                anon = max(anon, _anon(group, v))
                if time.perf_counter() > deadline:
                    child.kill()
                time.sleep(0.02)
            seconds = time.perf_counter() - started
            code = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            done = subprocess.CompletedProcess(argv, code, out.read(), err.read())
        if v == 2:
            peak = int((group / "memory.peak").read_text()) if (group / "memory.peak").exists() else 0
            events = (group / "memory.events").read_text()
            oom = any(line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in events.splitlines())
        else:
            peak = int((group / "memory.max_usage_in_bytes").read_text())
            control = (group / "memory.oom_control").read_text()
            oom = any(line.startswith("oom_kill ") and int(line.split()[1]) > 0 for line in control.splitlines())
            oom = oom or done.returncode == -9
        return Limited(
            done.returncode, seconds, peak / 2**20, oom, done.stdout, done.stderr, usage.ru_maxrss / 1024, anon / 2**20
        )
    finally:
        for g in groups:
            for _ in range(50):
                try:
                    g.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                shutil.rmtree(g, ignore_errors=True)
