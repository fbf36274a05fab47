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

from typing import Any

from ..core.errors import InvalidParameter
from ..core.ir import Composed, Projection
from ..registry.transfer import is_projection_file, read_projection

#: ``--matrix`` values that are not a table name
MATRIX_SOURCES = ("auto", "registry", "values")


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
            f"--matrix={matrix} joins a matrix loaded in the warehouse, but its scale and shape are not in that "
            "table: give --projection=FILE (the exported file that was loaded) or a stored projection's name with --db"
        )
