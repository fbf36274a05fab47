"""One ``SELECT`` per projection: the strategy's linear stage, the combiner, pooling, scale and output form.

:func:`compile_select` checks what the engine cannot do, picks the strategy (:func:`.strategies.choose`),
builds its relation and outputs from the table :data:`BODIES` (one row per strategy; the linear stages
themselves are in :mod:`.dense`, :mod:`.long` and :mod:`.lists`), then :func:`_finish` applies pooling,
the one scale factor, float32 and the output checks, and names the columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from sqlglot import exp

from ..core.errors import InvalidParameter
from ..core.ir import Composed, Projection
from ..core.layout import LAYOUTS, Formulation, Output, Source
from ..core.nodes import col, gc_paused, ident, number
from ..dialects import SqlrpDialect, get_dialect, portable
from .compose import compile_composed
from .dense import _dense_linear
from .guard import guardable, output_guard
from .inputs import dense_source
from .lists import list_outputs
from .long import _long_linear, _unnested, check_matrix_used
from .preprocess import compile_standardized
from .strategies import decide


def _linear_relation(
    keys: exp.Select, sums: list[exp.Expression], dialect: SqlrpDialect
) -> tuple[exp.Select, list[exp.Expression]]:
    """The linear sums as a relation the combiner reads, and how to refer to sum ``v`` in it.

    Normally one column ``_k{v}`` per sum.  Where that exceeds the engine's column limit (PostgreSQL:
    1,664 per select; P-RP with m = 30 and k = 160 has 4,800 sums) the sums travel as one array
    ``_kv`` read by subscripts.  Either way the relation is fenced, so each sum is computed once per
    row even when several products use it; PostgreSQL's fence still lets the workers of a parallel
    plan compute it, where ``OFFSET 0`` made it serial (``PYTHONPATH=. python -m bench.probes
    pg-fence``; figures: docs/benchmarks.md, "Compiler")."""
    limit = dialect.max_columns
    if limit is None or len(sums) + len(keys.expressions) <= limit:
        rel = keys.select(
            *[exp.alias_(e, f"_k{v}", quoted=True, copy=False) for v, e in enumerate(sums)], append=True, copy=False
        )
        return dialect.fence(rel), [col(f"_k{v}") for v in range(len(sums))]
    if not dialect.arrays or dialect.portable_core:
        raise dialect.refuse(
            f"{len(sums)} linear sums exceed the limit of {limit} columns and there is no array type"
            + (" whose subscripts mean the same on every engine (a smaller k or m)" if dialect.arrays else "")
        )
    rel = keys.select(exp.alias_(exp.Array(expressions=sums), "_kv", quoted=True, copy=False), append=True, copy=False)
    refs = [exp.Bracket(this=col("_kv"), expressions=[exp.Literal.number(v)], offset=0) for v in range(len(sums))]
    return dialect.fence(rel), refs


def _combine(projection: Projection, k_cols: list[exp.Expression]) -> list[exp.Expression]:
    """Combiner terms per component (before scale): ``sum_t w_t * prod_f K[v_f]``."""
    comb = projection.combiner
    if comb.is_identity:
        return list(k_cols)
    per_component: list[list[exp.Expression]] = [[] for _ in range(comb.k)]
    for c, w, vectors in comb.terms():
        prod: exp.Expression | None = None
        for v in vectors:
            f = k_cols[v].copy()
            prod = f if prod is None else exp.Mul(this=prod, expression=f)
        term: exp.Expression = prod if prod is not None else exp.Literal.number(1)
        if w != 1.0:
            term = exp.Mul(this=number(w), expression=term)
        per_component[c].append(term)
    out = []
    for terms in per_component:
        if not terms:
            out.append(exp.Literal.number("0.0"))
            continue
        total = terms[0]
        for t in terms[1:]:
            total = exp.Add(this=total, expression=t)
        out.append(exp.paren(total))
    return out


def _combined(
    projection: Projection,
    lin_sel: exp.Select,
    sums: list[exp.Expression],
    dialect: SqlrpDialect,
    key_cols: list[exp.Expression],
) -> tuple[exp.Select, list[exp.Expression]]:
    """The linear sums as the fenced relation ``lin`` (:func:`_linear_relation`) over the keys of
    ``lin_sel``, a select of ``key_cols`` from it, and the combiner's outputs (:func:`_combine`)."""
    lin_sel, k_cols = _linear_relation(lin_sel, sums, dialect)
    outputs = _combine(projection, k_cols)
    return exp.select(*key_cols).from_(lin_sel.subquery("lin", copy=False)), outputs


def _long_body(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect,
    how: Formulation,
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategies ``join`` / ``lookup`` (:mod:`.long`): a long table, or a wide one unnested, joined with
    the matrix; ``join``'s relation is grouped by id here (``lookup``'s has one row per id already)."""
    pooled = source.group_column is not None
    unnested = _unnested(projection, source, dialect, how.guard) if source.layout != "long" else None
    body, k_exprs = _long_linear(projection, source, how.matrix, dialect, how.strategy, unnested)
    relation = body.subquery("kv", copy=False)
    key_cols = [col("_g")] if pooled else [col("_id")]
    group_by = [col("_id")] + ([col("_g")] if pooled else [])
    regroup = how.strategy != "lookup"  # lookup's relation has one row per id already
    if projection.combiner.is_identity and not pooled:
        base = exp.select(*key_cols).from_(relation)
        if regroup:
            base = base.group_by(*group_by, copy=False)
        return base, k_exprs
    lin_sel = exp.select(*[c.copy() for c in group_by]).from_(relation)
    if regroup:
        lin_sel = lin_sel.group_by(*group_by, copy=False)
    return _combined(projection, lin_sel, k_exprs, dialect, key_cols)


def _list_body(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect,
    how: Formulation,
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``list_transform``: linear sums and combiner in lists (:mod:`.lists`)."""
    # list_sum skips NULLs: a guard reads every feature in the source relation (checked="all")
    src = dense_source(projection, source, dialect, checked="all" if how.guard else False)
    relation, outputs = list_outputs(projection, source, src)
    key_cols = [col("_g")] if source.group_column is not None else [col("_id")]
    return exp.select(*key_cols).from_(relation.subquery("src", copy=False)), outputs


def _dense_body(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect,
    how: Formulation,
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategies ``inline`` / ``mailman`` / ``pairs`` (:mod:`.dense`): signed sums over the input columns."""
    pooled = source.group_column is not None
    src, sums = _dense_linear(projection, source, dialect, how, how.guard)
    key_cols = [col("_g")] if pooled else [col("_id")]
    if projection.combiner.is_identity:
        return exp.select(*key_cols).from_(src.subquery("src", copy=False)), list(sums)
    lin_sel = exp.select(col("_id"), *([col("_g")] if pooled else [])).from_(src.subquery("src", copy=False))
    return _combined(projection, lin_sel, list(sums), dialect, key_cols)


#: (projection, source, dialect, the decided formulation) -> (a select of the key from the strategy's
#: relation, the outputs before pooling and scale)
Body = Callable[[Projection, Source, SqlrpDialect, Formulation], tuple[exp.Select, list[exp.Expression]]]

#: strategy -> the function building its relation and outputs, one row per strategy (:mod:`.strategies`)
BODIES: dict[str, Body] = {
    "inline": _dense_body,
    "mailman": _dense_body,
    "pairs": _dense_body,
    "join": _long_body,
    "lookup": _long_body,
    "list_transform": _list_body,
}


def check_output_columns(dialect: SqlrpDialect, key: str, names: Sequence[str]) -> None:
    """Refuse output columns ``names`` with a NUL (:func:`ident`) or of which one is the key column
    ``key`` to the engine (DuckDB, SQLite and Spark match quoted names ignoring case: ``P0`` is
    ``p0`` there)."""
    for name in names:
        ident(name)
    clash = [name for name in names if dialect.same_identifier(name, key)]
    if clash:
        same = "" if clash[0] == key else f" ({dialect.name} takes {clash[0]!r} for {key!r}: it ignores case)"
        raise InvalidParameter(
            f"output column {key!r} would appear twice{same}; choose another --prefix or output name"
        )


@gc_paused
def compile_select(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    output: Output | None = None,
    how: Formulation | None = None,
) -> exp.Select:
    """The projection of ``source`` as a sqlglot ``SELECT`` (id column first, then the outputs).

    :param projection: the projection (or composition) to compile.
    :param source: the input relation and its layout.
    :param dialect: the engine's dialect, by name or as an object.
    :param output: the output's form (default: wide columns ``p0 .. p{k-1}``).
    :param how: the formulation (:class:`~sqlrp.core.layout.Formulation`); what it leaves ``auto`` is
        decided here, once (:func:`.strategies.decide`).  ``how.matrix``: ``registry`` joins the stored
        ``sqlrp_linear_entry`` rows, ``values`` inlines the matrix as a ``VALUES`` list, ``auto`` picks
        ``registry`` when the projection has a stored name.  ``how.strategy``: ``auto`` (measured
        rule, :mod:`.strategies`) or one of ``inline`` / ``pairs`` / ``mailman`` / ``list_transform``
        (wide, array; the last on DuckDB, :mod:`.lists`) and ``join`` / ``lookup`` (long);
        ``how.block`` forces the mailman block size; ``how.guard``: the input and output checks ride
        along (:mod:`.guard`; only where :func:`.guard.guardable` says so: asked elsewhere, it is refused
        rather than left out).
    :returns: the ``SELECT``, to render with the dialect or to nest in a larger statement.
    """
    dialect = get_dialect(dialect)  # a name resolved at the entry (compose and preprocess pass the object)
    how = how or Formulation()
    _refuse_unsupported(dialect, source, output, how.strategy, how.matrix)
    if source.standardize is not None:
        return compile_standardized(projection, source, dialect, output, how, compile_select=compile_select)
    if isinstance(projection, Composed):
        check_matrix_used(how.matrix, projection, how.strategy, source.layout)  # a table holds one stage
        return compile_composed(projection, source, dialect, output, how.matrix, compile_select)
    output = output or Output()
    if source.layout not in LAYOUTS:  # pragma: no cover - Source validates
        raise InvalidParameter(source.layout)
    names = output.names(projection.k)
    key_out = source.group_column or source.id_column
    check_output_columns(dialect, key_out, names)
    matrix = how.matrix if how.matrix != "auto" else ("registry" if projection.name else "values")
    strategy, pairs = decide(projection, source, dialect, how.strategy, matrix, how.pairs)
    how = dataclasses.replace(how, matrix=matrix, strategy=strategy, pairs=pairs)
    check_matrix_used(matrix, projection, strategy, source.layout)  # a table never left unread
    if dialect.portable_core:
        portable.check(dialect.name, source, output, strategy, matrix, dialect.values_relation)
    if how.guard and not guardable(projection, source, dialect, strategy):
        raise InvalidParameter(f"the {strategy} plan of this projection cannot check its input in the same statement")
    base, outputs = BODIES[strategy](projection, source, dialect, how)
    return _finish(projection, source, dialect, output, base, outputs, how.guard)


def _refuse_unsupported(
    dialect: SqlrpDialect, source: Source, output: Output | None, strategy: str, matrix: str
) -> None:
    """Refuse, before anything is built, an array layout or output without an array type, and on a
    portable-core dialect the constructs whose meaning varies between engines (``dialects/portable.py``)."""
    if source.layout == "array" and not source.array_column:  # a blank only the table can fill (fill_source)
        raise InvalidParameter("the array layout needs the name of the array column (--array-column)")
    arrayed = source.layout == "array" or (output is not None and output.form == "array")
    if not dialect.arrays and arrayed:
        what = "the array layout" if source.layout == "array" else "array output"
        raise dialect.refuse(f"{what} needs an array type, which this engine does not have; use wide columns")
    if dialect.portable_core:  # refused before rendering: constructs whose meaning varies (dialects/portable.py)
        portable.check(dialect.name, source, output or Output(), strategy, matrix, dialect.values_relation)


def _finish(
    projection: Projection,
    source: Source,
    dialect: SqlrpDialect,
    output: Output,
    base: exp.Select,
    outputs: list[exp.Expression],
    guard: bool,
) -> exp.Select:
    """The outputs summed per group where pooled, times the scale (applied once, here), cast to FLOAT
    for float32, checked (``guard``), and named after the key column and ``output``."""
    names = output.names(projection.k)
    key_out = source.group_column or source.id_column
    scale = number(projection.scale)
    outputs = apply_function(projection, outputs, dialect)
    if source.group_column is not None:
        outputs = [exp.Sum(this=e) for e in outputs]
        base = base.group_by(col("_g"), copy=False)
    final = [exp.Mul(this=e, expression=scale.copy()) for e in outputs]
    flushed = output.dtype == "float32" and dialect.float32_underflow_errors
    if output.dtype == "float32":
        if not dialect.float32:
            raise dialect.refuse(
                "float32 outputs need a 4-byte float type, which this engine does not have; use float64"
            )
        if not flushed:
            final = [exp.cast(e, exp.DataType.build("FLOAT")) for e in final]
    if guard:  # the outputs computed once in a fenced select, checked, then named below
        base = output_guard(base, final, dialect)
        final = [col(f"_o{j}") for j in range(len(final))]
    if flushed:  # after the guard: the check must see the doubles (it was skipped here, silently)
        return _float32_flushed(base, final, key_out, names, output)
    # rename the key back to the user's column name
    key_expr = base.expressions[0]
    base.set("expressions", [exp.alias_(key_expr, key_out, quoted=True, copy=False)])
    if output.form == "wide":
        return base.select(
            *[exp.alias_(e, n, quoted=True, copy=False) for e, n in zip(final, names, strict=True)],
            append=True,
            copy=False,
        )
    return base.select(
        exp.alias_(exp.Array(expressions=final), output.array_name, quoted=True, copy=False), append=True, copy=False
    )


def apply_function(
    projection: Projection, outputs: list[exp.Expression], dialect: SqlrpDialect
) -> list[exp.Expression]:
    """The elementwise output function ``f(inner * output)`` (:data:`sqlrp.core.ir.FUNCTIONS`), per row,
    before pooling and the scale; each engine names ``cos`` and ``sign`` in its dialect file
    (:meth:`~sqlrp.dialects.base.SqlrpDialect.function`)."""
    name = projection.function
    if name == "identity":
        return outputs
    inner = float(projection.function_scale)
    scaled = outputs if inner == 1.0 else [exp.Mul(this=e, expression=number(inner)) for e in outputs]
    return [dialect.function(name, e) for e in scaled]


def _float32_flushed(
    base: exp.Select, final: list[exp.Expression], key_out: str, names: list[str], output: Output
) -> exp.Select:
    """float32 outputs where a cast to FLOAT raises ``value out of range: underflow`` for a double that
    rounds to 0 (PostgreSQL: |x| < 7.1e-46; NumPy's float32 is 0): the doubles are computed once in a
    sub-query, and those below 1e-45 are 0 before the cast."""
    inner_names = [f"_f32_{j}" for j in range(len(final))]
    while key_out in inner_names:
        inner_names = [f"_{n}" for n in inner_names]
    base.set("expressions", [exp.alias_(base.expressions[0], key_out, quoted=True, copy=False)])
    base = base.select(
        *[exp.alias_(e, n, quoted=True, copy=False) for e, n in zip(final, inner_names, strict=True)],
        append=True,
        copy=False,
    )
    flushed = []
    for n in inner_names:
        tiny = exp.LT(this=exp.Abs(this=exp.column(n, quoted=True)), expression=number(1e-45))
        value = exp.Case(ifs=[exp.If(this=tiny, true=number(0.0))], default=exp.column(n, quoted=True))
        flushed.append(exp.cast(value, exp.DataType.build("FLOAT")))
    outer = exp.select(exp.column(key_out, quoted=True)).from_(base.subquery("_f32", copy=False), copy=False)
    if output.form == "wide":
        return outer.select(*[exp.alias_(e, n, quoted=True, copy=False) for e, n in zip(flushed, names, strict=True)])
    return outer.select(exp.alias_(exp.Array(expressions=flushed), output.array_name, quoted=True, copy=False))
