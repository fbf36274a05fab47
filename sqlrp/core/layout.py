"""How the input table is laid out, and what the output should look like.

Input layouts (``../shared/DESIGN.md`` §3):

- ``wide``  -- one numeric column per feature; feature ``i`` is ``columns[i]``.
- ``long``  -- sparse rows ``(id, feature, value)``; ``feature`` is an integer in ``[0, d)``.
  Rows of the output exist only for ids present in the table.
- ``array`` -- one LIST/ARRAY (DuckDB) or ``float8[]`` (PostgreSQL) column of length ``d``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .errors import InvalidParameter, refuse_nul
from .files import refuse_file_ending
from .pairs_plan import PairsPlan
from .params import optional_count

LAYOUTS = ("wide", "long", "array")
NULL_MODES = ("error", "zero")


@dataclass(frozen=True)
class Source:
    """The input relation of a projection: the one carrier of the input from the entry point on.

    An entry point makes it from the user's options (``Source(table, id_column, **options)``, the
    options of :class:`SourceOptions`), leaving blanks where the table decides: no ``columns`` (the
    wide layout's numeric columns), no ``array_column`` (the table's one numeric array).
    :func:`sqlrp.pipeline.sources.fill_source` reads the table and fills them.

    :param table: the table or view's name (its schema apart, in ``schema``).
    :param id_column: the column copied to the output as each row's key.
    :param layout: ``wide`` (a column per feature), ``array`` (one numeric array column) or ``long``
        (rows of id, feature, value).
    :param columns: wide: the feature columns, feature ``i`` being ``columns[i]`` (empty: every numeric
        column but the id, the group and ``exclude``).
    :param array_column: array: the array column (``None``: the table's one numeric array).
    :param feature_column: long: the column of feature indices ``0 .. d-1``.
    :param value_column: long: the column of feature values.
    :param schema: the table's schema (``None``: the connection's default).
    :param nulls: NULL features: ``error`` (refused, naming the rows) or ``zero``.
    :param group_column: pool the projected rows of each group (compact bilinear pooling): the group's column.
    :param catalog: the catalog (database) holding ``schema``.
    :param row_filter: a sqlglot condition on the table's own columns (``None``: every row).
    :param standardize: ``(means, stds)``, one of each per feature: standardise in SQL before projecting
        (:mod:`sqlrp.compiler.preprocess`; ``None``: as stored).
    :param rows: the engine's estimate of the table's rows (``None``: unknown).
    :param exclude: wide layout: columns left out of the default features.
    """

    table: str
    id_column: str
    layout: str = "wide"
    columns: tuple[str, ...] = ()
    array_column: str | None = None
    feature_column: str = "feature"
    value_column: str = "value"
    schema: str | None = None
    nulls: str = "error"
    group_column: str | None = None
    #: the catalog (database) holding ``schema`` -- Trino, Databricks, BigQuery projects, DuckDB's attached files
    catalog: str | None = None
    #: optional sqlglot condition on the input table's own columns (incremental runs, id-range batches)
    row_filter: Any = None
    # ``(means, stds)`` per feature: standardise in SQL before projecting (:mod:`.preprocess`)
    standardize: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    #: the engine's estimate of the table's rows (``None``: unknown); sets the pairs planner's time
    rows: int | None = None
    #: wide layout: columns left out of the default features (a label, a year)
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise InvalidParameter(f"unknown layout {self.layout!r}; choose one of {', '.join(LAYOUTS)}")
        if self.nulls not in NULL_MODES:
            raise InvalidParameter(f"nulls must be 'error' or 'zero', got {self.nulls!r}")
        object.__setattr__(self, "columns", tuple(self.columns or ()))
        object.__setattr__(self, "exclude", tuple(self.exclude or ()))


def refuse_other_d(columns: Sequence[str] | None, d: int | None) -> None:
    """A new projection's ``d`` given beside the feature columns that set it must be their number: ``--columns
    a,b --d 3`` is refused, never drawn with d = 2 (or 3) without a word."""
    if columns and d is not None and d != len(columns):
        raise InvalidParameter(
            f"--d {d} but --columns names {len(columns)} features: drop --d (the columns set it) or name {d} columns"
        )


class SourceOptions(TypedDict, total=False):
    """The user's keyword options of a :class:`Source` (its fields but the table, the id and what sqlrp
    derives): how the table is laid out and which columns are features."""

    layout: str
    """``wide`` (a column per feature), ``array`` (one numeric array column) or ``long`` (id, feature, value)"""
    columns: Sequence[str] | None
    """wide: the feature columns (default: every numeric column but the id and the group)"""
    array_column: str | None
    """array: the array column (default: the table's one numeric array)"""
    feature_column: str
    """long: the column of feature indices 0..d-1, and of values"""
    value_column: str
    schema: str | None
    """where the table is: its schema, and the catalog (database) holding that"""
    catalog: str | None
    nulls: str
    """NULL features: ``error`` (refused, naming the rows) or ``zero``"""
    group_column: str | None
    """pool the rows of each group (compact bilinear pooling): the group's column"""
    exclude: Sequence[str] | None
    """wide layout: columns left out of the default features (a label, a year)"""


#: the names of :class:`SourceOptions`, in order
SOURCE_OPTIONS = tuple(SourceOptions.__annotations__)


DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Output:
    """Output form: ``wide`` columns ``{prefix}0 .. {prefix}{k-1}`` or one ``array`` column.

    :param form: ``wide`` (a column per output) or ``array`` (one array column).
    :param prefix: wide: the output columns' prefix.
    :param array_name: array: the output column's name.
    :param dtype: the outputs' type, ``float64`` (DOUBLE) or ``float32`` (FLOAT).
    """

    form: str = "wide"
    prefix: str = "p"
    array_name: str = "projection"
    #: ``float64`` (DOUBLE) or ``float32`` (FLOAT: half the bytes to write and store; projections rarely
    #: need 53 bits -- rounding each output once costs a relative 6e-8)
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.form not in ("wide", "array"):
            raise InvalidParameter(f"output must be 'wide' or 'array', got {self.form!r}")
        if self.dtype not in DTYPES:
            raise InvalidParameter(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    def names(self, k: int) -> list[str]:
        return [f"{self.prefix}{j}" for j in range(k)] if self.form == "wide" else [self.array_name]


@dataclass(frozen=True)
class Formulation:
    """How a projection is written as SQL: where the matrix comes from (``auto``, ``registry``,
    ``values`` or a table), the strategy (``auto`` or a name of :data:`sqlrp.compiler.strategies.STRATEGIES`),
    mailman's ``block``, and ``check``: refuse NULL, NaN or infinite features and overflowing outputs.

    Planning decides once (:func:`sqlrp.pipeline.plan.decide`): the decided formulation names a
    strategy (never ``auto``), carries the ``pairs`` plan that strategy compiles with (loaded from
    the registry or planned there), ``guard`` (the checks ride in the projection's own statement,
    :mod:`sqlrp.compiler.guard`) and ``bind`` (dense weight rows travel as bound constants, not text).
    The compiler uses what it is given and decides only what is left ``auto``."""

    matrix: str = "auto"
    strategy: str = "auto"
    block: int | None = None
    check: bool = True
    pairs: PairsPlan | None = field(default=None, compare=False, repr=False)
    guard: bool = False
    bind: bool = False

    def __post_init__(self) -> None:
        # checked where the option enters (issue 41): every entry point builds this value, so none can
        # take a ``block`` another refuses; the upper bound (d) is checked where d is known
        for name in ("matrix", "strategy"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidParameter(f"{name} must be a name, got {value!r}")
            refuse_nul(value, name)
        object.__setattr__(self, "block", optional_count("block", self.block))
        _flag("check", self.check)


@dataclass(frozen=True)
class Target:
    """Where projected rows go: back to Python (``into=None``; in chunks of ``chunk_rows``, ``ordered``
    by the key, as ``output_format``), or into a table (``view``: a view; ``incremental``: only the ids
    not there yet) or a ``.parquet`` / ``.csv`` / ``.json`` file, ``replace`` allowing an existing one."""

    into: str | None = None
    view: bool = False
    replace: bool = False
    incremental: bool = False
    chunk_rows: int | None = None
    ordered: bool = True
    output_format: str = "pandas"
    #: the statement's form for ``into``: ``INSERT INTO`` an existing table, or a ``TEMPORARY`` one
    insert: bool = False
    temporary: bool = False
    #: ``auto``, ``sql`` (the compiled statement computes every output) or ``arrow`` (an in-process engine
    #: streams the features to NumPy's BLAS for the linear sums: :mod:`sqlrp.pipeline.arrow_route`)
    route: str = "auto"

    def __post_init__(self) -> None:
        # checked where the option enters (issue 41), for every entry point alike
        check_route(self.route)
        if self.into is not None:
            if not isinstance(self.into, str) or not self.into.strip():
                raise InvalidParameter(f"into must be a table or file name, got {self.into!r}")
            refuse_nul(self.into, "into")
            refuse_file_ending(self.into)  # x.xlsx would quietly be a table of that name
        for name in ("view", "replace", "incremental", "ordered", "insert", "temporary"):
            _flag(name, getattr(self, name))
        rows = optional_count("chunk_rows", self.chunk_rows)  # sqlrp.core.params.LIMITS
        object.__setattr__(self, "chunk_rows", rows)
        if self.output_format not in OUTPUT_FORMATS:
            raise InvalidParameter(
                f"output_format must be one of {', '.join(OUTPUT_FORMATS)}; got {self.output_format!r}"
            )
        if self.replace and self.incremental:
            raise InvalidParameter(
                "--replace rebuilds the output and --incremental adds only the ids not in it yet: choose one"
            )
        if self.into is None and (self.view or self.replace or self.incremental):
            given = "--view" if self.view else ("--replace" if self.replace else "--incremental")
            raise InvalidParameter(f"{given} is about the output table; give it with --into")
        if self.view and self.incremental:
            raise InvalidParameter("a view is computed when read: it cannot be topped up (--incremental)")
        if rows is not None and self.into is not None:
            raise InvalidParameter("--chunk-rows hands rows back in chunks; it does not go with --into")


#: how ``project`` and ``fit`` run: ``auto`` (chosen), ``sql`` or ``arrow`` (record batches into NumPy)
ROUTES = ("auto", "sql", "arrow")


def check_route(route: Any) -> str:
    """``route`` (``project``'s and ``fit``'s option), refused unless one of :data:`ROUTES`."""
    if route not in ROUTES:
        raise InvalidParameter(f"route must be 'auto', 'sql' or 'arrow', got {route!r}")
    return route


#: the output formats of rows handed back to Python
OUTPUT_FORMATS = ("pandas", "arrow", "polars", "numpy")


def _flag(name: str, value: Any) -> None:
    """A yes/no option must be a ``bool``: ``replace="no"`` would otherwise be read as yes."""
    if not isinstance(value, bool):
        import numpy as np

        if not isinstance(value, np.bool_):
            raise InvalidParameter(f"{name} must be True or False, got {value!r}")
