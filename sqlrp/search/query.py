"""Similarity search as SQL: inverted lists, RaBitQ code estimates, an exact re-rank (issue 23).

An index (:mod:`sqlrp.search.index`) is three tables: ``<name>__tops`` and ``<name>__lists`` (the two-level
centroids, and each list's rotated centroid) and ``<name>`` (every row's list, code words and the
estimator's constants; :mod:`sqlrp.search.ivf` has the mathematics).  A batch of queries is one ``SELECT``:

1. ``probe``: each query's ``probes`` nearest lists (distances to every list's centroid);
2. ``planes``: the rotated query, quantised to 4 bit planes (once per query);
3. ``estimate``: every row of the probed lists, its estimated squared distance from popcounts of its
   code AND the planes (:func:`sqlrp.search.ivf.estimates`);
4. ``top``: the ``candidates`` best estimates per query (ties by id);
5. re-ranked exactly on the table's own rows *as they are now* (a row deleted since the build is
   never returned): Euclidean ``sqrt(sum_i (q_i - x_i)^2)``, or for ``angular`` indexes
   ``|q/|q| - x/|x||^2 / 2 = 1 - cos(q, x)``; the ``top`` nearest by ``(distance, id)`` come back as
   ``(query_id, id, rank, distance)``.

Recall rises with ``candidates`` (the re-ranked share of the probed rows) up to the probed lists'
ceiling, and with ``probes``.  :func:`reference_search` is the NumPy oracle of every step: integer
data gives the same lists, codes, candidates and ranks, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sqlglot
from sqlglot import exp

from ..compiler import Source, col, dense_source, number, table_ref
from ..core.errors import InvalidParameter
from ..core.lazy import pd
from ..core.nodes import balanced
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select
from ..dialects import SqlrpDialect
from .ivf import QUERY_BITS, WORD_BITS, Lists, assign, estimates, query_planes, reference_codes
from .rotation import rotate, rotate_select, rotation_scale

METRICS = ("euclidean", "angular")
#: output columns of a search, in order
RESULT_COLUMNS = ("query_id", "id", "rank", "distance")
#: the index tables' own column names (sqlrp's tables: fixed names, never the user's)
ID, LIST, PARENT, TOP, WORD, CENTRE, ROTATED = "id", "list", "parent", "top", "w", "c", "t"
G, ONES, NX, TB, HASH = "g", "ones", "nx", "tb", "h"
INT = exp.DataType.build("INT")
BIGINT = exp.DataType.build("BIGINT")
DOUBLE = exp.DataType.build("DOUBLE")


def _cast(expression: exp.Expression, to: exp.DataType) -> exp.Cast:
    """``CAST(expression AS to)`` without copying ``expression`` (``exp.cast`` copies both)."""
    return exp.Cast(this=expression, to=to.copy())


def _named(column: str, table: str) -> exp.Expression:
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

    @property
    def size(self) -> int:
        return int(self.signs.shape[1])

    @property
    def words(self) -> int:
        return -(-self.size // self.word_bits)

    def word(self, w: int, bits: Sequence[exp.Expression], dialect: SqlrpDialect) -> exp.Expression:
        """Word ``w`` of ``bits`` (conditions, one a code bit) packed as the dialect's code word."""
        return _word(bits[w * self.word_bits : (w + 1) * self.word_bits], dialect.code_word_type(self.word_bits))


def check_search(top: int, candidates: int, probes: int | None, metric: str) -> None:
    """Refuse nonsense parameters before any SQL is written."""
    for name, value in (("top", top), ("candidates", candidates), ("probes", probes)):
        if name == "probes" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise InvalidParameter(f"{name} must be a positive integer, got {value!r}")
    if candidates < top:
        raise InvalidParameter(f"candidates ({candidates}) must be at least top ({top}): only candidates are re-ranked")
    if metric not in METRICS:
        raise InvalidParameter(f"metric must be one of {', '.join(METRICS, copy=False)}, got {metric!r}")


# ----------------------------------------------------------------------------------------------
# building blocks


def _from(select: exp.Select | exp.Table, alias: str) -> exp.Expression:
    if isinstance(select, exp.Table):
        return select.copy().as_(alias)
    return select.subquery(alias, copy=False)


def _cte(name: str, alias: str | None = None) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(name, quoted=True, copy=False),
        alias=exp.TableAlias(this=exp.to_identifier(alias)) if alias else None,
    )


def _xs(d: int, table: str | None = None, prefix: str = "_x") -> list[exp.Expression]:
    return [col(f"{prefix}{i}", table) for i in range(d)]


def squared_distance(left: Sequence[exp.Expression], right: Sequence[exp.Expression]) -> exp.Expression:
    """``sum_i (a_i - b_i) * (a_i - b_i)`` as a balanced sum (the NumPy reference sums the same squares)."""
    squares = [
        exp.Mul(this=_p(exp.Sub(this=a, expression=b)), expression=_p(exp.Sub(this=a.copy(), expression=b.copy())))
        for a, b in zip(left, right, strict=True)
    ]
    return balanced(squares, exp.Add)


def feature_rows(
    source: Source, d: int, dialect: SqlrpDialect, metric: str = "euclidean", hashed: bool = False
) -> exp.Select:
    """``SELECT _id, _x0 .. _x{d-1} [, _h]``: the source's rows as the index sees them (the only place
    a user's column names are read: everything above refers to these aliases, which a user's column
    cannot capture); for ``angular``, each row divided by its norm (a zero row stays zero).
    ``hashed`` adds ``_h``, the hash of the row's id and raw features (its array as one value where
    the engine reads it whole: 1,000,000 x 128 on DuckDB, 0.24 s rather than 1.32 s for 128 elements:
    ``bench/search.py``, before and after)."""
    rows = dense_source(d, source, dialect)
    if hashed:
        if source.layout == "array" and not dialect.needs_materialised_array():
            raw = [col(source.id_column), col(source.array_column)]
        elif source.layout == "wide":
            raw = [col(source.id_column), *[col(c) for c in source.columns]]
        else:  # PostgreSQL's array layout: its elements, read once per row
            raw = [col("_id"), *_xs(d)]
            rows = _select(exp.Star()).from_(rows.subquery("_e", copy=False), copy=False)
        rows = rows.select(exp.alias_(dialect.row_hash(raw), "_h", quoted=True, copy=False), append=True, copy=False)
    if metric != "angular":
        return rows
    norm = exp.Sqrt(this=balanced([exp.Mul(this=x, expression=x.copy()) for x in _xs(d)], exp.Add))
    safe = exp.Case(ifs=[exp.If(this=_p(norm).eq(0), true=number(1.0))], default=norm.copy())
    keep = [col("_h")] if hashed else []
    inner = _select(col("_id"), *_xs(d), *keep, exp.alias_(safe, "_n", quoted=True, copy=False)).from_(
        rows.subquery("_raw", copy=False), copy=False
    )
    return _select(
        col("_id"),
        *[
            exp.alias_(exp.Div(this=x, expression=col("_n")), f"_x{i}", quoted=True, copy=False)
            for i, x in enumerate(_xs(d))
        ],
        *[k.copy() for k in keep],
    ).from_(inner.subquery("_norm", copy=False), copy=False)


def _with_vector(select: exp.Select, d: int, dialect: SqlrpDialect, prefix: str = "_x") -> exp.Select:
    """``select`` with ``_vec``, its features as the engine's native vector, where it has one."""
    vector = dialect.vector(_xs(d, prefix=prefix))
    if vector is None:
        return select
    return _select(exp.Star(), exp.alias_(vector, "_vec", quoted=True, copy=False)).from_(
        select.subquery("_v", copy=False)
    )


def _rerank_rows(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``(_id, .., _vec)``: the table's rows as the exact re-rank reads them.  An array column of
    Euclidean rows is cast whole to the engine's vector where it can be (DuckDB), rather than read
    element by element through :func:`feature_rows`: the same values (NULLs are refused by the
    source check, or read as zeros: that, standardising and groups take the element path)."""
    src, d = layout.source, layout.d
    plain = src.layout == "array" and layout.metric == "euclidean" and src.nulls == "error"
    whole = dialect.whole_vector(col(src.array_column), d) if plain and not src.standardize else None
    if whole is None or src.group_column is not None:
        return _with_vector(feature_rows(src, d, dialect, layout.metric), d, dialect)
    select = _select(
        exp.alias_(col(src.id_column), "_id", quoted=True, copy=False),
        exp.alias_(whole, "_vec", quoted=True, copy=False),
    ).from_(table_ref(src), copy=False)
    return select.where(src.row_filter.copy(), copy=False) if src.row_filter is not None else select


def _distance_key(d: int, dialect: SqlrpDialect, left: str, right: str, right_prefix: str) -> exp.Expression:
    """A value that orders pairs by Euclidean distance: the native vector distance where the engine
    has one (both sides carry ``_vec``), else the squared distance over the columns."""
    if dialect.vector(_xs(1)) is not None:
        return dialect.vector_distance(col("_vec", left), col("_vec", right))
    return squared_distance(_xs(d, left), _xs(d, right, right_prefix))


def _centroids(table: exp.Table, key: str, d: int, dialect: SqlrpDialect, extra: Sequence[str] = ()) -> exp.Select:
    select = _select(col(key), *[col(c) for c in extra], *_xs(d, prefix=CENTRE)).from_(table.copy(), copy=False)
    return _with_vector(select, d, dialect, CENTRE)


def _best(
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
        # ties broken by key in the window below; min_by with a (value, key) tuple cost 3.8 s against
        # 0.3 s for the value alone (32.7M estimates, 1,000 queries): the candidates' top keeps a
        # tie at its boundary arbitrarily (ties of estimates need identical codes and norms)
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


def _ranked(pairs: exp.Select, count: int) -> exp.Select:
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


def _result(final: exp.Select) -> exp.Select:
    out = _select(
        exp.alias_(col("_qid"), "query_id", quoted=True, copy=False),
        exp.alias_(col("_id"), "id", quoted=True, copy=False),
        exp.alias_(col("_rank"), "rank", quoted=True, copy=False),
        exp.alias_(col("_d"), "distance", quoted=True, copy=False),
    ).from_(final.subquery("_f", copy=False))
    return out.order_by(col("query_id"), col("rank"), copy=False)


def _bit(b: int, word: exp.DataType = BIGINT, width: int = WORD_BITS) -> exp.Expression:
    """``2^b`` as a signed ``width``-bit integer; ``b = width - 1`` is the sign bit, ``-2^(width-1)``.
    Beyond 64 bits the value is cast from a string (a literal that large is no engine's integer)."""
    value = 1 << b if b < width - 1 else -(1 << (width - 1))
    if width <= 64:
        if b < width - 1:
            return _cast(exp.Literal.number(value), word)
        return _cast(exp.Sub(this=exp.Literal.number(value + 1), expression=exp.Literal.number(1)), word)
    return _cast(exp.Literal.string(str(value)), word)


def _word(conditions: Sequence[exp.Expression], word: tuple[exp.DataType, int] = (BIGINT, WORD_BITS)) -> exp.Expression:
    """Up to ``width`` conditions packed as one signed integer of type ``word = (type, width)``, bit
    ``b`` set where condition ``b`` holds (a balanced sum of ``CASE``: each partial sum joins
    consecutive bits, so none overflows)."""
    kind, width = word
    zero = _cast(exp.Literal.number(0), kind)
    bits = [
        exp.Case(ifs=[exp.If(this=c, true=_bit(b, kind, width))], default=zero.copy()) for b, c in enumerate(conditions)
    ]
    return balanced(bits, exp.Add)


def _pair_distance(metric: str, d: int, dialect: SqlrpDialect, left: str, right: str) -> exp.Expression:
    """The reported distance between the rows aliased ``left`` and ``right`` (both ``_x..``)."""
    if metric == "angular":  # 1 - cos: half the squared distance of the normalised rows
        return exp.Div(this=_p(squared_distance(_xs(d, left), _xs(d, right))), expression=number(2.0))
    if dialect.vector(_xs(1)) is not None:
        return dialect.vector_distance(col("_vec", left), col("_vec", right))
    return exp.Sqrt(this=squared_distance(_xs(d, left), _xs(d, right)))


# ----------------------------------------------------------------------------------------------
# the index's rows


def _nearest(
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
        _named("_id", "r"),
        exp.alias_(col(key, "c"), f"_{key}", quoted=True, copy=False),
        exp.alias_(_distance_key(d, dialect, "r", "c", CENTRE), "_dist", quoted=True, copy=False),
    ).from_(rows, copy=False)
    for table, condition in joins:
        pairs = pairs.join(table, on=condition, copy=False)
    centroid_rows = centroids.subquery("c", copy=False)
    pairs = (
        pairs.join(centroid_rows, on=on, copy=False) if on is not None else pairs.join(centroid_rows, join_type="CROSS")
    )
    return _best(pairs, "_id", f"_{key}", "_dist", count, dialect, f"_{key}")


def _probe_adaptive(
    rows: exp.Expression, centroids: exp.Select, floor: int, cap: int, ratio: float, d: int, dialect: SqlrpDialect
) -> exp.Select:
    """``(_id, _list)``: each query's probed lists under the adaptive rule -- its ``floor`` nearest
    lists, and further lists up to ``cap`` while ``|q - c|^2 <= ratio * |q - c_1|^2`` (``c_1`` the
    nearest centroid).  A query far from every centroid (unlike the table's rows) sees many lists at
    about the same distance and probes more of them; a query inside a list's cluster, few
    (:mod:`sqlrp.search.calibrate` measures ``floor`` and ``ratio`` on the table's own rows)."""
    pairs = _select(
        _named("_id", "r"),
        exp.alias_(col(LIST, "c"), "_list", quoted=True, copy=False),
        exp.alias_(_distance_key(d, dialect, "r", "c", CENTRE), "_dist", quoted=True, copy=False),
    ).from_(rows, copy=False)
    pairs = pairs.join(centroids.subquery("c", copy=False), join_type="CROSS", copy=False)
    order = exp.Order(expressions=[exp.Ordered(this=col("_dist"), nulls_first=False), exp.Ordered(this=col("_list"))])
    ranked = _select(
        col("_id"),
        col("_list"),
        col("_dist"),
        exp.alias_(
            exp.Window(this=exp.RowNumber(), partition_by=[col("_id")], order=order), "_rk", quoted=True, copy=False
        ),
        exp.alias_(
            exp.Window(this=exp.Min(this=col("_dist")), partition_by=[col("_id")]), "_d0", quoted=True, copy=False
        ),
    ).from_(pairs.subquery("_pairs", copy=False), copy=False)
    # the distance key is the distance itself where the engine has a vector distance, else its square
    factor = float(np.sqrt(ratio)) if dialect.vector(_xs(1)) is not None else float(ratio)
    keep = exp.or_(
        col("_rk") <= floor,
        exp.and_(col("_rk") <= cap, col("_dist") <= exp.Mul(this=number(factor), expression=col("_d0"))),
    )
    return _select(col("_id"), col("_list")).from_(ranked.subquery("_probes", copy=False), copy=False).where(
        keep, copy=False
    )


def probe_counts(distances: np.ndarray, floor: int, cap: int | None = None, ratio: float | None = None) -> np.ndarray:
    """NumPy reference of the lists each query probes: ``floor``, or under the adaptive rule
    (:func:`_probe_adaptive`) between ``floor`` and ``cap`` by the ``ratio`` of squared centroid
    distances (``distances``: queries x lists, squared)."""
    n, lists = distances.shape
    if ratio is None:
        return np.full(n, min(floor, lists), dtype=np.int64)
    d0 = distances.min(axis=1, keepdims=True)
    within = (distances <= ratio * d0).sum(axis=1)
    return np.clip(within, min(floor, lists), min(cap if cap is not None else lists, lists)).astype(np.int64)


def assignment_select(layout: IndexLayout, rows: exp.Select, dialect: SqlrpDialect) -> exp.Select:
    """``(_id, _list)``: each row of ``rows`` (``_id, _x..``) in the nearest list among the children
    of its nearest top centroid."""
    d = layout.d
    xv = _with_vector(rows, d, dialect)
    nearest_top = _nearest(xv.subquery("r", copy=False), _centroids(layout.tops, TOP, d, dialect), TOP, 1, d, dialect)
    return _nearest(
        xv.copy().subquery("r", copy=False),
        _centroids(layout.lists, LIST, d, dialect, extra=[PARENT]),
        LIST,
        1,
        d,
        dialect,
        on=col(PARENT, "c").eq(col("_top", "a")),
        joins=[(nearest_top.subquery("a", copy=False), col("_id", "a").eq(col("_id", "r")))],
    )


def rows_select(layout: IndexLayout, source: Source, dialect: SqlrpDialect) -> exp.Select:
    """``SELECT id, list, w0 .., g, ones, nx, tb, h``: the index rows of ``source`` (module docstring of
    :mod:`sqlrp.search.ivf`); ``h`` is the row's hash (id and features), whose sum is the table's fingerprint."""
    d, size = layout.d, layout.size
    x = feature_rows(source, d, dialect, layout.metric, hashed=True)
    placed = (
        _select(
            _named("_id", "x"),
            _named("_list", "a"),
            *[_named(f"_x{i}", "x") for i in range(d)],
            exp.alias_(squared_distance(_xs(d, "x"), _xs(d, "l", CENTRE)), "_nx", quoted=True, copy=False),
            _named("_h", "x"),
        )
        .from_(x.subquery("x", copy=False))
        .join(
            assignment_select(layout, x.copy(), dialect).subquery("a", copy=False),
            on=col("_id", "a").eq(col("_id", "x")),
            copy=False,
        )
        .join(layout.lists.copy().as_("l"), on=col(LIST, "l").eq(col("_list", "a")), copy=False)
    )
    keep = ["_id", "_list", "_nx", "_h"]
    rotated = rotate_select(
        dialect.fence(placed), [f"_x{i}" for i in range(d)], layout.signs, "_y", keep, dialect.fence
    )
    diff = [_p(exp.Sub(this=col(f"_y{j}", "r"), expression=col(f"{ROTATED}{j}", "l"))) for j in range(size)]
    above = [col(f"_y{j}", "r") > col(f"{ROTATED}{j}", "l") for j in range(size)]
    l1 = balanced([exp.Abs(this=e) for e in diff], exp.Add)
    g = exp.Case(
        ifs=[exp.If(this=_p(l1) > 0, true=exp.Div(this=col("_nx", "r"), expression=_p(l1.copy())))],
        default=number(0.0),
    )
    ones = balanced(
        [
            exp.Case(ifs=[exp.If(this=a.copy(), true=exp.Literal.number(1))], default=exp.Literal.number(0))
            for a in above
        ],
        exp.Add,
    )
    tb = balanced(
        [
            exp.Case(ifs=[exp.If(this=a.copy(), true=col(f"{ROTATED}{j}", "l"))], default=number(0.0))
            for j, a in enumerate(above)
        ],
        exp.Add,
    )
    return (
        _select(
            exp.alias_(col("_id", "r"), ID, quoted=True, copy=False),
            exp.alias_(col("_list", "r"), LIST, quoted=True, copy=False),
            *[
                exp.alias_(layout.word(w, above, dialect), f"{WORD}{w}", quoted=True, copy=False)
                for w in range(layout.words)
            ],
            exp.alias_(g, G, quoted=True, copy=False),
            exp.alias_(_cast(ones, INT), ONES, quoted=True, copy=False),
            exp.alias_(col("_nx", "r"), NX, quoted=True, copy=False),
            exp.alias_(tb, TB, quoted=True, copy=False),
            exp.alias_(col("_h", "r"), HASH, quoted=True, copy=False),
        )
        .from_(rotated.subquery("r", copy=False))
        .join(layout.lists.copy().as_("l"), on=col(LIST, "l").eq(col("_list", "r")), copy=False)
    )


def fingerprint(row_hash: exp.Expression, dialect: SqlrpDialect) -> list[exp.Expression]:
    """``count(*), sum(hash(h))`` over rows whose hash is ``row_hash``: the table's fingerprint.

    Each row's hash is hashed again before the sum.  A row hash may be linear in its fields' hashes
    (PostgreSQL's ``hash_record_extended`` is ``h = 31 h + hash(field)`` over the fields), so that
    the plain sum over the rows is a sum per column: rows that trade values (two rows' ids swapped)
    leave it unchanged.  The second hash is non-linear: the fingerprint is then a sum over the rows
    as wholes, and a changed row changes it as it would change any 64-bit hash."""
    return [exp.Count(this=exp.Star()), exp.Sum(this=dialect.row_hash([row_hash]))]


def fingerprint_select(layout: IndexLayout, source: Source, dialect: SqlrpDialect) -> exp.Select:
    """:func:`fingerprint` of ``source`` now: equal to the index rows' own while the table holds the
    rows the index was built or refreshed from (any insert, delete, update, rows trading values, a
    duplicate or a re-created table changes it, but for a 2^-64 chance)."""
    x = feature_rows(source, layout.d, dialect, layout.metric, hashed=True)
    return _select(*fingerprint(col("_h"), dialect)).from_(x.subquery("x", copy=False), copy=False)


# ----------------------------------------------------------------------------------------------
# the search


def _planes_in_lists(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_planes`` (``_qid, _lo, _dl, _hsum, _p{p}_{w}``) on engines with list lambdas (DuckDB):
    the query's rotation, quantisation and bit planes as list expressions over ``_vec``, a few
    kilobytes of SQL where the column-by-column form below is 320 KB for D = 256 (about 0.8 s of
    compiling, parsing and binding a 1,000-query search on 1M rows).  The same IEEE operations in the
    same order as :func:`sqlrp.search.rotation.rotate` and the column form: each sign is a multiplication by
    +-1.0 (an exact negation), each butterfly ``a + b`` / ``a - b``, then the one scale; the integers
    ``k_j`` sum exactly in any order; a word is the OR of its set bits."""
    rounds, size = layout.signs.shape
    word_type, width = dialect.code_word_type(layout.word_bits)
    top = -(1 << (width - 1))  # the sign bit
    bits = "[" + ",".join(str(1 << b if b < width - 1 else top) for b in range(width)) + "]"

    def stage(expression: str, inner: exp.Select, *extra: str) -> exp.Select:
        text = f"SELECT _id, {', '.join(extra) + ', ' if extra else ''}{expression} AS _v FROM _s"
        select = sqlglot.parse_one(text, read="duckdb")
        assert isinstance(select, exp.Select)
        select.set("from_", exp.From(this=inner.subquery("_s", copy=False)))
        return dialect.fence(select)

    current = stage(f"list_resize(CAST(_vec AS DOUBLE[]), {size}, 0.0)", _select(exp.Star()).from_(_cte("_sqlrp_q")))
    for r in range(rounds):
        signs = "[" + ",".join("1.0" if v > 0 else "-1.0" for v in layout.signs[r]) + "]"
        current = stage(
            f"list_transform(range(1, {size + 1}), lambda i: _v[i] * CAST('{signs}' AS DOUBLE[])[i])", current
        )
        h = 1
        while h < size:
            butterfly = f"CASE WHEN (j & {h}) = 0 THEN _v[j + 1] + _v[j + {h + 1}] ELSE _v[j - {h - 1}] - _v[j + 1] END"
            current = stage(f"list_transform(range(0, {size}), lambda j: {butterfly})", current)
            h *= 2
    scale = repr(rotation_scale(size, rounds))
    current = stage(f"list_transform(_v, lambda x: x * CAST({scale} AS DOUBLE))", current)
    ranged = stage(
        "_v",
        current,
        "list_min(_v) AS _lo",
        f"(list_max(_v) - list_min(_v)) / CAST({2**QUERY_BITS - 1}.0 AS DOUBLE) AS _dl",
    )
    level = "CASE WHEN _dl > 0 THEN CAST(FLOOR((x - _lo) / _dl + 0.5) AS BIGINT) ELSE CAST(0 AS BIGINT) END"
    quantised = stage(f"list_transform(_v, lambda x: {level})", ranged, "_lo", "_dl")
    word = word_type.sql("duckdb")
    planes = [
        f"list_reduce(list_transform(range(0, {width}), lambda j: CASE WHEN ((_v[j + {w * width + 1}] >> {p}) & 1) = 1"
        f" THEN CAST('{bits}' AS {word}[])[j + 1] ELSE CAST(0 AS {word}) END), lambda a, b: a | b) AS _p{p}_{w}"
        for p in range(QUERY_BITS)
        for w in range(layout.words)
    ]
    hsum = f"CAST(list_sum(_v) AS DOUBLE) * _dl + CAST({float(size)} AS DOUBLE) * _lo AS _hsum"
    text = (
        f"SELECT _id AS _qid, _lo, _dl, {hsum}, "
        + ", ".join(planes)
        + " FROM _s"
    )
    select = sqlglot.parse_one(text, read="duckdb")
    assert isinstance(select, exp.Select)
    return select.from_(quantised.subquery("_s", copy=False), copy=False)


def _planes_in_columns(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_planes`` column by column: the query rotated (:func:`~sqlrp.search.rotation.rotate_select`),
    quantised to ``QUERY_BITS`` bits a dimension and packed into bit planes (module docstring of
    :mod:`sqlrp.search.ivf`); every engine."""
    d, size, words = layout.d, layout.size, layout.words
    queries_ = _select(exp.Star()).from_(_cte("_sqlrp_q"), copy=False)
    rotated = rotate_select(queries_, [f"_x{i}" for i in range(d)], layout.signs, "_q", ["_id"], dialect.fence)
    hs = [f"_q{j}" for j in range(size)]  # the rotated query, quantised once per query
    lo = exp.Least(this=col(hs[0]), expressions=[col(h) for h in hs[1:]])
    hi = exp.Greatest(this=col(hs[0]), expressions=[col(h) for h in hs[1:]])
    ranged = _select(
        exp.Star(),
        exp.alias_(lo, "_lo", quoted=True, copy=False),
        exp.alias_(
            exp.Div(this=_p(exp.Sub(this=hi, expression=lo.copy())), expression=number(2**QUERY_BITS - 1)),
            "_dl",
            quoted=True,
            copy=False,
        ),
    ).from_(dialect.fence(rotated).subquery("_rot", copy=False))
    ks = [f"_k{j}" for j in range(size)]
    level = [
        exp.Case(
            ifs=[
                exp.If(
                    this=col("_dl") > 0,
                    true=_cast(
                        exp.Floor(
                            this=exp.Add(
                                this=exp.Div(
                                    this=_p(exp.Sub(this=col(h), expression=col("_lo"))), expression=col("_dl")
                                ),
                                expression=number(0.5),
                            )
                        ),
                        BIGINT,
                    ),
                )
            ],
            default=_cast(exp.Literal.number(0), BIGINT),
        )
        for h in hs
    ]
    quantised = _select(
        col("_id"),
        col("_lo"),
        col("_dl"),
        *[exp.alias_(e, k, quoted=True, copy=False) for e, k in zip(level, ks, strict=True)],
    ).from_(dialect.fence(ranged).subquery("_rng", copy=False))
    one = _cast(exp.Literal.number(1), BIGINT)

    def plane_bit(k: str, p: int) -> exp.Expression:
        shifted = _p(exp.BitwiseRightShift(this=col(k), expression=exp.Literal.number(p))) if p else col(k)
        return exp.EQ(this=_p(exp.BitwiseAnd(this=shifted, expression=one.copy())), expression=one.copy())

    hsum = exp.Add(
        this=exp.Mul(this=_cast(_p(balanced([col(k) for k in ks], exp.Add)), DOUBLE), expression=col("_dl")),
        expression=exp.Mul(this=number(float(size)), expression=col("_lo")),
    )
    planes = _select(
        exp.alias_(col("_id"), "_qid", quoted=True, copy=False),
        col("_lo"),
        col("_dl"),
        exp.alias_(hsum, "_hsum", quoted=True, copy=False),
        *[
            exp.alias_(
                layout.word(w, [plane_bit(k, p) for k in ks], dialect),
                f"_p{p}_{w}",
                quoted=True,
                copy=False,
            )
            for p in range(QUERY_BITS)
            for w in range(words)
        ],
    ).from_(dialect.fence(quantised).subquery("_qk", copy=False))
    return planes


def search_select(
    layout: IndexLayout,
    queries: Source,
    dialect: SqlrpDialect,
    top: int = 10,
    candidates: int = 100,
    probes: int = 8,
    ratio: float | None = None,
    cap: int | None = None,
    ranked: bool = False,
    staged: bool = False,
) -> exp.Select:
    """The whole search, one ``SELECT`` of ``(query_id, id, rank, distance)`` ordered by query and
    rank.  ``queries`` must hold the same features as the index's table (its own id column).
    ``ratio`` (with ``cap``) probes adaptively (:func:`_probe_adaptive`; ``probes`` is the floor);
    ``ranked`` returns every candidate instead, ``(_qid, _id, _erank, _d)``: its rank by the
    estimate and its exact distance (what the calibration measures recall from).  ``staged``
    leaves out the two common table expressions ``_sqlrp_q`` and ``_sqlrp_planes``: the caller
    writes them as tables first (:mod:`sqlrp.search.staged`)."""
    check_search(top, candidates, probes, layout.metric)
    d, size, words = layout.d, layout.size, layout.words
    q = feature_rows(queries, d, dialect, layout.metric)
    qv = _with_vector(q, d, dialect)
    leaves = _centroids(layout.lists, LIST, d, dialect)
    if ratio is None:
        probe = _nearest(_cte("_sqlrp_q", "r"), leaves, LIST, probes, d, dialect)
    else:
        probe = _probe_adaptive(_cte("_sqlrp_q", "r"), leaves, probes, max(cap or probes, probes), ratio, d, dialect)
    planes = (
        None
        if staged
        else _planes_in_lists(layout, dialect)
        if dialect.list_lambdas
        else _planes_in_columns(layout, dialect)
    )
    plane_columns = [f"_p{p}_{w}" for p in range(QUERY_BITS) for w in range(words)]
    # each probed list: the query's squared distance to its centroid, and the sum of its rotation
    probed = (
        _select(
            exp.alias_(col("_id", "p"), "_qid", quoted=True, copy=False),
            _named("_list", "p"),
            exp.alias_(squared_distance(_xs(d, "q"), _xs(d, "l", CENTRE)), "_nq", quoted=True, copy=False),
            exp.alias_(
                balanced([col(f"{ROTATED}{j}", "l") for j in range(size)], exp.Add), "_tsum", quoted=True, copy=False
            ),
        )
        .from_(probe.subquery("p", copy=False))
        .join(_cte("_sqlrp_q", "q"), on=col("_id", "q").eq(col("_id", "p")), copy=False)
        .join(layout.lists.copy().as_("l"), on=col(LIST, "l").eq(col("_list", "p")), copy=False)
    )
    per_probe = (
        _select(
            _named("_qid", "b"),
            _named("_list", "b"),
            _named("_nq", "b"),
            exp.alias_(exp.Sub(this=col("_hsum", "k"), expression=col("_tsum", "b")), "_us", quoted=True, copy=False),
            _named("_lo", "k"),
            _named("_dl", "k"),
            *[_named(c, "k") for c in plane_columns],
        )
        .from_(dialect.fence(probed).subquery("b", copy=False))
        .join(_cte("_sqlrp_planes", "k"), on=col("_qid", "k").eq(col("_qid", "b")), copy=False)
    )
    S = balanced(
        [
            exp.Mul(
                this=exp.Literal.number(1 << p),
                expression=dialect.popcount_sum(
                    [
                        _p(exp.BitwiseAnd(this=col(f"{WORD}{w}", "i"), expression=col(f"_p{p}_{w}", "pr")))
                        for w in range(words)
                    ]
                ),
            )
            for p in range(QUERY_BITS)
        ],
        exp.Add,
    )
    under = exp.Sub(  # delta * S + lo * ones - tb: the quantised sum of h - t where the code's bits are set
        this=exp.Add(
            this=exp.Mul(this=col("_dl", "pr"), expression=_p(S)),
            expression=exp.Mul(this=col("_lo", "pr"), expression=col(ONES, "i")),
        ),
        expression=col(TB, "i"),
    )
    inner = exp.Mul(
        this=col(G, "i"),
        expression=_p(
            exp.Sub(
                this=exp.Mul(this=exp.Literal.number(2), expression=_p(under)),
                expression=col("_us", "pr"),
            )
        ),
    )
    estimate = exp.Sub(
        this=_p(exp.Add(this=col(NX, "i"), expression=col("_nq", "pr"))),
        expression=exp.Mul(this=exp.Literal.number(2), expression=_p(inner)),
    )
    # the index's rows joined to the probes: the engine picks the sides.  (Pinning DuckDB's hash table
    # to the rows, so that a pair copies a row's 7 columns rather than a probe's 13, made that join
    # one thread: 3.0-3.7 s against 1.9-2.2 s for 200 queries at P = 126, C = 200 on 1M rows.)
    estimated = (
        _select(
            col("_qid", "pr"),
            exp.alias_(col(ID, "i"), "_id", quoted=True, copy=False),
            exp.alias_(estimate, "_e", quoted=True, copy=False),
        )
        .from_(dialect.fence(per_probe).subquery("pr", copy=False))
        .join(layout.rows.copy().as_("i"), on=col(LIST, "i").eq(col("_list", "pr")), copy=False)
    )
    if ranked and dialect.min_by_n:  # the C best ids in estimate order, numbered in lockstep
        listed = _select(
            col("_qid"),
            exp.alias_(
                exp.Anonymous(this="min_by", expressions=[col("_id"), col("_e"), exp.Literal.number(candidates)]),
                "_ids",
                quoted=True,
                copy=False,
            ),
        ).from_(estimated.subquery("_est", copy=False), copy=False).group_by(col("_qid"), copy=False)
        count = exp.Add(this=exp.Anonymous(this="len", expressions=[col("_ids")]), expression=exp.Literal.number(1))
        best = _select(
            col("_qid"),
            exp.alias_(exp.Unnest(expressions=[col("_ids")]), "_id", quoted=True, copy=False),
            exp.alias_(
                exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[exp.Literal.number(1), count])]),
                "_erank",
                quoted=True,
                copy=False,
            ),
        ).from_(listed.subquery("_listed", copy=False), copy=False)
    elif ranked:
        window = exp.Window(
            this=exp.RowNumber(),
            partition_by=[col("_qid")],
            order=exp.Order(expressions=[exp.Ordered(this=col("_e")), exp.Ordered(this=col("_id"))]),
        )
        numbered = _select(
            col("_qid"), col("_id"), exp.alias_(window, "_erank", quoted=True, copy=False)
        ).from_(estimated.subquery("_est", copy=False), copy=False)
        best = _select(exp.Star()).from_(numbered.subquery("_num", copy=False), copy=False)
        best = best.where(col("_erank") <= candidates, copy=False)
    else:
        best = _best(estimated, "_qid", "_id", "_e", candidates, dialect, "_id", tie_break=False)
    x = _rerank_rows(layout, dialect)
    rr = (
        _select(
            _named("_qid", "t"),
            _named("_id", "t"),
            *([_named("_erank", "t")] if ranked else []),
            exp.alias_(_pair_distance(layout.metric, d, dialect, "q", "x"), "_d", quoted=True, copy=False),
        )
        .from_(x.subquery("x", copy=False))
        .join(best.subquery("t", copy=False), on=col("_id", "x").eq(col("_id", "t")), copy=False)
        .join(_cte("_sqlrp_q", "q"), on=col("_id", "q").eq(col("_qid", "t")), copy=False)
    )
    out = rr if ranked else _result(_ranked(rr, top))
    if staged:
        return out
    return out.with_("_sqlrp_q", as_=qv, copy=False).with_("_sqlrp_planes", as_=planes, copy=False)


def query_vectors(layout: IndexLayout, queries: Source, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_q``: the queries' ``_id, _x..`` (and ``_vec``) as the search reads them."""
    return _with_vector(feature_rows(queries, layout.d, dialect, layout.metric), layout.d, dialect)


def exact_select(layout: IndexLayout, queries: Source, dialect: SqlrpDialect, top: int = 10) -> exp.Select:
    """Exact k-NN by brute force, the baseline a search is measured against: every query against
    every row of the table, the same distance and ``(distance, id)`` ranking, in the engine's
    strongest single statement (DuckDB: ``array_distance`` over ``DOUBLE[d]`` and ``min_by(id,
    (distance, id), top)``, the form DESIGN.md 4c measured fastest; elsewhere a window)."""
    check_search(top, top, None, layout.metric)
    d = layout.d
    q = _with_vector(feature_rows(queries, d, dialect, layout.metric), d, dialect)
    x = _with_vector(feature_rows(layout.source, d, dialect, layout.metric), d, dialect)
    pairs = (
        _select(
            exp.alias_(col("_id", "q"), "_qid", quoted=True, copy=False),
            exp.alias_(col("_id", "x"), "_id", quoted=True, copy=False),
            exp.alias_(_pair_distance(layout.metric, d, dialect, "q", "x"), "_d", quoted=True, copy=False),
        )
        .from_(q.subquery("q", copy=False))
        .join(x.subquery("x", copy=False), join_type="CROSS")
    )
    if dialect.min_by_n:  # the K smallest (distance, id) per query in one aggregate, unnested in lockstep
        order = exp.Tuple(expressions=[col("_d"), col("_id")])
        best = (
            _select(
                col("_qid"),
                *[
                    exp.alias_(
                        exp.Anonymous(this="min_by", expressions=[col(c), order.copy(), exp.Literal.number(top)]),
                        f"{c}s",
                        quoted=True,
                        copy=False,
                    )
                    for c in ("_id", "_d")
                ],
            )
            .from_(pairs.subquery("_pairs", copy=False))
            .group_by(col("_qid"), copy=False)
        )
        pairs = _select(
            col("_qid"),
            *[exp.alias_(exp.Unnest(expressions=[col(f"{c}s")]), c, quoted=True, copy=False) for c in ("_id", "_d")],
        ).from_(best.subquery("_best", copy=False))
    return _result(_ranked(pairs, top))


# ----------------------------------------------------------------------------------------------
# the NumPy oracle


def normalise(X: np.ndarray) -> np.ndarray:
    """NumPy reference of :func:`feature_rows` for ``angular``: rows over their norms, zero rows kept."""
    X = np.asarray(X, dtype=np.float64)
    norm = np.sqrt((X * X).sum(axis=1))
    return X / np.where(norm == 0, 1.0, norm)[:, None]


def reference_search(
    X: np.ndarray,
    ids: Sequence,
    Q: np.ndarray,
    query_ids: Sequence,
    lists: Lists,
    signs: np.ndarray,
    top: int = 10,
    candidates: int = 100,
    probes: int = 8,
    metric: str = "euclidean",
    ratio: float | None = None,
    cap: int | None = None,
) -> pd.DataFrame:
    """Every step of :func:`search_select` in NumPy, on the same centroids and rotation: the same
    lists (adaptive with ``ratio`` and ``cap``: :func:`probe_counts`), codes, estimates, candidates
    (ties by id) and exact ranks."""
    check_search(top, candidates, probes, metric)
    ids = np.asarray(ids)
    X, Q = np.asarray(X, dtype=np.float64), np.asarray(Q, dtype=np.float64)
    if metric == "angular":
        X, Q = normalise(X), normalise(Q)
    rotated = rotate(lists.leaves, signs)
    codes = reference_codes(X, lists, signs, rotated)
    RQ = rotate(Q, signs)
    out = []
    for qi, qid in enumerate(query_ids):
        dist = ((Q[qi][None, :] - lists.leaves) ** 2).sum(axis=1)
        count = int(probe_counts(dist[None, :], probes, max(cap or probes, probes), ratio)[0])
        probed = np.lexsort((np.arange(len(dist)), dist))[:count]
        found, est = [], []
        planes, lo, delta, hsum = query_planes(RQ[qi])
        for lst in probed:
            rows = np.flatnonzero(codes.lists == lst)
            nq = ((Q[qi] - lists.leaves[lst]) ** 2).sum()
            found.append(rows)
            est.append(estimates(codes, rows, planes, lo, delta, hsum - rotated[lst].sum(), nq))
        rows, est = np.concatenate(found), np.concatenate(est)
        best = rows[np.lexsort((ids[rows], est))][:candidates]
        if metric == "angular":
            d = ((X[best] - Q[qi]) ** 2).sum(axis=1) / 2.0
        else:
            d = np.sqrt(((X[best] - Q[qi]) ** 2).sum(axis=1))
        for rank, at in enumerate(np.lexsort((ids[best], d))[:top], start=1):
            out.append((qid, ids[best[at]], rank, d[at]))
    return pd.DataFrame(out, columns=list(RESULT_COLUMNS))


def reference_assign(X: np.ndarray, lists: Lists, metric: str = "euclidean") -> np.ndarray:
    """The lists the SQL puts the rows of ``X`` in."""
    return assign(normalise(X) if metric == "angular" else X, lists)


def result_recall(found: pd.DataFrame, truth: pd.DataFrame) -> float:
    """Recall@K: the mean over the queries of truth of ``|found ids & true ids| / |true ids|``
    (both frames ``(query_id, id, ...)``; a query with no result counts 0)."""
    got = found.groupby("query_id")["id"].apply(set).to_dict()
    scores = [len(got.get(qid, set()) & set(true)) / len(true) for qid, true in truth.groupby("query_id")["id"]]
    return float(np.mean(scores)) if scores else float("nan")


__all__ = [
    "METRICS",
    "RESULT_COLUMNS",
    "IndexLayout",
    "assignment_select",
    "exact_select",
    "feature_rows",
    "fingerprint",
    "fingerprint_select",
    "probe_counts",
    "query_vectors",
    "result_recall",
    "reference_assign",
    "reference_search",
    "rows_select",
    "search_select",
]
