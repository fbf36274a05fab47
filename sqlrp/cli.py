"""The ``sqlrp`` command.  Each command is a thin wrapper over the function of the same name in
:mod:`sqlrp.api` (``project``, ``compile`` -> ``compile_projection``, ``create`` ->
``create_projection``, ``projections list|show|copy|export|import|drop``, ``migrate``, ``demo``,
``tune``, ``evaluate``; ``index`` -> ``build_index``, ``search``, ``indexes list|drop`` ->
``list_indexes`` / ``drop_index``, from :mod:`sqlrp.search.index` and :mod:`sqlrp.search.lookup`).
``--db`` defaults to ``$SQLRP_DB``."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import __version__, api
from .backends import connect, default_url, engines_table
from .backends.base import Backend
from .compiler import Output, Source, compile_sql
from .compiler.guard import guarded
from .compiler.selfcheck import check_sql
from .compiler.strategies import STRATEGIES
from .core.errors import EXIT_USAGE, InputError, InvalidParameter, exit_status, one_line
from .core.files import OUTPUTS, file_format, output_format, read_input
from .core.ir import Composed, Projection
from .core.lazy import pd
from .core.params import arg_finite, arg_nonnegative, arg_positive, arg_positive_list, block_size
from .demo import run_demo
from .dialects import SqlrpDialect, get_dialect
from .evaluation.metrics import Kernel
from .methods import METHODS, make_projection
from .pipeline import given
from .pipeline.plan import registry_of, stored_pairs_plan
from .registry.store import Registry
from .registry.transfer import export_projection, import_projection, is_projection_file, read_projection
from .search.evaluate import evaluate_search
from .search.index import (
    build_index,
    describe_defaults,
    describe_index,
    drop_index,
    list_indexes,
    load_index,
)
from .search.lookup import search


def _columns(args: argparse.Namespace) -> list[str] | None:
    cols = [c.strip() for c in (args.columns or "").split(",") if c.strip()] + list(args.column or [])
    return cols or None


def _s(value: str) -> float | str:
    try:
        return float(value)
    except ValueError:
        return value


#: the one description of ``--s`` (every command that draws a sign matrix)
S_HELP = "sparsity s >= 1: 1 dense signs, 3 Achlioptas, auto chosen from the data's kurtosis (at most sqrt(d))"


def _add_table(
    p: argparse.ArgumentParser,
    db_required: bool = True,
    table_required: bool = True,
    layouts: Sequence[str] = ("wide", "long", "array"),
) -> None:
    """The options that name an input table and its layout (every command that reads one)."""
    _add_db(p)
    p.add_argument(
        "--table",
        help="input table, exactly (a dot is part of the name; it is quoted); on DuckDB a file or glob that is "
        "no table: data.parquet, part-*.csv, rows.jsonl",
    )
    p.add_argument("--input", help="input file or glob, whatever its ending (read by DuckDB; instead of --table)")
    p.set_defaults(table_required=table_required)
    p.add_argument("--schema", help="schema of the input (and output) tables")
    p.add_argument("--catalog", help="catalog (database, project) holding --schema: catalog.schema.table")
    p.add_argument("--id-column", required=table_required, help="row id column, copied to the output")
    p.add_argument(
        "--layout",
        choices=layouts,
        default="wide",
        help="wide: a column per feature; array: one LIST/ARRAY column"
        + ("; long: (id, feature, value) rows" if "long" in layouts else ""),
    )
    p.add_argument("--columns", help="wide layout: comma-separated feature columns (default: all numeric but id)")
    p.add_argument("--column", action="append", help="a feature column (repeatable; for names with commas)")
    p.add_argument("--array-column", help="array layout: the LIST/ARRAY column")
    if "long" in layouts:
        p.add_argument("--feature-column", default="feature", help="long layout: feature index column (0..d-1)")
        p.add_argument("--value-column", default="value", help="long layout: value column")
    p.add_argument("--nulls", choices=["error", "zero"], default="error", help="NULL features: fail, or read as 0")


def _urls() -> str:
    """The registered engines' example URLs (each backend's registration), for help and errors."""
    return ", ".join(dict.fromkeys(e["url"] for e in engines_table() if e["url"]))


def _add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=default_url(),
        help=f"database: {_urls()}, or any SQLAlchemy URL (default: $SQLRP_DB)",
    )


#: commands that may make a new database file; every other one reads a table first (issue 26)
_CREATING = {"create", "migrate", "demo", ("projections", "import")}


def _need_db(args: argparse.Namespace) -> str:
    if not args.db:
        if _files_only(args):
            return ":memory:"  # both ends are files: an in-memory DuckDB reads and writes them
        table = getattr(args, "table", None) or ""
        if _looks_like_a_file(table) and not Path(table).exists():
            raise InputError(f"no file {table!r}{_near(table)} (a table in a database needs --db URL)")
        raise InvalidParameter("name the database with --db URL (or set SQLRP_DB)")
    creating = args.command in _CREATING or (args.command, getattr(args, "action", None)) in _CREATING
    # an index of a file (Parquet, CSV, ...) may go into a new database file, as project's output does
    table_file = bool(getattr(args, "input", None) or file_format(getattr(args, "table", None) or ""))
    creating = creating or (args.command == "index" and table_file)
    _check_file_db(args.db, creating)
    return args.db


def _files_only(args: argparse.Namespace) -> bool:
    """The input is a file and the output a file, stdout or a report folder (``project``,
    ``compile``, ``evaluate``): no database is needed.  ``project --into TABLE`` without ``--db`` is
    refused here, naming both ways out."""
    table = getattr(args, "table", None)
    if args.command not in ("project", "compile", "evaluate") or getattr(args, "index", None) or not table:
        return False
    if not (getattr(args, "input", None) or file_format(table)):
        return False
    into = getattr(args, "into", None)
    if args.command == "project" and into and output_format(into) is None and _looks_like_a_file(into):
        raise InvalidParameter(
            f"--into {into!r}: sqlrp writes {', '.join(OUTPUTS)} files, or a table of a database (--db URL)"
        )
    if args.command == "project" and into and output_format(into) is None:
        raise InvalidParameter(
            f"--into {into!r} writes a table: name the database with --db URL, or write a file (--into out.parquet)"
        )
    return True


def _looks_like_a_file(name: str) -> bool:
    """A path (a folder in it) or a name with a file ending (``emb.parqet``, ``x.xlsx``)."""
    return os.sep in name or bool(re.search(r"\.[A-Za-z][A-Za-z0-9]{1,7}$", name))


def _near(path: str) -> str:
    """``; did you mean 'emb.parquet'?`` for a file beside ``path`` with a close name, else ``""``."""
    folder = Path(path).parent
    if not folder.is_dir():
        return ""
    names = [f.name for f in folder.iterdir() if f.is_file()][:1000]
    close = difflib.get_close_matches(Path(path).name, names, n=1, cutoff=0.75)
    return f"; did you mean {str(folder / close[0]) if str(folder) != '.' else close[0]!r}?" if close else ""


def _input_table(args: argparse.Namespace) -> None:
    """``--input PATH`` is the table named by the path; one of ``--table`` and ``--input`` is needed."""
    if getattr(args, "input", None):
        if args.table:
            raise InvalidParameter("give the input as --table NAME or --input PATH, not both")
        args.table = args.input
    if getattr(args, "table_required", False) and not args.table:
        raise InvalidParameter("the input is missing: give --table NAME (a table or a file) or --input PATH")


def _check_file_db(url: str, creating: bool) -> None:
    """A database file named in ``url`` (``duckdb:///``, ``sqlite:///``, ``chdb:///``) that is not
    there is refused -- connecting would create an empty one -- unless the command makes one; a
    ClickHouse path must be a folder."""
    for scheme in ("duckdb:///", "sqlite:///", "chdb:///"):
        if url.startswith(scheme):
            path = (
                Path("/" + url[len(scheme) :].split("?")[0].lstrip("/"))
                if scheme == "chdb:///"
                else Path(url[len(scheme) :].split("?")[0])
            )
            break
    else:
        return
    if str(path) in (":memory:", "/:memory:", ""):
        return
    if scheme == "chdb:///" and path.exists() and not path.is_dir():
        raise InputError(
            f"chdb:///{str(path).lstrip('/')} must name a folder (ClickHouse's data directory); it is a file"
        )
    if not path.exists() and not creating:
        raise InputError(
            f"no database file {str(path)!r}: nothing to read (check the path; `sqlrp create` or "
            "`sqlrp projections import` make a new database)"
        )


def _add_source(p: argparse.ArgumentParser, db_required: bool = True) -> None:
    _add_table(p, db_required)
    p.add_argument(
        "--projection",
        help="stored projection name: reused if it exists, else created and stored; or a projection file "
        "(NAME.sqlrp.json written beside a projected file, or a projections export)",
    )
    p.add_argument("--method", choices=sorted(METHODS), help="new projections (default: achlioptas)")
    p.add_argument("--k", type=arg_positive, help="output dimension (new projections)")
    _add_method_params(p)
    p.add_argument("--seed", type=int, help="seed of a new projection (default 0); a stored one keeps its own")
    p.add_argument("--d", type=arg_positive, help="input dimension, when it cannot be read off the table")
    p.add_argument("--group-column", help="pool (sum) the projections of rows sharing this key (CBP-KRP)")
    p.add_argument(
        "--standardize", action="store_true", help="centre and scale every feature in SQL first (wide/array)"
    )
    p.add_argument("--output", choices=["wide", "array"], default="wide", help="output columns or one array")
    p.add_argument("--prefix", default="p", help="output column prefix (array output: the column name)")
    p.add_argument(
        "--dtype",
        choices=["float64", "float32"],
        default=None,
        help="output type: float64 (DOUBLE) or float32 (FLOAT, half the bytes to write; DuckDB, PostgreSQL); "
        "default: float32 for float32 features where the engine has it, else float64",
    )
    p.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        default="auto",
        help="SQL formulation: auto (measured rule), inline, pairs, mailman or list_transform (DuckDB) (wide/array), "
        "join or lookup (long)",
    )
    p.add_argument("--block", type=arg_positive, help="mailman strategy: features per block (default: chosen)")
    p.add_argument(
        "--matrix",
        default="auto",
        help="long layout: where the matrix comes from -- registry (the stored rows), values (inlined in the "
        "SQL), or the name of a table holding (vector, feature, weight), e.g. one loaded from "
        "'sqlrp projections export' (default: registry on the same database, else values)",
    )
    _add_profile(p)


def _add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=arg_positive, help="small-device profile: DuckDB threads")
    p.add_argument("--memory-limit", help="small-device profile: DuckDB memory_limit, e.g. 1GB")
    p.add_argument("--temp-directory", help="small-device profile: where DuckDB spills beyond --memory-limit")


def _add_method_params(p: argparse.ArgumentParser) -> None:
    """Parameters of the methods; each is passed to the method only when given."""
    p.add_argument("--s", type=_s, help=f"{S_HELP}; default per method")
    k = p.add_argument_group("polynomial-kernel methods (p-rp, pk-rp, cbp, maclaurin, craftmap)")
    k.add_argument("--m", type=arg_positive, help="p-rp: number of sign matrices summed (CLT; default 10, even)")
    k.add_argument("--degree", type=arg_nonnegative, help="pk-rp, maclaurin, craftmap: polynomial degree")
    k.add_argument("--t", type=arg_positive, help="pk-rp, cbp: products summed per output (CLT)")
    k.add_argument("--p", type=arg_positive, help="pk-rp, cbp: number of random vectors (default g*t*k)")
    k.add_argument("--c", type=arg_finite, help="constant of the inhomogeneous kernel (x.y + c)^degree")
    k.add_argument("--kernel-modified", action="store_true", help="p-rp: the modified kernel (x.y)^2 - (x^2).(y^2)")
    k.add_argument("--index", choices=["distinct", "balanced"], help="pk-rp: index scheme")
    k.add_argument("--distribution", choices=["achlioptas", "gaussian"], help="pk-rp, cbp: random vectors")
    k.add_argument("--up", choices=["maclaurin", "pk-rp"], help="craftmap: up-projection method")
    k.add_argument("--up-k", type=arg_positive, help="craftmap: up-projection dimension D (default 4k)")


_METHOD_PARAMS = ("s", "m", "degree", "t", "p", "c", "index", "distribution", "up", "up_k")


def _method_params(args: argparse.Namespace) -> dict:
    params = {name: getattr(args, name) for name in _METHOD_PARAMS if getattr(args, name, None) is not None}
    if getattr(args, "kernel_modified", False):
        params["modified"] = True
    return params


#: what ``build_index`` takes of the input's options (its rows are dense vectors: no long layout, no pooling)
_INDEX_INPUT = ("layout", "columns", "array_column", "schema", "catalog", "nulls")


def _input_options(args: argparse.Namespace) -> dict:
    """The input's options as every command that reads a table forwards them (``_add_table``): the
    fields of :class:`sqlrp.Source` but the table and the id column, read off the command line here
    only."""
    return dict(
        layout=args.layout,
        columns=_columns(args),
        array_column=args.array_column,
        feature_column=getattr(args, "feature_column", "feature"),  # long layout only (not index's)
        value_column=getattr(args, "value_column", "value"),
        schema=args.schema,
        nulls=args.nulls,
        group_column=getattr(args, "group_column", None),
        catalog=args.catalog,
    )


def _plan_options(args: argparse.Namespace) -> dict:
    options = dict(
        _input_options(args),
        method=args.method,
        k=args.k,
        seed=args.seed,
        output=args.output,
        prefix=args.prefix,
        dtype=args.dtype,
        d=args.d,
        standardize=args.standardize,
    )
    options.update(_method_params(args))
    return options


def _connect(args: argparse.Namespace):
    profile = {name: getattr(args, name, None) for name in ("threads", "memory_limit", "temp_directory")}
    db = connect(_need_db(args), **profile)
    if getattr(args, "input", None):  # any ending: read as the table named by the path
        read_input(db, args.input)
    return db


def _say_features(db: object, args: argparse.Namespace) -> None:
    """For a file read as the input (its types guessed from the text): which feature columns are read,
    on stderr, before the work -- so that a column left out (text) is never a silent change of d."""
    if args.layout != "wide" or not (args.input or file_format(args.table)):
        return
    source = api.resolve_source(db, args.table, args.id_column, **_input_options(args))
    shown = ", ".join(source.columns[:20]) + (", ..." if len(source.columns) > 20 else "")
    print(f"reading {len(source.columns)} feature columns of {args.table!r}: {shown}", file=sys.stderr)


def cmd_project(args: argparse.Namespace) -> int:
    with _connect(args) as db:
        _say_features(db, args)
        # the bar goes to stderr: shown on a terminal, or when asked for (--progress); never in a pipe or a log
        wanted = args.progress or (sys.stderr.isatty() and not args.no_progress)
        progress = False if (not wanted or not args.into or args.view) else (args.batches or True)
        result = api.project(
            db,
            args.table,
            args.id_column,
            args.projection,
            into=args.into,
            view=args.view,
            replace=args.replace,
            check=not args.no_check,
            strategy=args.strategy,
            block=args.block,
            matrix=args.matrix,
            incremental=args.incremental,
            progress=progress,
            chunk_rows=None if args.into else args.chunk_rows,
            **_plan_options(args),
        )
        if args.into and output_format(args.into):
            print(f"wrote {' and '.join(map(str, result))}", file=sys.stderr)
        elif args.into:
            kind = "view" if args.view else "table"
            print(f"wrote {kind} {args.into!r}", file=sys.stderr)
        else:
            for i, chunk in enumerate(result):  # streamed: never one giant fetch (an empty result: one
                _exact_lists(chunk).to_csv(sys.stdout, index=False, header=(i == 0))  # empty chunk, the header)
    return 0


def _exact_lists(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each array cell (``--output array``) as a JSON list of its floats in their shortest
    exact form: pandas would print NumPy's repr, 8 digits and no commas (``[-0.19133204  0.67537395]``)."""
    for column in frame.columns:
        cells = frame[column]
        if cells.dtype == object and any(hasattr(v, "__len__") and not isinstance(v, str) for v in cells):
            frame = frame.assign(
                **{column: [None if v is None else json.dumps([float(x) for x in v]) for v in cells]}
            )
    return frame


def cmd_compile(args: argparse.Namespace) -> int:
    """Print the SQL of the matrix given (a stored projection, an exported file, or a warehouse table
    with the projection it came from: :mod:`sqlrp.pipeline.given`), or of a new one (``--k``, ``--d``)."""
    params = _method_params(args)
    new = dict(method=args.method, k=args.k, d=args.d, seed=args.seed, params=params)
    projection = given.read_file(args.projection) if args.projection else None
    if projection is not None:
        given.check_agrees(projection, f"file {args.projection!r}", **new)
    if not (args.db or _files_only(args)):
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
    with _connect(args) as db:
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
    cols = _columns(args)
    d = len(cols) if cols else args.d
    if not d or args.k is None:
        raise InvalidParameter("without --db, give --k and --d (or --columns), or --projection FILE")
    seed = 0 if args.seed is None else args.seed
    return make_projection(args.method or "achlioptas", d, args.k, seed=seed, **params)


def _compile_planned(
    args: argparse.Namespace, db: Backend, target: SqlrpDialect, projection: Projection | Composed | None
) -> str:
    """The SQL (or with ``--check`` the self-check) of a plan on a table of ``db``."""
    options = _plan_options(args) if projection is None else {**_plan_options(args), **_GIVEN}
    plan = api.plan(db, args.table, args.id_column, projection or args.projection, **options)
    # no --db: the in-memory registry is gone when this returns; the matrix goes into the SQL
    matrix = "values" if not args.db and args.matrix == "auto" else args.matrix
    if matrix == "auto":  # as compile_projection: the registry where it is the same engine
        matrix = "registry" if (target.name == db.dialect and plan.projection.name) else "values"
    # the checks ride along for the engine of --db itself (compile_projection's rule)
    guard = target.name == db.dialect and guarded(plan.projection, plan.source, target, args.strategy, matrix)
    if not args.check:
        _unchecked(plan.source, target, guard)
        return api.compile_projection(
            db, plan, target, into=args.into, view=args.view, strategy=args.strategy, block=args.block, matrix=matrix
        )
    stored_pairs_plan(db, plan, target, args.strategy)
    return check_sql(plan.projection, plan.source, target, plan.output, matrix, args.strategy, args.block, guard)


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
    cols = _columns(args)
    if args.layout == "wide" and not cols:
        raise InvalidParameter("name the feature columns with --columns (wide layout; the table is not in a --db)")
    if cols and len(cols) != projection.d:
        raise InvalidParameter(f"--columns names {len(cols)} features; the projection has d = {projection.d}")
    if args.standardize:
        raise InvalidParameter("--standardize computes the feature statistics in the database: give --db")
    block_size(args.block, projection.d)
    source = Source(args.table, args.id_column, **{**_input_options(args), "columns": tuple(cols or ())})
    output = Output(args.output, args.prefix, args.prefix, args.dtype or "float64")  # no table to follow
    if args.check:
        return check_sql(projection, source, target, output, matrix, args.strategy, args.block)
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


def cmd_create(args: argparse.Namespace) -> int:
    with connect(_need_db(args)) as db:
        proj = api.create_projection(
            db, args.name, args.method, d=args.d, k=args.k, seed=args.seed, replace=args.replace, **_method_params(args)
        )
        print(json.dumps(proj.describe(), default=str))
    return 0


def cmd_projections(args: argparse.Namespace) -> int:
    with connect(_need_db(args)) as db:
        if args.action == "list":
            _print_list(api.list_projections(db), args.format)
        elif args.action == "show":
            print(json.dumps(api.load_projection(db, args.name).describe(), indent=2, default=str))
        elif args.action == "copy":
            if not args.to or "://" not in args.to:
                raise InvalidParameter(
                    f"projections copy needs --to URL, a database ({_urls()}); "
                    "to write a file: sqlrp projections export NAME --to F"
                )
            with connect(args.to) as target:
                api.copy_projection(db, args.name, target, replace=args.replace)
            print(f"copied {args.name!r} to {args.to}", file=sys.stderr)
        elif args.action == "export":
            if not args.to:
                raise InvalidParameter("projections export needs --to FILE (.parquet or .csv)")
            for path in export_projection(db, args.name, args.to, replace=args.replace):
                print(f"wrote {path}", file=sys.stderr)
        elif args.action == "import":
            if not args.source:
                raise InvalidParameter("projections import needs --from FILE (a file written by projections export)")
            stored = import_projection(db, args.source, name=args.name, replace=args.replace)
            print(f"imported {stored.name!r}", file=sys.stderr)
        elif args.action == "drop":
            api.drop_projection(db, args.name)
            print(f"dropped {args.name!r}", file=sys.stderr)
    return 0


def _print_list(frame: pd.DataFrame, fmt: str) -> None:
    """``projections list``: a table that fits 100 columns (long names and parameters cut with
    ``...``; the creation time to the minute), or every field as JSON lines or CSV for scripts."""
    if fmt == "json":
        for record in frame.to_dict(orient="records"):
            if isinstance(record.get("params"), str):
                record["params"] = json.loads(record["params"])
            print(json.dumps(record, default=str))
        return
    if fmt == "csv":
        frame.to_csv(sys.stdout, index=False)
        return
    if not len(frame):
        print("(no stored projections)")
        return
    shown = frame[["name", "method", "d", "k", "seed", "params", "created_at"]].copy()
    shown["created_at"] = pd.to_datetime(shown["created_at"]).dt.strftime("%Y-%m-%d %H:%M")
    shown["params"] = shown["params"].astype(str)
    for column, width in (("name", 28), ("params", 24)):
        shown[column] = [v if len(v) <= width else v[: width - 3] + "..." for v in shown[column].astype(str)]
    print(shown.to_string(index=False))


def cmd_migrate(args: argparse.Namespace) -> int:
    with connect(_need_db(args)) as db:
        applied = Registry(db, migrate=False).migrate()
        print("\n".join(applied) if applied else "registry is up to date")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    run_demo(args.db, ks=args.k, s=args.s)
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    with _connect(args) as db:
        proj = api.tune(
            db,
            args.table,
            args.id_column,
            sample=args.sample,
            k=args.k,
            s=args.s,
            iterations=args.iterations,
            seed=args.seed,
            name=args.name,
            replace=args.replace,
            baseline=args.baseline,
            draws=args.draws,
            **_input_options(args),
        )
        print(json.dumps(proj.describe(), indent=2, default=str))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.index:
        with connect(_need_db(args)) as db:
            report = evaluate_search(
                db,
                args.index,
                queries=args.queries,
                top=args.top,
                candidates=_positive_list(args.candidates, "--candidates") if args.candidates else None,
                metric=args.metric,
                seed=args.seed,
                out=args.out,
            )
            print(report)
            for f in report.files:
                print(f"wrote {f}", file=sys.stderr)
        return 0
    if not (args.table and args.id_column and args.projection):
        raise InvalidParameter("evaluate needs --table, --id-column and --projection (or --index NAME for a search)")

    kernel: Kernel | str | None = "projection"  # the kernel the stored projection approximates (issue 24)
    if args.kernel_degree == 1:
        kernel = None  # the input space
    elif args.kernel_degree:
        kernel = Kernel(degree=args.kernel_degree, c=args.kernel_c, modified=args.modified_kernel)
    with _connect(args) as db:
        report = api.evaluate(
            db,
            args.table,
            args.id_column,
            read_projection(args.projection) if is_projection_file(args.projection) else args.projection,
            out=args.out,
            sample=args.sample,
            queries=args.queries,
            recall_k=args.recall_k,
            seed=args.seed,
            ks=args.ks,
            kernel=kernel,
            label_column=args.label_column,
            in_sql=not args.no_sql,
            **_input_options(args),
        )
        print(report)
        for f in report.files:
            print(f"wrote {f}", file=sys.stderr)
    return 0


def _positive_list(text: str, flag: str) -> list[int]:
    """``10,20,50`` as positive whole numbers; an InvalidParameter naming ``flag`` otherwise."""
    try:
        return arg_positive_list(text)
    except argparse.ArgumentTypeError as exc:
        raise InvalidParameter(f"{flag} takes comma-separated positive whole numbers: {exc}") from None


def cmd_index(args: argparse.Namespace) -> int:
    with _connect(args) as db:
        index = build_index(
            db,
            args.table,
            args.id_column,
            args.name,
            lists=args.lists,
            bits=args.bits,
            probes=args.probes,
            metric=args.metric,
            seed=args.seed,
            sample=args.sample,
            incremental=args.incremental,
            replace=args.replace,
            check=not args.no_check,
            recall=args.recall,
            calibration_queries=args.calibration_queries,
            progress=sys.stderr.isatty(),  # on a terminal only, as project's bar
            **{key: value for key, value in _input_options(args).items() if key in _INDEX_INPUT},
        )
        print(("refreshed " if args.incremental else "") + describe_index(index), file=sys.stderr)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    with _connect(args) as db:
        result = search(
            db,
            args.index,
            args.query_table,
            args.query_id_column,
            top=args.top,
            candidates=args.candidates,
            probes=args.probes,
            metric=args.metric,
            into=args.into,
            replace=args.replace,
            schema=args.schema,
            catalog=args.catalog,
            check=not args.no_check,
            exact=args.exact,
            strict=args.strict,
            progress=sys.stderr.isatty(),
        )
        if not args.exact and args.probes is None and args.candidates is None:
            line = describe_defaults(db, args.index, args.top)
            if line:
                print(line, file=sys.stderr)
        if args.into:
            print(f"wrote table {args.into!r}", file=sys.stderr)
        else:
            result.to_csv(sys.stdout, index=False)
    return 0


def cmd_indexes(args: argparse.Namespace) -> int:
    with connect(_need_db(args)) as db:
        if args.action == "list":
            frame = list_indexes(db)
            print(frame.to_string(index=False) if len(frame) else "(no indexes)")
        elif args.action == "show":
            index = load_index(db, args.name)
            print(describe_index(index))
            print(f"table {index.source.table!r}, id column {index.source.id_column!r}, d = {index.d}")
        else:
            drop_index(db, args.name)
            print(f"dropped index {args.name!r}", file=sys.stderr)
    return 0


#: each command (and action) of the command line and the Python function of ``sqlrp`` that does the same,
#: name for name where the CLI's grammar allows (``tests/test_cli.py`` checks both ways)
MIRROR: dict[str, str] = {
    "project": "project",
    "compile": "compile_projection",
    "create": "create_projection",
    "projections list": "list_projections",
    "projections show": "load_projection",
    "projections copy": "copy_projection",
    "projections export": "export_projection",
    "projections import": "import_projection",
    "projections drop": "drop_projection",
    "tune": "tune",
    "evaluate": "evaluate",
    "evaluate --index": "evaluate_search",
    "index": "build_index",
    "search": "search",
    "indexes list": "list_indexes",
    "indexes show": "load_index",
    "indexes drop": "drop_index",
    "migrate": "migrate",
    "demo": "demo",
}


class _Parser(argparse.ArgumentParser):
    """argparse with sqlrp's error format: a usage error is one line (``error: argument --k: ...``)
    and exit status 2, like every other error, not the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {' '.join(message.split())} (see {self.prog} --help)\n")


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text already says it) and keeps the
    examples' lines as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list)
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _command(sub: Any, name: str, summary: str, examples: Sequence[str]) -> argparse.ArgumentParser:
    """A subcommand: its one-line summary is the list's entry and its description; its examples close
    its ``--help``."""
    lines = "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=summary, description=summary, epilog=f"examples:\n{lines}", formatter_class=_Help)


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """``warnings.showwarning`` of the command: one line, ``warning: ...``, without Python's source
    location (a site-packages path and line number mean nothing to the user)."""
    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sqlrp", description="Random projections compiled to SQL.")
    parser.add_argument("--version", action="version", version=f"sqlrp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = _command(
        sub,
        "project",
        "project a table inside the database (a table, a view, or CSV on stdout)",
        [
            "sqlrp project --db duckdb:///w.db --table events --id-column id --k 64 --into events_rp",
            "sqlrp project --table emb.parquet --id-column id --k 64 --into emb_rp.parquet",
            "sqlrp project --db duckdb:///w.db --table events --id-column id --projection rp64 > rp.csv",
        ],
    )
    _add_source(p)
    p.add_argument(
        "--into",
        help="materialise into this table, or a file (.parquet, .csv, .json; by DuckDB, with the projection "
        "beside it in <file>.sqlrp.json; --db may then be omitted) (default: print CSV)",
    )
    p.add_argument("--view", action="store_true", help="create a view instead of a table")
    p.add_argument("--replace", action="store_true", help="replace an existing output table or file")
    p.add_argument("--no-check", action="store_true", help="skip the NULL/NaN scan of the input")
    p.add_argument("--incremental", action="store_true", help="with --into: add only ids not yet in the table")
    p.add_argument("--no-progress", action="store_true", help="with --into: no progress bar")
    p.add_argument(
        "--progress", action="store_true", help="with --into: a progress bar on stderr even when it is not a terminal"
    )
    p.add_argument(
        "--batches",
        type=arg_positive,
        help="with --into: materialise in this many id-range batches behind the progress bar (default: DuckDB "
        "reports the progress of one statement; PostgreSQL batches, up to 10 of >= 20,000 rows each)",
    )
    p.add_argument("--chunk-rows", type=arg_positive, default=100_000, help="CSV output: rows fetched per chunk")
    p.set_defaults(func=cmd_project)

    p = _command(
        sub,
        "compile",
        "print the SQL of a projection",
        [
            "sqlrp compile --db duckdb:///w.db --table events --id-column id --projection rp64 --dialect spark",
            "sqlrp compile --dialect snowflake --table EVENTS --id-column ID --projection rp64.parquet --check",
        ],
    )
    _add_source(p, db_required=False)
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

    p = _command(
        sub,
        "create",
        "generate a projection and store it under a name",
        [
            "sqlrp create --db duckdb:///w.db --name rp64 --d 300 --k 64 --s 3",
        ],
    )
    _add_db(p)
    p.add_argument("--name", required=True, help="store the projection under this name")
    p.add_argument("--method", choices=sorted(METHODS), default="achlioptas", help="the projection's method")
    p.add_argument("--d", type=arg_positive, required=True, help="input dimension (feature columns)")
    p.add_argument("--k", type=arg_positive, required=True, help="output dimension")
    _add_method_params(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the random matrix")
    p.add_argument("--replace", action="store_true", help="overwrite a stored projection of that name")
    p.set_defaults(func=cmd_create)

    p = _command(
        sub,
        "projections",
        "list, show, copy, export, import or drop stored projections",
        [
            "sqlrp projections list --db duckdb:///w.db",
            "sqlrp projections export rp64 --db duckdb:///w.db --to rp64.parquet",
            "sqlrp projections import --db postgresql://localhost/w --from rp64.parquet",
        ],
    )
    p.add_argument(
        "action",
        choices=["list", "show", "copy", "export", "import", "drop"],
        help="list them; show, copy, export or drop the one named; import one from a file",
    )
    p.add_argument("name", nargs="?", help="the projection (show, copy, export, drop; import: the name to store)")
    _add_db(p)
    p.add_argument("--to", help="copy: the database URL to copy into; export: a .parquet or .csv file")
    p.add_argument("--from", dest="source", help="import: the file to read (written by export)")
    p.add_argument("--replace", action="store_true", help="copy, import: overwrite that projection; export: the file")
    p.add_argument(
        "--format", choices=["table", "json", "csv"], default="table", help="list: json (one object a line) or csv"
    )
    p.set_defaults(func=cmd_projections)

    p = _command(
        sub,
        "tune",
        "tune a projection on a sample of a table (DT-RP) and store it",
        [
            "sqlrp tune --db duckdb:///w.db --table events --id-column id --k 32 --name dt32",
        ],
    )
    _add_table(p)
    p.add_argument("--sample", type=arg_positive, default=500, help="training rows (a seeded sample)")
    p.add_argument("--k", type=arg_positive, required=True, help="output dimension")
    p.add_argument("--s", type=_s, default="auto", help=S_HELP)
    p.add_argument("--iterations", type=arg_nonnegative, default=4000, help="tuning steps (sign flips tried)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample and of the starting matrix")
    p.add_argument("--name", help="store under this name (default: <table>_<method>_k<k>_seed<seed>)")
    p.add_argument("--replace", action="store_true", help="overwrite a stored projection of that name")
    p.add_argument("--baseline", choices=["dt-rp", "best-of-n"], default="dt-rp", help="tuner")
    p.add_argument("--draws", type=arg_positive, default=20, help="best-of-n: how many random matrices")
    p.set_defaults(func=cmd_tune)

    p = _command(
        sub,
        "evaluate",
        "metrics and plots of a stored projection on a table, or of a search index (--index)",
        [
            "sqlrp evaluate --db duckdb:///w.db --table events --id-column id --projection rp64 --out report",
            "sqlrp evaluate --db duckdb:///w.db --index ix --top 10",
        ],
    )
    _add_table(p, table_required=False)
    p.add_argument("--projection", help="stored projection name (with --table and --id-column)")
    p.add_argument(
        "--index", help="instead: Recall@K of this search index against exact k-NN, per number of candidates"
    )
    p.add_argument("--top", type=arg_positive, default=10, help="--index: K of Recall@K")
    p.add_argument("--candidates", help="--index: comma-separated candidate counts (default K, 2K, 5K, 10K, ...)")
    p.add_argument("--metric", choices=["euclidean", "angular"], help="--index: check the index was built for it")
    p.add_argument("--out", help="folder for metrics.csv/json and the PNG plots")
    p.add_argument("--sample", type=arg_positive, default=300, help="rows in the seeded evaluation sample")
    p.add_argument("--queries", type=arg_positive, default=100, help="Recall@K queries (the rest is the database)")
    p.add_argument("--recall-k", type=arg_positive, default=5, help="K of Recall@K")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation sample")
    p.add_argument("--ks", type=arg_positive_list, help="comma-separated k values for the distortion-vs-k plot")
    p.add_argument(
        "--kernel-degree",
        type=arg_positive,
        help="measure distortion in this polynomial kernel's space (default: the kernel the projection "
        "approximates, from its stored parameters; 1: the input space)",
    )
    p.add_argument("--kernel-c", type=arg_finite, default=0.0, help="kernel constant c in (x.y + c)^degree")
    p.add_argument("--modified-kernel", action="store_true", help="degree-2 kernel without its diagonal")
    p.add_argument("--label-column", help="class labels: adds linear-classifier accuracies")
    p.add_argument("--no-sql", action="store_true", help="skip the in-database metrics")
    p.set_defaults(func=cmd_evaluate)

    p = _command(
        sub,
        "index",
        "index a table for similarity search: lists and RaBitQ codes (build_index)",
        [
            "sqlrp index --db duckdb:///w.db --table emb --id-column id --layout array --array-column v --name ix",
        ],
    )
    _add_table(p, layouts=("wide", "array"))
    p.add_argument("--name", required=True, help="the index: tables <name>, <name>__lists and <name>__tops")
    p.add_argument("--lists", type=arg_positive, help="inverted lists (default: about sqrt(rows))")
    p.add_argument("--bits", type=arg_positive, help="code bits, a power of two >= d (default: 256 for d = 128)")
    p.add_argument(
        "--probes",
        type=arg_positive,
        help="lists a search probes by default (default: calibrated on the table, adaptive)",
    )
    p.add_argument(
        "--recall", type=float, default=0.95, help="Recall@10 the search defaults are calibrated for (default 0.95)"
    )
    p.add_argument(
        "--calibration-queries",
        type=arg_nonnegative,
        default=100,
        help="table rows searched as queries to calibrate the defaults (default 100; 0: none)",
    )
    p.add_argument("--metric", choices=["euclidean", "angular"], default="euclidean", help="angular: cosine distance")
    p.add_argument(
        "--sample", type=arg_positive, help="rows k-means trains the lists on (default 40 a list, <= 100,000)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sample, k-means and the rotation")
    p.add_argument("--incremental", action="store_true", help="refresh: new, changed and deleted rows (same lists)")
    p.add_argument("--replace", action="store_true", help="rebuild an existing index")
    p.add_argument("--no-check", action="store_true", help="skip the NULL/NaN scan of the input")
    _add_profile(p)
    p.set_defaults(func=cmd_index)

    p = _command(
        sub,
        "search",
        "nearest indexed rows of every query row: (query_id, id, rank, distance)",
        [
            "sqlrp search --db duckdb:///w.db --index ix --query-table q --query-id-column id --top 10",
        ],
    )
    _add_db(p)
    p.add_argument("--index", required=True, help="an index built by `sqlrp index`")
    p.add_argument("--query-table", required=True, help="queries: the index's feature columns and an id")
    p.add_argument("--query-id-column", required=True, help="the query table's id column (query_id of the result)")
    p.add_argument("--schema", help="schema of the query (and output) tables")
    p.add_argument("--catalog", help="catalog holding --schema")
    p.add_argument("--top", type=arg_positive, default=10, help="neighbours per query (K)")
    p.add_argument("--candidates", type=arg_positive, help="rows re-ranked exactly per query (C; default: calibrated)")
    p.add_argument(
        "--probes", type=arg_positive, help="lists probed per query (P; default: the index's calibrated rule)"
    )
    p.add_argument("--metric", choices=["euclidean", "angular"], help="check the index was built for it")
    p.add_argument("--strict", action="store_true", help="refuse (rather than warn) if the table changed since")
    p.add_argument("--into", help="write the result to this table (default: CSV on stdout)")
    p.add_argument("--replace", action="store_true", help="replace an existing --into table")
    p.add_argument("--no-check", action="store_true", help="skip the NULL/NaN scan of the queries")
    p.add_argument("--exact", action="store_true", help="brute force: every query against every row (the baseline)")
    _add_profile(p)
    p.set_defaults(func=cmd_search)

    p = _command(
        sub,
        "indexes",
        "list, show or drop similarity-search indexes",
        [
            "sqlrp indexes list --db duckdb:///w.db",
            "sqlrp indexes show ix --db duckdb:///w.db",
        ],
    )
    p.add_argument("action", choices=["list", "show", "drop"], help="list them; show or drop the one named")
    p.add_argument("name", nargs="?", help="the index (show, drop)")
    _add_db(p)
    p.set_defaults(func=cmd_indexes)

    p = _command(
        sub,
        "migrate",
        "create or upgrade the registry tables",
        [
            "sqlrp migrate --db postgresql://localhost/w",
        ],
    )
    _add_db(p)
    p.set_defaults(func=cmd_migrate)

    p = _command(
        sub,
        "demo",
        "project the bundled digits (UCI, 1,797 x 64) in an embedded DuckDB file",
        [
            "sqlrp demo",
            "sqlrp demo --db digits.duckdb --k 20,40",
        ],
    )
    p.add_argument("--db", default="sqlrp_demo.duckdb", help="the database to write (a DuckDB file, or any URL)")
    p.add_argument("--k", type=arg_positive_list, default=[20, 40, 80, 160], help="comma-separated output dimensions")
    p.add_argument("--s", type=_s, default="auto", help=S_HELP)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error: argparse printed it; a status, as for the errors below
        if not exc.code:
            raise  # --help, --version
        return int(exc.code)
    if args.command == "projections" and args.action in ("show", "copy", "export", "drop") and not args.name:
        parser.error(f"projections {args.action} needs a NAME")
    if args.command == "indexes" and args.action in ("show", "drop") and not args.name:
        parser.error(f"indexes {args.action} needs a NAME")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_line
            _input_table(args)
            return args.func(args)
    except BrokenPipeError:  # e.g. `sqlrp project ... | head`
        sys.stderr.close()
        return 0
    except Exception as exc:  # noqa: BLE001 - every expected error: one line, a status by kind
        status = exit_status(exc)
        if status is None:
            raise  # a defect in sqlrp: the traceback is what a bug report needs
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return status


if __name__ == "__main__":
    raise SystemExit(main())
