"""The session settings sqlrp makes on a DuckDB connection (:mod:`sqlrp.backends.duckdb`): its own
(:func:`configure`: no common-subexpression pass, a spill folder if given), the small-device profile
chosen from this process's budget (:mod:`sqlrp.backends.resources`, issue 42), threads and memory
fitted to a Parquet file's row groups (:func:`fit_row_groups`), and a setting's value as a ``SET``
literal (:func:`setting_literal`)."""

from __future__ import annotations

import contextlib
from typing import Any

import duckdb
from sqlglot import exp

from . import resources
from .base import memory_size
from .scan_fit import ScanFit, fit_scan, row_group_need

#: the settings that keep DuckDB's own progress bar quiet (sqlrp's --progress bar covers the whole command)
QUIET = ("SET enable_progress_bar = false", "SET enable_progress_bar_print = false")


def configure(
    con: duckdb.DuckDBPyConnection, threads: int | None, memory_limit: str | None, temp_directory: str | None = None
) -> resources.Budget:
    """sqlrp's settings on ``con`` (:func:`session_statements`); the options given override those of the
    small-device profile.  Returns this process's budget."""
    budget = resources.budget()
    for statement in session_statements(budget, threads, memory_limit, temp_directory):
        con.execute(statement)
    return budget


def session_statements(
    budget: resources.Budget, threads: int | None, memory_limit: str | None, temp_directory: str | None = None
) -> list[str]:
    """The statements :func:`configure` runs on a new connection for ``budget`` and the options given (the
    statement cache stores them with a stored projection's statements: :mod:`sqlrp.start`)."""
    # sqlrp's compiled SQL computes every linear sum once by construction, so DuckDB's
    # common-subexpression pass finds nothing -- but on projections with thousands of sums it
    # dominates planning (P-RP m = 30, k = 160: `python -m bench.probes planning`; docs/benchmarks.md)
    out = ["SET disabled_optimizers = 'common_subexpressions'"]
    # bounded memory by construction (issue 42): on a small device (a cgroup's limit, or little
    # memory available) the settings come from the budget; the options given override them
    if budget.small:
        threads = threads or budget.threads
        memory_limit = memory_limit or f"{budget.engine_memory // resources.MIB}MB"
    if threads:
        out.append(f"SET threads = {int(threads)}")
    if memory_limit:
        out.append("SELECT current_setting('memory_limit')")  # validates the connection
        out.append(f"SET memory_limit = '{memory_size(memory_limit)}'")
        # small-device profile: let CREATE TABLE AS stream without buffering to keep row order
        # (results handed to Python are ORDER BY id anyway)
        out.append("SET preserve_insertion_order = false")
        # read Parquet page by page: prefetching reads each column chunk whole, which for a list of
        # 384 floats in a row group of 300,000 rows (one pyarrow wrote) asks for 441 MB at once
        # (the scan then fails under memory_limit 400MB; page by page it peaks at 79 MB RSS)
        out.append("SET disable_parquet_prefetching = true")
    if temp_directory:
        # where DuckDB spills beyond memory_limit (default: next to the database file, or
        # .tmp in the working folder): on a Pi, a USB disk rather than the SD card
        out.append(f"SET temp_directory = {exp.Literal.string(str(temp_directory)).sql('duckdb')}")
    return out


def fit_row_groups(
    con: duckdb.DuckDBPyConnection,
    path: str,
    budget: resources.Budget,
    threads: int | None = None,
    memory_limit: str | None = None,
) -> ScanFit | None:
    """On a small device: the engine's share raised to all the room the budget leaves (80% of what this
    process does not hold yet), and a thread kept for each 2.6 row groups (decoded) it holds (a scan holds
    a row group, and two while it moves to the next; at least one) -- the settings every statement over
    the file starts from (``evaluate``'s and ``tune``'s samples among them).  Returns the scan a projection
    of the file runs (:func:`sqlrp.backends.scan_fit.fit_scan`, from the same room and the file's column
    chunks: one pass, pinned where the chunks exceed a block, or column blocks,
    :mod:`sqlrp.pipeline.column_blocks`); ``None`` with no footers, or ``memory_limit`` given.
    ``threads`` and ``memory_limit``: the options given (``--threads``, ``--memory-limit``), kept."""
    with contextlib.suppress(duckdb.Error):
        rows = _rows(
            con,
            "SELECT file_name, row_group_id, split_part(path_in_schema, ', ', 1), total_compressed_size, "
            "total_uncompressed_size FROM parquet_metadata(?)",
            [path],
        )
        if not rows:
            return None
        groups: dict[tuple[str, int], dict[str, list[int]]] = {}
        decoded: dict[tuple[str, int], int] = {}
        for name, group, column, size, full in rows:
            groups.setdefault((name, group), {}).setdefault(column, []).append(int(size or 0))
            decoded[(name, group)] = decoded.get((name, group), 0) + int(full or 0)
        now = int(_rows(con, "SELECT current_setting('threads')")[0][0])
        current = resources.size_bytes(_rows(con, "SELECT current_setting('memory_limit')")[0][0])
        room = int(max(0, budget.memory - resources.resident()) * 0.8)
        if memory_limit:
            room = current  # given: the threads fit it
        elif current < room:
            con.execute(f"SET memory_limit = '{room // resources.MIB}MB'")
        fit = max(1, min(now, room // int(max(decoded.values()) * 2.6 or 1)))
        if fit < now and not threads:
            con.execute(f"SET threads = {fit}")
        if memory_limit:
            return None
        group, large = row_group_need(groups.values())
        return fit_scan(group, large, room, threads or budget.cpus)
    return None


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[tuple]:
    """The rows of a query on ``con`` (:meth:`sqlrp.backends.duckdb.DuckDBBackend.fetchall`'s)."""
    return (con.execute(sql, params) if params is not None else con.execute(sql)).fetchall()


def setting_literal(value: object) -> str:
    """A ``current_setting`` value as a SET literal (booleans and integers bare)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


#: what a cursor is told of its connection's settings
_SETTINGS = "SELECT name, value FROM duckdb_settings()"


def same_settings(con: duckdb.DuckDBPyConnection, cur: duckdb.DuckDBPyConnection) -> None:
    """Give ``cur`` the settings ``con`` has and it has not: a ``SET`` of some (the Parquet reader's
    ``disable_parquet_prefetching`` of the small-device profile) holds for its connection only, and a stream read
    on a cursor without it prefetches whole column chunks -- out of memory under 512 MB (issue 42;
    ``python -m bench.probes parquet-stream``)."""
    theirs = dict(cur.execute(_SETTINGS).fetchall())
    for name, value in con.execute(_SETTINGS).fetchall():
        if theirs.get(name) != value and value is not None:
            with contextlib.suppress(duckdb.Error):  # a setting that cannot be set again (read-only)
                cur.execute(f"SET {exp.to_identifier(name).sql('duckdb')} = {exp.Literal.string(value).sql('duckdb')}")


__all__ = ["QUIET", "configure", "fit_row_groups", "session_statements", "setting_literal", "same_settings"]
