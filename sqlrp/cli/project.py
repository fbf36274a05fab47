"""``sqlrp project`` and ``sqlrp compile``: each command's options above the function that reads them."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from .. import api
from ..backends.base import Backend
from ..compiler import Output, Source, compile_sql, compile_statements
from ..compiler.selfcheck import check_sql
from ..core.errors import InvalidParameter
from ..core.files import file_format, output_format
from ..core.ir import Composed, Projection
from ..core.layout import ROUTES, Formulation, Target, refuse_other_d
from ..core.lazy import pd
from ..core.params import arg_count, block_size
from ..dialects import SqlrpDialect, get_dialect
from ..methods import make_projection
from ..pipeline import given
from ..pipeline.plan import decide, registry_of
from .options import (
    add_source,
    command,
    connect_args,
    feature_columns,
    files_only,
    hand_on,
    handed_on,
    input_options,
    method_params,
    plan_options,
)
from .statement_cache import recording


def add_project(sub: Any) -> None:
    """project: the source, the projection, and where the rows go."""
    p = command(
        sub,
        "project",
        "project a table inside the database (a table, a view, or CSV on stdout)",
        [
            "sqlrp project --db duckdb:///w.db --table events --id-column id --k 64 --into events_rp",
            "sqlrp project --table emb.parquet --id-column id --k 64 --into emb_rp.parquet",
            "sqlrp project --db duckdb:///w.db --table events --id-column id --projection rp64 > rp.csv",
        ],
    )
    add_source(p)
    w = p.add_argument_group("where the rows go")
    hand_on(
        p,
        w.add_argument(
            "--into",
            help="materialise into this table, or a file (.parquet, .csv, .json; by DuckDB, with the projection "
            "beside it in <file>.sqlrp.json; --db may then be omitted) (default: print CSV)",
        ),
        w.add_argument("--view", action="store_true", help="create a view instead of a table"),
        w.add_argument("--replace", action="store_true", help="replace an existing output table or file"),
        w.add_argument("--no-check", dest="check", action="store_false", help="skip the NULL/NaN scan of the input"),
        w.add_argument("--incremental", action="store_true", help="with --into: add only ids not yet in the table"),
        w.add_argument(
            "--route",
            choices=list(ROUTES),
            default="auto",
            help="sql: every output computed in SQL; arrow: in-process DuckDB streams the features as Arrow "
            "record batches into NumPy's BLAS for the linear sums, the rest in SQL; auto: arrow there for dense "
            "matrices (the SQL 'compile' prints is the sql route's)",
        ),
    )
    add_progress(w)
    w.add_argument(
        "--chunk-rows",
        type=arg_count("chunk_rows"),
        default=None,
        help="CSV output: rows fetched per chunk (default 100,000)",
    )
    p.set_defaults(func=cmd_project)


def add_progress(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The progress bar's options (``progress_option`` reads them back)."""
    p.add_argument("--no-progress", action="store_true", help="with --into: no progress bar")
    p.add_argument(
        "--progress", action="store_true", help="with --into: a progress bar on stderr even when it is not a terminal"
    )
    p.add_argument(
        "--batches",
        type=arg_count("batches"),
        help="with --into: materialise in this many id-range batches behind the progress bar (default: DuckDB "
        "reports the progress of one statement; PostgreSQL batches, up to 10 of >= 20,000 rows each)",
    )


def progress_option(args: argparse.Namespace) -> bool | int:
    """``progress`` of ``api.project``: a bar only when writing (``--into``, not a view), on stderr, shown
    on a terminal or when asked for (``--progress``), never in a pipe or a log; ``--batches``: that many."""
    wanted = args.progress or (sys.stderr.isatty() and not args.no_progress)
    return False if (not wanted or not args.into or args.view) else (args.batches or True)


def cmd_project(args: argparse.Namespace) -> int:
    progress = progress_option(args)
    with connect_args(args) as db, recording(args, db, progress) as recorded:
        _say_features(db, args)
        result = api.project(
            db,
            args.table,
            args.id_column,
            args.projection,
            strategy=args.strategy,
            block=args.block,
            matrix=args.matrix,
            progress=progress,
            chunk_rows=args.chunk_rows if (args.into or args.chunk_rows) else 100_000,  # given with --into: refused
            **handed_on(args),
            **plan_options(args),
        )
        if args.into and output_format(args.into):
            message = f"wrote {' and '.join(map(str, result))}"
            print(message, file=sys.stderr)
            recorded(message)  # a stored projection's run again: sqlrp.start
        elif args.into:
            kind = "view" if args.view else "table"
            print(f"wrote {kind} {args.into!r}", file=sys.stderr)
        else:
            for i, chunk in enumerate(result):  # streamed: never one giant fetch (an empty result: one
                _exact_lists(chunk).to_csv(sys.stdout, index=False, header=(i == 0))  # empty chunk, the header)
    return 0


def _say_features(db: object, args: argparse.Namespace) -> None:
    """For a file read as the input (its types guessed from the text): which feature columns are read,
    on stderr, before the work -- so that a column left out (text) is never a silent change of d."""
    if args.layout != "wide" or not (args.input or file_format(args.table)):
        return
    source = api.resolve_source(db, args.table, args.id_column, **input_options(args))
    shown = ", ".join(source.columns[:20]) + (", ..." if len(source.columns) > 20 else "")
    print(f"reading {len(source.columns)} feature columns of {args.table!r}: {shown}", file=sys.stderr)


def _exact_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each array cell (``--output array``) as a JSON list of its floats in their shortest
    exact form: pandas would print NumPy's repr, 8 digits and no commas (``[-0.19133204  0.67537395]``)."""
    for column in frame.columns:
        cells = frame[column]
        if cells.dtype == object and any(hasattr(v, "__len__") and not isinstance(v, str) for v in cells):
            frame = frame.assign(**{column: [None if v is None else json.dumps([float(x) for x in v]) for v in cells]})
    return frame


def add_compile(sub: Any) -> None:
    """compile: the source and projection of ``project``, the dialect, and the self-check."""
    p = command(
        sub,
        "compile",
        "print the SQL of a projection",
        [
            "sqlrp compile --db duckdb:///w.db --table events --id-column id --projection rp64 --dialect spark",
            "sqlrp compile --dialect snowflake --table EVENTS --id-column ID --projection rp64.parquet --check",
        ],
    )
    add_source(p)
    p.add_argument("--dialect", help="duckdb, postgres, spark, or any sqlglot dialect (default: the --db's)")
    p.add_argument("--into", help="emit CREATE TABLE <into> AS ...")
    p.add_argument("--view", action="store_true", help="emit CREATE VIEW instead")
    p.add_argument(
        "--check",
        action="store_true",
        help="print instead one statement that runs this SQL on a built-in fixture and compares it with NumPy's "
        "outputs: run it once on the engine; it returns sqlrp_check = 'ok' (and the largest error) or 'wrong'",
    )
    p.set_defaults(func=cmd_compile)


def cmd_compile(args: argparse.Namespace) -> int:
    """Print the SQL of the matrix given (a stored projection, an exported file, or a warehouse table
    with the projection it came from: :mod:`sqlrp.pipeline.given`), or of a new one (``--k``, ``--d``)."""
    params = method_params(args)
    new = dict(method=args.method, k=args.k, d=args.d, seed=args.seed, params=params)
    projection = given.read_file(args.projection) if args.projection else None
    if projection is not None:
        given.check_agrees(projection, f"file {args.projection!r}", **new)
    if not (args.db or files_only(args)):
        if args.projection and projection is None:
            raise InvalidParameter(
                f"{args.projection!r} is no projection file and there is no database to hold a stored projection "
                "of that name: give --db, or the file written by 'sqlrp projections export'"
            )
        if args.matrix == "registry":
            raise InvalidParameter("--matrix registry reads the stored matrix from a database: give --db")
        given.check_matrix_table(args.matrix, given=projection is not None)
        target = get_dialect(args.dialect or "duckdb")
        sql = _compile_offline(args, projection or _new_matrix(args, params), target)
        print(sql.rstrip(";") + ";")
        return 0
    with connect_args(args) as db:
        target = get_dialect(args.dialect or db.dialect)
        if projection is None and args.projection and registry_of(db).exists(args.projection):
            projection = api.load_projection(db, args.projection)
            given.check_agrees(projection, f"stored projection {args.projection!r}", **new)
        given.check_matrix_table(args.matrix, given=projection is not None)  # a new matrix is in no warehouse
        if db.table_exists(args.table, args.schema) or not _elsewhere(args, target, db):
            sql = _compile_planned(args, db, target, projection)
        elif projection is None and args.projection:
            raise InvalidParameter(
                f"no table {args.table!r} in --db and no stored projection {args.projection!r} there to render "
                "for another engine: give the name of a stored projection, or --projection FILE"
            )
        else:  # the table is in the warehouse: the database only held the projection
            sql = _compile_offline(args, projection or _new_matrix(args, params), target)
    print(sql.rstrip(";") + ";")
    return 0


def _new_matrix(args: argparse.Namespace, params: dict) -> Projection | Composed:
    """A new projection of ``--k`` outputs for ``--d`` features (or as many as ``--columns`` names)."""
    cols = feature_columns(args)
    refuse_other_d(cols, args.d)
    d = len(cols) if cols else args.d
    if not d or args.k is None:
        raise InvalidParameter("without --db, give --k and --d (or --columns), or --projection FILE")
    seed = 0 if args.seed is None else args.seed
    return make_projection(args.method or "achlioptas", d, args.k, seed=seed, **params)


def _compile_planned(
    args: argparse.Namespace, db: Backend, target: SqlrpDialect, projection: Projection | Composed | None
) -> str:
    """The SQL (or with ``--check`` the self-check) of a plan on a table of ``db``."""
    options = plan_options(args) if projection is None else {**plan_options(args), **_GIVEN}
    plan = api.plan(db, args.table, args.id_column, projection or args.projection, **options)
    # no --db: the in-memory registry is gone when this returns; the matrix goes into the SQL
    matrix = "values" if not args.db and args.matrix == "auto" else args.matrix
    if matrix == "auto":  # as compile_projection: the registry where it is the same engine
        matrix = "registry" if (target.name == db.dialect and plan.projection.name) else "values"
    # decided once, the checks riding along for the engine of --db itself (compile_projection's rule)
    how = Formulation(matrix=matrix, strategy=args.strategy, block=args.block)
    plan = decide(db, plan, how, target, guard=target.name == db.dialect)
    if not args.check:
        _unchecked(plan.source, target, plan.how.guard)
        statements = compile_statements(plan, target, Target(into=args.into, view=args.view, ordered=False))
        return statements.script() if statements.setup else statements.main
    return check_sql(plan.projection, plan.source, target, plan.output, plan.how)


#: plan options that describe a new matrix: not passed on with a given one (checked by given.check_agrees)
_GIVEN = dict.fromkeys(("method", "k", "seed", "d"), None)


def _elsewhere(args: argparse.Namespace, target: SqlrpDialect, db: Backend) -> bool:
    """The table lives in another engine than ``--db`` (the warehouse recipe): rendering for another
    dialect, or joining a matrix table loaded there."""
    return target.name != db.dialect or args.matrix not in given.MATRIX_SOURCES


def _compile_offline(args: argparse.Namespace, projection: Projection | Composed, target: SqlrpDialect) -> str:
    """The SQL (or the self-check) of ``projection`` for a table sqlrp does not reach: its columns come
    from the command line, the matrix is inlined unless ``--matrix`` names where it is."""
    matrix = "values" if args.matrix == "auto" else args.matrix
    cols = feature_columns(args)
    if args.layout == "wide" and not cols:
        raise InvalidParameter("name the feature columns with --columns (wide layout; the table is not in a --db)")
    if cols and len(cols) != projection.d:
        raise InvalidParameter(f"--columns names {len(cols)} features; the projection has d = {projection.d}")
    if args.standardize:
        raise InvalidParameter("--standardize computes the feature statistics in the database: give --db")
    block_size(args.block, projection.d)
    source = Source(args.table, args.id_column, **{**input_options(args), "columns": tuple(cols or ())})
    output = Output(args.output, args.prefix, args.prefix, args.dtype or "float64")  # no table to follow
    if args.check:
        return check_sql(projection, source, target, output, Formulation(matrix, args.strategy, args.block))
    _unchecked(source, target, False)  # no --db engine: the text is for an engine sqlrp does not reach
    return compile_sql(
        projection,
        source,
        target,
        output,
        into=args.into,
        view=args.view,
        strategy=args.strategy,
        block=args.block,
        matrix=matrix,
    )


def _unchecked(source: Source, target: SqlrpDialect, guard: bool) -> None:
    """Warn (one line) that the printed SQL cannot refuse NULL features itself: where sums skip NULLs
    (aggregates, pooled groups, the long layout) a row with one would be projected as if it were 0."""
    if not guard and source.nulls == "error":
        warnings.warn(
            f"{target.name}: this SQL does not check its input (it checks itself only for the engine of --db, "
            "and not for every layout): run it on rows without NULL, NaN or infinite features, or pass "
            "--nulls zero to read NULL as 0 on purpose",
            stacklevel=2,
        )
