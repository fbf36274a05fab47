"""The input relation of the wide and array layouts: ``_id``, ``[_g,]`` and one DOUBLE column ``_x{i}``
per feature, read from the source table (PostgreSQL's arrays detoasted once per row in a fence)."""

from __future__ import annotations

from sqlglot import exp

from ..core.errors import InvalidParameter
from ..core.ir import Projection
from ..core.layout import Source
from ..core.nodes import col, feature_input, from_source
from ..dialects import SqlrpDialect
from .guard import input_guard


def dense_source(
    projection: Projection | int, source: Source, dialect: SqlrpDialect, checked: bool | str = False
) -> exp.Select:
    """``SELECT _id, [_g,] _x0 .. _x{d-1} FROM <table>`` for the wide and array layouts (``d`` given,
    or the projection's).  ``checked``: with the input's guard of :func:`.guard.input_guard` (the
    features no output reads, the arrays' lengths; ``"all"``: every feature) in its ``WHERE``."""
    d = projection if isinstance(projection, int) else projection.d
    keys = [exp.alias_(col(source.id_column), "_id", quoted=True, copy=False)]
    if source.group_column:
        keys.append(exp.alias_(col(source.group_column), "_g", quoted=True, copy=False))
    if source.layout == "wide":
        if len(source.columns) != d:
            raise InvalidParameter(
                f"the projection expects d = {d} features but {len(source.columns)} columns were given"
            )
        feats = [col(c) for c in source.columns]
        inner = from_source(exp.select(*keys), source)
        array, key = None, col(source.id_column)
    else:
        assert source.array_column is not None
        array = col(source.array_column)
        if dialect.needs_materialised_array():
            # detoast once per row in a fenced sub-query (the fence allows parallel plans: dialects/postgres.py)
            passthrough = [col("_id")] + ([col("_g")] if source.group_column else [])
            raw = exp.select(*keys, exp.alias_(col(source.array_column), "_a0", quoted=True, copy=False))
            detoasted = exp.alias_(dialect.array_source(col("_a0")), "_a", quoted=True, copy=False)
            fenced = dialect.fence(
                exp.select(*passthrough, detoasted).from_(from_source(raw, source).subquery("_t", copy=False))
            )
            inner = exp.select(*[c.copy() for c in passthrough]).from_(fenced.subquery("_arr", copy=False))
            array, key = col("_a"), col("_id")
        else:
            inner = from_source(exp.select(*keys), source)
            key = col(source.id_column)
        # a list, never a MAP: sqlglot's DuckDB writer then skips inferring the type of each subscript's
        # array (half the time of rendering 300 subscripts; the text is the same)
        feats = [
            exp.Bracket(this=array.copy(), expressions=[exp.Literal.number(i)], offset=0, returns_list_for_maps=True)
            for i in range(d)
        ]
    if checked and isinstance(projection, Projection):
        guard = input_guard(projection, source, dialect, feats, key, array, every=checked == "all")
        if guard is not None:
            inner = inner.where(guard, copy=False)
    relation = inner.select(
        *[exp.alias_(feature_input(f, source), f"_x{i}", quoted=True, copy=False) for i, f in enumerate(feats)],
        append=True,
        copy=False,
    )
    if source.layout == "array" and dialect.needs_materialised_array():
        # read each element once per row: unfenced, PostgreSQL would inline `_a[i]` into every sum that
        # uses feature i (`PYTHONPATH=. python -m bench.probes pg-array`; figures: docs/benchmarks.md,
        # "Compiler")
        relation = dialect.fence(relation)
    return relation
