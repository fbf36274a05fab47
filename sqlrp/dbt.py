"""Projections as dbt models (``sqlrp dbt``; :func:`dbt_model`).

dbt runs a model's ``SELECT`` inside its own ``CREATE TABLE ... AS (...)`` (or an ``INSERT`` for an
incremental model), reading other relations through ``{{ ref('model') }}`` and ``{{ source('s', 't') }}``
(`dbt's docs, "ref", "source", "is_incremental" <https://docs.getdbt.com/reference/dbt-jinja-functions>`_).
:func:`dbt_model` writes into a dbt project:

- ``models/<into>.sql``: the projection's ``SELECT`` as ``sqlrp compile`` renders it for the dialect of
  the project's adapter (:mod:`sqlrp.dbt_project`), with the input relation as ``ref``/``source``, no
  trailing ``;``, and -- where the engine raises from inside a query (DuckDB, PostgreSQL; wide and array
  inputs) -- the in-query input and output checks of :mod:`sqlrp.compiler.guard`.  ``incremental``:
  ``materialized='incremental'``, ``unique_key`` the id, and ``{% if is_incremental() %}`` keeping only
  the ids not in ``{{ this }}`` yet;
- ``seeds/<into>_matrix.csv`` (and its ``.yml`` with the column types) where the SQL joins the matrix
  rather than writing it into the text: the long layout (and the ``join`` / ``lookup`` strategies),
  ``(vector, feature, weight)`` as ``sqlrp projections export`` writes it, each weight in its shortest
  exact decimal (``repr``);
- ``tests/<into>_input_check.sql``: a singular test returning the input rows the projection would
  refuse -- a NULL (unless ``nulls='zero'``), NaN or infinite feature, a NULL array or one of another
  length, a feature index that is NULL, not an integer or outside ``[0, d)``, a NULL id (long layout)
  or group -- as :func:`sqlrp.pipeline.checks.check_source` finds them;
- ``tests/<into>_self_check.sql``: ``sqlrp compile --check``'s statement (:mod:`sqlrp.compiler.selfcheck`:
  the same SQL on a built-in fixture, compared with NumPy's outputs), returning a row unless it says 'ok'.

``dbt build`` then loads the seed, tests the input, materialises the model and runs the self-check.
The SQL is made with the placeholders of :data:`PLACEHOLDERS` for the relations dbt names, each
replaced after rendering by its Jinja (quoted as the dialect quotes it, case as it folds it).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Unpack

import numpy as np
from sqlglot import exp

from .backends import Backend
from .compiler import Output, Source, compile_statements, dense_source, fold_names, strategies
from .compiler.guard import guardable
from .compiler.long import MATRIX_READERS
from .compiler.selfcheck import check_select
from .core.errors import InvalidParameter
from .core.ir import Composed, Projection
from .core.layout import SOURCE_OPTIONS, Formulation, Target, refuse_other_d
from .core.nodes import as_double, col, ident
from .core.options import PlanOptions, refuse_unknown
from .core.plan import Plan
from .dbt_project import NAME, DbtProject, check_name, read_project, refuse_existing, write_files
from .dialects import SqlrpDialect, get_dialect
from .methods import make_projection
from .pipeline import given
from .pipeline.checks import any_of, bad_index
from .pipeline.plan import plan, registry_of

#: the placeholder table and column names of the relations dbt names, and what each becomes
PLACEHOLDERS = {"input": "_sqlrp_dbt_input_", "matrix": "_sqlrp_dbt_matrix_", "this": "_sqlrp_dbt_this_"}
NEW_ROWS = "_sqlrp_dbt_new_rows_"  #: the incremental filter's placeholder (a boolean column)
SEED_NOTE = "the projection's matrix (vector, feature, weight), written by sqlrp dbt"


class DbtOptions(PlanOptions, total=False):
    """:func:`dbt_model`'s options: the input and a new projection's parameters (:func:`sqlrp.plan`'s), how
    the SQL is written, the model's materialisation, and which dbt profile target to render for."""

    method: str | None
    k: int | None
    seed: int | None
    strategy: str
    """``auto`` or a strategy of :data:`sqlrp.compiler.strategies.STRATEGIES`"""
    block: int | None
    incremental: bool
    """an incremental model: each ``dbt run`` adds the ids not in the table yet"""
    replace: bool
    """overwrite the files sqlrp wrote before (else refused if any exists)"""
    profiles_dir: str | None
    """the folder of ``profiles.yml`` (default: ``$DBT_PROFILES_DIR``, the project's folder, ``~/.dbt``)"""
    target: str | None
    """the profile's target whose adapter the SQL is rendered for (default: the profile's own)"""


_OWN = ("method", "k", "seed", "strategy", "block", "incremental", "replace", "profiles_dir", "target")


def dbt_model(
    project_dir: str | os.PathLike[str],
    into: str,
    id_column: str,
    projection: str | Projection | Composed | None = None,
    *,
    db: Backend | None = None,
    ref: str | None = None,
    source: str | None = None,
    **options: Unpack[DbtOptions],
) -> list[Path]:
    """Write a projection into the dbt project ``project_dir`` as the model ``into`` (module docstring:
    the model, the matrix seed where the SQL joins one, the input check and the self-check as tests).

    The input is the dbt model ``ref`` or the dbt source ``source`` (``"source_name.table_name"``), one of
    them.  Its feature columns are read from ``db`` when that database holds a table of that name (in
    ``schema``); else they are given (``columns``; ``d`` for the long and array layouts), as ``sqlrp
    compile`` takes them for a table it does not reach.

    :param project_dir: the dbt project's folder (its ``dbt_project.yml``; the profile's adapter sets the
        dialect, :mod:`sqlrp.dbt_project`).
    :param into: the model's name (``models/<into>.sql``).
    :param id_column: the input's key, the model's first column (and its ``unique_key``).
    :param projection: a stored projection's name (in ``db``), a projection file, a
        :class:`~sqlrp.core.ir.Projection`, or ``None`` for a new one of ``method``, ``k`` and ``seed``
        (stored under a name given here when ``db`` is given).
    :param db: the database holding the stored projection and, possibly, the input table.
    :param ref: the input as a dbt model's name.
    :param source: the input as a dbt source, ``"source_name.table_name"``.
    :param options: :class:`DbtOptions`.
    :returns: the files written.
    """
    refuse_unknown("dbt_model", options, (*PlanOptions.__annotations__, *_OWN))
    given_options: dict[str, Any] = dict(options)
    project = read_project(project_dir, given_options.pop("profiles_dir", None), given_options.pop("target", None))
    check_name(into, "into")
    relation, table = _input(ref, source)
    dialect = get_dialect(project.dialect)
    incremental, replace = bool(given_options.pop("incremental", False)), bool(given_options.pop("replace", False))
    if incremental and given_options.get("group_column"):
        raise InvalidParameter("--incremental adds rows by id, and --group-column pools rows into groups: drop one")
    seed = f"{into}_matrix"
    paths = {
        "model": project.models / f"{into}.sql",
        "csv": project.seeds / f"{seed}.csv",
        "yml": project.seeds / f"{seed}.yml",
        "input": project.tests / f"{into}_input_check.sql",
        "self": project.tests / f"{into}_self_check.sql",
    }
    refuse_existing(project, paths.values(), into, replace)  # before anything is made or stored
    how = Formulation(strategy=given_options.pop("strategy", "auto"), block=given_options.pop("block", None))
    proj, src, out = _bound(db, table, id_column, projection, given_options)
    src = dataclasses.replace(src, table=PLACEHOLDERS["input"], schema=None, catalog=None)
    how = _decided(proj, src, dialect, how)
    files = {paths["model"]: _model(proj, src, out, dialect, how, relation, incremental, seed)}
    if how.matrix != "values":
        assert isinstance(proj, Projection)
        files[paths["csv"]] = _matrix_csv(proj)
        files[paths["yml"]] = _seed_properties(seed, dialect)
    jinja = {PLACEHOLDERS["input"]: relation, PLACEHOLDERS["matrix"]: f"{{{{ ref('{seed}') }}}}"}
    files[paths["input"]] = _test(_input_check(proj.d, src, dialect), dialect, jinja)
    check = check_select(proj, src, dialect, out, how)
    failing = exp.select("*").from_(check.subquery("_sqlrp_self_check")).where(col("sqlrp_check").neq("ok"))
    files[paths["self"]] = _test(failing, dialect, jinja)
    written = write_files(files)
    if paths["model"] in files and paths["yml"] not in files and _seed_written_by_sqlrp(paths["yml"]):
        for stale in (paths["csv"], paths["yml"]):  # --replace: the matrix of the model replaced, no longer read
            stale.unlink(missing_ok=True)
    return written


def _seed_written_by_sqlrp(path: Path) -> bool:
    """``path`` is a seed's properties file that :func:`dbt_model` wrote."""
    try:
        return SEED_NOTE in path.read_text()
    except OSError:
        return False


def _input(ref: str | None, source: str | None) -> tuple[str, str]:
    """The input's Jinja (``{{ ref('m') }}`` / ``{{ source('s', 't') }}``) and its table's name."""
    if (ref is None) == (source is None):
        raise InvalidParameter("name the input once: --ref MODEL (a dbt model) or --source SOURCE.TABLE (a dbt source)")
    if ref is not None:
        return f"{{{{ ref('{check_name(ref, 'ref')}') }}}}", ref
    parts = str(source).split(".")
    if len(parts) != 2:
        raise InvalidParameter(f"--source takes SOURCE.TABLE (the dbt source's name, a dot, its table), got {source!r}")
    name, table = (check_name(p, "source") for p in parts)
    return f"{{{{ source('{name}', '{table}') }}}}", table


def _bound(
    db: Backend | None, table: str, id_column: str, projection: Any, options: dict[str, Any]
) -> tuple[Projection | Composed, Source, Output]:
    """The projection, the input and the output: planned on ``db`` (:func:`sqlrp.plan`) where it holds
    the table, else as ``sqlrp compile`` binds a table it does not reach (the columns given)."""
    method, k, seed = options.pop("method", None), options.pop("k", None), options.pop("seed", None)
    if db is not None and db.table_exists(table, options.get("schema")):
        p = plan(db, table, id_column, projection, method=method, k=k, seed=seed, **options)
        return p.projection, p.source, p.output
    inputs = {key: options.pop(key) for key in SOURCE_OPTIONS if key in options}
    output, prefix, dtype = options.pop("output", "wide"), options.pop("prefix", "p"), options.pop("dtype", None)
    d = options.pop("d", None)
    save_as = options.pop("save_as", None)
    if options.pop("standardize", False):
        raise InvalidParameter("--standardize computes the feature statistics in the database: give --db holding it")
    options.pop("store", None)
    src = Source(table, id_column, **inputs)
    if src.layout == "array" and not src.array_column:
        raise InvalidParameter("name the array column with --array-column (array layout; the table is not in a --db)")
    new = dict(method=method, k=k, d=d, seed=seed, params=options)
    proj = _given(db, projection, new)
    if proj is None:
        refuse_other_d(src.columns, d)
        d = len(src.columns) if src.columns else d
        if not d or k is None:
            where = f"no table {table!r} in --db" if db is not None else f"without --db the features of {table!r}"
            raise InvalidParameter(
                f"{where} to read the features off: give --k and --columns (wide layout) or --d, or --projection"
            )
        proj = make_projection(method or "achlioptas", d, k, seed=0 if seed is None else seed, **options)
        if db is not None and (projection or save_as):
            registry_of(db).save(proj, projection or save_as)
    if src.layout == "wide" and len(src.columns) != proj.d:
        raise InvalidParameter(
            f"name the {proj.d} feature columns with --columns (wide layout; the table is not in a --db)"
            if not src.columns
            else f"--columns names {len(src.columns)} features; the projection has d = {proj.d}"
        )
    return proj, src, Output(output, prefix, prefix, dtype or "float64")


def _given(db: Backend | None, projection: Any, new: dict[str, Any]) -> Projection | Composed | None:
    """The projection given (an object, a file, a stored name), checked against the options of a new
    one; ``None`` where a new one is to be drawn."""
    if isinstance(projection, (Projection, Composed)):
        found, origin = projection, "projection given"
    elif isinstance(projection, str) and given.read_file(projection) is not None:
        found, origin = given.read_file(projection), f"file {projection!r}"
    elif isinstance(projection, str) and db is not None and registry_of(db).exists(projection):
        found, origin = registry_of(db).load(projection), f"stored projection {projection!r}"
    elif isinstance(projection, str) and new["k"] is None:
        where = "in --db" if db is not None else "without --db (no registry to look in)"
        raise InvalidParameter(f"no stored projection {projection!r} {where}: give --db, or --k for a new one")
    else:
        return None
    given.check_agrees(found, origin, **new)
    return found


def _decided(proj: Projection | Composed, src: Source, dialect: SqlrpDialect, how: Formulation) -> Formulation:
    """The strategy decided once; the matrix joined from the seed where that strategy joins one; the
    in-query checks where the engine can raise (:func:`sqlrp.compiler.guard.guardable`)."""
    if not isinstance(proj, Projection):
        return dataclasses.replace(how, matrix="values")
    strategy, pairs = strategies.decide(proj, src, dialect, how.strategy, "values")
    matrix = PLACEHOLDERS["matrix"] if strategy in MATRIX_READERS else "values"
    return dataclasses.replace(
        how, matrix=matrix, strategy=strategy, pairs=pairs, guard=guardable(proj, src, dialect, strategy)
    )


def _model(
    proj: Projection | Composed,
    src: Source,
    out: Output,
    dialect: SqlrpDialect,
    how: Formulation,
    relation: str,
    incremental: bool,
    seed: str,
) -> str:
    """The model's text: its config, a comment saying what it is, and the ``SELECT``."""
    key = dialect.fold(src.id_column)
    if incremental:
        this = exp.Table(this=ident(PLACEHOLDERS["this"]))
        known = exp.select(col(key)).from_(this).where(exp.Not(this=exp.Is(this=col(key), expression=exp.Null())))
        src = dataclasses.replace(src, row_filter=exp.column(NEW_ROWS))
        new_rows = dialect.render(exp.Not(this=exp.In(this=col(key), query=known.subquery())))
    statements = compile_statements(Plan(proj, src, out, how), dialect, Target(ordered=False))
    if statements.setup:
        raise InvalidParameter(
            f"this projection is too large for one {dialect.name} statement, and a dbt model is one: "
            "choose a smaller k, or project with sqlrp project --into"
        )
    jinja = {PLACEHOLDERS["input"]: relation, PLACEHOLDERS["matrix"]: f"{{{{ ref('{seed}') }}}}"}
    config = "materialized='table'"
    if incremental:
        filtered = _with_jinja(new_rows, dialect, {PLACEHOLDERS["this"]: "{{ this }}"})
        jinja[NEW_ROWS] = f"({{% if is_incremental() %}}{filtered}{{% else %}}1 = 1{{% endif %}})"
        unique = key if NAME.match(key) and key == key.lower() else dialect.render(col(key))  # dbt writes it as is
        config = f"materialized='incremental', unique_key='{_quote(unique)}'"
    sql = _with_jinja(statements.main, dialect, jinja)
    what = proj.name or f"new {proj.method}, d = {proj.d}, k = {proj.k}, seed = {getattr(proj, 'seed', None)}"
    note = " ".join(f"{what}; params {proj.params}".replace("#}", "# }").split())
    header = f"{{{{ config({config}) }}}}\n{{# written by sqlrp dbt ({note}): re-run it with --replace to change it #}}"
    return f"{header}\n{sql.rstrip().rstrip(';')}\n"


def _quote(text: str) -> str:
    """``text`` inside a Jinja single-quoted string."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _raw(text: str) -> str:
    """SQL text as Jinja leaves it: ``{% raw %}`` around it if it holds a Jinja delimiter (a column named so)."""
    if not any(mark in text for mark in ("{{", "{%", "{#")):
        return text
    if "endraw" in text:
        raise InvalidParameter("a name of the input holds Jinja's 'endraw': dbt cannot keep it as it is; rename it")
    return "{% raw %}" + text + "{% endraw %}"


def _with_jinja(sql: str, dialect: SqlrpDialect, jinja: dict[str, str]) -> str:
    """``sql`` with each placeholder it holds replaced by its Jinja, the text between them raw if it must be."""
    names = [p for p in jinja if re.search(re.escape(p), sql, re.IGNORECASE)]
    if not names:
        return _raw(sql)
    pattern = re.compile(r"""["`\[]?(""" + "|".join(map(re.escape, names)) + r""")["`\]]?""", re.IGNORECASE)
    parts, last = [], 0
    for found in pattern.finditer(sql):
        parts += [_raw(sql[last : found.start()]), jinja[found.group(1).lower()]]
        last = found.end()
    return "".join([*parts, _raw(sql[last:])])


def _test(select: exp.Expression, dialect: SqlrpDialect, jinja: dict[str, str]) -> str:
    """A singular test's text: the rows it returns are failures."""
    return _with_jinja(dialect.render(select, pretty=True), dialect, jinja).rstrip().rstrip(";") + "\n"


def _input_check(d: int, src: Source, dialect: SqlrpDialect) -> exp.Expression:
    """The rows of the input the projection would refuse (module docstring), by their id."""

    def bad(value: exp.Expression) -> exp.Expression:
        cond: exp.Expression = dialect.not_finite(as_double(value.copy()))
        if src.nulls == "error":
            cond = exp.or_(exp.Is(this=value.copy(), expression=exp.Null()), cond)
        loose = dialect.not_a_number(value.copy())
        return cond if loose is None else exp.or_(cond, loose)

    src, _ = fold_names(src, Output(), dialect)
    table = exp.Table(this=ident(src.table))
    keys = [src.group_column] if src.group_column else []
    if src.layout == "wide":
        conds = [bad(col(c)) for c in src.columns]
    elif src.layout == "array":  # the lengths on the table, the elements through the compiler's own reading
        assert src.array_column is not None
        array = col(src.array_column)
        length = exp.ArraySize(this=array.copy(), expression=exp.Literal.number(1))
        conds = [
            exp.Is(this=array.copy(), expression=exp.Null()),
            exp.NEQ(this=length, expression=exp.Literal.number(d)),
        ]
        dense = dense_source(d, dataclasses.replace(src, group_column=None), dialect).subquery("_sqlrp_src")
        elements = exp.select(col("_id")).from_(dense).where(any_of([bad(col(f"_x{i}")) for i in range(d)]))
        conds.append(exp.In(this=col(src.id_column), query=elements.subquery()))
    else:
        conds = [*bad_index(src.feature_column, d, dialect), bad(col(src.value_column))]
        keys.append(src.id_column)
    conds += [exp.Is(this=col(key), expression=exp.Null()) for key in keys]
    return exp.select(col(src.id_column)).from_(table).where(any_of(conds))


def _matrix_csv(proj: Projection) -> str:
    """The linear stage's non-zeros as ``vector,feature,weight`` lines, each weight exact (``repr``)."""
    lin = proj.linear
    lines = ["vector,feature,weight"]
    for v, f, w in zip(
        lin.vector.tolist(), lin.feature.tolist(), np.asarray(lin.weight, dtype=float).tolist(), strict=True
    ):
        lines.append(f"{v},{f},{w!r}")
    return "\n".join(lines) + "\n"


def _seed_properties(seed: str, dialect: SqlrpDialect) -> str:
    """The seed's properties: its column types, so that no weight is read as a decimal or an integer."""
    whole, real = (dialect.render(exp.DataType.build(t)) for t in ("BIGINT", "DOUBLE"))
    return (
        "version: 2\n\nseeds:\n"
        f"  - name: {seed}\n"
        f"    description: {SEED_NOTE}\n"
        "    config:\n      column_types:\n"
        f"        vector: {whole}\n        feature: {whole}\n        weight: {real}\n"
    )


__all__ = ["DbtOptions", "DbtProject", "dbt_model", "read_project"]
