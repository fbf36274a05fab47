"""Compiler: IR + input layout + dialect -> one SQL statement.

The query is built once as a sqlglot expression tree and rendered per dialect.  Every relation in it
renames user identifiers to internal ones (``_id``, ``_x{i}``, ``_k{v}``), so a user's names appear
exactly once, quoted, in the innermost select and once in the outermost aliases.

Shape of the generated SQL::

    src:  SELECT <id> AS _id, CAST(<feature i> AS DOUBLE) AS _x{i} ... FROM <table>     (wide/array)
          SELECT <id> AS _id, <feature> AS _f, <value> AS _v FROM <table>                (long)
    lin:  linear stage, _k{v} = (_x3 + _x17 - _x40 ...)  -- additions and subtractions only
          (long: JOIN the stored matrix, SUM(+-_v) ... GROUP BY _id, vector)
    out:  combiner, p{c} = (sum_t w_t * prod _k{v}) * scale   -- scale applied once, at the end

For a linear projection on a wide or array table ``lin`` and ``out`` fuse into one select whose
expressions are ``(_x3 + _x17 - _x40 ...) * scale``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..core.errors import EngineLimit, InvalidParameter
from ..core.ir import Composed, LinearStage, Projection
from ..core.layout import LAYOUTS, Output, Source
from ..core.nodes import (  # noqa: F401 - the SQL-expression helpers, re-exported as the compiler's
    DOUBLE,
    Inputs,
    SignedSum,
    as_double,
    col,
    feature_input,
    from_source,
    gc_paused,
    ident,
    number,
    table_ref,
)
from ..dialects import SqlrpDialect, get_dialect, portable
from .compose import compile_composed
from .guard import MARKER, guardable, output_guard
from .inputs import dense_source
from .limits import Statements, blocks, check, estimate_nodes, new_staging_name, output_block, splittable
from .lists import binding, list_outputs
from .preprocess import compile_standardized
from .strategies import LONG_STRATEGIES, best_mailman, best_pairs, choose, planner_seconds

REGISTRY_ENTRY_TABLE = "sqlrp_linear_entry"
BIGINT = exp.DataType.build("BIGINT")


def _linear_sums(linear: LinearStage, inputs: Inputs, squares: Inputs | None) -> list[SignedSum]:
    sums = []
    for v, (feat, weight) in enumerate(linear.columns()):
        src = squares if (squares is not None and linear.vector_power(v) == 2) else inputs
        if linear.vector_power(v) > 2:
            raise InvalidParameter("linear stage powers above 2 are not supported by the compiler")
        sums.append(SignedSum.of(src, feat, weight, linear.vector_bias(v)))
    return sums


def _matrix_relation(projection: Projection, matrix: str, dialect: SqlrpDialect) -> exp.Expression:
    """The stored matrix as a relation ``(vector, feature, weight)``: ``registry`` (the rows of
    ``sqlrp_linear_entry``), ``values`` (inlined), or the name of a table holding those three
    columns (``matrix="warehouse.rp40"``: dots separate catalog, schema and table; the warehouse
    recipe: ``sqlrp projections export`` the matrix, bulk-load it, ``sqlrp compile --matrix TABLE``)."""
    lin = projection.linear
    columns = [col("vector"), col("feature"), col("weight")]
    if matrix == "registry":
        if not projection.name:
            raise InvalidParameter("the long layout with matrix='registry' needs a stored projection")
        return (
            exp.select(*columns)
            .from_(exp.Table(this=ident(REGISTRY_ENTRY_TABLE)))
            .where(col("projection").eq(exp.Literal.string(projection.name)))
        )
    if matrix != "values":
        parts = [ident(p) for p in matrix.split(".")]
        if len(parts) > 3 or not all(p.name for p in parts):
            raise InvalidParameter(f"matrix table {matrix!r}: give table, schema.table or catalog.schema.table")
        table = exp.Table(
            this=parts[-1], db=parts[-2] if len(parts) > 1 else None, catalog=parts[-3] if len(parts) > 2 else None
        )
        return exp.select(*columns).from_(table)
    if dialect.matrix_array_join:
        return _matrix_arrays(lin)
    entries = list(zip(lin.vector.tolist(), lin.feature.tolist(), lin.weight.tolist(), strict=True)) or [(-1, -1, 0.0)]

    def row(v: int, f: int, w: float) -> exp.Tuple:
        return exp.Tuple(expressions=[exp.Literal.number(v), exp.Literal.number(f), exp.Literal.number(repr(w))])

    names = [ident("vector"), ident("feature"), ident("weight")]
    values = exp.Values(expressions=[row(*r) for r in entries])
    if dialect.values_column_names:
        values.set("alias", exp.TableAlias(this=ident("_m"), columns=names))
        return exp.select(*columns).from_(values)
    # SQLite and MySQL drop an alias' column names (``column1..3`` would be read: the join on
    # "feature" then compares with a string and returns no rows); a CTE's column list keeps them
    cte = exp.CTE(this=values, alias=exp.TableAlias(this=ident("_m"), columns=names))
    select = exp.select(*columns).from_(exp.Table(this=ident("_m")))
    select.set("with_", exp.With(expressions=[cte]))
    return select


def _matrix_arrays(lin: LinearStage) -> exp.Select:
    """The matrix inlined as three literal arrays unnested in lockstep (ClickHouse's ``ARRAY JOIN``):
    ``SELECT CAST(vector AS BIGINT) ... FROM system.one ARRAY JOIN [..] AS vector, [..] AS feature,
    [..] AS weight``.  One plan step and one AST element per array at any size, where ``VALUES``
    (one ``UNION ALL`` branch per non-zero there) exceeds the plan-optimisation limit from about
    2,500 non-zeros (``dialects/clickhouse.py``)."""
    vector, feature, weight = lin.vector.tolist(), lin.feature.tolist(), lin.weight.tolist()
    if not vector:  # no non-zeros: one entry that matches no feature
        vector, feature, weight = [-1], [-1], [0.0]

    def array(values: list, name: str) -> exp.Alias:
        literals = exp.Array(expressions=[exp.Literal.number(repr(v)) for v in values])
        return exp.alias_(literals, name, quoted=True, copy=False)

    unnest = exp.Join(
        this=array(vector, "_mv"), expressions=[array(feature, "_mf"), array(weight, "_mw")], kind="ARRAY"
    )
    one = exp.Table(this=exp.to_identifier("one"), db=exp.to_identifier("system"))
    return (
        exp.select(
            exp.alias_(exp.cast(col("_mv"), BIGINT), "vector", quoted=True, copy=False),
            exp.alias_(exp.cast(col("_mf"), BIGINT), "feature", quoted=True, copy=False),
            exp.alias_(as_double(col("_mw")), "weight", quoted=True, copy=False),
        )
        .from_(one, copy=False)
        .join(unnest, copy=False)
    )


def _if(
    dialect: SqlrpDialect, condition: exp.Expression, true: exp.Expression, false: exp.Expression
) -> exp.Case | exp.If:
    """``IF(c, a, b)`` where the engine is run and tested; ``CASE WHEN c THEN a ELSE b END`` elsewhere
    (the portable core: sqlglot renders ``IF`` as Snowflake's ``IFF``, which no other engine has)."""
    if dialect.executes:
        return exp.If(this=condition, true=true, false=false)
    return exp.Case(ifs=[exp.If(this=condition, true=true)], default=false)


def _long_linear(
    projection: Projection,
    source: Source,
    matrix: str,
    dialect: SqlrpDialect,
    strategy: str = "join",
    src: exp.Select | None = None,
) -> tuple[exp.Select, list[exp.Expression]]:
    """Linear stage over a long table: join + GROUP BY (id, vector), then a pivot to one value per
    output vector -- ``join``: an aggregate with a FILTER per vector; ``lookup``: see below.
    ``src`` (``_id, [_g,] _f, _v``) replaces the long table: a wide one unnested (:func:`_unnested`)."""
    lin = projection.linear
    group_keys = [col("_id", "s")] + ([col("_g", "s")] if source.group_column else [])
    complete = src is not None  # every id has a row for every feature: see _lookup_pivot
    if src is None:
        keys = [exp.alias_(col(source.id_column), "_id", quoted=True, copy=False)]
        if source.group_column:
            keys.append(exp.alias_(col(source.group_column), "_g", quoted=True, copy=False))
        value = col(source.value_column)
        if source.nulls == "zero":
            value = exp.Coalesce(this=value, expressions=[exp.Literal.number(0)])
        src = from_source(
            exp.select(
                *keys,
                exp.alias_(exp.cast(col(source.feature_column), BIGINT), "_f", quoted=True, copy=False),
                exp.alias_(exp.cast(value, DOUBLE), "_v", quoted=True, copy=False),
            ),
            source,
        )
    v = col("_v", "s")
    weight = col("weight", "m")
    if lin.is_signs:
        signed = _if(dialect, weight > exp.Literal.number(0), v, exp.Neg(this=v.copy()))
        signed_sq = _if(dialect, weight > exp.Literal.number(0), v * v, exp.Neg(this=exp.paren(v * v)))
    else:
        signed, signed_sq = weight * v, weight * exp.paren(v * v)
    kv = (
        exp.select(
            *group_keys,
            exp.alias_(exp.cast(col("vector", "m"), BIGINT), "_vec", quoted=True, copy=False),
            exp.alias_(exp.Sum(this=signed), "_s1", quoted=True, copy=False),
        )
        .from_(src.subquery("s", copy=False))
        .join(
            _matrix_relation(projection, matrix, dialect).subquery("m", copy=False),
            on=col("feature", "m").eq(col("_f", "s")),
        )
        .group_by(*[c.copy() for c in group_keys], col("vector", "m"))
    )
    if lin.power is not None:
        kv = kv.select(exp.alias_(exp.Sum(this=signed_sq), "_s2", quoted=True, copy=False), append=True, copy=False)
    if strategy == "lookup":
        return _lookup_pivot(projection, kv, pooled=source.group_column is not None, complete=complete)
    sums = []
    for vec in range(lin.p):
        which = "_s2" if lin.vector_power(vec) == 2 else "_s1"
        hit = col("_vec").eq(exp.Literal.number(vec))
        if dialect.filter_clause and not dialect.portable_core:  # an engine may parse FILTER and ignore it
            agg = exp.Filter(this=exp.Sum(this=col(which)), expression=exp.Where(this=hit))
        else:  # portable: SUM(CASE WHEN _vec = v THEN s END), NULL when no row matches, like FILTER
            agg = exp.Sum(this=exp.Case(ifs=[exp.If(this=hit, true=col(which))]))
        expr: exp.Expression = exp.Coalesce(this=agg, expressions=[exp.Literal.number(0)])
        if lin.vector_bias(vec):
            expr = exp.paren(expr + number(lin.vector_bias(vec)))
        sums.append(expr)
    return kv, sums


def _lookup_pivot(
    projection: Projection, kv: exp.Select, pooled: bool, complete: bool = False
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``lookup``: ``kv`` (one row per id and vector) collapses to one row per id holding
    two aligned arrays, ``_vv`` (vectors) and ``_ss`` (sums); output ``j`` is
    ``COALESCE(_ss[ARRAY_POSITION(_vv, j)], 0)`` -- a scan of a short array instead of k filters
    per (id, vector) row.  The relation already has one row per id: no further GROUP BY.

    ``complete``: every id has a row for every feature (an unnested wide table), so every vector
    with a non-zero has a sum for every id, in vector order: vector ``j`` is ``_ss[rank of j among
    those vectors]``, read directly; a vector without non-zeros is 0 (and its bias)."""
    lin = projection.linear
    held = np.bincount(lin.vector, minlength=lin.p) > 0  # vectors with a non-zero
    rank = np.cumsum(held)  # 1-based position of such a vector in _ss
    keys = [col("_id")] + ([col("_g")] if pooled else [])
    order = exp.Order(expressions=[exp.Ordered(this=col("_vec"))])

    def agg(name: str) -> exp.Expression:
        return exp.ArrayAgg(this=exp.Order(this=col(name), expressions=order.expressions))

    collected = (
        exp.select(*[c.copy() for c in keys])
        .select(exp.alias_(agg("_vec"), "_vv", quoted=True, copy=False), copy=False)
        .select(exp.alias_(agg("_s1"), "_ss", quoted=True, copy=False), copy=False)
        .from_(kv.subquery("kv0", copy=False))
        .group_by(*[c.copy() for c in keys])
    )
    if lin.power is not None:
        collected = collected.select(exp.alias_(agg("_s2"), "_ss2", quoted=True, copy=False), copy=False)
    sums: list[exp.Expression] = []
    for vec in range(lin.p):
        which = "_ss2" if lin.vector_power(vec) == 2 else "_ss"
        expr: exp.Expression
        if complete:
            at = exp.Literal.number(int(rank[vec]))
            expr = exp.Bracket(this=col(which), expressions=[at], offset=1) if held[vec] else exp.Literal.number(0)
        else:
            position = exp.Anonymous(
                this="ARRAY_POSITION", expressions=[col("_vv"), exp.cast(exp.Literal.number(vec), BIGINT)]
            )
            value = exp.Bracket(this=col(which), expressions=[position], offset=1)
            expr = exp.Coalesce(this=value, expressions=[exp.Literal.number(0)])
        if lin.vector_bias(vec):
            expr = exp.paren(expr + number(lin.vector_bias(vec)))
        sums.append(expr)
    return collected, sums


def _unnested(projection: Projection, source: Source, dialect: SqlrpDialect, guard: bool = False) -> exp.Select:
    """A wide (or array) source as a long one: ``SELECT _id, [_g,] UNNEST([0, .., d-1]) AS _f,
    UNNEST([_x0, .., _x{d-1}]) AS _v`` over :func:`dense_source` -- two unnests of equal length in one
    select list run in lockstep (``dialect.select_unnest``).  Its SQL grows with d, not with the
    matrix: the ``join`` / ``lookup`` strategies for small wide tables, where binding a sum term per
    non-zero costs more than joining every row with the matrix (``strategies.prefers_long``).
    As in the long layout, ``SUM`` skips a NULL feature: ``check=True`` (the default) refuses NULLs
    before anything runs, and ``nulls="zero"`` reads them as 0 on every path; only with the check
    off would a NULL be 0 here where the inline sums give NULL."""
    d = projection.d
    wide = dense_source(projection, source, dialect, checked="all" if guard else False)  # SUM skips NULLs
    keys = [col("_id")] + ([col("_g")] if source.group_column else [])
    features = exp.Array(expressions=[exp.Literal.number(i) for i in range(d)])
    values = exp.Array(expressions=[col(f"_x{i}") for i in range(d)])
    return exp.select(
        *keys,
        exp.alias_(exp.Anonymous(this="UNNEST", expressions=[features]), "_f", quoted=True, copy=False),
        exp.alias_(exp.Anonymous(this="UNNEST", expressions=[values]), "_v", quoted=True, copy=False),
    ).from_(wide.subquery("_w", copy=False))


def _dense_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, strategy: str, block: int | None, guard: bool = False
) -> tuple[exp.Select, list[exp.Expression]]:
    """The relation the linear sums read from, and the sums (strategies ``inline`` / ``mailman`` / ``pairs``);
    ``guard``: the source relation checks the input (:func:`.guard.input_guard`)."""
    lin = projection.linear
    src = dense_source(projection, source, dialect, checked=guard)
    inputs = Inputs(col(f"_x{i}") for i in range(projection.d))
    if strategy == "mailman":
        plan = best_mailman(lin, dialect, block)
        if plan is None:
            raise InvalidParameter("the mailman strategy needs a sign matrix (+1/-1 weights, no squared features)")
        keys = [col("_id")] + ([col("_g")] if source.group_column else [])
        used = [col(f"_x{i}") for i in range(projection.d) if plan.uses_feature[i]]
        partials = [
            exp.alias_(SignedSum.of(inputs, feat, sign), f"_m{q}", quoted=True, copy=False)
            for q, (feat, sign) in enumerate(plan.partials)
        ]
        # fenced: each partial sum computed once per row (PostgreSQL, parallel plans still allowed:
        # s = 1, 20,000 x 784 wide, 10.0-11.6 s; 16.5-17.3 s under OFFSET 0; `bench/probes.py pg-fence`)
        shared = dialect.fence(exp.select(*keys, *used, *partials).from_(src.subquery("src", copy=False), copy=False))
        extended = Inputs(
            [*(col(f"_x{i}") for i in range(projection.d)), *(col(f"_m{q}") for q in range(len(partials)))]
        )
        sums = [SignedSum.of(extended, idx, sign, lin.vector_bias(v)) for v, (idx, sign) in enumerate(plan.terms)]
        return shared, sums
    if strategy == "pairs":
        return _pairs_linear(projection, source, dialect, src)
    squares = Inputs(exp.Mul(this=col(f"_x{i}"), expression=col(f"_x{i}")) for i in range(projection.d))
    return src, list(_linear_sums(lin, inputs, squares if lin.power is not None else None))


def _pairs_linear(
    projection: Projection, source: Source, dialect: SqlrpDialect, src: exp.Select
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``pairs``: the partial sums of :mod:`.pairs` as columns ``_m{q}`` of nested selects,
    one per level (a partial reads only lower levels; each sits on the last level before its first
    reader), each fenced and passing on only the columns that a later level or an output still reads;
    the outputs sum features and partials.  Where the dialect has ``SELECT * EXCLUDE`` (DuckDB) a
    level names the columns it drops if they are fewer than those it keeps: for d = 784, k = 200 the
    SQL shrinks from 451,000 to 427,000 characters for s = 3 and from 460,000 to 432,000 for s = 1,
    and DuckDB parses it in 0.29-0.31 s instead of 0.32-0.35 s (``PYTHONPATH=. python
    bench/probes.py pairs``, which also counts the carried columns)."""
    lin = projection.linear
    plan = best_pairs(lin, dialect, planner_seconds(lin, source.rows))
    if plan is None:
        raise InvalidParameter("the pairs strategy needs a sign matrix (+1/-1 weights, no squared features)")
    d = projection.d
    names = [f"_x{i}" for i in range(d)] + [f"_m{q}" for q in range(len(plan.partials))]
    inputs = Inputs(col(n) for n in names)
    depth = plan.depth
    defined = np.concatenate([np.zeros(d, dtype=np.int64), plan.level])
    last_use = np.zeros(len(names), dtype=np.int64)  # level that last reads a column (depth + 1: outputs)
    for q, (cols, _) in enumerate(plan.partials):
        np.maximum.at(last_use, cols, plan.level[q])
    for cols, _ in plan.terms:
        last_use[cols] = depth + 1
    keys = [col("_id")] + ([col("_g")] if source.group_column else [])
    relation = src
    available = defined == 0  # the columns of the relation the next level reads
    for lev in range(1, depth + 1):
        keep = (defined < lev) & (last_use > lev)
        drop = available & ~keep
        if dialect.star_exclude and drop.sum() < keep.sum():
            # ``* EXCLUDE`` names the columns dropped here where they are fewer than those kept
            dropped = [col(names[c]) for c in np.flatnonzero(drop)]
            carried: list[exp.Expression] = [exp.Star(except_=dropped) if dropped else exp.Star()]
        else:
            carried = [k.copy() for k in keys] + [col(names[c]) for c in np.flatnonzero(keep)]
        available = keep | (defined == lev)
        new = [
            exp.alias_(SignedSum.of(inputs, *plan.partials[q]), names[d + q], quoted=True, copy=False)
            for q in np.flatnonzero(plan.level == lev)
        ]
        select = exp.select(*carried, *new).from_(relation.subquery(f"_l{lev}", copy=False), copy=False)
        relation = dialect.fence(select)
    sums = [SignedSum.of(inputs, idx, sign, lin.vector_bias(v)) for v, (idx, sign) in enumerate(plan.terms)]
    return relation, sums


def _linear_relation(
    keys: exp.Select, sums: list[exp.Expression], dialect: SqlrpDialect
) -> tuple[exp.Select, list[exp.Expression]]:
    """The linear sums as a relation the combiner reads, and how to refer to sum ``v`` in it.

    Normally one column ``_k{v}`` per sum.  Where that exceeds the engine's column limit (PostgreSQL:
    1,664 per select; P-RP with m = 30 and k = 160 has 4,800 sums) the sums travel as one array
    ``_kv`` read by subscripts.  Either way the relation is fenced, so each sum is computed once per
    row even when several products use it; PostgreSQL's fence still lets the workers of a parallel
    plan compute it (P-RP m = 4 on 20,000 x 784 arrays: 35.9-38.6 s, 66.8-66.9 s under ``OFFSET 0``;
    ``bench/probes.py pg-fence``)."""
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
    matrix: str = "auto",
    strategy: str = "auto",
    block: int | None = None,
    guard: bool = False,
) -> exp.Select:
    """The projection of ``source`` as a sqlglot ``SELECT`` (id column first, then the outputs).

    ``guard``: the input and output checks ride along (:mod:`.guard`; only where
    :func:`.guard.guarded` says so: asked elsewhere, it is refused rather than left out).

    ``matrix`` (long layout only): ``registry`` joins the stored ``sqlrp_linear_entry`` rows,
    ``values`` inlines the matrix as a ``VALUES`` list, ``auto`` picks ``registry`` when the
    projection has a stored name.  ``strategy``: ``auto`` (measured rule, :mod:`.strategies`) or one
    of ``inline`` / ``pairs`` / ``mailman`` / ``list_transform`` (wide, array; the last on DuckDB,
    :mod:`.lists`) and ``join`` / ``lookup`` (long); ``block`` forces the mailman block size.
    """
    dialect = get_dialect(dialect)  # a name resolved at the entry (compose and preprocess pass the object)
    arrayed = source.layout == "array" or (output is not None and output.form == "array")
    if not dialect.arrays and arrayed:
        what = "the array layout" if source.layout == "array" else "array output"
        raise dialect.refuse(f"{what} needs an array type, which this engine does not have; use wide columns")
    if dialect.portable_core:  # refused before rendering: constructs whose meaning varies (dialects/portable.py)
        portable.check(dialect.name, source, output or Output(), strategy, matrix, dialect.values_relation)
    if source.standardize is not None:
        return compile_standardized(
            projection, source, dialect, output, matrix, strategy, block, compile_select=compile_select
        )
    if isinstance(projection, Composed):
        return compile_composed(projection, source, dialect, output, matrix, compile_select)
    output = output or Output()
    if source.layout not in LAYOUTS:  # pragma: no cover - Source validates
        raise InvalidParameter(source.layout)
    names = output.names(projection.k)
    key_out = source.group_column or source.id_column
    check_output_columns(dialect, key_out, names)
    if matrix == "auto":
        matrix = "registry" if projection.name else "values"
    pooled = source.group_column is not None
    strategy = choose(projection, source, dialect, strategy, matrix)
    if dialect.portable_core:
        portable.check(dialect.name, source, output, strategy, matrix, dialect.values_relation)
    if guard and not guardable(projection, source, dialect, strategy):
        raise InvalidParameter(f"the {strategy} plan of this projection cannot check its input in the same statement")

    if source.layout == "long" or strategy in LONG_STRATEGIES:
        unnested = _unnested(projection, source, dialect, guard) if source.layout != "long" else None
        body, k_exprs = _long_linear(projection, source, matrix, dialect, strategy, unnested)
        relation = body.subquery("kv", copy=False)
        key_cols = [col("_g")] if pooled else [col("_id")]
        group_by = [col("_id")] + ([col("_g")] if pooled else [])
        regroup = strategy != "lookup"  # lookup's relation has one row per id already
        if projection.combiner.is_identity and not pooled:
            outputs, base = k_exprs, exp.select(*key_cols).from_(relation)
            if regroup:
                base = base.group_by(*group_by, copy=False)
        else:
            lin_sel = exp.select(*[c.copy() for c in group_by]).from_(relation)
            if regroup:
                lin_sel = lin_sel.group_by(*group_by, copy=False)
            lin_sel, k_cols = _linear_relation(lin_sel, k_exprs, dialect)
            outputs = _combine(projection, k_cols)
            base = exp.select(*key_cols).from_(lin_sel.subquery("lin", copy=False))
    elif strategy == "list_transform":  # linear sums and combiner in lists (:mod:`.lists`)
        # list_sum skips NULLs: a guard reads every feature in the source relation (checked="all")
        src = dense_source(projection, source, dialect, checked="all" if guard else False)
        relation, outputs = list_outputs(projection, source, src)
        key_cols = [col("_g")] if pooled else [col("_id")]
        base = exp.select(*key_cols).from_(relation.subquery("src", copy=False))
    else:
        src, sums = _dense_linear(projection, source, dialect, strategy, block, guard)
        key_cols = [col("_g")] if pooled else [col("_id")]
        if projection.combiner.is_identity:
            outputs, base = list(sums), exp.select(*key_cols).from_(src.subquery("src", copy=False))
        else:
            lin_sel = exp.select(col("_id"), *([col("_g")] if pooled else [])).from_(src.subquery("src", copy=False))
            lin_sel, k_cols = _linear_relation(lin_sel, list(sums), dialect)
            outputs = _combine(projection, k_cols)
            base = exp.select(*key_cols).from_(lin_sel.subquery("lin", copy=False))

    scale = number(projection.scale)
    if pooled:
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


@gc_paused
def compile_sql(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    output: Output | None = None,
    into: str | None = None,
    view: bool = False,
    matrix: str = "auto",
    pretty: bool = True,
    strategy: str = "auto",
    block: int | None = None,
    insert: bool = False,
    temporary: bool = False,
    guard: bool = False,
) -> str:
    """SQL text of the projection: a ``SELECT``, ``CREATE [TEMPORARY] TABLE|VIEW <into> AS SELECT ...``,
    or with ``insert=True`` ``INSERT INTO <into> (key, outputs...) SELECT ...``.  Where the engine's
    limits need several statements (:mod:`.limits`), a script of them, separated by ``;``."""
    statements = compile_statements(
        projection, source, dialect, output, into, view, matrix, pretty, strategy, block, insert, temporary,
        guard=guard,
    )
    return statements.script() if statements.setup else statements.main


@gc_paused
def compile_statements(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    output: Output | None = None,
    into: str | None = None,
    view: bool = False,
    matrix: str = "auto",
    pretty: bool = True,
    strategy: str = "auto",
    block: int | None = None,
    insert: bool = False,
    temporary: bool = False,
    ordered: bool = False,
    bind: bool = False,
    guard: bool = False,
) -> Statements:
    """The projection as statements within the engine's limits: one, or -- for a linear projection
    too large for one statement -- blocks of outputs staged in tables and joined on the id
    (:mod:`.limits`).  Raises :class:`~sqlrp.core.errors.EngineLimit` naming the engine otherwise.
    ``bind``: dense weight matrices go in ``Statements.constants`` instead of the text
    (:func:`.lists.binding`; the caller registers them, as :func:`sqlrp.pipeline.materialise.run` does).
    ``guard``: the input and output checks ride along in each statement (:mod:`.guard`)."""
    dialect = get_dialect(dialect)  # a name resolved once, at the entry: below, the dialect object
    with binding(bind and not view) as bound:
        statements = _statements(
            projection, source, dialect, output, into, view, matrix, pretty, strategy, block, insert, temporary,
            ordered, guard,
        )
    return dataclasses.replace(statements, constants=bound) if bound else statements


def _statements(
    projection: Projection | Composed,
    source: Source,
    dialect: SqlrpDialect,
    output: Output | None,
    into: str | None,
    view: bool,
    matrix: str,
    pretty: bool,
    strategy: str,
    block: int | None,
    insert: bool,
    temporary: bool,
    ordered: bool,
    guard: bool = False,
) -> Statements:
    output = output or Output()
    source, output = fold_names(source, output, dialect)
    into = dialect.fold(into) if into and not temporary else into

    def wrap(select: exp.Select) -> exp.Expression:
        if into and insert:
            names = [source.group_column or source.id_column, *output.names(projection.k)]
            target = exp.Schema(this=target_table(into, source, temporary), expressions=[ident(n) for n in names])
            return exp.Insert(this=target, expression=select)
        if into:
            return exp.Create(
                kind="VIEW" if view else "TABLE",
                this=target_table(into, source, temporary),
                expression=select,
                properties=_table_properties(dialect, temporary, view),
            )
        if ordered:  # rows handed back ordered by the key (its output name)
            return select.order_by(col(source.group_column or source.id_column), copy=False)
        return select

    select = compile_select(projection, source, dialect, output, matrix, strategy, block, guard)
    statement = wrap(select)
    dialect.check_identifiers(statement)  # a name the engine would truncate could name another object
    sql = dialect.render(statement, pretty=pretty)
    if guard and MARKER not in sql:  # a plan that dropped the checks asked for would be silently wrong
        raise RuntimeError(f"sqlrp defect: the {strategy} plan lost the input checks asked of it ({dialect.name})")
    try:
        checked = Statements(check(dialect, statement, sql))
        soft = dialect.split_statement_bytes
        if soft is None or len(sql.encode()) <= soft or view or not splittable(projection, source, output):
            return checked
        count = int(np.ceil(len(sql.encode()) / soft))  # the engine runs smaller statements better
        return _split(projection, source, dialect, output, wrap, count, matrix, strategy, pretty, guard)
    except EngineLimit as exc:
        if view or not splittable(projection, source, output) or dialect.max_columns_exceeded_by(source):
            hint = (
                " (long layout: --matrix registry or a table name keeps the SQL small)"
                if (source.layout == "long" and matrix == "values")
                else ""
            )
            raise dialect.refuse(f"{str(exc).split(': ', 1)[1]}{hint}") from None
    assert isinstance(projection, Projection)
    size = max(len(sql.encode()) / (dialect.max_statement_bytes or float("inf")), 1.0)
    if dialect.max_ast_nodes:
        size = max(size, estimate_nodes(sql) / dialect.max_ast_nodes)
    count = max(2, int(np.ceil(size * 1.25)))
    while count <= projection.k:
        try:
            return _split(projection, source, dialect, output, wrap, count, matrix, strategy, pretty, guard)
        except EngineLimit:
            count *= 2
    raise dialect.refuse("a single output's sum is larger than the engine accepts in one statement")


def _split(projection, source, dialect, output, wrap, count, matrix, strategy, pretty, guard=False) -> Statements:  # noqa: ANN001
    """``count`` staged blocks of outputs and the join that puts them back together."""
    key = source.group_column or source.id_column
    names = output.names(projection.k)
    setup, cleanup, parts = [], [], []
    for b, (start, stop) in enumerate(blocks(projection.k, count)):
        part = output_block(projection, start, stop)
        staged = new_staging_name()
        select = compile_select(part, source, dialect, Output(prefix="_o"), "values", strategy, guard=guard)
        create = exp.Create(
            kind="TABLE",
            this=exp.Table(this=ident(staged)),
            expression=select,
            properties=_table_properties(dialect, False, False),
        )
        sql = dialect.render(create, pretty=pretty)
        setup.append(check(dialect, create, sql))
        cleanup.append(dialect.render(exp.Drop(tables=[exp.Table(this=ident(staged))], kind="TABLE", exists=True)))
        parts.append((f"_b{b}", staged, start, stop))
    first = parts[0][0]
    columns: list[exp.Expression] = [exp.alias_(col(key, first), key, quoted=True, copy=False)]
    for alias, _, start, stop in parts:
        columns += [exp.alias_(col(f"_o{j - start}", alias), names[j], quoted=True) for j in range(start, stop)]
    joined = exp.select(*columns).from_(exp.Table(this=ident(parts[0][1]), alias=exp.TableAlias(this=ident(first))))
    for alias, staged, _, _ in parts[1:]:
        joined = joined.join(
            exp.Table(this=ident(staged), alias=exp.TableAlias(this=ident(alias))),
            on=col(key, alias).eq(col(key, first)),
        )
    statement = wrap(joined)
    main = check(dialect, statement, dialect.render(statement, pretty=pretty))
    return Statements(main, setup, cleanup)


def target_table(into: str, source: Source, temporary: bool = False) -> exp.Table:
    """The output table, in the source's schema (and catalog) unless temporary."""
    if temporary:
        return exp.Table(this=ident(into))
    return exp.Table(
        this=ident(into),
        db=ident(source.schema) if source.schema else None,
        catalog=ident(source.catalog) if source.catalog else None,
    )


def fold_names(source: Source, output: Output, dialect: SqlrpDialect) -> tuple[Source, Output]:
    """User names as the engine stores unquoted names (:meth:`SqlrpDialect.fold`; Snowflake: upper case)."""
    if dialect.identifier_case is None:
        return source, output
    f = dialect.fold
    source = dataclasses.replace(
        source,
        table=f(source.table),
        id_column=f(source.id_column),
        columns=tuple(f(c) for c in source.columns),
        array_column=f(source.array_column) if source.array_column else None,
        feature_column=f(source.feature_column),
        value_column=f(source.value_column),
        schema=f(source.schema) if source.schema else None,
        catalog=f(source.catalog) if source.catalog else None,
        group_column=f(source.group_column) if source.group_column else None,
    )
    return source, dataclasses.replace(output, prefix=f(output.prefix), array_name=f(output.array_name))


def _table_properties(dialect: SqlrpDialect, temporary: bool, view: bool) -> exp.Properties | None:
    """``TEMPORARY`` and whatever the engine needs on every ``CREATE TABLE`` (ClickHouse: ENGINE)."""
    props: list[exp.Expression] = [exp.TemporaryProperty()] if temporary else []
    engine = None if view else dialect.table_properties()
    if engine is not None:
        props.extend(engine.expressions)
    return exp.Properties(expressions=props) if props else None


__all__ = [
    "Output",
    "Source",
    "Statements",
    "as_double",
    "compile_select",
    "compile_sql",
    "compile_statements",
    "feature_input",
    "ident",
    "choose",
]
