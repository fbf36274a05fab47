"""How a small device scans a Parquet file in one pass, chosen from the room it has and the file's shape
(issue 42): a pure function of the column chunks' sizes (``parquet_metadata``), the memory the engine may
take and the CPUs, tested without a cgroup (tests/reliability/test_scan_fit.py).

What DuckDB 2.0's Parquet reader holds (measured, one thread, ``duckdb_memory()``; a 384-column float32
file of 100,000-row groups, 400 KB column chunks, and of 50,000-row groups, 200 KB chunks):

- a row group of the columns it reads, each column chunk in one buffer the size of the chunk rounded up
  to a power of two (:func:`reader_bytes`: 384 x 512 KiB and the key's 1 MiB = 193 MiB; 384 x 256 KiB and 512 KiB
  = 96.5 MiB);
- where every chunk fits DuckDB's 256 KiB block (:data:`BLOCK`), the buffers are the buffer pool's own:
  any ``memory_limit`` from a row group and a tenth up finished (110 MB to 700 MB, one or two threads);
- where chunks are larger, the buffers are allocations of their own, and the reader reads the next row
  groups ahead while the limit lets it, failing at the limit (``failed to allocate data of size 512.0
  KiB``) instead of waiting: one thread finished for ``memory_limit`` 210 MB to 265 MB only (a row group
  plus 8 MiB to plus 60 MiB); 270 MB to 600 MB failed, and it finished again from about three row groups
  (620 MiB, 700 MiB, 2,000,000 rows); two threads failed from 400 MB to 781 MiB (750 MiB finished with
  prefetching on, 650 MiB did not).  So a single pass over such a file runs on one thread with the
  limit just above a row group (:func:`fit_scan`: a tenth of it, at most :data:`AHEAD_MARGIN`, plus
  :data:`STATEMENT_FLOOR`), where it finished at 2,000,000 and 3,000,000 rows in the time DuckDB tuned
  by hand takes.

Where even that does not fit the room, the file is read in column blocks
(:mod:`sqlrp.pipeline.column_blocks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MIB = 2**20
#: DuckDB's buffer-pool block: a column chunk up to this size is held in one
BLOCK = 256 * 1024
#: the statement's own memory beside the reader's buffers: its vectors (DOUBLE, 2,048 rows of each stage)
#: and the Parquet writer's row group (at most 16,384 rows on a small device, :mod:`sqlrp.pipeline.materialise`)
STATEMENT_FLOOR = 16 * MIB
#: where chunks exceed a block, the limit stays below a row group plus this: above it the reader reads
#: ahead and fails (measured: the window closed between a row group plus 60 and plus 65 MiB)
AHEAD_MARGIN = 24 * MIB


def reader_bytes(chunk: int) -> int:
    """The buffer DuckDB's reader holds for a column chunk of ``chunk`` bytes on disk: the next power of
    two (at least 4 KiB)."""
    size = 4096
    while size < chunk:
        size *= 2
    return size


@dataclass(frozen=True)
class ScanFit:
    """A scan's settings: ``threads`` and ``memory_limit`` (bytes); ``single``: the whole row group of the
    columns read fits, one pass over the file (else its columns are read in blocks); ``pinned``: the limit
    must not be raised later (the reader would read ahead and fail: chunks above a block); ``group``: the
    reader's buffers for the widest row group."""

    threads: int
    memory_limit: int
    single: bool
    pinned: bool
    group: int

    def describe(self) -> str:
        how = "one pass" if self.single else "column blocks"
        return (
            f"{how}: a row group holds {self.group / MIB:.0f} MiB in the reader; DuckDB memory_limit "
            f"{self.memory_limit / MIB:.0f} MiB, {self.threads} thread(s)"
        )


def row_group_need(
    groups: Iterable[Mapping[str, Iterable[int]]], columns: Iterable[str] | None = None
) -> tuple[int, bool]:
    """The reader's buffers for the widest row group (``groups``: per row group, each column's chunk sizes
    on disk, one per leaf), over ``columns`` (all where ``None``); and whether in some row group most of
    them (by bytes) are chunks above :data:`BLOCK` (a 50,000-row group of 384 float32 columns, 200 KB
    each, and its 400 KB BIGINT key read under any limit: the reader's behaviour is its float columns')."""
    keep = None if columns is None else set(columns)
    widest, large = 0, False
    for group in groups:
        total = above = 0
        for column, chunks in group.items():
            if keep is not None and column not in keep:
                continue
            for chunk in chunks:
                total += reader_bytes(chunk)
                above += reader_bytes(chunk) if chunk > BLOCK else 0
        widest = max(widest, total)
        large = large or 2 * above > total
    return widest, large


def scan_need(group: int) -> int:
    """The ``memory_limit`` one thread's scan needs over row groups whose reader buffers are ``group``
    bytes: ``group + min(group / 10, AHEAD_MARGIN) + STATEMENT_FLOOR``."""
    return group + min(group // 10, AHEAD_MARGIN) + STATEMENT_FLOOR


def block_room(memory: int, reserve: int) -> int:
    """The widest row group (reader buffers) one thread's scan may hold under ``memory`` with ``reserve``
    bytes set aside (a block's partial sums being written): the inverse of :func:`scan_need`."""
    spare = memory - reserve - STATEMENT_FLOOR
    return int(max(0, spare / 1.1 if spare <= 11 * AHEAD_MARGIN else spare - AHEAD_MARGIN))


def fit_scan(group: int, large: bool, room: int, cpus: int) -> ScanFit:
    """The scan of a file whose widest row group holds ``group`` bytes in the reader (``large``: its chunks
    exceed a block), with ``room`` bytes for the engine and ``cpus`` CPUs.

    A thread needs ``group + min(group / 10, AHEAD_MARGIN) + STATEMENT_FLOOR``.  Chunks within a block:
    as many threads as each fit that, the limit all the room.  Larger chunks: one thread, the limit that
    need and pinned there.  Either way ``single``
    where one thread's need fits ``room``; else column blocks, with the limit all the room."""
    need = scan_need(group)
    if need > room:
        return ScanFit(1, room, single=False, pinned=large, group=group)
    if large:
        return ScanFit(1, need, single=True, pinned=True, group=group)
    threads = max(1, min(cpus, room // need))
    return ScanFit(threads, room, single=True, pinned=False, group=group)


__all__ = ["BLOCK", "ScanFit", "block_room", "fit_scan", "reader_bytes", "row_group_need", "scan_need"]
