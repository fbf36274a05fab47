"""The Python API.  The CLI (:mod:`sqlrp.cli`) mirrors it name for name.

    db = sqlrp.connect("duckdb:///digits.db")
    proj = sqlrp.create_projection(db, "digits_k40", method="achlioptas", d=64, k=40, s="auto", seed=1)
    df = sqlrp.project(db, "digits", "id", "digits_k40")  # DataFrame
    sqlrp.project(db, "digits", "id", "digits_k40", into="digits_rp")  # table
    print(sqlrp.compile_projection(db, sqlrp.plan(db, "digits", "id", "digits_k40"), dialect="spark"))

The planning (:mod:`sqlrp.pipeline.plan`), the materialising (:mod:`sqlrp.pipeline.materialise`), DT-RP's
tuner (:mod:`sqlrp.methods.tuning`) and the evaluation (:mod:`sqlrp.evaluation.report`) live in their own
modules; this one binds them to a database.  :func:`project` runs a plan with
:mod:`sqlrp.pipeline.projecting`, the rows going where :mod:`sqlrp.pipeline.destinations` sends them, and
a DataFrame as a table for the call with :mod:`sqlrp.pipeline.frame_table`.
"""

from __future__ import annotations

from typing import Any, Unpack

from .backends import Backend, connect
from .core.errors import InvalidParameter, warn_caller
from .core.files import existing_database
from .core.ir import Composed, Projection
from .core.layout import Formulation, Target
from .core.lazy import pd
from .core.options import (
    FIT_DEFAULTS,
    TUNE_DEFAULTS,
    FitOptions,
    FormulationOptions,
    ProjectOptions,
    TuneOptions,
    names,
    refuse_unknown,
    take,
)
from .core.params import count, k_or_variance
from .evaluation.report import evaluate
from .evaluation.sql import fetch_sample
from .methods import make_projection
from .methods.lowrank import LowRank, describe_fit, lowrank_projection
from .methods.tuning import best_of_n, projection_from_dense, tune_matrix
from .pipeline.checks import check_frame_outputs, check_outputs, check_source  # noqa: F401 - the API's checks
from .pipeline.destinations import check_output_names  # noqa: F401 - the names sqlrp.api had before issue 35
from .pipeline.fitting import FitPlan, choose_route, fit_to_variance, run_fit
from .pipeline.frame_table import frame_input
from .pipeline.frames import (
    is_frame,
    transform_frame,
)
from .pipeline.outputs import Projected
from .pipeline.plan import Plan, decide, plan, registry_of  # noqa: F401 - plan: sqlrp.plan
from .pipeline.progress import command_bar
from .pipeline.running import compile_plan
from .pipeline.running import run_frame as project_frame  # noqa: F401 - sqlrp.api.project_frame, as before
from .pipeline.sources import (  # noqa: F401 - the API's first stage
    SOURCE_OPTIONS,
    describe,
    infer_d,
    input_dimension,
    resolve_source,
)
from .registry.store import Registry
from .relation import projected, split_destination

__all__ = [
    "accept_projection",
    "compile_projection",
    "connect",
    "copy_projection",
    "create_projection",
    "drop_projection",
    "evaluate",
    "fit",
    "list_projections",
    "load_projection",
    "project",
    "resolve_source",
    "transform_frame",
    "migrate",
    "tune",
]


def create_projection(
    db: Backend | None,
    name: str | None,
    method: str = "achlioptas",
    d: int = 0,
    k: int = 0,
    seed: int | None = 0,
    replace: bool = False,
    **params: Any,
) -> Projection | Composed:
    """Generate a projection (``d`` inputs, ``k`` outputs) and, if ``db`` is given, store it as ``name``.

    :param db: the connection whose registry stores it (``None``: generate it only, in memory).
    :param name: the stored name (needed with ``db``; without, the projection's ``name``).
    :param method: a method of :data:`sqlrp.methods.METHODS`.
    :param d: the input dimension, the number of features (required: a whole number >= 1).
    :param k: the output dimension (required: a whole number >= 1).
    :param seed: the generator's seed (``None``: fresh entropy, not reproducible).
    :param replace: replace a stored projection of that name (else
        :class:`~sqlrp.core.errors.ProjectionExists`).
    :param params: the method's own parameters (``s`` for ``achlioptas``, ``degree`` for ``maclaurin``, ...).
    :returns: the projection, stored or not.
    """
    projection = make_projection(method, d, k, seed=seed, **params)
    projection.name = name
    if db is not None:
        if not name:
            raise InvalidParameter("give the projection a name to store it")
        registry_of(db).save(projection, name, replace=replace)
    return projection


def load_projection(db: Backend, name: str) -> Projection | Composed:
    """The projection stored as ``name``.

    :param db: the connection whose registry holds it.
    :param name: the stored name.
    :returns: the projection (:class:`~sqlrp.core.errors.ProjectionNotFound` if there is none).
    """
    return registry_of(existing_database(db)).load(name)


def accept_projection(db: Backend, name: str) -> Projection | Composed:
    """Accept the stored projection ``name`` as its rows hold it now: after an edit made outside sqlrp
    on purpose (the registry then refuses it, :class:`~sqlrp.registry.validate.StoredProjectionChanged`),
    or for a projection stored before registry version 5 whose digest is missing.  Its digest is computed
    from the rows and stored; rows that make no sound projection are still refused (re-create it).

    :param db: the connection whose registry holds it.
    :param name: the stored name.
    :returns: the projection as its rows hold it.
    """
    return registry_of(existing_database(db)).accept(name)


def list_projections(db: Backend) -> pd.DataFrame:
    """All stored projections, one row each.

    :param db: the connection whose registry is read.
    :returns: a DataFrame of ``name``, ``method``, ``d``, ``k``, ``nnz``, ``seed``, ``params`` (JSON) and
        ``created_at``, ordered by name.
    """
    return registry_of(existing_database(db)).list()


def copy_projection(db: Backend, name: str, to: Backend, new_name: str | None = None, replace: bool = False) -> None:
    """Copy the stored projection ``name`` from ``db`` into the registry of ``to`` (another database),
    so that both project with the identical matrix.

    :param db: the connection that stores it.
    :param name: its stored name there.
    :param to: the connection to copy it into.
    :param new_name: its name in ``to`` (default: ``name``).
    :param replace: replace a projection of that name in ``to`` (else
        :class:`~sqlrp.core.errors.ProjectionExists`).
    """
    registry_of(to).save(registry_of(existing_database(db)).load(name), new_name or name, replace=replace)


def drop_projection(db: Backend, name: str) -> None:
    """Delete the stored projection ``name``.

    :param db: the connection whose registry holds it.
    :param name: the stored name (:class:`~sqlrp.core.errors.ProjectionNotFound` if there is none).
    """
    registry_of(existing_database(db)).drop(name)


# ----------------------------------------------------------------------------------------------
# projecting


def compile_projection(
    db: Backend | None,
    plan_: Plan,
    dialect: str | None = None,
    *,
    into: str | None = None,
    view: bool = False,
    **options: Unpack[FormulationOptions],
) -> str:
    """SQL text of a plan for ``dialect`` (default: the database's own), decided once
    (:func:`sqlrp.pipeline.plan.decide`).

    :param db: the connection the plan was made on (``None``: a plan made without one; the matrix is
        inlined).
    :param plan_: :func:`sqlrp.plan`'s result.
    :param dialect: the engine the text is for.
    :param into: ``CREATE TABLE <into> AS`` (``view=True``: a view) instead of a ``SELECT``.
    :param view: with ``into``: ``CREATE VIEW`` instead of a table.
    :param options: :class:`~sqlrp.core.options.FormulationOptions` -- ``matrix``, ``strategy``, ``block``,
        ``check``.  ``check``: for the engine of ``db`` itself, where it can raise from inside a query
        (DuckDB, PostgreSQL; :mod:`sqlrp.compiler.guard`), the statement refuses a NULL, NaN or
        infinite feature and an overflowing output as ``project`` does, naming the row; for another
        dialect (its raising construct may not exist on the engine that runs the text) or where
        :func:`sqlrp.compiler.guard.guardable` is false, the text cannot check its input.
    :returns: the SQL, one statement or a script of them.
    """
    return compile_plan(db, plan_, dialect, Target(into=into, view=view), Formulation(**options))


def project(
    db: Backend,
    table: Any,
    id_column: str,
    projection: str | Projection | None = None,
    *,
    method: str | None = None,
    k: int | None = None,
    seed: int | None = None,
    into: str | None = None,
    **options: Unpack[ProjectOptions],
) -> Projected:
    """Project ``table`` inside the database.

    Returns the projected rows as a DataFrame ordered by id (with ``chunk_rows``: an iterator of
    DataFrames of at most that many rows, streamed from the database -- never one giant fetch), or
    with ``into`` materialises them as a table (``view=True``: a view) and returns ``None``; an
    ``into`` ending in ``.parquet``, ``.csv`` or ``.json`` is a file, written by DuckDB with the
    projection beside it (:func:`sqlrp.pipeline.materialise.write_file`), and the files written are returned.
    ``table`` may name a file or a glob on DuckDB (:mod:`sqlrp.core.files`); ``projection`` a
    projection file (``*.sqlrp.json``, or a ``projections export``).
    Materialisation is one transaction: on any failure no output table is left, and the source table
    is never written.  The same projection, lazily, with its destinations as methods: :func:`sqlrp.projected`.

    A new projection (``method``, ``k``, ...) is stored in the registry when the rows go ``into`` a
    table or file (under ``save_as``, else a name made of the table, method, k and seed) or when a
    name is given; rows handed back to Python store nothing.  A pandas or polars DataFrame or a
    ``pyarrow.Table`` as ``table`` (:func:`project_frame`) is registered for this call only, its rows
    come back in the frame's own order (a pandas result keeps the frame's index), and a new projection
    is stored only under a name given (``projection=`` or ``save_as=``).

    :param db: the connection (:func:`sqlrp.connect`).
    :param table: a table or view, a file or glob (DuckDB), or a DataFrame / Arrow table.
    :param id_column: the column copied to the output as each row's key.
    :param projection: a stored projection's name, a :class:`~sqlrp.core.ir.Projection`, a projection
        file, or ``None`` for a new one of ``method``, ``k`` and ``seed``.
    :param method: a new projection's method (default ``achlioptas``; :data:`sqlrp.methods.METHODS`).
    :param k: a new projection's output dimension.
    :param seed: a new projection's seed (default 0).
    :param into: a table (``view=True``: a view) or a ``.parquet`` / ``.csv`` / ``.json`` file to write.
    :param options: :class:`~sqlrp.core.options.ProjectOptions` -- the input (``layout``, ``columns``,
        ``array_column``, ``nulls``, ``group_column``, ``schema``, ...), the method's own parameters
        (``s``, ``degree``, ...), the output (``output``, ``prefix``, ``dtype``), ``d``, ``save_as``,
        ``standardize``; how the SQL is written (``matrix``, ``strategy``, ``block``, ``check``: refuse
        NULL, NaN or infinite features and overflowing outputs, in the statement itself where the
        engine can raise); where the rows go (``view``, ``replace``, ``incremental``, ``chunk_rows``,
        ``ordered``, ``output_format``: ``pandas``, ``arrow``, ``polars`` or ``numpy`` (``(ids, Y)``),
        ``progress``: DuckDB's own progress through one statement, elsewhere id-range batches).
    :returns: the rows in ``output_format`` (or an iterator of chunks); with ``into`` a table,
        ``None``; with ``into`` a file, the files written.
    """
    refuse_unknown("project", options, names(ProjectOptions))
    relation, destination = split_destination(options)
    new = projected(db, table, id_column, projection, method=method, k=k, seed=seed, **relation)
    return new.send(into, **destination)


def migrate(db: Backend) -> list[str]:
    """Create or upgrade the registry tables of ``db`` (``sqlrp migrate``).

    :param db: the connection.
    :returns: the file names of the migrations applied (none when it is up to date).
    """
    return Registry(db, migrate=False).migrate()


def tune(
    db: Backend,
    table: Any,
    id_column: str,
    *,
    k: int = 200,
    name: str | None = None,
    **options: Unpack[TuneOptions],
) -> Projection:
    """Tune a projection on a seeded sample of ``sample`` rows of ``table`` and store it as ``name``.

    ``baseline="dt-rp"`` runs DT-RP (002 Section 3); ``"best-of-n"`` keeps the best of ``draws``
    Achlioptas matrices (002 Section 4.2).  The result is an ordinary linear projection (sign matrix,
    identity combiner) whose ``params`` record the training sample and the final loss; it compiles and
    runs like any other.  Only the sample rows leave the database.

    :param db: the connection.
    :param table: a table, or a DataFrame or Arrow table (registered for the call; ``name`` is then needed).
    :param id_column: the rows' key (the sample is drawn by it).
    :param k: the output dimension.
    :param name: the stored projection's name (default: made of the table, method, k and seed).
    :param options: :class:`~sqlrp.core.options.TuneOptions` -- ``sample`` (rows, default 500), ``s``
        (default ``auto``), ``iterations`` (4000), ``seed`` (0), ``replace``, ``baseline`` (``dt-rp`` or
        ``best-of-n``), ``draws`` (20), and the input's options (:class:`~sqlrp.core.layout.SourceOptions`).
    :returns: the stored projection.
    """
    refuse_unknown("tune", options, names(TuneOptions))
    if is_frame(table):
        if name is None:
            raise InvalidParameter("name the tuned projection (--name): a DataFrame has no name to make one of")
        with frame_input(db, table, id_column, dict(options)) as (registered, decided):
            return tune(db, registered, id_column, k=k, name=name, **decided)
    given: dict[str, Any] = {**TUNE_DEFAULTS, **options}
    sample, s, iterations, seed = take(given, "sample", "s", "iterations", "seed")
    replace, baseline, draws = take(given, "replace", "baseline", "draws")
    source_options = given  # the input's
    sample = count("sample", sample)  # every count in its range (sqlrp.core.params.LIMITS)
    k = count("k", k)
    iterations = count("iterations", iterations)
    draws = count("draws", draws)
    if seed is not None:
        count("seed", seed)
    source = resolve_source(db, table, id_column, **source_options)
    d = infer_d(db, source)
    sample_seed = 0 if seed is None else int(seed)
    ids, X = fetch_sample(db, None, source, sample, sample_seed, d=d)
    if baseline == "dt-rp":
        result = tune_matrix(X, k, s=s, iterations=iterations, seed=seed)
        method = "dt-rp"
        extra: dict[str, Any] = {"iterations": int(iterations), "accepted": result.accepted}
    elif baseline == "best-of-n":
        result = best_of_n(X, k, s=s, n=draws, seed=seed)
        method = "best-of-n"
        extra = {"draws": result.iterations}
    else:
        raise InvalidParameter(f"baseline must be 'dt-rp' or 'best-of-n', got {baseline!r}")
    params = {
        "s": result.s,
        "initial_loss": result.initial_loss,
        "final_loss": result.loss,
        "seconds": round(result.seconds, 3),
        "training_sample": {
            "table": table,
            "schema": source.schema,
            "id_column": id_column,
            "layout": source.layout,
            "rows": len(ids),
            "seed": sample_seed,
            "order": "md5('<seed>:' || CAST(id AS TEXT)), id",
            "valid_pairs": result.n_pairs,
        },
        **extra,
    }
    projection = projection_from_dense(result.R, result.s, method, params, seed=seed)
    name = name or f"{table}_{method}_k{k}_seed{seed}"
    projection.name = name
    registry_of(db).save(projection, name, replace=replace)
    return projection


def fit(
    db: Backend,
    table: Any,
    id_column: str,
    method: str = "pca",
    *,
    k: int | None = None,
    name: str | None = None,
    **options: Unpack[FitOptions],
) -> LowRank:
    """Fit the top ``k`` principal components (``method="pca"``) or right singular vectors (``"svd"``, no
    centring) of ``table`` by the randomized range finder (Halko, Martinsson & Tropp 2011, Alg. 4.4/5.1;
    paper 004 Section 5.1: :mod:`sqlrp.methods.lowrank`) and store them as the projection ``name``: scores
    ``y = W^T (x - mean)``, then ``sqlrp.project(db, table, id_column, name)`` as for any stored projection.

    Each pass over the rows is aggregate SQL (only ``(k + p) x d`` sums leave the database) or, on an
    in-process engine, Arrow batches into NumPy (:mod:`sqlrp.pipeline.fitting`); ``1 + power_iterations``
    passes in all.

    :param db: the connection.
    :param table: a table or view, a file or glob (DuckDB), or a DataFrame (``name`` is then needed).
    :param id_column: the rows' key.
    :param method: ``pca`` (centred) or ``svd`` (as stored: paper 004 Eq. 48-50).
    :param k: the number of components (fewer when the table's rank is lower: a warning says so); or
        ``variance=`` (a fraction): the fewest components whose explained-variance ratio exceeds it.
    :param name: the stored projection's name (default: ``<table>_<method>_k<k>``).
    :param options: :class:`~sqlrp.core.options.FitOptions` -- ``oversample`` (10), ``power_iterations``
        (``auto``), ``seed`` (0), ``whiten``, ``replace``, ``route`` (``auto``), ``gram`` (``auto``: the
        exact ``d x d`` Gram matrix in one pass where that costs less than sketching), ``progress``, and the
        input's options (:class:`~sqlrp.core.layout.SourceOptions`).
    :returns: the stored projection, with ``components_``, ``explained_variance_``,
        ``explained_variance_ratio_``, ``singular_values_`` and ``mean_`` as scikit-learn's PCA names them.
    """
    refuse_unknown("fit", options, names(FitOptions))
    if method not in ("pca", "svd"):
        raise InvalidParameter(f"fit: method must be 'pca' or 'svd', got {method!r}")
    if is_frame(table):
        if name is None:
            raise InvalidParameter("name the fitted projection (--name): a DataFrame has no name to make one of")
        with frame_input(db, table, id_column, dict(options)) as (registered, decided):
            return fit(db, registered, id_column, method, k=k, name=name, **decided)
    given: dict[str, Any] = {**FIT_DEFAULTS, **options}
    variance, p, q, seed, whiten, replace, route, progress, gram = take(
        given, "variance", "oversample", "power_iterations", "seed", "whiten", "replace", "route", "progress", "gram"
    )
    (k, variance), p = k_or_variance(k, variance), count("oversample", p)
    if q != "auto":
        q = count("power_iterations", q)
    if seed is not None:
        count("seed", seed)
    source = resolve_source(db, table, id_column, **given)
    if source.layout == "long" and route == "arrow":
        raise InvalidParameter("fit --route arrow reads the wide and array layouts; a long table takes --route sql")
    d = infer_d(db, source)
    if k is not None and k > d:
        raise InvalidParameter(f"--k={k} is more than the table's {d} features: ask for at most {d} components")
    plan_ = FitPlan(method, k or d, p, q, seed, "sql" if source.layout == "long" else choose_route(db, route), gram)
    with command_bar(progress, f"fit {method}") as bar:
        fitted = run_fit(db, source, d, plan_, bar) if k else fit_to_variance(db, source, d, plan_, variance, bar)
    kept = len(fitted.singular_values)
    if k is not None and kept < k:
        warn_caller(f"the table's rank is {kept} < --k={k}: {kept} components were fitted")
    info = fitted.info
    extra = {"whiten": bool(whiten), "seed": seed, "route": info["route"], "passes": info["passes"],
             "power_iterations_why": info["why"] or "as asked", "exact": info["exact"], "variance": variance,
             "components_why": info.get("kept_why", f"--k {k}"), "table": str(table)}  # fmt: skip
    projection = lowrank_projection(fitted, method, bool(whiten), describe_fit(fitted, method, k, p, extra))
    projection.seed = seed
    name = name or f"{table}_{method}_" + (f"k{k}" if k else f"var{variance:g}")
    projection.name = name
    registry_of(db).save(projection, name, replace=replace)
    return projection
