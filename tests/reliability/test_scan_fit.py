"""The scan a small device chooses from its room and a Parquet file's shape (issue 42,
:mod:`sqlrp.backends.scan_fit`): a pure function of the column chunks' sizes, the memory and the CPUs --
one pass where a row group fits, pinned just above it where the chunks exceed DuckDB's block, column
blocks (each pass pinned the same way) where it does not fit; and the blocks' output equal to NumPy's."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.backends import resources
from sqlrp.backends.duckdb_settings import fit_row_groups
from sqlrp.backends.scan_fit import (
    AHEAD_MARGIN,
    BLOCK,
    STATEMENT_FLOOR,
    block_room,
    fit_scan,
    reader_bytes,
    row_group_need,
    scan_need,
)
from sqlrp.methods import reference
from sqlrp.pipeline.column_blocks import block_limit, plan_blocks
from sqlrp.pipeline.plan import plan
from sqlrp.registry.transfer import read_projection
from testkit.fuzz_tables import fuzz_settings

MIB = 2**20
#: 2,000,000 x 384 float32 in 100,000-row groups (the issue's file): each chunk 401,424 bytes on disk
WIDE = [{"id": [802_848], **{f"f{i}": [401_424] for i in range(384)}}] * 20
#: the same in 50,000-row groups: chunks within a block
NARROW = [{"id": [401_424], **{f"f{i}": [200_712] for i in range(384)}}] * 40


def room(limit_mb: int, held_mb: int = 60) -> int:
    """The engine's room on a device of ``limit_mb`` where this process holds ``held_mb``: 80% of the rest."""
    return int((limit_mb - held_mb) * MIB * 0.8)


def test_the_reader_holds_each_chunk_rounded_to_a_power_of_two() -> None:
    assert [reader_bytes(n) for n in (1, 4096, 4097, 200_712, BLOCK, 401_424)] == [
        4096, 4096, 8192, 256 * 1024, BLOCK, 512 * 1024,
    ]  # fmt: skip
    assert row_group_need(WIDE) == (384 * 512 * 1024 + MIB, True)  # the id's 8-byte chunk: 1 MiB
    assert row_group_need(NARROW) == (384 * 256 * 1024 + 512 * 1024, False)
    assert row_group_need(WIDE, ["id", "f0", "f1"]) == (2 * 512 * 1024 + MIB, True)


def test_a_row_group_that_fits_512_mb_is_read_in_one_pass_pinned_above_it() -> None:
    """The issue's file under 512 MB and 1 CPU, and under 1 GB and 2 CPUs: one pass, one thread (two fail),
    the limit inside the window measured (a row group plus 8 to plus 60 MiB), and pinned there."""
    group, large = row_group_need(WIDE)
    for limit, cpus in ((512, 1), (1024, 2)):
        fit = fit_scan(group, large, room(limit), cpus)
        assert fit.single and fit.pinned and fit.threads == 1
        assert group + 8 * MIB <= fit.memory_limit <= group + 60 * MIB
        assert fit.memory_limit == group + group // 10 + STATEMENT_FLOOR  # a tenth of 193 MiB: below the margin


def test_chunks_within_a_block_take_threads_and_all_the_room() -> None:
    group, large = row_group_need(NARROW)
    fit = fit_scan(group, large, room(1024), 2)
    assert fit.single and not fit.pinned and fit.threads == 2 and fit.memory_limit == room(1024)
    fit = fit_scan(group, large, room(512), 2)
    assert fit.threads == 2  # 96 MiB row groups: two fit 362 MiB
    assert fit_scan(group, large, room(256), 2).threads == 1


def test_a_row_group_too_large_for_the_room_is_read_in_column_blocks() -> None:
    group, large = row_group_need(WIDE)
    fit = fit_scan(group, large, room(256), 1)
    assert not fit.single and fit.pinned and fit.threads == 1 and fit.memory_limit == room(256)
    group, large = row_group_need(NARROW)
    fit = fit_scan(group * 4, large, room(256), 2)
    assert not fit.single and not fit.pinned


@fuzz_settings(30)
@given(group=st.integers(0, 2**34), reserve=st.integers(0, 2**28))
def test_a_block_room_is_the_inverse_of_a_scan_need(group: int, reserve: int) -> None:
    """The widest row group a block may hold under a limit, with the partial sums' reserve, needs no more
    than that limit -- and nothing less would fit."""
    need = scan_need(group)
    assert need == group + min(group // 10, AHEAD_MARGIN) + STATEMENT_FLOOR
    fits = block_room(need + reserve, reserve)
    assert group - 2 <= fits <= group + 1
    assert scan_need(fits) <= need + 1


def test_column_blocks_of_a_budget_pin_each_pass_and_equal_numpy(tmp_path: Path) -> None:
    """A budget whose room holds no whole row group of 512 KiB chunks (60,000 x 64 doubles in one row
    group): its columns in blocks, each pass pinned to its own need, the output NumPy's."""
    source = tmp_path / "wide.parquet"
    cols = ", ".join(f"CAST(hash(range * 131 + {i}) / 9.2e18 - 1 AS DOUBLE) AS f{i}" for i in range(64))
    duckdb.sql(f"COPY (SELECT range AS id, {cols} FROM range(60000)) TO '{source}' (ROW_GROUP_SIZE 60000)")
    db = sqlrp.connect(memory_limit="1GB", threads=1)  # the small-device profile's session settings
    table = db.read_file(str(source))
    held = resources.resident()
    budget = resources.Budget(held + 40 * MIB, 1, 96 * MIB, 1)
    fit = fit_row_groups(db.con, str(source), budget)  # type: ignore[attr-defined]
    assert fit is not None and not fit.single and fit.pinned
    db.con.execute(f"SET memory_limit = '{fit.memory_limit // MIB}MiB'")  # the room, as the profile's start
    db._scan_fits[table] = fit  # type: ignore[attr-defined]
    p = plan(db, table, "id", method="gaussian", k=8, seed=4, store=False)
    blocks = plan_blocks(db, p)
    assert blocks is not None and len(blocks) > 1 and sorted(i for b in blocks for i in b) == list(range(64))
    limits = [block_limit(db, p.source, b) for b in blocks]
    assert all(limit is not None and limit <= fit.memory_limit for limit in limits)
    out = str(tmp_path / "out.parquet")
    sqlrp.project(db, table, "id", method="gaussian", k=8, seed=4, into=out)
    got = duckdb.sql(f"SELECT * FROM read_parquet('{out}') ORDER BY id").df().drop(columns="id").to_numpy()
    X = duckdb.sql(f"SELECT * EXCLUDE (id) FROM read_parquet('{source}') ORDER BY id").df().to_numpy(np.float64)
    want = reference.transform(read_projection(out + ".sqlrp.json"), X)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.max(np.abs(want)))


def test_a_cursor_reads_under_its_connections_settings():
    """A stream read on a cursor (``fit``'s Arrow pass, ``project``'s Arrow route) has the settings its
    connection was given: ``SET disable_parquet_prefetching`` holds for one connection only, and without it a
    cursor's Parquet scan of 400 KB column chunks ran out of memory under 512 MB where the connection's did
    not (``python -m bench.probes parquet-stream``)."""
    db = sqlrp.connect()
    try:
        db.execute("SET disable_parquet_prefetching = true")
        db.execute("SET preserve_insertion_order = false")
        cur = db._cursor()
        got = dict(cur.execute("SELECT name, value FROM duckdb_settings()").fetchall())
        assert got["disable_parquet_prefetching"] == "true"
        assert got["preserve_insertion_order"] == "false"
        cur.close()
    finally:
        db.close()
