"""The index's rows as SQL (what :mod:`sqlrp.search.build` writes and :mod:`sqlrp.search.fresh`
refreshes): each row's list (:func:`assignment_select`), its RaBitQ code words and estimator
constants (:func:`rows_select`; the mathematics in :mod:`sqlrp.search.ivf`), and the table's
fingerprint (:func:`fingerprint`)."""

from __future__ import annotations

from sqlglot import exp

from ..compiler import Source, col, number
from ..core.nodes import balanced
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select
from ..dialects import SqlrpDialect
from .rotation import rotate_select
from .sql import (
    CENTRE,
    HASH,
    ID,
    INT,
    LIST,
    NX,
    ONES,
    PARENT,
    ROTATED,
    TB,
    TOP,
    WORD,
    G,
    IndexLayout,
    cast_to,
    centroids,
    feature_rows,
    named,
    nearest,
    squared_distance,
    with_vector,
    xs,
)


def assignment_select(layout: IndexLayout, rows: exp.Select, dialect: SqlrpDialect) -> exp.Select:
    """``(_id, _list)``: each row of ``rows`` (``_id, _x..``) in the nearest list among the children
    of its nearest top centroid."""
    d = layout.d
    xv = with_vector(rows, d, dialect)
    nearest_top = nearest(xv.subquery("r", copy=False), centroids(layout.tops, TOP, d, dialect), TOP, 1, d, dialect)
    return nearest(
        xv.copy().subquery("r", copy=False),
        centroids(layout.lists, LIST, d, dialect, extra=[PARENT]),
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
    x = feature_rows(source, d, dialect, layout.metric, hashed=True, scale=layout.scale)
    placed = (
        _select(
            named("_id", "x"),
            named("_list", "a"),
            *[named(f"_x{i}", "x") for i in range(d)],
            exp.alias_(squared_distance(xs(d, "x"), xs(d, "l", CENTRE)), "_nx", quoted=True, copy=False),
            named("_h", "x"),
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
            exp.alias_(cast_to(ones, INT), ONES, quoted=True, copy=False),
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
