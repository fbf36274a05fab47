"""The long layout's linear stage: the stored matrix joined with ``(id, feature, value)`` rows.

Strategies ``join`` and ``lookup`` (:mod:`.strategies`): the source (a long table, or a wide one
unnested by :func:`_unnested`) joins the matrix relation ``(vector, feature, weight)``
(:func:`_matrix_relation`: the registry's rows, a warehouse table, or the matrix inlined) and sums
``GROUP BY id, vector``; a pivot then gives one value per output vector -- a ``FILTER`` per vector
(:func:`_join_pivot`) or two collected arrays (:func:`_lookup_pivot`).
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from ..core.errors import InvalidParameter, text_value
from ..core.ir import Combiner, LinearStage, Projection
from ..core.layout import Source
from ..core.nodes import DOUBLE, as_double, col, from_source, ident, number
from ..dialects import SqlrpDialect
from .inputs import dense_source

REGISTRY_ENTRY_TABLE = "sqlrp_linear_entry"
BIGINT = exp.DataType.build("BIGINT")


#: ``matrix`` values that are not a table's name
MATRIX_SOURCES = ("auto", "registry", "values")
#: the strategies that read the matrix from a relation (``registry`` or a table) rather than from the SQL
MATRIX_READERS = ("join", "lookup")


def matrix_table(matrix: str) -> exp.Table | None:
    """The table ``matrix`` names (``table``, ``schema.table`` or ``catalog.schema.table``: dots separate
    the parts), or ``None`` for ``auto``, ``registry`` and ``values``."""
    if matrix in MATRIX_SOURCES:
        return None
    parts = [ident(p) for p in str(matrix).split(".")]
    if len(parts) > 3 or not all(p.name for p in parts):
        raise InvalidParameter(f"matrix table {matrix!r}: give table, schema.table or catalog.schema.table")
    return exp.Table(
        this=parts[-1], db=parts[-2] if len(parts) > 1 else None, catalog=parts[-3] if len(parts) > 2 else None
    )


def check_matrix_used(matrix: str, projection: object, strategy: str, layout: str) -> None:
    """Refuse a matrix table (``--matrix TABLE``) where the SQL would not read it -- a strategy that writes
    the weights into the SQL (``inline``, ``pairs``, ``mailman``, ``list_transform``), or a composition
    (two matrices; a table holds one) -- instead of leaving it unread without a word, so that a wrong
    or missing table never passes for the matrix used.  ``strategy``: the decided one."""
    if matrix_table(matrix) is None:
        return
    if not isinstance(projection, Projection):
        raise InvalidParameter(
            f"--matrix={text_value(matrix)}: a matrix table holds one linear stage, and this projection is a "
            "composition of two: drop --matrix (the stages are stored in the registry under their own names)"
        )
    if strategy not in MATRIX_READERS:
        raise InvalidParameter(
            f"--matrix={text_value(matrix)} is read only by the join and lookup strategies, and this {layout} input is "
            f"projected with the {strategy} strategy, which writes the weights into the SQL: drop --matrix, or "
            "give --strategy=join"
        )


def _matrix_relation(projection: Projection, matrix: str, dialect: SqlrpDialect) -> exp.Expression:
    """The stored matrix as a relation ``(vector, feature, weight)``: ``registry`` (the rows of
    ``sqlrp_linear_entry``), ``values`` (inlined), or the name of a table holding those three
    columns (``matrix="warehouse.rp40"``: dots separate catalog, schema and table; the warehouse
    recipe: ``sqlrp projections export`` the matrix, bulk-load it, ``sqlrp compile --matrix TABLE``)."""
    lin = projection.linear
    columns = [col("vector"), col("feature"), col("weight")]
    if matrix == "registry":
        if not projection.name:
            raise InvalidParameter("the long layout with --matrix=registry needs a stored projection")
        return (
            exp.select(*columns)
            .from_(exp.Table(this=ident(REGISTRY_ENTRY_TABLE)))
            .where(col("projection").eq(exp.Literal.string(projection.name)))
        )
    table = matrix_table(matrix)
    if table is not None:
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


def matrix_values(lin: LinearStage, dialect: SqlrpDialect) -> exp.Expression:
    """A matrix held in memory (not stored) as the relation ``(vector, feature, weight)``, inlined: what
    :func:`_matrix_relation` gives for ``matrix="values"`` (a fit's sketch over a long table)."""
    stage = Projection(method="fit", linear=lin, combiner=Combiner.identity(lin.p), scale=1.0)
    return _matrix_relation(stage, "values", dialect)


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
    output vector -- ``join``: an aggregate with a FILTER per vector (:func:`_join_pivot`); ``lookup``:
    two collected arrays (:func:`_lookup_pivot`).
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
    relation = _matrix_relation(projection, matrix, dialect)
    vector: exp.Expression = exp.cast(col("vector", "m"), BIGINT)
    # a feature no output reads has no entry: an id whose every row is such a feature would join no
    # entry and lose its row (NumPy's is 0) -- the long table then LEFT JOINs, its unmatched rows
    # summed under vector -1, which no output reads (``_hit``: a LEFT JOIN in ClickHouse fills 0, not NULL)
    keep_all = not complete and len(np.unique(lin.feature)) < projection.d
    if keep_all:
        assert isinstance(relation, exp.Select)  # every form of the relation: one more column, no more nesting
        relation = relation.select(exp.alias_(exp.Literal.number(1), "_hit", quoted=True), copy=False)
        hit = exp.EQ(
            this=exp.Coalesce(this=col("_hit", "m"), expressions=[exp.Literal.number(0)]),
            expression=exp.Literal.number(1),
        )

        def matched(e: exp.Expression, other: exp.Expression) -> exp.Expression:
            return exp.Case(ifs=[exp.If(this=hit.copy(), true=e)], default=other)

        vector = matched(vector, exp.cast(exp.Literal.number(-1), BIGINT))
        signed, signed_sq = matched(signed, number(0.0)), matched(signed_sq, number(0.0))
    kv = (
        exp.select(
            *group_keys,
            exp.alias_(vector, "_vec", quoted=True),
            exp.alias_(exp.Sum(this=signed), "_s1", quoted=True, copy=False),
        )
        .from_(src.subquery("s", copy=False))
        .join(
            relation.subquery("m", copy=False),
            on=col("feature", "m").eq(col("_f", "s")),
            join_type="LEFT" if keep_all else None,
        )
        .group_by(*[c.copy() for c in group_keys], vector.copy() if keep_all else col("vector", "m"))
    )
    if lin.power is not None:
        kv = kv.select(exp.alias_(exp.Sum(this=signed_sq), "_s2", quoted=True, copy=False), append=True, copy=False)
    if strategy == "lookup":
        return _lookup_pivot(projection, kv, pooled=source.group_column is not None, complete=complete)
    return _join_pivot(projection, kv, dialect)


def _join_pivot(
    projection: Projection, kv: exp.Select, dialect: SqlrpDialect
) -> tuple[exp.Select, list[exp.Expression]]:
    """Strategy ``join``: output ``j`` is ``COALESCE(SUM(_s1) FILTER (WHERE _vec = j), 0)`` over
    ``kv`` (one row per id and vector; the caller groups it by id): every row is tested k times."""
    lin = projection.linear
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
