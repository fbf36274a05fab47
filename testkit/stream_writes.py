"""Writes made while a chunk stream is open on the same connection (issue 41, "Lost data"), and their
oracle, shared by ``tests/reliability/test_stream_writes.py`` (one test per instance) and the
interleaving fuzzer ``tests/fuzz/test_fuzz_interleave.py``.

On PostgreSQL, ``it = sqlrp.projected(db, "t", "id", k=8).chunks(100); next(it)`` opened a transaction
that every later statement on ``db`` joined: ``to_table``, ``project(into=...)``, ``create_projection``
and ``build_index`` returned normally, and closing the stream early (``close()``, ``break``, garbage
collection) rolled them all back.  The oracle here: every write that returned normally is there with
the NumPy reference's values (:func:`sqlrp.methods.reference.transform`), whatever happens to the
stream afterwards, and every chunk a stream hands over equals the reference of the table as it was
when the stream began.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.core.errors import EngineLimit
from sqlrp.methods.reference import transform

D = 4  # features of every generated table
FEATURES = [f"f{i}" for i in range(D)]
RTOL = 1e-9
ROWS_BIG = 20  # rows of the table whose projection overflows (the failing write)

#: the writes of the issue, in its order
WRITES = ("to_table", "project_into", "create_projection", "build_index")


def make_table(db: Any, name: str, rows: int, seed: int) -> np.ndarray:
    """A table ``name`` of ``id`` (0 .. rows-1) and :data:`FEATURES`, replacing one of that name; its
    features as an ``rows x D`` matrix."""
    X = np.random.default_rng(seed).normal(size=(rows, D)) * 10.0
    frame = pd.DataFrame(X, columns=FEATURES)
    frame.insert(0, "id", np.arange(rows, dtype=np.int64))
    db.write_dataframe(name, frame, replace=True)
    return X


def projection(k: int, seed: int) -> Any:
    """A projection of :data:`D` features to ``k``, in memory (nothing stored)."""
    return sqlrp.create_projection(None, None, d=D, k=k, seed=seed)


def close_to(got: np.ndarray, want: np.ndarray) -> bool:
    """``got`` equals ``want`` to :data:`RTOL` relative to the largest value."""
    if got.shape != want.shape:
        return False
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return bool(np.all(np.abs(got - want) <= RTOL * scale))


def table_values(db: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, outputs)`` of the table ``name``, by id."""
    frame = db.query_df(f'SELECT * FROM "{name}" ORDER BY "id"')
    return frame["id"].to_numpy(dtype=np.int64), frame.drop(columns="id").to_numpy(dtype=float)


@dataclasses.dataclass
class Written:
    """A write that returned normally: what it made (``kind``, ``name``) and what must be there."""

    kind: str
    name: str
    expected: Any  # the projected rows (a table), the projection (stored), the indexed rows (an index)

    def check(self, db: Any) -> None:
        """Assert the object is there with its contents."""
        if self.kind in ("to_table", "project_into", "replace_table"):
            ids, Y = table_values(db, self.name)
            assert np.array_equal(ids, np.arange(len(self.expected))), f"{self.name}: ids {ids[:10]}"
            assert close_to(Y, self.expected), f"{self.name}: the table's values differ from NumPy's"
        elif self.kind == "create_projection":
            stored = sqlrp.load_projection(db, self.name)
            probe = np.random.default_rng(1).normal(size=(5, D))
            assert close_to(transform(stored, probe), transform(self.expected, probe)), f"projection {self.name}"
        elif self.kind == "failing":
            assert not db.table_exists(self.name), f"{self.name}: a failed write left its table"
        elif self.kind == "build_index":
            sqlrp.load_index(db, self.name)
            (n,) = db.fetchall(f'SELECT count(*) FROM "{self.name}"')[0]
            assert n == self.expected, f"index {self.name}: {n} rows, not {self.expected}"
        else:
            raise AssertionError(self.kind)


def write(db: Any, kind: str, name: str, source: str, X: np.ndarray, seed: int) -> Written | None:
    """Make the write ``kind`` of the rows of ``source`` (features ``X``) under ``name``; what must be
    there afterwards, or ``None`` when the engine refuses it (SQLite, Hyper and DataFusion have no
    index: EngineLimit)."""
    if kind == "to_table":
        P = projection(3, seed)
        sqlrp.projected(db, source, "id", P).to_table(name)
        return Written(kind, name, transform(P, X))
    if kind == "replace_table":  # over a table written before (or a new one)
        P = projection(2, seed)
        sqlrp.projected(db, source, "id", P).to_table(name, replace=True)
        return Written(kind, name, transform(P, X))
    if kind == "project_into":
        P = projection(5, seed)
        sqlrp.project(db, source, "id", P, into=name)
        return Written(kind, name, transform(P, X))
    if kind == "create_projection":
        return Written(kind, name, sqlrp.create_projection(db, name, d=D, k=3, seed=seed))
    if kind == "build_index":
        try:
            sqlrp.build_index(db, source, "id", name, lists=2, calibration_queries=0, seed=seed)
        except EngineLimit:
            assert db.dialect in ("sqlite", "hyper", "datafusion"), f"{db.dialect} refused an index"
            return None
        return Written(kind, name, len(X))
    if kind == "failing":  # a write that fails once it has begun (the sums overflow): nothing of it stays
        big = np.full((ROWS_BIG, D), 1e308) * np.where(np.arange(ROWS_BIG) % 2, 1.0, -1.0)[:, None]
        if not db.table_exists("big"):
            frame = pd.DataFrame(big, columns=FEATURES)
            frame.insert(0, "id", np.arange(ROWS_BIG, dtype=np.int64))
            db.write_dataframe("big", frame)
        P = next(p for p in (projection(3, seed + j) for j in range(100)) if _overflows(p, big))
        try:
            sqlrp.projected(db, "big", "id", P).to_table(name)
        except Exception:  # noqa: BLE001 - the engine's overflow error or sqlrp's InputError
            return Written(kind, name, None)
        raise AssertionError("a projection that overflows did not fail")
    raise AssertionError(kind)


def _overflows(P: Any, X: np.ndarray) -> bool:
    """NumPy's projection of ``X`` by ``P`` overflows (the reference refuses it as sqlrp does)."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            transform(P, X)
    except Exception:  # noqa: BLE001 - the reference's refusal of a non-finite output
        return True
    return False


def check_chunks(chunks: list[pd.DataFrame], P: Any, X: np.ndarray) -> None:
    """The chunks a stream handed over are the first rows, by id, of the NumPy reference of ``P`` on
    ``X`` (the table as it was when the stream began)."""
    if not chunks:
        return
    got = pd.concat(chunks, ignore_index=True)
    n = len(got)
    assert n <= len(X)
    assert np.array_equal(got["id"].to_numpy(dtype=np.int64), np.arange(n)), "the chunks' ids"
    assert close_to(got.drop(columns="id").to_numpy(dtype=float), transform(P, X)[:n]), "the chunks' values"
