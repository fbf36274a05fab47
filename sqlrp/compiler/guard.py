"""The input and output checks folded into the projection's own statement (issue 34): one read of the data.

A NULL, NaN or infinite feature makes every linear sum that reads it NULL, NaN or infinite, and so every
output built from that sum (a product of sums, a weighted term, the scale: ``0 * inf`` is NaN, ``NULL * x``
is NULL); a finite input that overflows makes an output infinite.  So where the engine can raise from
inside a query (:meth:`SqlrpDialect.raise_in_query`: DuckDB ``error()``, PostgreSQL a checked cast), the
projection's statement carries two guards, each ``CASE WHEN COALESCE(<good>, FALSE) THEN TRUE ELSE
<raise> END`` in a ``WHERE`` (``<good>``: ``ABS(sum) <= <largest double>``, false or NULL for NaN,
infinity and NULL):

- on the outputs: their sum (computed once per row in a fenced select) is NULL or not finite;
- on the input, in the source relation: the features no output reads (none for most matrices) summed
  the same way, and for the array layout a NULL array or one whose length is not ``d``.

The raised text starts with :data:`MARKER` and names the row's key.  The statement then fails as a whole:
its ``CREATE TABLE AS`` / ``INSERT`` / ``COPY`` is rolled back or its temporary file removed, so nothing is
written; :func:`sqlrp.api.project` then runs the separate scans (:func:`sqlrp.pipeline.checks.check_source`)
that name up to five rows, with the same message as before, or -- if the input is clean and only a sum
overflowed, or the guard's own sum did -- projects again the old way, with the output check.

Guarded: wide and array inputs with any strategy -- ``inline`` / ``pairs`` / ``mailman``, whose sums
propagate NULL, and ``list_transform`` and the unnested ``join`` / ``lookup``, whose ``list_sum`` and
``SUM`` skip NULLs, so their input guard sums every feature -- with no ``GROUP BY`` (a pooled ``SUM``
skips NULL rows), no in-SQL standardisation, one matrix (not a composition).  The long layout (which
also checks feature indices) and those others keep the separate scan.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..core.ir import Projection
from ..core.layout import Source
from ..core.nodes import balanced, col, feature_input
from ..dialects import SqlrpDialect

#: the start of the text the in-query check raises (sqlrp.api.project recognises it)
MARKER = "sqlrp input check"
GUARDED_STRATEGIES = ("inline", "pairs", "mailman", "list_transform", "join", "lookup")


def guardable(projection: object, source: Source, dialect: SqlrpDialect, strategy: str) -> bool:
    """True if the checks of ``projection`` on ``source`` can ride along its statement compiled with the
    resolved ``strategy`` (module docstring)."""
    return (
        isinstance(projection, Projection)
        and dialect.raise_in_query(exp.Literal.string("")) is not None
        and source.layout in ("wide", "array")
        and source.group_column is None
        and source.standardize is None
        and strategy in GUARDED_STRATEGIES
    )


def tripped(exc: BaseException) -> bool:
    """True if ``exc`` is the in-query check's error."""
    return MARKER in str(exc)


def stop_unless(good: exp.Expression, key: exp.Expression, dialect: SqlrpDialect) -> exp.Expression:
    """``CASE WHEN COALESCE(good, FALSE) THEN TRUE ELSE <raise '<MARKER>: row <key>'> END``."""
    text = exp.Coalesce(
        this=exp.Cast(this=key, to=exp.DataType.build("TEXT")), expressions=[exp.Literal.string("NULL")]
    )
    message = exp.DPipe(this=exp.Literal.string(f"{MARKER}: row "), expression=text, safe=True)
    raised = dialect.raise_in_query(message)
    assert raised is not None
    known = exp.Coalesce(this=good, expressions=[exp.false()])
    return exp.Case(ifs=[exp.If(this=known, true=exp.true())], default=raised)


def finite(value: exp.Expression) -> exp.Expression:
    """``ABS(value) <= <largest double>``: NULL for NULL, false for NaN (the engines that raise order
    NaN above every number: PostgreSQL "8.1.3. Arbitrary Precision Numbers", DuckDB's float comparisons)
    and for infinity; ``value`` appears once, so a sum is computed once."""
    largest = exp.Cast(this=exp.Literal.number("1.7976931348623157e308"), to=exp.DataType.build("DOUBLE"))
    return exp.LTE(this=exp.Abs(this=value), expression=largest)


def unused_features(projection: Projection) -> np.ndarray:
    """The features no output reads (no non-zero in a vector that a combiner term uses)."""
    lin, comb = projection.linear, projection.combiner
    vectors = np.arange(lin.p) if comb.is_identity else np.unique(comb.factor_vector)
    read = np.isin(lin.vector, vectors) & (np.asarray(lin.weight) != 0)
    used = np.zeros(projection.d, dtype=bool)
    used[lin.feature[read]] = True
    return np.flatnonzero(~used)


def input_guard(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect,
    features: list[exp.Expression],
    key: exp.Expression,
    array: exp.Expression | None = None,
    every: bool = False,
) -> exp.Expression | None:
    """The source relation's guard (module docstring): ``features`` are the raw feature expressions,
    ``array`` the array column (array layout); ``every``: all features, not only those no output reads
    (``list_transform``, whose ``list_sum`` skips NULLs); ``None`` if there is nothing to check there."""
    conditions: list[exp.Expression] = []
    unused = np.arange(projection.d) if every else unused_features(projection)
    if len(unused):
        conditions.append(finite(balanced([feature_input(features[i].copy(), source) for i in unused], exp.Add)))
    if array is not None:  # NULL for a NULL array
        length = exp.ArraySize(this=array.copy(), expression=exp.Literal.number(1))
        conditions.append(exp.EQ(this=length, expression=exp.Literal.number(projection.d)))
    if not conditions:
        return None
    return stop_unless(balanced(conditions, exp.And), key, dialect)


def output_guard(base: exp.Select, outputs: list[exp.Expression], dialect: SqlrpDialect) -> exp.Select:
    """``SELECT _id FROM (fenced: base's key as _id, the outputs as _o{j}) WHERE <their sum is finite, else
    raise>``: the caller adds the outputs ``_o{j}`` under their names, as it would have to ``base``."""
    inner = base  # the caller's, built for this statement
    key = inner.expressions[0]
    inner.set("expressions", [exp.alias_(key, "_id", quoted=True, copy=False)])
    inner = inner.select(
        *[exp.alias_(e, f"_o{j}", quoted=True, copy=False) for j, e in enumerate(outputs)], append=True, copy=False
    )
    total = balanced([col(f"_o{j}") for j in range(len(outputs))], exp.Add)
    guard = stop_unless(finite(total), col("_id"), dialect)
    return exp.select(col("_id")).from_(dialect.fence(inner).subquery("_chk", copy=False)).where(guard, copy=False)


__all__ = ["MARKER", "guardable", "input_guard", "output_guard", "stop_unless", "tripped", "unused_features"]
