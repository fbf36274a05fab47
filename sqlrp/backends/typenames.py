"""Type names shared by several backends, both ways.

- :data:`NUMBER_NAMES`: number types as ClickHouse and Arrow name them (lower case: ``int64``,
  ``uint8``, ``float64``, ``double``, ``halffloat`` ...) in the spelling
  :func:`~sqlrp.backends.base.is_numeric_type` reads (DuckDB's: ``bigint``, ``utinyint``, ``double``):
  ClickHouse's (:data:`sqlrp.dialects.clickhouse.NUMBER_TYPES`, holding Arrow's too) and Arrow's ``halffloat``;
- :data:`KIND_TYPES`: the column type of each kind of DataFrame column
  (:func:`~sqlrp.backends.values.value_kind`) in PostgreSQL's spelling, which PostgreSQL and Hyper
  create (each changes what it stores otherwise).
"""

from __future__ import annotations

from ..dialects.clickhouse import NUMBER_TYPES

#: number type names of ClickHouse and Arrow -> sqlrp's spelling (decimals with their arguments apart)
NUMBER_NAMES = {**NUMBER_TYPES, "halffloat": "float"}

#: the column type of each kind of DataFrame column, in PostgreSQL's spelling
KIND_TYPES = {
    "double": "double precision",
    "bigint": "bigint",
    "boolean": "boolean",
    "array": "double precision[]",
    "timestamp": "timestamp",
    "blob": "bytea",
    "text": "text",
}


__all__ = ["KIND_TYPES", "NUMBER_NAMES"]
