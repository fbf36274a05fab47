"""Type names shared by several backends, both ways.

- :data:`NUMBER_NAMES`: number types as ClickHouse and Arrow name them (lower case: ``int64``,
  ``uint8``, ``float64``, ``double``, ``halffloat`` ...) in the spelling
  :func:`~sqlrp.backends.base.is_numeric_type` reads (DuckDB's: ``bigint``, ``utinyint``, ``double``);
- :data:`KIND_TYPES`: the column type of each kind of DataFrame column
  (:func:`~sqlrp.backends.values.value_kind`) in PostgreSQL's spelling, which PostgreSQL and Hyper
  create (each changes what it stores otherwise);
- :func:`type_call`, :func:`unwrapped`: a parametrised type name ``Name(args)`` taken apart, and
  freed of wrappers such as ClickHouse's ``Nullable(...)``.
"""

from __future__ import annotations

import re
from collections.abc import Collection

_CALL = re.compile(r"^\s*(?P<name>\w+)\s*\((?P<args>.*)\)\s*$", re.DOTALL)

#: number type names of ClickHouse and Arrow -> sqlrp's spelling (decimals with their arguments apart)
NUMBER_NAMES = {
    "float64": "double",
    "double": "double",
    "float32": "float",
    "float": "float",
    "bfloat16": "float",
    "halffloat": "float",
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "integer",
    "int64": "bigint",
    "int128": "hugeint",
    "int256": "hugeint",
    "uint8": "utinyint",
    "uint16": "usmallint",
    "uint32": "uinteger",
    "uint64": "ubigint",
    "uint128": "uhugeint",
    "uint256": "uhugeint",
    "decimal": "decimal",
    "decimal32": "decimal",
    "decimal64": "decimal",
    "decimal128": "decimal",
    "decimal256": "decimal",
}

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



def type_call(type_name: str) -> tuple[str, str]:
    """``(name, arguments)`` of a type name ``Name(args)`` (``Decimal(10, 2)``, ``Array(Int64)``), or
    ``(type_name, "")`` for one without arguments."""
    m = _CALL.match(type_name)
    if not m:
        return type_name.strip(), ""
    return m["name"], m["args"].strip()


def unwrapped(type_name: str, wrappers: Collection[str]) -> str:
    """``type_name`` without the ``wrappers`` (lower-case names, ``nullable``) around it."""
    name, args = type_call(type_name)
    while name.lower() in wrappers and args:
        type_name = args
        name, args = type_call(type_name)
    return type_name.strip()


__all__ = ["KIND_TYPES", "NUMBER_NAMES", "type_call", "unwrapped"]
