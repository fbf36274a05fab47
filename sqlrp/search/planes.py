"""The query's bit planes (``_sqlrp_planes``: ``_qid, _lo, _dl, _hsum, _p{p}_{w}``): each query
rotated (:func:`sqlrp.search.rotation.rotate`), quantised to ``QUERY_BITS`` bits a dimension, and
packed into code words, once per query (module docstring of :mod:`sqlrp.search.ivf`;
:func:`sqlrp.search.ivf.query_planes` is the NumPy reference).  Two forms of the same IEEE
operations: list expressions where the dialect has list lambdas (DuckDB: a few kilobytes of SQL),
column by column elsewhere; :func:`planes_select` picks by the dialect's ``list_lambdas``."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from ..compiler import col, number
from ..core.nodes import balanced
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select
from ..dialects import SqlrpDialect
from .ivf import QUERY_BITS
from .rotation import rotate_select, rotation_scale
from .sql import BIGINT, DOUBLE, IndexLayout, cast_to, cte


def planes_select(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_planes`` of the queries in ``_sqlrp_q``, in the dialect's form."""
    return planes_in_lists(layout, dialect) if dialect.list_lambdas else planes_in_columns(layout, dialect)


def planes_in_lists(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_planes`` (``_qid, _lo, _dl, _hsum, _p{p}_{w}``) on engines with list lambdas (DuckDB):
    the query's rotation, quantisation and bit planes as list expressions over ``_vec``, a few
    kilobytes of SQL where the column-by-column form below is 320 KB for D = 256, most of a search's
    time to compile, parse and bind (measured: ``docs/benchmarks.md``, "Search").  The same IEEE operations in the
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

    current = stage(f"list_resize(CAST(_vec AS DOUBLE[]), {size}, 0.0)", _select(exp.Star()).from_(cte("_sqlrp_q")))
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


def planes_in_columns(layout: IndexLayout, dialect: SqlrpDialect) -> exp.Select:
    """``_sqlrp_planes`` column by column: the query rotated (:func:`~sqlrp.search.rotation.rotate_select`),
    quantised to ``QUERY_BITS`` bits a dimension and packed into bit planes (module docstring of
    :mod:`sqlrp.search.ivf`); every engine."""
    d, size, words = layout.d, layout.size, layout.words
    queries_ = _select(exp.Star()).from_(cte("_sqlrp_q"), copy=False)
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
                    true=cast_to(
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
            default=cast_to(exp.Literal.number(0), BIGINT),
        )
        for h in hs
    ]
    quantised = _select(
        col("_id"),
        col("_lo"),
        col("_dl"),
        *[exp.alias_(e, k, quoted=True, copy=False) for e, k in zip(level, ks, strict=True)],
    ).from_(dialect.fence(ranged).subquery("_rng", copy=False))
    one = cast_to(exp.Literal.number(1), BIGINT)

    def plane_bit(k: str, p: int) -> exp.Expression:
        shifted = _p(exp.BitwiseRightShift(this=col(k), expression=exp.Literal.number(p))) if p else col(k)
        return exp.EQ(this=_p(exp.BitwiseAnd(this=shifted, expression=one.copy())), expression=one.copy())

    hsum = exp.Add(
        this=exp.Mul(this=cast_to(_p(balanced([col(k) for k in ks], exp.Add)), DOUBLE), expression=col("_dl")),
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
