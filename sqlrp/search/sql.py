"""The SQL pieces every search statement is built from: the index tables' column names, what a
search knows of an index (:class:`IndexLayout`), the rows as the index sees them
(:func:`feature_rows`), distances, the per-group ``K`` best, and code words packed from bits.

Everything here is a sqlglot expression rendered per dialect; a user's column names are read in
:func:`feature_rows` only, every other piece refers to its fixed aliases (``_id``, ``_x0`` ..)."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import sqlglot
from sqlglot import exp

from ..compiler import Source, col, dense_source, number, table_ref
from ..core.errors import InvalidParameter
from ..core.nodes import balanced
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select
from ..core.options import refuse_unknown, take
from ..core.params import count, is_whole
from ..dialects import SqlrpDialect
from .ivf import WORD_BITS

METRICS = ("euclidean", "angular")
#: output columns of a search, in order
RESULT_COLUMNS = ("query_id", "id", "rank", "distance")
#: the index tables' own column names (sqlrp's tables: fixed names, never the user's)
ID, LIST, PARENT, TOP, WORD, CENTRE, ROTATED = "id", "list", "parent", "top", "w", "c", "t"
G, ONES, NX, TB, HASH = "g", "ones", "nx", "tb", "h"
INT = exp.DataType.build("INT")
BIGINT = exp.DataType.build("BIGINT")
DOUBLE = exp.DataType.build("DOUBLE")


def cast_to(expression: exp.Expression, to: exp.DataType) -> exp.Cast:
    """``CAST(expression AS to)`` without copying ``expression`` (``exp.cast`` copies both)."""
    return exp.Cast(this=expression, to=to.copy())


def named(column: str, table: str) -> exp.Expression:
    """``table.column AS column``: ClickHouse names an unaliased ``r._id`` ``r._id`` where another
    joined relation has an ``_id`` too, and the outer select then cannot find ``_id``."""
    return exp.alias_(col(column, table), column, quoted=True, copy=False)


@dataclass(frozen=True)
class IndexLayout:
    """What a search needs to know of a stored index (:class:`sqlrp.search.index.Index` holds one)."""

    d: int
    source: Source  #: the indexed table, re-ranked on its own rows
    rows: exp.Table  #: ``(id, list, w0 .., g, ones, nx, tb, h)``
    lists: exp.Table  #: ``(list, parent, c0 .. c{d-1}, t0 .. t{D-1})``
    tops: exp.Table  #: ``(top, c0 .. c{d-1})``
    signs: np.ndarray  #: the rotation's signs (rounds x D)
    metric: str = "euclidean"
    word_bits: int = WORD_BITS  #: bits of a stored code word (the dialect's ``code_word_bits``)
    scale: int = 0  #: the rows are read times ``2^scale`` (:mod:`sqlrp.search.scale`)
    fine: bool = False  #: distances below ``2^-FINE`` computed again (:func:`pair_distance`)

    @property
    def size(self) -> int:
        return int(self.signs.shape[1])

    @property
    def words(self) -> int:
        return -(-self.size // self.word_bits)

    def word(self, w: int, bits: Sequence[exp.Expression], dialect: SqlrpDialect) -> exp.Expression:
        """Word ``w`` of ``bits`` (conditions, one a code bit) packed as the dialect's code word."""
        return pack_word(bits[w * self.word_bits : (w + 1) * self.word_bits], dialect.code_word_type(self.word_bits))


class Probing(TypedDict, total=False):
    """How a search probes and re-ranks (defaults: :data:`PROBING`): the ``top`` neighbours, from the
    ``candidates`` best estimates, in the ``probes`` nearest lists -- or adaptively, every list within
    ``ratio`` times the nearest one's distance, ``probes`` at least and ``cap`` at most
    (:func:`sqlrp.search.query.probe_adaptive`)."""

    top: int
    candidates: int
    probes: int
    ratio: float | None
    cap: int | None


#: the most neighbours (``top``) and candidates a search takes: DuckDB's ``min_by(x, v, n)`` holds
#: ``n < 1,000,000``; the same bound on every engine, so that no engine takes what another refuses
MAX_COUNT = 999_999

PROBING: Probing = {"top": 10, "candidates": 100, "probes": 8, "ratio": None, "cap": None}


def probing(options: Probing) -> tuple[int, int, int, float | None, int | None]:
    """``(top, candidates, probes, ratio, cap)`` of ``options`` with the defaults, checked by name."""
    refuse_unknown("search_select", options, PROBING)
    return take({**PROBING, **options}, "top", "candidates", "probes", "ratio", "cap")  # type: ignore[return-value]


def check_search(top: int, candidates: int, probes: int | None, metric: str) -> None:
    """Refuse nonsense parameters before any SQL is written."""
    for name, value in (("top", top), ("candidates", candidates), ("probes", probes)):
        if name == "probes" and value is None:
            continue
        if name != "probes" and is_whole(value) and value > MAX_COUNT:  # the engines' bound, below LIMITS'
            raise InvalidParameter(f"{name} must be at most {MAX_COUNT:,}, got {value!r}")
        count(name, value)  # a whole number in its range (sqlrp.core.params.LIMITS)
    if candidates < top:
        raise InvalidParameter(f"candidates ({candidates}) must be at least top ({top}): only candidates are re-ranked")
    if metric not in METRICS:
        raise InvalidParameter(f"metric must be one of {', '.join(METRICS, copy=False)}, got {metric!r}")


def cte(name: str, alias: str | None = None) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(name, quoted=True, copy=False),
        alias=exp.TableAlias(this=exp.to_identifier(alias)) if alias else None,
    )


def xs(d: int, table: str | None = None, prefix: str = "_x") -> list[exp.Expression]:
    return [col(f"{prefix}{i}", table) for i in range(d)]


def squared_distance(left: Sequence[exp.Expression], right: Sequence[exp.Expression]) -> exp.Expression:
    """``sum_i (a_i - b_i) * (a_i - b_i)`` as a balanced sum (the NumPy reference sums the same squares)."""
    squares = [
        exp.Mul(this=_p(exp.Sub(this=a, expression=b)), expression=_p(exp.Sub(this=a.copy(), expression=b.copy())))
        for a, b in zip(left, right, strict=True)
    ]
    return balanced(squares, exp.Add)


def scaled(value: exp.Expression, e: int) -> exp.Expression:
    """``value * 2^e`` (``value`` itself for ``e = 0``), the power of two written exactly."""
    if e == 0:
        return value
    factor = exp.cast(exp.Literal.number(repr(math.ldexp(1.0, e))), exp.DataType.build("DOUBLE"))
    return exp.Mul(this=exp.paren(value, copy=False), expression=factor)


def feature_rows(
    source: Source, d: int, dialect: SqlrpDialect, metric: str = "euclidean", hashed: bool = False, scale: int = 0
) -> exp.Select:
    """``SELECT _id, _x0 .. _x{d-1} [, _h]``: the source's rows as the index sees them (the only place
    a user's column names are read: everything above refers to these aliases, which a user's column
    cannot capture); for ``angular``, each row divided by its norm (a zero row stays zero).
    ``hashed`` adds ``_h``, the hash of the row's id and raw features (its array as one value where
    the engine reads it whole, several times faster than element by element: ``docs/benchmarks.md``,
    "Search").  ``scale``: the features times ``2^scale`` (:mod:`sqlrp.search.scale`; after the hash,
    before the norm)."""
    rows = dense_source(d, source, dialect)
    if hashed:
        if source.layout == "array" and not dialect.needs_materialised_array():
            raw = [col(source.id_column), col(source.array_column)]
        elif source.layout == "wide":
            raw = [col(source.id_column), *[col(c) for c in source.columns]]
        else:  # PostgreSQL's array layout: its elements, read once per row
            raw = [col("_id"), *xs(d)]
            rows = _select(exp.Star()).from_(rows.subquery("_e", copy=False), copy=False)
        rows = rows.select(exp.alias_(dialect.row_hash(raw), "_h", quoted=True, copy=False), append=True, copy=False)
    if scale:
        rows = _select(
            col("_id"),
            *[exp.alias_(scaled(x, scale), f"_x{i}", quoted=True, copy=False) for i, x in enumerate(xs(d))],
            *([col("_h")] if hashed else []),
        ).from_(rows.subquery("_sc", copy=False), copy=False)
    if metric != "angular":
        return rows
    norm = exp.Sqrt(this=balanced([exp.Mul(this=x, expression=x.copy()) for x in xs(d)], exp.Add))
    safe = exp.Case(ifs=[exp.If(this=_p(norm).eq(0), true=number(1.0))], default=norm.copy())
    keep = [col("_h")] if hashed else []
    inner = _select(col("_id"), *xs(d), *keep, exp.alias_(safe, "_n", quoted=True, copy=False)).from_(
        rows.subquery("_raw", copy=False), copy=False
    )
    return _select(
        col("_id"),
        *[
            exp.alias_(exp.Div(this=x, expression=col("_n")), f"_x{i}", quoted=True, copy=False)
            for i, x in enumerate(xs(d))
        ],
        *[k.copy() for k in keep],
    ).from_(inner.subquery("_norm", copy=False), copy=False)


def with_vector(select: exp.Select, d: int, dialect: SqlrpDialect, prefix: str = "_x") -> exp.Select:
    """``select`` with ``_vec``, its features as the engine's native vector, where it has one."""
    vector = dialect.vector(xs(d, prefix=prefix))
    if vector is None:
        return select
    return _select(exp.Star(), exp.alias_(vector, "_vec", quoted=True, copy=False)).from_(
        select.subquery("_v", copy=False)
    )


def rerank_rows(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``(_id, .., _vec)``: the table's rows as the exact re-rank reads them.  An array column of
    Euclidean rows is cast whole to the engine's vector where it can be (DuckDB), rather than read
    element by element through :func:`feature_rows`: the same values (NULLs are refused by the
    source check, or read as zeros: that, standardising and groups take the element path)."""
    src, d = layout.source, layout.d
    plain = src.layout == "array" and layout.metric == "euclidean" and src.nulls == "error"
    whole = dialect.whole_vector(col(src.array_column), d) if plain and not src.standardize else None
    if whole is None or src.group_column is not None or layout.scale:
        return with_vector(feature_rows(src, d, dialect, layout.metric, scale=layout.scale), d, dialect)
    select = _select(
        exp.alias_(col(src.id_column), "_id", quoted=True, copy=False),
        exp.alias_(whole, "_vec", quoted=True, copy=False),
    ).from_(table_ref(src), copy=False)
    return select.where(src.row_filter.copy(), copy=False) if src.row_filter is not None else select


def distance_key(d: int, dialect: SqlrpDialect, left: str, right: str, right_prefix: str) -> exp.Expression:
    """A value that orders pairs by Euclidean distance: the native vector distance where the engine
    has one (both sides carry ``_vec``), else the squared distance over the columns."""
    if dialect.vector(xs(1)) is not None:
        return dialect.vector_distance(col("_vec", left), col("_vec", right))
    return squared_distance(xs(d, left), xs(d, right, right_prefix))


def centroids(table: exp.Table, key: str, d: int, dialect: SqlrpDialect, extra: Sequence[str] = ()) -> exp.Select:
    select = _select(col(key), *[col(c) for c in extra], *xs(d, prefix=CENTRE)).from_(table.copy(), copy=False)
    return with_vector(select, d, dialect, CENTRE)


def best_per(
    pairs: exp.Select,
    by: str,
    key: str,
    order: str,
    count: int,
    dialect: SqlrpDialect,
    alias: str,
    tie_break: bool = True,
) -> exp.Select:
    """``(by, alias)``: for each ``by``, the ``count`` rows of ``pairs`` with the smallest ``(order,
    key)`` -- DuckDB's ``min_by(key, (order, key), count)`` unnested, elsewhere ``row_number()``."""
    if dialect.min_by_n:
        # ties broken by key in the window below; min_by with a (value, key) tuple costs over ten
        # times the value alone (docs/benchmarks.md, "Search"): the candidates' top keeps a tie at
        # its boundary arbitrarily (ties of estimates need identical codes and norms)
        tie = col(order) if count > 1 and tie_break is False else exp.Tuple(expressions=[col(order), col(key)])
        if count == 1:
            best = exp.Anonymous(this="min_by", expressions=[col(key), tie])
        else:
            best = exp.Unnest(
                expressions=[exp.Anonymous(this="min_by", expressions=[col(key), tie, exp.Literal.number(count)])]
            )
        return (
            _select(col(by), exp.alias_(best, alias, quoted=True, copy=False))
            .from_(pairs.subquery("_pairs", copy=False))
            .group_by(col(by), copy=False)
        )
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[col(by)],
        order=exp.Order(expressions=[exp.Ordered(this=col(order), nulls_first=False), exp.Ordered(this=col(key))]),
    )
    ranked = _select(
        col(by),
        exp.alias_(col(key), alias, quoted=True, copy=False),
        exp.alias_(window, "_rk", quoted=True, copy=False),
    )
    ranked = ranked.from_(pairs.subquery("_pairs", copy=False))
    return (
        _select(col(by), col(alias))
        .from_(ranked.subquery("_ranked", copy=False))
        .where(col("_rk") <= count, copy=False)
    )


def top_ranked(pairs: exp.Select, count: int) -> exp.Select:
    """``(_qid, _id, _d, _rank)``: the ``count`` smallest ``(_d, _id)`` per ``_qid``, numbered."""
    window = exp.Window(
        this=exp.RowNumber(),
        partition_by=[col("_qid")],
        order=exp.Order(expressions=[exp.Ordered(this=col("_d"), nulls_first=False), exp.Ordered(this=col("_id"))]),
    )
    ranked = _select(exp.Star(), exp.alias_(window, "_rank", quoted=True, copy=False)).from_(
        pairs.subquery("_in", copy=False)
    )
    return _select(exp.Star()).from_(ranked.subquery("_ranked", copy=False)).where(col("_rank") <= count, copy=False)


def result_select(final: exp.Select) -> exp.Select:
    out = _select(
        exp.alias_(col("_qid"), "query_id", quoted=True, copy=False),
        exp.alias_(col("_id"), "id", quoted=True, copy=False),
        exp.alias_(col("_rank"), "rank", quoted=True, copy=False),
        exp.alias_(col("_d"), "distance", quoted=True, copy=False),
    ).from_(final.subquery("_f", copy=False))
    return out.order_by(col("query_id"), col("rank"), copy=False)


def bit_value(b: int, word: exp.DataType = BIGINT, width: int = WORD_BITS) -> exp.Expression:
    """``2^b`` as a signed ``width``-bit integer; ``b = width - 1`` is the sign bit, ``-2^(width-1)``.
    Beyond 64 bits the value is cast from a string (a literal that large is no engine's integer)."""
    value = 1 << b if b < width - 1 else -(1 << (width - 1))
    if width <= 64:
        if b < width - 1:
            return cast_to(exp.Literal.number(value), word)
        return cast_to(exp.Sub(this=exp.Literal.number(value + 1), expression=exp.Literal.number(1)), word)
    return cast_to(exp.Literal.string(str(value)), word)


def pack_word(
    conditions: Sequence[exp.Expression], word: tuple[exp.DataType, int] = (BIGINT, WORD_BITS)
) -> exp.Expression:
    """Up to ``width`` conditions packed as one signed integer of type ``word = (type, width)``, bit
    ``b`` set where condition ``b`` holds (a balanced sum of ``CASE``: each partial sum joins
    consecutive bits, so none overflows)."""
    kind, width = word
    zero = cast_to(exp.Literal.number(0), kind)
    bits = [
        exp.Case(ifs=[exp.If(this=c, true=bit_value(b, kind, width))], default=zero.copy())
        for b, c in enumerate(conditions)
    ]
    return balanced(bits, exp.Add)


#: a Euclidean distance below ``2^-FINE`` (on the scaled rows) is computed again on the differences
#: times ``2^FINE_SCALE``: its squares no longer underflow (:mod:`sqlrp.search.scale`)
FINE, FINE_SCALE = 400, 500


def _elements(d: int, dialect: SqlrpDialect, table: str) -> list[exp.Expression]:
    """The features of the row aliased ``table``: its ``_x`` columns, or the elements of its ``_vec``
    where the engine measures vectors (the re-rank may read the vector alone)."""
    if dialect.vector(xs(1)) is None:
        return xs(d, table)
    return [sqlglot.parse_one(f'"{table}"."_vec"[{i + 1}]', read="duckdb") for i in range(d)]


def pair_distance(  # noqa: PLR0913 - the rows, and how they were read
    metric: str, d: int, dialect: SqlrpDialect, left: str, right: str, scale: int = 0, fine: bool = False
) -> exp.Expression:
    """The reported distance between the rows aliased ``left`` and ``right`` (both ``_x..``, read
    times ``2^scale``: the Euclidean distance is divided by it again, exactly; the angular one is of
    normalised rows, which no scale changes).  A Euclidean distance below ``2^-FINE`` is computed
    again on the differences times ``2^FINE_SCALE`` (every difference is below it then: no overflow),
    so that squares of differences down to about ``2^-1037`` still count (two rows ``1e-300`` apart
    are not at distance 0) -- except on engines that raise where a product underflows (PostgreSQL),
    where that distance would have failed already (:func:`sqlrp.search.scale.engine_range`).  Only
    with ``fine``: where the rows may differ that little at all (:func:`sqlrp.search.scale.needs_fine`;
    the second distance costs as much as the first)."""
    if metric == "angular":  # 1 - cos: half the squared distance of the normalised rows
        return exp.Div(this=_p(squared_distance(xs(d, left), xs(d, right))), expression=number(2.0))
    if dialect.vector(xs(1)) is not None:
        coarse = dialect.vector_distance(col("_vec", left), col("_vec", right))
    else:
        coarse = exp.Sqrt(this=squared_distance(xs(d, left), xs(d, right)))
    if not fine or dialect.float32_underflow_errors:  # PostgreSQL raises on the underflow it avoids
        return _unscaled(coarse, scale, dialect)
    diffs = [
        _p(scaled(exp.Sub(this=a, expression=b), FINE_SCALE))
        for a, b in zip(_elements(d, dialect, left), _elements(d, dialect, right), strict=True)
    ]
    fine = scaled(exp.Sqrt(this=balanced([exp.Mul(this=x, expression=x.copy()) for x in diffs], exp.Add)), -FINE_SCALE)
    small = exp.LT(this=coarse.copy(), expression=number(2.0**-FINE))
    return _unscaled(exp.Case(ifs=[exp.If(this=small, true=fine)], default=coarse), scale, dialect)


def layout_distance(layout: IndexLayout, dialect: SqlrpDialect, left: str, right: str) -> exp.Expression:
    """:func:`pair_distance` of the rows aliased ``left`` and ``right`` as ``layout``'s index reads them."""
    return pair_distance(layout.metric, layout.d, dialect, left, right, layout.scale, layout.fine)


def _unscaled(distance: exp.Expression, scale: int, dialect: SqlrpDialect) -> exp.Expression:
    """``distance * 2^-scale``: a distance of rows scaled down (``scale < 0``) may pass the largest
    double once scaled up again -- ``inf``, as NumPy's ``math.dist`` gives, where PostgreSQL would
    raise ``value out of range: overflow`` instead."""
    if scale >= 0 or not dialect.float32_underflow_errors:
        return scaled(distance, -scale)
    beyond = exp.GT(this=distance.copy(), expression=number(math.ldexp(sys.float_info.max, scale)))
    infinite = exp.cast(exp.Literal.string("Infinity"), DOUBLE)
    return exp.Case(ifs=[exp.If(this=beyond, true=infinite)], default=scaled(distance, -scale))


def nearest(
    rows: exp.Expression,
    centroids: exp.Select,
    key: str,
    count: int,
    d: int,
    dialect: SqlrpDialect,
    on: exp.Expression | None = None,
    joins: Sequence[tuple[exp.Expression, exp.Expression]] = (),
) -> exp.Select:
    """``(_id, _key)``: for each row of ``rows`` (aliased ``r``: ``_id`` and the features), its
    ``count`` nearest ``centroids`` (aliased ``c``), every centroid or those ``on`` allows."""
    pairs = _select(
        named("_id", "r"),
        exp.alias_(col(key, "c"), f"_{key}", quoted=True, copy=False),
        exp.alias_(distance_key(d, dialect, "r", "c", CENTRE), "_dist", quoted=True, copy=False),
    ).from_(rows, copy=False)
    for table, condition in joins:
        pairs = pairs.join(table, on=condition, copy=False)
    centroid_rows = centroids.subquery("c", copy=False)
    pairs = (
        pairs.join(centroid_rows, on=on, copy=False) if on is not None else pairs.join(centroid_rows, join_type="CROSS")
    )
    return best_per(pairs, "_id", f"_{key}", "_dist", count, dialect, f"_{key}")
