"""Fitting a projection into an engine's limits (``SqlrpDialect`` profile: statement bytes,
expression nodes, columns per select).

:func:`fit` compiles the one statement; if the engine would reject it, a linear projection is split
into blocks of outputs, each computed by its own ``CREATE TABLE`` within the limits, and joined on
the id by a last statement of constant size per output.  A projection that cannot be split (kernel
combiners, pooling, a source wider than the engine's column limit) is refused with an error naming
the engine and the limit.  The long layout's SQL grows with the matrix only when it is inlined
(``matrix="values"``); ``matrix="registry"`` or a table name keeps it small, and the error says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
from sqlglot import exp

from ..core.errors import EngineLimit
from ..core.ir import Combiner, LinearStage, Projection
from ..core.names import scratch_name

_TOKEN = re.compile(r'"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|[\w.]+|[-+*/(]')


def estimate_nodes(sql: str) -> int:
    """Expression nodes of a statement, over-counted: every identifier, literal and keyword once,
    every operator and opening parenthesis twice.  ClickHouse parses ``a + b`` as the function
    ``plus`` with an argument list: three elements per term of a sum, not two.  ``PYTHONPATH=. python
    bench/clickhouse_ast.py`` bisects the real count: 2,000 terms need 6,500 elements (this counts
    7,375), 500 terms 1,940 (2,680)."""
    return sum(2 if m.group()[0] in "-+*/(" else 1 for m in _TOKEN.finditer(sql))


def widest_select(statement: exp.Expression) -> int:
    """Most columns any select of ``statement`` produces."""
    return max((len(s.expressions) for s in statement.find_all(exp.Select)), default=0)


#: query-plan optimisations one ``UNION ALL`` branch costs on ClickHouse: a UNION ALL of 2,499
#: one-row selects runs, of 2,500 fails at the limit of 10,000 (chdb 4.4, ``dialects/clickhouse.py``)
OPTIMIZATIONS_PER_BRANCH = 4


_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`")
_UNION = re.compile(r"\bUNION\b", re.IGNORECASE)


def union_branches(sql: str) -> int:
    """``UNION`` branches in the rendered statement ``sql`` (0 without a union), counted in the text:
    sqlglot renders ``VALUES`` as a ``UNION ALL`` for ClickHouse, which the tree does not show."""
    unions = len(_UNION.findall(_QUOTED.sub("", sql)))
    return unions + 1 if unions else 0


def check(dialect, statement: exp.Expression, sql: str) -> str:  # noqa: ANN001 - SqlrpDialect
    """``sql`` (the rendering of ``statement``) if the engine accepts it, else :class:`EngineLimit`."""
    nodes = estimate_nodes(sql) if dialect.max_ast_nodes is not None else None
    limit = dialect.max_plan_optimizations
    if limit is not None:
        branches = union_branches(sql)
        if branches * OPTIMIZATIONS_PER_BRANCH > limit:
            raise dialect.refuse(
                f"the statement has {branches:,} UNION ALL branches, about {OPTIMIZATIONS_PER_BRANCH} query-plan "
                f"optimisations each; the engine applies at most {limit:,} (query_plan_max_optimizations_to_apply)"
            )
    return dialect.check_statement(sql, columns=widest_select(statement), nodes=nodes)


@dataclass
class Statements:
    """What to run: ``setup`` (staging tables), then ``main`` (a SELECT, or the CREATE/INSERT),
    then ``cleanup`` (dropping the staging tables, also after a failure).  ``constants``: dense
    matrices the statements read from relations of these names, registered while they run
    (:func:`sqlrp.compiler.lists.binding`; only for backends with ``binds_constants``)."""

    main: str
    setup: list[str] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def script(self) -> str:
        return ";\n\n".join([*self.setup, self.main, *self.cleanup]).rstrip(";") + ";"


def within_limits(conditions: list[exp.Expression], dialect) -> list[list[exp.Expression]]:  # noqa: ANN001
    """``conditions`` cut into groups whose ``OR`` fits half the engine's statement size and syntax-tree
    limits (the rest: the select, the table and its subquery).  ClickHouse reads 262,144 bytes of a
    query: the check of 5,000 features (about 60 bytes each) failed there (issue 41)."""
    max_bytes = dialect.max_statement_bytes
    max_nodes = dialect.max_ast_nodes
    if max_bytes is None and max_nodes is None:
        return [conditions]

    def names(condition: exp.Expression) -> int:
        return sum(len(i.name.encode()) for i in condition.find_all(exp.Identifier))

    # the conditions differ in their column names only: one is rendered, the others' sizes follow from it
    # (rendering each of 5,000 took half a minute)
    first = conditions[0]
    fixed = len(dialect.render(first).encode()) + 4 - 2 * names(first)  # and " OR "; a name may be quoted
    groups: list[list[exp.Expression]] = [[]]
    size = nodes = 0
    for condition in conditions:
        n_bytes = fixed + 2 * names(condition)
        n_nodes = sum(1 for _ in condition.walk()) + 1
        over = (max_bytes is not None and size + n_bytes > max_bytes // 2) or (
            max_nodes is not None and nodes + n_nodes > max_nodes // 2
        )
        if over and groups[-1]:
            groups.append([])
            size = nodes = 0
        groups[-1].append(condition)
        size += n_bytes
        nodes += n_nodes
    return groups


def output_block(projection: Projection, start: int, stop: int) -> Projection:
    """The linear projection restricted to outputs ``start .. stop - 1`` (same scale)."""
    lin = projection.linear
    keep = (lin.vector >= start) & (lin.vector < stop)
    linear = LinearStage(
        d=lin.d,
        p=stop - start,
        vector=lin.vector[keep] - start,
        feature=lin.feature[keep],
        weight=lin.weight[keep],
        bias=None if lin.bias is None else lin.bias[start:stop],
    )
    return Projection(
        method=projection.method,
        linear=linear,
        combiner=Combiner.identity(stop - start),
        scale=projection.scale,
        params=projection.params,
        seed=projection.seed,
    )


def splittable(projection: object, source, output) -> bool:  # noqa: ANN001
    """Only linear projections of single rows into wide outputs split into blocks of outputs."""
    return (
        isinstance(projection, Projection)
        and projection.combiner.is_identity
        and projection.linear.power is None
        and source.group_column is None
        and source.standardize is None
        and output.form == "wide"
        and projection.k > 1
    )


def blocks(k: int, count: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, k, count + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def new_staging_name() -> str:
    return scratch_name("block")


def too_large(exc: EngineLimit) -> bool:
    return "columns" not in str(exc) or "select would have" not in str(exc)
