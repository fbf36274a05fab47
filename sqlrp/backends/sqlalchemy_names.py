"""SQLAlchemy's names in sqlrp's spelling, for :mod:`sqlrp.backends.sqlalchemy`: a dialect's name
(:func:`sqlrp_dialect`: ``postgresql`` -> ``postgres``), a reflected column's type
(:func:`column_info`: number types named so that :func:`~sqlrp.backends.base.is_numeric_type` knows
them), and the SQLAlchemy type a DataFrame column is created with (:func:`frame_type`)."""

from __future__ import annotations

from typing import Any

from ..core.errors import InvalidParameter
from ..core.lazy import pd
from ..dialects import dialect_name, dialect_names
from ..dialects.base import SqlrpDialect
from .base import ColumnInfo
from .values import value_kind


def sqlrp_dialect(name: str) -> str:
    """The sqlrp/sqlglot dialect for SQLAlchemy's dialect ``name``: a dialect of sqlrp's own or of
    sqlglot's by that name, else the dialect ``name`` is an alias of (``postgresql`` -> ``postgres``,
    ``mssql`` -> ``tsql``, ``mariadb`` -> ``mysql``: each dialect file declares its aliases);
    :class:`InvalidParameter` naming the dialect otherwise."""
    import sqlglot

    key = name.lower()
    if key in dialect_names():
        return key
    try:
        sqlglot.Dialect.get_or_raise(key)
    except ValueError:
        if dialect_name(key) != key:
            return dialect_name(key)
        raise InvalidParameter(
            f"sqlrp cannot render SQL for the SQLAlchemy dialect {name!r}: sqlglot has no dialect of that name "
            f"(known here: {', '.join(dialect_names())})"
        ) from None
    return key


def column_info(name: str, sa_type: Any, sa_dialect: Any) -> ColumnInfo:
    """The column ``name`` of SQLAlchemy type ``sa_type`` (reflected through ``sa_dialect``): integers
    ``bigint``, floats and decimals ``double``, arrays by their element type."""
    from sqlalchemy.types import ARRAY

    if isinstance(sa_type, ARRAY):
        element = type_name(sa_type.item_type, sa_dialect)
        return ColumnInfo(name, f"{element}[]", element)
    return ColumnInfo(name, type_name(sa_type, sa_dialect))


def type_name(sa_type: Any, sa_dialect: Any) -> str:
    """The name of SQLAlchemy type ``sa_type`` as sqlrp reads it (``bigint``, ``double``), else as
    ``sa_dialect`` renders it, else its class name."""
    from sqlalchemy.types import Float, Integer, Numeric

    if isinstance(sa_type, Integer):
        return "bigint"
    if isinstance(sa_type, (Float, Numeric)):  # Float, REAL, DOUBLE, DOUBLE_PRECISION, DECIMAL
        return "double"
    try:
        return str(sa_type.compile(dialect=sa_dialect))
    except Exception:  # noqa: BLE001 - a type this dialect cannot render: its class name
        return type(sa_type).__name__


def frame_type(series: pd.Series, dialect: SqlrpDialect, engine: str) -> Any:
    """The SQLAlchemy type of a DataFrame column (:func:`~sqlrp.backends.values.value_kind`) on the
    engine ``engine`` (sqlrp's dialect name, its profile ``dialect``); list-valued columns only on
    PostgreSQL (``DOUBLE PRECISION[]``)."""
    from sqlalchemy import types as t

    kind = value_kind(series)
    if kind == "array":
        if not dialect.arrays or engine != "postgres":
            raise dialect.refuse(f"column {series.name!r} holds lists, and sqlrp has no array column type here")
        from sqlalchemy.dialects.postgresql import ARRAY

        return ARRAY(t.Double())
    kinds = {"double": t.Double, "bigint": t.BigInteger, "boolean": t.Boolean, "blob": t.LargeBinary}
    return kinds.get(kind, t.Text)()


__all__ = ["column_info", "frame_type", "sqlrp_dialect", "type_name"]
