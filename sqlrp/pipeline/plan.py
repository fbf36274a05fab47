"""Planning: a projection bound to an input table (:class:`Plan`), with what the compiler needs from
the database gathered here, once, before any SQL is compiled -- the input's columns and row estimate
(:func:`sqlrp.pipeline.sources.resolve_source`), the stored projection or a new one stored in the
registry, the kurtosis that picks ``s`` (:mod:`.moments`, on a bounded sample), the features' means and deviations for
``standardize``; then, once, the formulation (:func:`decide`): whether the registry holds the matrix
(:func:`choose_matrix`), the strategy and the stored ``pairs`` plan (:func:`pairs_for`), the in-query
checks.  The compiler below reads none of them from the database itself."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from typing import Any, Unpack

from ..backends import Backend
from ..compiler import Output, Source, strategies
from ..compiler.guard import guardable
from ..compiler.long import MATRIX_READERS, check_matrix_used, matrix_table
from ..compiler.preprocess import read_stats, stats_query
from ..core import files
from ..core.errors import InputError, InvalidParameter, ProjectionExists, SqlrpError
from ..core.ir import Composed, Projection
from ..core.layout import SOURCE_OPTIONS, Formulation
from ..core.options import PlanOptions
from ..core.pairs_plan import PairsPlan
from ..core.params import block_size
from ..core.plan import Plan
from ..dialects import SqlrpDialect
from ..methods import make_projection
from ..methods.rff import data_gamma
from ..methods.sparsity import data_sparsity
from ..registry.store import Registry
from ..registry.transfer import is_projection_file, read_projection
from ..registry.validate import check_matrix_table, validate
from .given import check_matrix_holds, matrix_differs
from .moments import sample_kurtosis, table_variance
from .sources import describe, infer_d, resolve_source


def registry_of(db: Backend) -> Registry:
    """The registry of ``db`` (its tables are created or upgraded on the connection's first use)."""
    return Registry.of(db)


def feature_stats(db: Backend, projection: Projection | Composed, source: Source) -> tuple[list[float], list[float]]:
    """Per-feature mean and population standard deviation of ``source``, computed in the database."""
    dialect = db.sql_dialect
    row = db.fetchall(dialect.render(stats_query(projection, source, dialect)))[0]
    return read_stats(row, projection, source, dialect)  # constant columns by their range; overflow refused


def plan(
    db: Backend,
    table: str,
    id_column: str,
    projection: str | Projection | None = None,
    method: str | None = None,
    k: int | None = None,
    seed: int | None = None,
    **options: Unpack[PlanOptions],
) -> Plan:
    """Resolve the table, then load (``projection`` = a stored name that exists), reuse (a
    ``Projection``), or generate and store (``method``, ``k``, ...) the projection.

    Names are taken exactly as given, each part on its own: ``catalog``, ``schema`` and ``table``
    (a dot inside ``table`` is part of the name, never a separator).

    :param db: the connection.
    :param table: a table or view (on DuckDB also a file or glob).
    :param id_column: the column copied to the output as each row's key.
    :param projection: a stored projection's name, a :class:`~sqlrp.core.ir.Projection`, a projection
        file, or ``None`` for a new one made of ``method``, ``k``, ``seed`` and the method's options.
    :param method: a new projection's method (default ``achlioptas``; :data:`sqlrp.methods.METHODS`).
    :param k: a new projection's output dimension.
    :param seed: a new projection's seed (default 0).
    :param options: :class:`~sqlrp.core.options.PlanOptions` -- the input
        (:class:`~sqlrp.core.layout.SourceOptions`), a new projection's method parameters
        (:class:`~sqlrp.core.options.MethodOptions`), the output (``output``, ``prefix``, ``dtype``),
        and ``d``, ``save_as``, ``standardize``, ``store``:

        ``dtype="float32"`` stores the outputs as 4-byte floats (DuckDB, PostgreSQL; refused elsewhere);
        the default (``None``) follows the input (:func:`input_dtype`): float32 features give float32
        outputs where the engine has the type, as the scikit-learn transformer keeps float32.
        ``standardize=True`` centres and scales every feature in SQL before projecting (means and
        standard deviations computed over the table now, then inlined in the SQL); recommended for the
        polynomial-kernel methods on raw data (see :mod:`sqlrp.methods.kernel`).
        ``store=False``: a new projection that no name was given for (``projection``, ``save_as``) is
        kept in the plan only, not in the registry (a DataFrame's projection: nothing is left behind).
    :returns: the plan -- the projection, the resolved input (:class:`~sqlrp.core.layout.Source`) and the
        output (:class:`~sqlrp.core.layout.Output`) -- for :func:`sqlrp.compile_projection`.
    """
    params: dict[str, Any] = dict(options)
    source = resolve_source(db, table, id_column, **{k: params.pop(k) for k in SOURCE_OPTIONS if k in params})
    output, prefix, dtype = params.pop("output", "wide"), params.pop("prefix", "p"), params.pop("dtype", None)
    d, save_as = params.pop("d", None), params.pop("save_as", None)
    standardize, store = params.pop("standardize", False), params.pop("store", True)  # the rest: the method's
    if source.layout != "long":  # sizes the pairs planner's time (compiler.strategies.planner_seconds)
        source = dataclasses.replace(source, rows=db.estimate_rows(source.table, source.schema, source.catalog))
    registry = registry_of(db) if isinstance(projection, str) or store or save_as else None
    table_d = functools.cache(lambda: _table_d(db, source))  # read once, and only if needed

    if isinstance(projection, str) and is_projection_file(projection) and not registry.exists(projection):
        projection = dataclasses.replace(read_projection(projection), name=None)  # a file's, stored nowhere
    if isinstance(projection, (Projection, Composed)):
        proj = validate(projection)  # an object is checked as the registry and the files are
    elif isinstance(projection, str) and registry.exists(projection):
        proj = _stored(registry, projection, method, k, seed, params)
    else:
        method = method or "achlioptas"
        if k is None:
            raise InvalidParameter("give k (the output dimension) or the name of a stored projection")
        d_in = d if d is not None else table_d()
        seed = 0 if seed is None else seed
        # issue 24's rule on a bounded sample (issue 34: no whole read of the table for a default)
        with db.reading_few_rows():
            params = data_sparsity(method, params, lambda: sample_kurtosis(db, source, d_in, standardize))
        params = data_gamma(method, params, lambda: table_variance(db, source, d_in, standardize))
        proj = make_projection(method, d_in, k, seed=seed, **params)
        name = projection if isinstance(projection, str) else save_as
        default = f"{files.label(table)}_{method}_k{k}_seed{seed}"
        proj = _store_new(db, registry, proj, source, name, default if store else None)
    d_in = table_d() if source.layout != "long" else proj.d
    _check_d(proj, source, d_in, table)
    if standardize:
        means, stds = feature_stats(db, proj, source)
        source = dataclasses.replace(source, standardize=(tuple(means), tuple(stds)))
    if dtype is None:
        dtype = input_dtype(db, source)
    return Plan(proj, source, Output(form=output, prefix=prefix, array_name=prefix, dtype=dtype))


def _table_d(db: Backend, source: Source) -> int:
    """The input's d (an array's length is one row's: on a Parquet file, a read)."""
    with db.reading_few_rows():
        return infer_d(db, source)


def _check_d(proj: Projection | Composed, source: Source, d_in: int, table: str) -> None:
    """The table's features fit the projection's ``d``."""
    if source.layout == "wide" and d_in != proj.d:
        raise InputError(
            f"projection {proj.name!r} expects d = {proj.d} features but table {table!r} gives {d_in} "
            f"({', '.join(source.columns[:10])}{', ...' if d_in > 10 else ''}); choose the matching "
            "--columns or create a projection for this table"
        )
    if source.layout == "array" and d_in != proj.d:
        raise InputError(
            f"projection {proj.name!r} expects arrays of length d = {proj.d} but "
            f"{source.array_column!r} holds length {d_in}"
        )


def _stored(
    registry: Registry, name: str, method: str | None, k: int | None, seed: int | None, params: dict
) -> Projection | Composed:
    """The stored projection ``name``, refused where the options given describe another one."""
    proj = registry.load(name)
    if k is not None and k != proj.k:
        raise InvalidParameter(f"stored projection {name!r} has k = {proj.k}, not {k}; drop --k or use another name")
    if method is not None and method != proj.method:
        raise InvalidParameter(
            f"stored projection {name!r} has method {proj.method}, not {method}; drop --method "
            "or choose a new --projection name"
        )
    stored_seed = getattr(proj, "seed", None)
    if seed is not None and stored_seed is not None and seed != stored_seed:
        raise InvalidParameter(
            f"stored projection {name!r} has seed = {stored_seed}, not {seed}; drop --seed or choose a new "
            "--projection name"
        )
    stored = proj.params
    differ = sorted(
        key
        for key, value in params.items()
        if value is not None and value not in (stored.get(key), stored.get(f"{key}_requested"))
    )
    if differ:
        raise InvalidParameter(
            f"stored projection {name!r} has other {', '.join(differ)} ({stored}); it is reused as "
            "stored: drop those options or choose a new --projection name"
        )
    return proj


def _store_new(
    db: Backend,
    registry: Registry | None,
    proj: Projection | Composed,
    source: Source,
    name: str | None,
    default: str | None,
) -> Projection | Composed:
    """A generated projection stored under ``name``, or under ``default`` (a free name, or the stored
    projection already equal to it: :func:`default_name`); neither: kept in the plan only."""
    if name is None and default is not None:
        assert registry is not None
        name, same = default_name(registry, proj, default)
        if same is not None:
            proj = same
    if proj.name is None and name is not None:
        (registry or registry_of(db)).save(proj, name)
        # what the compiler derives from the matrix is derived now, with it, and stored beside it: a
        # later use loads it (pairs_for) instead of planning again
        pairs_for(db, Plan(proj, source), db.sql_dialect, "auto")
    return proj


FLOAT32_TYPES = ("FLOAT", "FLOAT4", "REAL")


def input_dtype(db: Backend, source: Source) -> str:
    """``"float32"`` if every feature of ``source`` is a 4-byte float (DuckDB ``FLOAT``, PostgreSQL
    ``real``; an array's elements) and the engine has that type for outputs, else ``"float64"``."""
    if not db.sql_dialect.float32:
        return "float64"
    info = {c.name: c for c in describe(db, source.table, source.schema, source.catalog)}
    if source.layout == "wide":
        types = [info[c].type for c in source.columns if c in info]
    elif source.layout == "array":
        types = [info[source.array_column].element_type or ""] if source.array_column in info else []
    else:
        types = [info[source.value_column].type] if source.value_column in info else []
    return "float32" if types and all(str(t).upper() in FLOAT32_TYPES for t in types) else "float64"


def default_name(registry: Registry, proj: Projection, base: str) -> tuple[str, Projection | None]:
    """The name to store a generated projection under, and the stored projection to reuse if one of
    the same d, parameters and seed is there: ``base`` (``{table}_{method}_k{k}_seed{seed}``) when it is
    free or holds the same projection, else ``base`` and a digest of d and the parameters, so that
    projections differing only in, say, the degree never share a default name."""
    digest = hashlib.sha256(json.dumps([proj.d, proj.params], sort_keys=True, default=str).encode()).hexdigest()
    for name in (base, f"{base}_{digest[:8]}"):
        if not registry.exists(name):
            return name, None
        stored = registry.load(name)
        if stored.d == proj.d and stored.params == proj.params and getattr(stored, "seed", None) == proj.seed:
            return name, stored
    raise ProjectionExists(f"the default names {base!r} and {base}_{digest[:8]!r} hold other projections; pass a name")


def decide(db: Backend, p: Plan, how: Formulation, dialect: SqlrpDialect | None = None, *, guard: bool = True) -> Plan:
    """The plan with its formulation decided, once, before anything is compiled: the matrix's home
    (:func:`choose_matrix`), the strategy and its pairs plan (:func:`sqlrp.compiler.strategies.decide`,
    the stored projection's plan from the registry: :func:`pairs_for`), and whether the input and
    output checks ride in the projection's own statement (``guard`` allowing it, ``how.check`` asking
    it, and the engine able to raise from inside a query: :func:`sqlrp.compiler.guard.guardable`).

    A composition or a standardised input keeps ``strategy="auto"``: its stages are decided as they
    are compiled (:func:`sqlrp.compiler.select.compile_select`).  ``dialect``: the engine the SQL is
    for (default: ``db``'s own)."""
    dialect = dialect or db.sql_dialect
    proj = p.projection
    block_size(how.block, proj.d)
    asked, verified = how, how.matrix == "auto"  # auto takes the registry only where it holds the matrix
    how = _strategy(db, p, dataclasses.replace(how, matrix=choose_matrix(db, p, how.matrix)), dialect)
    # SQL that joins the registry's rows (join, lookup; a composition's stages, decided later) runs only on
    # rows that are this projection, unedited (its digest); else auto inlines the matrix, and registry refuses
    if how.matrix == "registry" and how.strategy in (*strategies.LONG_STRATEGIES, "auto"):
        try:
            registry_of(db).verify(proj)
        except SqlrpError:
            if asked.matrix == "registry":
                raise
            how = _strategy(db, p, dataclasses.replace(asked, matrix="values"), dialect)
    check_matrix_used(how.matrix, proj, how.strategy, p.source.layout)  # a matrix table is read, or refused
    reads = how.strategy in MATRIX_READERS or matrix_table(how.matrix) is not None
    if reads and not verified and dialect.name == db.sql_dialect.name:  # the relation joined is here
        check_matrix_holds(db, proj, how.matrix)  # it exists and holds this matrix (one aggregate)
        if matrix_table(how.matrix) is not None and isinstance(proj, Projection):
            check_matrix_table(db, proj, how.matrix)  # and entry for entry: the projection's digest
    checked = guard and how.check and how.strategy != "auto" and guardable(proj, p.source, dialect, how.strategy)
    return dataclasses.replace(p, how=dataclasses.replace(how, guard=checked))


def _strategy(db: Backend, p: Plan, how: Formulation, dialect: SqlrpDialect) -> Formulation:
    """``how`` with its strategy and pairs plan decided (a composition's or a standardised input's: later)."""
    if isinstance(p.projection, Projection) and p.source.standardize is None:
        given = pairs_for(db, p, dialect, how.strategy)
        strategy, pairs = strategies.decide(p.projection, p.source, dialect, how.strategy, how.matrix, given)
        how = dataclasses.replace(how, strategy=strategy, pairs=pairs)
    return how


def pairs_for(db: Backend, p: Plan, dialect: SqlrpDialect, strategy: str) -> PairsPlan | None:
    """The pairs plan of a stored projection where compiling it with ``strategy`` may need one
    (:func:`sqlrp.compiler.strategies.pairs_considered`): the registry's, else planned now and, if the
    planner finished, stored beside it (:meth:`Registry.save_pairs`) so later processes skip planning.
    ``None`` elsewhere: :func:`sqlrp.compiler.strategies.decide` plans what it needs."""
    proj = p.projection
    if not (isinstance(proj, Projection) and proj.name):
        return None
    if not strategies.pairs_considered(proj, p.source, dialect, strategy):
        return None
    registry = registry_of(db)
    stored = registry.load_pairs(proj, dialect)
    if stored is not None:
        return stored
    planned = strategies.best_pairs(proj.linear, dialect, strategies.planner_seconds(proj.linear, p.source.rows))
    if planned is not None:
        registry.save_pairs(proj, dialect, planned)
    return planned


def choose_matrix(db: Backend, p: Plan, matrix: str) -> str:
    """``auto``: the registry's rows if this database holds the projection's matrix under its name
    (:func:`.given.matrix_differs`: a projection named but stored elsewhere, or never, would join no
    rows and project to zeros; another one stored under that name, its weights), else the matrix
    inlined as ``VALUES``."""
    proj = p.projection
    if matrix != "auto":
        return matrix
    if not getattr(proj, "name", None):
        return "values"
    if not isinstance(proj, Projection):  # a named composition: its stages are stored under their own names
        return "registry"
    registry_of(db)  # its tables exist from here on
    return "values" if matrix_differs(db, proj, "registry") else "registry"
