"""Strategy ``list_transform`` (DuckDB): every sum of a row in one lambda over constant lists.

Each row's features become one list ``_xs``; vector ``v``'s sum ``K[v] = sum_f w_{fv} x_f`` (000
Eq. 2, the linear stage of every method) is computed in one of two forms, whichever
:func:`~.strategies.list_row_seconds` estimates cheaper:

- **positions** (sparse matrices): ``_xs = x ++ -x [++ x^2 ++ -x^2] ++ [0.0]`` (the squares where a
  vector sums them, the negations for sign matrices), and

      sign matrices:  K[v] = list_sum(list_select(_xs, I_v))        -- additions only
      other weights:  K[v] = list_dot_product(list_select(_xs, I_v), W_v)

  where ``I_v`` holds 1-based positions in ``_xs`` (``f + 1`` for ``+x_f``, ``d + f + 1`` for
  ``-x_f``, the trailing zero for a vector without non-zeros): a cost per non-zero and row
  (:data:`~.strategies.LIST_ROW_SECONDS`).
- **dense rows** (denser than about 1 in 12: ``s = 3``, ``s = 1``, Gaussian):
  ``K[v] = list_dot_product(_xs, W_v)`` with ``_xs = x [++ x^2]`` and ``W_v`` the v-th row of the
  dense matrix: a smaller cost per entry and row (:data:`~.strategies.LIST_DENSE_ROW_SECONDS`).

The combiner's products of sums (000 Eq. 13, 003 Eq. 4.11) are positions as well, into
``_kw = K ++ [term weights] ++ [0.0]`` (:func:`combiner_constants`).  Every constant travels as
**one string** cast to a list type (``INTEGER[][]``, ``DOUBLE[][]``, ``STRUCT(i INTEGER[], w
DOUBLE[])[]``): DuckDB parses one string token and casts it once, so the statement binds in a time
nearly independent of the matrix, where the same lists written as list literals are parsed and bound
element by element (figures: docs/benchmarks.md, "Compiler").  It wins on
small tables, where binding the ``inline`` query (one sum term per non-zero) dominates, and with
dense rows well beyond; the rule is :func:`~.strategies.prefers_lists`.

NULLs: as with ``lookup`` on an unnested wide table, a NULL feature counts as 0 (``list_sum`` skips
it; weighted stages map NULL to 0 before ``list_dot_product``, which refuses NULLs) -- reachable
only with the NULL check off, since ``check=True`` refuses NULLs before anything runs and
``nulls="zero"`` reads them as 0 on every path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np
from sqlglot import exp

from ..core.ir import LinearStage, Projection
from ..core.layout import Source
from ..core.names import scratch_name
from .strategies import list_row_seconds

DOUBLE_LIST = exp.DataType.build("DOUBLE[]", dialect="duckdb")

#: Dense weight matrices bound to the statement instead of written into it (:func:`binding`), by the
#: name of the relation the statement reads them from; ``None`` while compiling text that stands alone.
_BOUND: ContextVar[dict[str, np.ndarray] | None] = ContextVar("sqlrp_bound_constants", default=None)


@contextlib.contextmanager
def binding(bind: bool) -> Iterator[dict[str, np.ndarray] | None]:
    """While compiling for a backend that binds constants (DuckDB's Python client: ``binds_constants``),
    dense weight matrices are collected here and read by the statement from a registered relation
    (``SELECT list([c0, .., c{d-1}] ORDER BY _r) FROM <name>``) instead of one long string literal.
    DuckDB's time to parse the string grows with the dense matrix's entries, and Python spends about
    as long writing it (figures: docs/benchmarks.md, "Compiler"); ``sqlrp compile`` and views keep the
    literal, which needs nothing registered."""
    bound: dict[str, np.ndarray] | None = {} if bind else None
    token = _BOUND.set(bound)
    try:
        yield bound
    finally:
        _BOUND.reset(token)


def _bound_rows(W: np.ndarray) -> exp.Expression | None:
    """``W``'s rows as a list of ``DOUBLE[]`` read from a relation bound at run time (:func:`binding`),
    or ``None`` when nothing binds."""
    bound = _BOUND.get()
    if bound is None:
        return None
    name = scratch_name("w")
    bound[name] = W
    row = exp.Array(expressions=[exp.column(f"c{i}", quoted=True) for i in range(W.shape[1])])
    ordered = exp.Order(this=row, expressions=[exp.Ordered(this=exp.column("_r", quoted=True))])
    return exp.Subquery(
        this=exp.select(_call("list", ordered)).from_(exp.Table(this=exp.to_identifier(name, quoted=True)))
    )


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
        return _string_list(_nested(lists), "INTEGER[][]")
    parts = []
    for (_, weight), pos in zip(linear.columns(), lists, strict=True):
        w = [repr(float(x)) for x in weight] or ["0.0"]
        parts.append("{'i': [" + ",".join(map(str, pos)) + "], 'w': [" + ",".join(w) + "]}")
    return _string_list("[" + ",".join(parts) + "]", "STRUCT(i INTEGER[], w DOUBLE[])[]")


def row_list(linear: LinearStage) -> exp.Expression:
    """``_xs`` built from the row's list ``_xl`` (see the module docstring)."""
    xl = _ref("_xl")
    if not linear.is_signs:  # list_dot_product refuses NULLs: read them as 0, as list_sum does
        zeroed = exp.Coalesce(this=_ref("v"), expressions=[exp.Literal.number(0)])
        xl = _call("list_transform", xl, _lambda(zeroed, "v"))
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


def dense_rows(linear: LinearStage) -> bool:
    """True if the sums are cheaper as dot products of the row with dense weight rows than by
    positions (:func:`~.strategies.list_row_seconds`): matrices denser than about 1 in 12."""
    return list_row_seconds(linear, dense=True) < list_row_seconds(linear, dense=False)


def dense_constant(linear: LinearStage) -> exp.Expression:
    """The matrix as ``p`` dense weight rows over ``x`` (and ``x^2`` where a vector sums squares),
    one string cast to ``DOUBLE[][]``; integer weights (signs) are written as integers.  An entry
    listed twice adds up, as in the sums by positions."""
    d = linear.d
    width = 2 * d if linear.power is not None else d
    W = np.zeros((linear.p, width))
    shift = np.where(linear.power[linear.vector] == 2, d, 0) if linear.power is not None else 0
    np.add.at(W, (linear.vector, linear.feature + shift), linear.weight)  # an entry given twice adds up
    bound = _bound_rows(W)
    if bound is not None:
        return bound
    if np.array_equal(W, np.round(W)) and np.abs(W).max(initial=0) < 2**53:  # integers (signs): short text
        text = "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in W.astype(np.int64).tolist()) + "]"
    else:
        text = "[" + ",".join("[" + ",".join(map(repr, row)) + "]" for row in W.tolist()) + "]"
    return _string_list(text, "DOUBLE[][]")


def dense_row_list(linear: LinearStage) -> exp.Expression:
    """``_xs`` for dense rows: ``x`` (NULL read as 0: ``list_dot_product`` refuses NULLs), then ``x^2``
    where a vector sums squares."""
    zeroed = exp.Coalesce(this=_ref("v"), expressions=[exp.Literal.number(0)])
    xl = _call("list_transform", _ref("_xl"), _lambda(zeroed, "v"))
    if linear.power is None:
        return xl
    square = exp.Mul(this=_ref("v"), expression=_ref("v"))
    return _call("list_concat", xl, _call("list_transform", xl.copy(), _lambda(square, "v")))


def _string_list(text: str, sql_type: str) -> exp.Expression:
    """A constant list written as one string and cast once (see the module docstring)."""
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build(sql_type, dialect="duckdb"))


def _nested(lists: list[list[int]]) -> str:
    return "[" + ",".join("[" + ",".join(map(str, x)) + "]" for x in lists) + "]"


def combiner_constants(projection: Projection) -> tuple[str, list[float]]:
    """The combiner as positions in ``_kw = _kl ++ [w_1, .., w_q, 0.0]``: per component its terms, per
    term its factors (1-based vector positions, plus the position of the term's weight when it is
    not 1).  A term without factors is its weight alone; a component without terms is ``[[0.0]]``."""
    comb, p = projection.combiner, projection.linear.p
    weights: dict[float, int] = {}
    per_component: list[list[list[int]]] = [[] for _ in range(comb.k)]
    for c, w, vectors in comb.terms():
        factors = [v + 1 for v in vectors]
        if w != 1.0 or not factors:
            factors.append(p + 1 + weights.setdefault(float(w), len(weights)))
        per_component[c].append(factors)
    zero = p + len(weights) + 1
    text = "[" + ",".join(_nested(terms or [[zero]]) for terms in per_component) + "]"
    return text, list(weights)


def list_outputs(
    projection: Projection, source: Source, src: exp.Select
) -> tuple[exp.Select, list[exp.Expression]]:
    """The relation ``SELECT _id, [_g,] <list> FROM ...`` over ``src`` (the dense source,
    ``_x0 .. _x{d-1}``) and the outputs before the scale: ``_kl[v + 1]`` (a linear projection) or
    ``_ol[c + 1]``, where ``_ol`` is the combiner over the sums, in lists as well::

        _ol = list_transform(T, lambda c: list_sum(list_transform(c, lambda f: list_product(list_select(_kw, f)))))

    with ``T`` from :func:`combiner_constants` (products of sums, 000 Eq. 13 / 003 Eq. 4.11)."""
    lin = projection.linear
    keys = [_ref("_id")] + ([_ref("_g")] if source.group_column else [])

    def over(relation: exp.Select, alias: str, expression: exp.Expression, name: str) -> exp.Select:
        select = exp.select(*[k.copy() for k in keys], exp.alias_(expression, name, quoted=True, copy=False))
        return select.from_(relation.subquery(alias, copy=False), copy=False)

    features = exp.cast(exp.Array(expressions=[_ref(f"_x{i}") for i in range(lin.d)]), DOUBLE_LIST)
    dense = dense_rows(lin)
    extended = over(over(src, "_r", features, "_xl"), "_l", dense_row_list(lin) if dense else row_list(lin), "_xs")
    if dense:
        body = _call("list_dot_product", _ref("_xs"), _ref("c"))
    elif lin.is_signs:
        body = _call("list_sum", _call("list_select", _ref("_xs"), _ref("c")))
    else:
        picked = _call("list_select", _ref("_xs"), exp.Dot(this=_ref("c"), expression=exp.to_identifier("i")))
        body = _call("list_dot_product", picked, exp.Dot(this=_ref("c"), expression=exp.to_identifier("w")))
    params = ["c"]
    if lin.bias is not None and np.any(lin.bias):
        bias = _string_list("[" + ",".join(repr(float(b)) for b in lin.bias) + "]", "DOUBLE[]")
        body = exp.Add(this=body, expression=exp.Bracket(this=bias, expressions=[_ref("i")], offset=1))
        params.append("i")
    sums = _call("list_transform", dense_constant(lin) if dense else constant(lin), _lambda(body, *params))
    comb = projection.combiner
    if comb.is_identity:
        relation, name = over(extended, "_e", sums, "_kl"), "_kl"
    else:
        text, weights = combiner_constants(projection)
        tail = _string_list("[" + ",".join(repr(w) for w in [*weights, 0.0]) + "]", "DOUBLE[]")
        with_weights = over(extended, "_e", _call("list_concat", sums, tail), "_kw")
        product = _call("list_product", _call("list_select", _ref("_kw"), _ref("f")))
        term_sum = _call("list_sum", _call("list_transform", _ref("c"), _lambda(product, "f")))
        combined = _call("list_transform", _string_list(text, "INTEGER[][][]"), _lambda(term_sum, "c"))
        relation, name = over(with_weights, "_k", combined, "_ol"), "_ol"
    outputs: list[exp.Expression] = [
        exp.Bracket(this=_ref(name), expressions=[exp.Literal.number(j + 1)], offset=1) for j in range(projection.k)
    ]
    return relation, outputs
