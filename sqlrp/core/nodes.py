"""SQL-expression helpers every layer builds with: quoted identifiers and columns (:func:`ident`,
:func:`col`, :func:`table_ref`), DOUBLE literals and casts, and the one expression node sqlrp adds to
sqlglot's tree: a signed sum over input expressions.

A projection with ``s = 1`` and ``d = 784, k = 200`` has 156,800 terms; as nested ``exp.Add`` /
``exp.Sub`` nodes sqlglot would recurse once per term and copy the tree on every call.  ``SignedSum``
holds index arrays into a shared list of input expressions instead; each dialect renders it with
:func:`signed_sum_sql`, which renders every input once per statement and joins strings.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from sqlglot import exp

from .errors import refuse_nul
from .layout import Source

F = TypeVar("F", bound=Callable)
DOUBLE = exp.DataType.build("DOUBLE")


def gc_paused(fn: F) -> F:
    """Run ``fn`` with Python's cyclic garbage collector paused.

    Building and rendering a tree of tens of thousands of sqlglot nodes (parent pointers make them
    cycles) triggers collections that walk every live node: paused, compiling the ``pairs`` query
    runs faster (``PYTHONPATH=. python -m bench.probes pairs``; docs/benchmarks.md,
    "Pipeline").  The trees are collected as usual once ``fn`` returns.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper  # type: ignore[return-value]


class Inputs(list):
    """Input expressions shared by many ``SignedSum`` nodes; never deep-copied (it is read-only)."""

    def __deepcopy__(self, memo: dict) -> Inputs:
        return self


class SignedSum(exp.Expression):
    """``sum_i weight_i * inputs[index_i] (+ bias)``; weights of +-1 render as bare additions and
    subtractions, so Achlioptas projections stay aggregate-only."""

    arg_types = {"this": False}

    @classmethod
    def of(cls, inputs: Inputs, index: np.ndarray, weight: np.ndarray, bias: float = 0.0) -> SignedSum:
        node = cls()
        node.meta["inputs"] = inputs
        node.meta["index"] = np.asarray(index, dtype=np.int64).tolist()  # plain ints, faster than a loop
        node.meta["weight"] = np.asarray(weight, dtype=np.float64).tolist()
        node.meta["bias"] = float(bias)
        return node


def _number(value: float) -> str:
    return repr(float(value))


def signed_sum_sql(self, expression: SignedSum, depth: int | None = None) -> str:  # noqa: ANN001
    """Render ``(a + b - c)`` (signs) or ``(0.5 * a - 1.25 * b)`` (float weights), opening with a
    positive term where there is one.  ``depth`` (engines that cap expression depth, e.g. SQLite's
    1,000): runs of at most ``depth`` terms are parenthesised, and those runs summed the same way,
    so the tree stays shallow (``a + b + c`` parses left-deep: one level per term)."""
    inputs: Inputs = expression.meta["inputs"]
    cache: dict[int, list[str]] = self.__dict__.setdefault("_sqlrp_inputs", {})
    rendered = cache.get(id(inputs))
    if rendered is None:
        rendered = cache[id(inputs)] = [self.sql(e) for e in inputs]
    parts: list[str] = []
    index, weight = expression.meta["index"], expression.meta["weight"]
    lead = next((t for t, w in enumerate(weight) if w > 0), 0)
    if lead:  # open with a positive term: ``b - a``, not ``-a + b`` (a negation is one more node)
        index = [index[lead], *index[:lead], *index[lead + 1 :]]
        weight = [weight[lead], *weight[:lead], *weight[lead + 1 :]]
    for i, w in zip(index, weight, strict=True):
        if w == 1.0:
            term, op = rendered[i], "+"
        elif w == -1.0:
            term, op = rendered[i], "-"
        else:
            term, op = f"{_number(abs(w))} * {rendered[i]}", ("+" if w > 0 else "-")
        if parts:
            parts.append(f" {op} {term}")
        else:
            parts.append(term if op == "+" else f"-{term}")
    bias = expression.meta["bias"]
    if bias:
        parts.append(f" {'+' if bias > 0 else '-'} {_number(abs(bias))}" if parts else _number(bias))
    if not parts:
        return "0.0"
    if depth is not None and len(parts) > depth:
        return _shallow(parts, depth)
    return "(" + "".join(parts) + ")"


def _shallow(parts: list[str], depth: int) -> str:
    """``parts`` (``"a"``, ``" + b"``, ``" - c"`` ...) as nested groups of at most ``depth`` terms.
    A group that opens with a subtraction keeps the sign outside: ``- (c + d)`` is ``- c - d``."""
    groups: list[str] = []
    for start in range(0, len(parts), depth):
        chunk = parts[start : start + depth]
        head = chunk[0].strip()
        if start == 0:
            groups.append("(" + "".join(chunk) + ")")
            continue
        op, first = head[0], head[1:].strip()
        flipped = [first] + [(" - " if p.strip()[0] == "+" else " + ") + p.strip()[1:].strip() for p in chunk[1:]]
        inner = [first] + [p for p in chunk[1:]] if op == "+" else flipped
        groups.append(f" {op} (" + "".join(inner) + ")")
    if len(groups) > depth:
        return _shallow(groups, depth)
    return "(" + "".join(groups) + ")"


def balanced(items: list[exp.Expression], node: type[exp.Binary]) -> exp.Expression:
    """``items`` joined by ``node`` (``exp.Or``, ``exp.Add``) as a balanced tree, each level
    parenthesised (sqlglot prints nested ORs and sums flat, and the engine would parse them
    left-deep again): 12 levels for 2,352 ORs, where a chain is deeper than SQLite's 1,000.  Each
    node joins two runs of consecutive items."""
    while len(items) > 1:
        pairs = [exp.Paren(this=node(this=a, expression=b)) for a, b in zip(items[::2], items[1::2], strict=False)]
        items = pairs + ([items[-1]] if len(items) % 2 else [])
    return items[0]


def bare_select(*expressions: exp.Expression) -> exp.Select:
    """``SELECT expressions`` without copying them (``exp.select`` copies every one)."""
    return exp.Select(expressions=list(expressions))


def bare_paren(expression: exp.Expression) -> exp.Paren:
    """``(expression)`` without a copy (``exp.paren`` copies its argument: quadratic in nested sums)."""
    return exp.Paren(this=expression)


def ident(name: str) -> exp.Identifier:
    """A quoted identifier: user text never reaches SQL any other way (a NUL is refused: :func:`refuse_nul`)."""
    return exp.to_identifier(refuse_nul(name), quoted=True, copy=False)


def col(name: str, table: str | None = None) -> exp.Column:
    """The column ``name`` (quoted), qualified by ``table`` if given."""
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table_ref(source: Source) -> exp.Table:
    """The input table: ``[catalog.][schema.]table``, each part quoted (a dot inside a part is part
    of the name)."""
    return exp.Table(
        this=ident(source.table),
        db=ident(source.schema) if source.schema else None,
        catalog=ident(source.catalog) if source.catalog else None,
    )


def number(value: float) -> exp.Expression:
    """``CAST(<value> AS DOUBLE)``: a float literal the engines all read as a double."""
    literal = exp.Literal.number(repr(float(value)))
    return exp.cast(literal, DOUBLE)


def from_source(select: exp.Select, source: Source) -> exp.Select:
    """``select ... FROM <table> [WHERE <row_filter>]``."""
    select = select.from_(table_ref(source), copy=False)
    if source.row_filter is not None:
        select = select.where(source.row_filter.copy(), copy=False)
    return select


def as_double(expr: exp.Expression) -> exp.Expression:
    """``CAST(expr AS DOUBLE)``, built fresh (``exp.cast`` deep-copies its type: slow by the thousand)."""
    return exp.Cast(this=expr, to=exp.DataType(this=exp.DataType.Type.DOUBLE))


def feature_input(expr: exp.Expression, source: Source) -> exp.Expression:
    """A feature as the sums read it: DOUBLE, and 0 for NULL under ``nulls="zero"``."""
    if source.nulls == "zero":
        expr = exp.Coalesce(this=expr, expressions=[exp.Literal.number(0)])
    return as_double(expr)
