"""Repairs of a registry changed outside sqlrp, made by :mod:`sqlrp.registry.store`: a version table
dropped or emptied while the registry's tables are there (:func:`recorded_again`, on migrating), a
projection's digest written again (:func:`write_digest`: a projection accepted as its rows now hold it,
and the upgrade to registry version 5), and the tables of a set-up that failed on an engine without
transactions dropped again (:func:`undone_on_failure`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from ..backends import Backend
from ..core.errors import InputError
from .schema import REGISTRY_TABLES, TABLES, VERSION_TABLE, VERSIONS

VERSION = VERSION_TABLE.name


def recorded_again(backend: Backend) -> int:
    """A registry whose version table is empty (dropped, or emptied) while its tables are there: the
    versions whose tables and columns all exist are recorded again (their statements would fail on
    what exists: "sqlrp_projection already exists"), and the last of them returned; 0 for a new
    database.  A version whose tables are there only in part is refused in one line."""
    present = {t for t in REGISTRY_TABLES if t != VERSION and backend.table_exists(t)}
    if not present:
        return 0
    found = 0
    for version in VERSIONS:
        tables = [t for t in TABLES if t.since == version.number]
        added = [(t, c) for t in TABLES for c in t.columns if c.since == version.number and t.since < version.number]
        have = [t.name in present for t in tables]
        have += [t.name in present and c.name in {i.name for i in backend.columns(t.name)} for t, c in added]
        if all(have) and found == version.number - 1:
            found = version.number
        elif any(have):
            raise InputError(
                f"the registry's version table {VERSION} is gone and its tables are there only in part "
                f"(up to version {found}, then some of version {version.number}): restore the database from a "
                "backup, or move the sqlrp_* tables away and store the projections again"
            )
    for version in VERSIONS[:found]:
        backend.execute(f"INSERT INTO {VERSION} (version, name) VALUES (?, ?)", [version.number, version.file])
    return found


def write_digest(backend: Backend, name: str, value: str) -> None:
    """Write ``value`` as ``name``'s digest: the row read, deleted and inserted again (no UPDATE:
    Spark's file tables and ClickHouse have none that is portable)."""
    columns = "name, method, params, d, k, p, seed, scale, created_at"
    row = backend.fetchall(f"SELECT {columns} FROM sqlrp_projection WHERE name = ?", [name])[0]
    values = list(row)
    if not isinstance(values[2], str):
        values[2] = json.dumps(values[2])
    backend.execute("DELETE FROM sqlrp_projection WHERE name = ?", [name])
    try:
        backend.execute(
            f"INSERT INTO sqlrp_projection ({columns}, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*values, value],
        )
    except Exception:  # noqa: BLE001 - a driver that cannot bind the timestamp it returned
        if backend.transactional:
            raise  # the transaction rolls the delete back
        # no transaction (Spark, ClickHouse): the row written again, its creation time now
        backend.execute(
            f"INSERT INTO sqlrp_projection ({columns[: -len(', created_at')]}, digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*values[:-1], value],
        )


__all__ = ["recorded_again", "write_digest"]


@contextlib.contextmanager
def undone_on_failure(backend: Backend) -> Iterator[None]:
    """On an engine without transactions, the registry tables made inside this block are dropped again
    if it fails (a refused statement halfway through the set-up), so that no half-made registry blocks
    the next call ("table already exists"); the error is raised as it was.  Where transactions hold,
    the rollback does this."""
    if backend.transactional:
        yield
        return
    before = {t for t in REGISTRY_TABLES if backend.table_exists(t)}
    try:
        yield
    except BaseException:
        for table in REGISTRY_TABLES:
            if table not in before:
                with contextlib.suppress(Exception):
                    backend.execute(f"DROP TABLE IF EXISTS {table}")
        raise
