"""Strategy ``list_transform`` (DuckDB): every linear sum of a row in one lambda over constant index lists.

Each row's features become one list ``_xs`` (``x``, then ``-x`` for sign matrices, then ``x^2`` and
``-x^2`` when some vector sums squares, then one ``0.0``); vector ``v``'s sum
``K[v] = sum_f w_{fv} x_f`` (000 Eq. 2, the linear stage of every method) is then

    sign matrices:  K[v] = list_sum(list_select(_xs, I_v))        -- additions only
    other weights:  K[v] = list_dot_product(list_select(_xs, I_v), W_v)

where ``I_v`` holds 1-based positions in ``_xs`` (``f + 1`` for ``+x_f``, ``d + f + 1`` for
``-x_f``, the trailing zero for a vector without non-zeros).  All ``p`` index lists travel as **one
string constant** cast to ``INTEGER[][]`` (``STRUCT(i INTEGER[], w DOUBLE[])[]`` with weights):
DuckDB parses one string token and casts it once, so the statement binds in a time nearly
independent of the matrix (PK-RP degree 2, d = 784, k = 160, 89,385 non-zeros: 0.14 s for
``EXPLAIN``, against 1.45 s for the same lists written as list literals), and the row work is one
``list_select`` per vector.  It wins on small tables, where binding the ``inline`` query (one sum
term per non-zero) dominates; the rule is :func:`~.strategies.list_transform_seconds`.

NULLs: as with ``lookup`` on an unnested wide table, a NULL feature counts as 0 (``list_sum`` skips
it; weighted stages map NULL to 0 before ``list_dot_product``, which refuses NULLs) -- reachable
only with the NULL check off, since ``check=True`` refuses NULLs before anything runs and
``nulls="zero"`` reads them as 0 on every path.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..ir import LinearStage, Projection
from .layout import Source

DOUBLE_LIST = exp.DataType.build("DOUBLE[]", dialect="duckdb")


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _lambda(body: exp.Expression, *names: str) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(n) for n in names])


def _ref(name: str) -> exp.Column:
    """A lambda parameter or internal column (never user text)."""
    return exp.column(name)


def positions(linear: LinearStage) -> list[list[int]]:
    """1-based positions in ``_xs`` of each vector's terms (see the module docstring)."""
    d, signs = linear.d, linear.is_signs
    segments = 2 if signs else 1  # x (and -x) per power
    zero = d * segments * (2 if linear.power is not None else 1) + 1
    out = []
    for v, (feat, weight) in enumerate(linear.columns()):
        base = d * segments if linear.vector_power(v) == 2 else 0
        pos = base + np.asarray(feat, dtype=np.int64) + 1
        if signs:
            pos = pos + np.where(np.asarray(weight) < 0, d, 0)
        out.append(pos.tolist() or [zero])
    return out


def constant(linear: LinearStage) -> exp.Expression:
    """The index lists (and weights) as one string literal cast to a DuckDB list type."""
    lists = positions(linear)
    if linear.is_signs:
        text = "[" + ",".join("[" + ",".join(map(str, pos)) + "]" for pos in lists) + "]"
        return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("INTEGER[][]", dialect="duckdb"))
    parts = []
    for (_, weight), pos in zip(linear.columns(), lists, strict=True):
        w = [repr(float(x)) for x in weight] or ["0.0"]
        parts.append("{'i': [" + ",".join(map(str, pos)) + "], 'w': [" + ",".join(w) + "]}")
    return exp.Cast(
        this=exp.Literal.string("[" + ",".join(parts) + "]"),
        to=exp.DataType.build("STRUCT(i INTEGER[], w DOUBLE[])[]", dialect="duckdb"),
    )


def row_list(linear: LinearStage) -> exp.Expression:
    """``_xs`` built from the row's list ``_xl`` (see the module docstring)."""
    xl = _ref("_xl")
    if not linear.is_signs:  # list_dot_product refuses NULLs: read them as 0, as list_sum does
        xl = _call("list_transform", xl, _lambda(exp.Coalesce(this=_ref("v"), expressions=[exp.Literal.number(0)]), "v"))
    square = exp.Mul(this=_ref("v"), expression=_ref("v"))
    pieces = [xl]
    if linear.is_signs:
        pieces.append(_call("list_transform", xl.copy(), _lambda(exp.Neg(this=_ref("v")), "v")))
    if linear.power is not None:
        pieces.append(_call("list_transform", xl.copy(), _lambda(square, "v")))
        if linear.is_signs:
            pieces.append(_call("list_transform", xl.copy(), _lambda(exp.Neg(this=exp.paren(square.copy())), "v")))
    pieces.append(exp.cast(exp.Array(expressions=[exp.Literal.number("0.0")]), DOUBLE_LIST))
    return _call("list_concat", *pieces)


def list_linear(
    projection: Projection, source: Source, src: exp.Select
) -> tuple[exp.Select, list[exp.Expression]]:
    """The relation ``SELECT _id, [_g,] list_transform(<constant>, ...) AS _kl`` over ``src`` (the
    dense source, ``_x0 .. _x{d-1}``) and the sums ``_kl[v + 1]`` (plus each vector's bias)."""
    lin = projection.linear
    keys = [_ref("_id")] + ([_ref("_g")] if source.group_column else [])
    features = exp.cast(exp.Array(expressions=[_ref(f"_x{i}") for i in range(lin.d)]), DOUBLE_LIST)
    rows = exp.select(*[k.copy() for k in keys], exp.alias_(features, "_xl", quoted=True, copy=False))
    rows = rows.from_(src.subquery("_r", copy=False), copy=False)
    extended = exp.select(*[k.copy() for k in keys], exp.alias_(row_list(lin), "_xs", quoted=True, copy=False))
    extended = extended.from_(rows.subquery("_l", copy=False), copy=False)
    selected = _call("list_select", _ref("_xs"), _ref("c") if lin.is_signs else exp.Dot(this=_ref("c"), expression=exp.to_identifier("i")))
    if lin.is_signs:
        body = _call("list_sum", selected)
    else:
        body = _call("list_dot_product", selected, exp.Dot(this=_ref("c"), expression=exp.to_identifier("w")))
    sums = _call("list_transform", constant(lin), _lambda(body, "c"))
    relation = exp.select(*keys, exp.alias_(sums, "_kl", quoted=True, copy=False))
    relation = relation.from_(extended.subquery("_e", copy=False), copy=False)
    refs: list[exp.Expression] = []
    for v in range(lin.p):
        ref: exp.Expression = exp.Bracket(this=_ref("_kl"), expressions=[exp.Literal.number(v + 1)], offset=1)
        if lin.vector_bias(v):
            ref = exp.paren(ref + exp.cast(exp.Literal.number(repr(lin.vector_bias(v))), "DOUBLE"))
        refs.append(ref)
    return relation, refs
