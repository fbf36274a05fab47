"""Which matrix ``sqlrp compile`` renders: the one it is given, never a new one in its place.

A projection comes from one of three places, with or without a database (``--db``):

- a **stored** projection (``--projection NAME`` with ``--db``): the registry's rows;
- an **exported file** (``--projection rp40.parquet``, ``rp40.csv`` with its ``rp40.csv.json``
  sidecar, or ``*.sqlrp.json``): the matrix and the rest of the projection (scale, combiner ...)
  exactly as exported (:mod:`sqlrp.registry.transfer`);
- a **warehouse table** (``--matrix TABLE``): the weights are read there when the SQL runs, but the
  scale and the shape come from the stored projection or the file it was loaded from, so ``--matrix
  TABLE`` needs one of the two.

``--method``, ``--k``, ``--d``, ``--seed`` and the method's parameters describe a *new* matrix; given
with an existing one they must agree with it, else the compile is refused (a seed-0 matrix drawn in
place of the given one is right-looking SQL with wrong numbers: issue 32).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlglot import exp

from ..backends import Backend
from ..compiler.long import MATRIX_SOURCES, _matrix_relation, matrix_table
from ..core.errors import InputError, InvalidParameter, text_value
from ..core.ir import Composed, Projection
from ..core.nodes import as_double, col
from ..registry.store import Registry
from ..registry.transfer import is_projection_file, read_projection
from .sources import describe

__all__ = [
    "MATRIX_SOURCES",
    "check_agrees",
    "check_matrix_holds",
    "check_matrix_origin",
    "check_matrix_table",
    "is_given",
    "matrix_differs",
    "read_file",
]


def read_file(name: str) -> Projection | Composed | None:
    """The projection in the file ``name`` (an export or a ``.sqlrp.json``), or None if ``name`` is
    not a projection file."""
    return read_projection(name) if is_projection_file(name) else None


def check_agrees(
    projection: Projection | Composed,
    origin: str,
    method: str | None = None,
    k: int | None = None,
    d: int | None = None,
    seed: int | None = None,
    params: dict[str, Any] | None = None,
) -> None:
    """Refuse options of a new matrix that disagree with the given ``projection`` (from ``origin``:
    "stored projection 'rp40'", "file 'rp40.parquet'"); options that agree are accepted."""
    stored = projection.params
    differ = [
        (flag, value, held)
        for flag, value, held in (
            ("--method", method, projection.method),
            ("--k", k, projection.k),
            ("--d", d, projection.d),
            ("--seed", seed, getattr(projection, "seed", None)),
        )
        if value is not None and value != held
    ]
    for key, value in (params or {}).items():
        if value is not None and value not in (stored.get(key), stored.get(f"{key}_requested")):
            differ.append((f"--{key.replace('_', '-')}", value, stored.get(key)))
    if differ:
        listed = ", ".join(f"{flag} {value} (it has {held})" for flag, value, held in differ)
        raise InvalidParameter(
            f"the {origin} is rendered as it is, but {listed} describe another matrix: drop those options "
            "(they are for a new projection), or leave out --projection to draw a new one"
        )


def check_matrix_table(matrix: str, given: bool) -> None:
    """``--matrix TABLE`` joins weights loaded in the warehouse: refused without the projection they
    came from (its scale and shape are not in the table)."""
    if matrix not in MATRIX_SOURCES and not given:
        raise InvalidParameter(
            f"--matrix={text_value(matrix)} joins a matrix loaded in the warehouse, but its scale and shape are not "
            "in that table: give --projection=FILE (the exported file that was loaded) or a stored projection's "
            "name with --db"
        )


def is_given(db: Backend, projection: Any) -> bool:
    """``projection`` (as :func:`sqlrp.project` takes it) names a matrix that exists: a projection object, a
    projection file, or the name of a projection stored in ``db``'s registry -- not a new one drawn for
    the call (``None``, or a name not stored yet)."""
    if isinstance(projection, (Projection, Composed)):
        return True
    if not isinstance(projection, str):
        return False
    return is_projection_file(projection) or Registry.of(db).exists(projection)


def check_matrix_origin(db: Backend, matrix: str | None, projection: Any) -> None:
    """The entry's check of ``--matrix TABLE`` (:func:`sqlrp.project`, :func:`sqlrp.projected` and its
    destinations, ``sqlrp project``; ``sqlrp compile`` calls :func:`check_matrix_table` itself): the
    table's weights need the projection they were exported from -- its scale and shape are not in the
    table -- so a new projection drawn for the call (no ``projection``, or a name not stored) is refused
    before any work, as ``compile`` refuses it."""
    if matrix is not None and matrix_table(matrix) is not None:
        check_matrix_table(matrix, is_given(db, projection))


def check_matrix_holds(db: Backend, projection: Projection | Composed, matrix: str) -> None:
    """Where the SQL will read the matrix from a relation of ``db`` (``matrix`` = ``registry`` or a
    table), check before anything runs that the relation exists and holds the matrix of ``projection``
    -- a table loaded from another projection's export, a stale or partial load, or a registry whose
    rows under that name are another projection's (or none: a projection object named but stored
    elsewhere) would otherwise join those weights with this projection's scale and give other numbers
    without a word.  :class:`InputError` in one line, naming what differs (:func:`matrix_differs`)."""
    differs = matrix_differs(db, projection, matrix)
    if not differs:
        return
    name = f"projection {projection.name!r}" if projection.name else "the projection given"
    if matrix_table(matrix) is not None:
        raise InputError(
            f"matrix table {matrix!r} does not hold the matrix of {name} ({differs}): load the matrix that 'sqlrp "
            "projections export' wrote for it, or give the projection the table was exported from"
        )
    if differs.startswith("entries: 0,"):
        raise InputError(
            f"the registry of this database holds no matrix for {name}: store it here (projections import, or "
            "copy_projection), or pass --matrix=values to have it in the SQL"
        )
    raise InputError(
        f"the registry's rows of {name} hold another matrix than the projection given ({differs}): give the stored "
        "projection by its name, or pass --matrix=values to have the given one in the SQL"
    )


def matrix_differs(db: Backend, projection: Projection | Composed, matrix: str) -> str:
    """What differs between the relation ``matrix`` (``registry``: the registry's rows under the
    projection's name; or a table) and the matrix of ``projection`` -- ``""`` where they agree, or
    where nothing is read from a relation (``auto``, ``values``, a composition).  A missing table, or
    one without the columns, is :class:`InputError`.

    The comparison is a digest computed in the engine (:func:`matrix_digest`: the count of entries, the
    ranges of ``vector`` and ``feature``, and sums of the weights and positions ``vector * d +
    feature`` and of their products) against the same digest of the projection's own entries, each
    sum to a relative 1e-9 of its terms' size: one aggregate over the relation, whatever its size."""
    if not isinstance(projection, Projection) or matrix in ("auto", "values"):
        return ""
    table = matrix_table(matrix)
    if table is not None:
        names = {c.name for c in _matrix_columns(db, table, matrix)}
        missing = [c for c in ("vector", "feature", "weight") if c not in names]
        if missing:
            raise InputError(
                f"matrix table {matrix!r} has no column {missing[0]!r}: it must hold (vector, feature, weight), the "
                "columns 'sqlrp projections export' writes"
            )
    relation = _matrix_relation(projection, matrix, db.sql_dialect)
    got = db.fetchall(db.sql_dialect.render(matrix_digest(relation, projection.d)))[0]
    want, size = projection_digest(projection)
    return _digest_differs(got, want, size)


def _matrix_columns(db: Backend, table: exp.Table, matrix: str) -> list:
    """The columns of the matrix table (:class:`InputError` in one line if there is no such table)."""
    schema = table.args.get("db")
    catalog = table.args.get("catalog")
    try:
        return describe(db, table.name, schema.name if schema else None, catalog.name if catalog else None)
    except InputError:
        raise InputError(
            f"--matrix={text_value(matrix)}: no such table in the database; load the exported matrix ('sqlrp "
            "projections export') as a table of (vector, feature, weight) first, or drop --matrix"
        ) from None


#: the digest's parts: what :func:`_digest_differs` names when one differs
DIGEST = (
    "entries",
    "weights given",
    "smallest vector",
    "largest vector",
    "smallest feature",
    "largest feature",
    "sum of weights",
    "sum of squared weights",
    "sum of positions",
    "sum of squared positions",
    "sum of weighted positions",
)
EXACT = 6  # the counts and ranges; the sums after them are compared to a relative 1e-9


def matrix_digest(relation: exp.Expression, d: int) -> exp.Select:
    """``SELECT`` the :data:`DIGEST` of a relation ``(vector, feature, weight)``."""
    vector, feature, weight = (as_double(col(c)) for c in ("vector", "feature", "weight"))
    position = exp.paren(vector.copy() * exp.Literal.number(d) + feature.copy())
    return exp.select(
        exp.Count(this=exp.Star()),
        exp.Count(this=col("weight")),
        exp.Min(this=col("vector")),
        exp.Max(this=col("vector")),
        exp.Min(this=col("feature")),
        exp.Max(this=col("feature")),
        exp.Sum(this=weight.copy()),
        exp.Sum(this=weight.copy() * weight.copy()),
        exp.Sum(this=position.copy()),
        exp.Sum(this=position.copy() * position.copy()),
        exp.Sum(this=weight.copy() * position.copy()),
    ).from_(relation.subquery("_mx", copy=False))


def projection_digest(projection: Projection) -> tuple[list[float], list[float]]:
    """The :data:`DIGEST` of the projection's own entries, and the size of each sum's terms (its
    tolerance's scale)."""
    lin = projection.linear
    v, f, w = (np.asarray(a, dtype=np.float64) for a in (lin.vector, lin.feature, lin.weight))
    h = v * projection.d + f
    n = len(w)
    ranges = [v.min(), v.max(), f.min(), f.max()] if n else [None] * 4
    sums = [w, w * w, h, h * h, w * h]
    return [n, n, *ranges, *(float(s.sum()) for s in sums)], [float(np.abs(s).sum()) for s in sums]


def _digest_differs(got: tuple, want: list, size: list[float]) -> str:
    """The first part of the digest that differs (``"entries: 40, the projection has 64"``), or ``""``."""
    for i, label in enumerate(DIGEST):
        g, w = got[i], want[i]
        if not want[0] and i >= 2:  # no entries: the ranges and sums are NULL (or 0) on either side
            break
        try:
            value = None if g is None else float(g)
        except (TypeError, ValueError):
            return f"{label}: {g!r}, not a number"
        if value is None:
            if w is None:
                continue
            return f"{label}: NULL, the projection's is {w!r}"
        if i < EXACT:
            same = value == float(w)
        else:
            same = math.isfinite(value) and abs(value - w) <= 1e-9 * size[i - EXACT] + 1e-300
        if not same:
            shown = int(value) if i < EXACT and value == int(value) else value
            return f"{label}: {shown!r}, the projection's is {int(w) if i < EXACT else w!r}"
    return ""
