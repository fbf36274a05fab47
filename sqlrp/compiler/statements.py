"""Statements: the select of :mod:`.select` as the text an engine runs.

``CREATE [TEMPORARY] TABLE|VIEW .. AS``, ``INSERT INTO`` or a plain (optionally ordered) ``SELECT``,
rendered for the dialect, with user names folded as the engine stores them (:func:`fold_names`).
Where the statement exceeds the engine's limits (:mod:`.limits`) it is split into blocks of outputs,
each staged in a table, and a join that puts them back together (:func:`_split`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sqlglot import exp

from ..core.errors import EngineLimit
from ..core.ir import Composed, Projection
from ..core.layout import Output, Source
from ..core.nodes import col, gc_paused, ident
from ..dialects import SqlrpDialect, get_dialect
from .guard import MARKER
from .limits import Statements, blocks, check, estimate_nodes, new_staging_name, output_block, splittable
from .lists import binding
from .select import compile_select


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
