"""Statements: the select of :mod:`.select` as the text an engine runs.

``CREATE [TEMPORARY] TABLE|VIEW .. AS``, ``INSERT INTO`` or a plain (optionally ordered) ``SELECT``,
rendered for the dialect, with user names folded as the engine stores them (:func:`fold_names`).
Where the statement exceeds the engine's limits (:mod:`.limits`) it is split into blocks of outputs,
each staged in a table, and a join that puts them back together (:func:`_split`).
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict, Unpack

import numpy as np
from sqlglot import exp

from ..core.errors import EngineLimit, cli_words
from ..core.ir import Composed, Projection
from ..core.layout import Formulation, Output, Source, Target
from ..core.nodes import col, gc_paused, ident
from ..core.plan import Plan
from ..dialects import SqlrpDialect, get_dialect
from .guard import MARKER
from .limits import Statements, blocks, check, estimate_nodes, new_staging_name, output_block, splittable
from .lists import binding
from .select import compile_select


class SqlOptions(TypedDict, total=False):
    """The keyword options of :func:`compile_sql`: the statement's form (:class:`~sqlrp.core.layout.Target`)
    and its formulation (:class:`~sqlrp.core.layout.Formulation`)."""

    #: ``CREATE TABLE <into> AS`` (or ``INSERT INTO <into>`` with ``insert``, a ``VIEW`` with ``view``)
    into: str | None
    view: bool
    insert: bool
    temporary: bool
    #: where the matrix comes from: ``auto``, ``registry`` or ``values``
    matrix: str
    #: ``auto`` or a name of :data:`sqlrp.compiler.strategies.STRATEGIES`
    strategy: str
    #: mailman's block size
    block: int | None
    #: the input and output checks ride along (:mod:`.guard`)
    guard: bool


def compile_sql(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect = "duckdb",
    output: Output | None = None,
    *,
    pretty: bool = True,
    **options: Unpack[SqlOptions],
) -> str:
    """SQL text of the projection: a ``SELECT``, ``CREATE [TEMPORARY] TABLE|VIEW <into> AS SELECT ...``,
    or with ``insert=True`` ``INSERT INTO <into> (key, outputs...) SELECT ...``.  Where the engine's
    limits need several statements (:mod:`.limits`), a script of them, separated by ``;``.

    :param projection: the projection (or composition) to compile.
    :param source: the input relation and its layout.
    :param dialect: the engine's dialect, by name or as an object.
    :param output: the output's form (default: wide columns ``p0 .. p{k-1}``).
    :param pretty: indented text.
    :param options: :class:`SqlOptions` -- ``into``, ``view``, ``insert``, ``temporary`` (the
        statement), ``matrix``, ``strategy``, ``block``, ``guard`` (the formulation).
    :returns: the SQL, one statement or a script of them.
    """
    target = Target(**{key: options.pop(key) for key in ("into", "view", "insert", "temporary") if key in options})
    how = Formulation(**options)  # type: ignore[arg-type]
    plan = Plan(projection, source, output or Output(), how)
    statements = compile_statements(plan, dialect, dataclasses.replace(target, ordered=False), pretty=pretty)
    return statements.script() if statements.setup else statements.main


@gc_paused
def compile_statements(
    plan: Plan, dialect: str | SqlrpDialect = "duckdb", target: Target | None = None, *, pretty: bool = True
) -> Statements:
    """The plan's projection as statements within the engine's limits: one, or -- for a linear projection
    too large for one statement -- blocks of outputs staged in tables and joined on the id
    (:mod:`.limits`).  Raises :class:`~sqlrp.core.errors.EngineLimit` naming the engine otherwise.

    :param plan: the projection, its input and output, and its formulation ``plan.how``: what that
        leaves ``auto`` is decided by :func:`.select.compile_select`.  ``how.bind``: dense weight
        matrices go in ``Statements.constants`` instead of the text (:func:`.lists.binding`; the caller
        registers them, as :func:`sqlrp.pipeline.materialise.run` does).  ``how.guard``: the input and
        output checks ride along in each statement (:mod:`.guard`).
    :param dialect: the engine's dialect, by name or as an object.
    :param target: the statement: ``into`` (a ``CREATE TABLE|VIEW``, or ``INSERT INTO`` with ``insert``,
        ``TEMPORARY`` with ``temporary``), or rows back (``ordered`` by the key).  Default: an unordered
        ``SELECT``.
    :param pretty: indented text.
    """
    dialect = get_dialect(dialect)  # a name resolved once, at the entry: below, the dialect object
    target = target or Target(ordered=False)
    with binding(plan.how.bind and not target.view) as bound:
        statements = _statements(plan, dialect, target, pretty)
    return dataclasses.replace(statements, constants=bound) if bound else statements


def _statements(plan: Plan, dialect: SqlrpDialect, target: Target, pretty: bool) -> Statements:
    projection, how = plan.projection, plan.how
    source, output = fold_names(plan.source, plan.output, dialect)
    into, view, guard = target.into, target.view, how.guard
    into = dialect.fold(into) if into and not target.temporary else into

    def wrap(select: exp.Select) -> exp.Expression:
        if into and target.insert:
            names = [source.group_column or source.id_column, *output.names(projection.k)]
            table = target_table(into, source, target.temporary)
            return exp.Insert(this=exp.Schema(this=table, expressions=[ident(n) for n in names]), expression=select)
        if into:
            return exp.Create(
                kind="VIEW" if view else "TABLE",
                this=target_table(into, source, target.temporary),
                expression=select,
                properties=_table_properties(dialect, target.temporary, view),
            )
        if target.ordered:  # rows handed back ordered by the key (its output name)
            return select.order_by(col(source.group_column or source.id_column), copy=False)
        return select

    statement = wrap(compile_select(projection, source, dialect, output, how))
    dialect.check_identifiers(statement)  # a name the engine would truncate could name another object
    sql = dialect.render(statement, pretty=pretty)
    if guard and MARKER not in sql:  # a plan that dropped the checks asked for would be silently wrong
        raise RuntimeError(f"sqlrp defect: the {how.strategy} plan lost the input checks asked of it ({dialect.name})")
    try:
        checked = Statements(check(dialect, statement, sql))
        soft = dialect.split_statement_bytes
        if soft is None or len(sql.encode()) <= soft or view or not splittable(projection, source, output):
            return checked
        count = int(np.ceil(len(sql.encode()) / soft))  # the engine runs smaller statements better
        return _split(projection, source, dialect, output, wrap, count, how, pretty)
    except EngineLimit as exc:
        if view or not splittable(projection, source, output) or dialect.max_columns_exceeded_by(source):
            hint = (
                " (long layout: --matrix=registry or --matrix=TABLE keeps the SQL small)"
                if (source.layout == "long" and how.matrix == "values")
                else ""
            )
            raise dialect.refuse(f"{cli_words(exc).split(': ', 1)[1]}{hint}") from None
    assert isinstance(projection, Projection)
    size = max(len(sql.encode()) / (dialect.max_statement_bytes or float("inf")), 1.0)
    if dialect.max_ast_nodes:
        size = max(size, estimate_nodes(sql) / dialect.max_ast_nodes)
    count = max(2, int(np.ceil(size * 1.25)))
    while count <= projection.k:
        try:
            return _split(projection, source, dialect, output, wrap, count, how, pretty)
        except EngineLimit:
            count *= 2
    raise dialect.refuse("a single output's sum is larger than the engine accepts in one statement")


def _split(projection, source, dialect, output, wrap, count, how, pretty) -> Statements:  # noqa: ANN001
    """``count`` staged blocks of outputs and the join that puts them back together (each block's
    matrix inlined, its pairs plan, if any, its own)."""
    key = source.group_column or source.id_column
    names = output.names(projection.k)
    setup, cleanup, parts = [], [], []
    for b, (start, stop) in enumerate(blocks(projection.k, count)):
        part = output_block(projection, start, stop)
        staged = new_staging_name()
        part_how = dataclasses.replace(how, matrix="values", pairs=None)
        select = compile_select(part, source, dialect, Output(prefix="_o"), part_how)
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
