"""The command line's option groups, each beside the function that reads it back (``add_table`` and
``input_options``, ``add_source`` and ``plan_options``, ``add_method_params`` and ``method_params``,
``hand_on`` and ``handed_on``),
and the checks every command shares: which database, which input table."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..backends import connect, default_url, examples
from ..compiler.strategies import STRATEGIES
from ..core.errors import InputError, InvalidParameter
from ..core.files import file_format, looks_like_a_file, no_such_file, output_format, read_input, refuse_file_ending
from ..core.params import arg_count, arg_count_list, arg_finite
from ..methods import METHODS
from ..methods.maclaurin import SAMPLINGS
from ..methods.rff import DEFAULT_WEIGHTS, KERNELS, WEIGHTS


def feature_columns(args: argparse.Namespace) -> list[str] | None:
    cols = [c.strip() for c in (args.columns or "").split(",") if c.strip()] + list(args.column or [])
    return cols or None


def names(value: str) -> tuple[str, ...]:
    """A comma-separated list of names."""
    return tuple(c.strip() for c in value.split(",") if c.strip())


def gamma_value(value: str) -> float | str:
    """``--gamma``: a number, or ``scale``."""
    if value.strip().lower() == "scale":
        return "scale"
    return arg_finite(value)


def sparsity(value: str) -> float | str:
    try:
        return float(value)
    except ValueError:
        return value


#: the one description of ``--s`` (every command that draws a sign matrix)
S_HELP = (
    "sparsity s >= 1: 1 dense signs, 3 Achlioptas, auto from the data's kurtosis when projecting a table "
    "(at most sqrt(d)), sqrt(d) without one"
)


def add_s(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None = "auto", note: str = ""
) -> argparse.Action:
    """``--s``, the sparsity of a sign matrix, described once (:data:`S_HELP`, then ``note``)."""
    return p.add_argument("--s", type=sparsity, default=default, help=S_HELP + note)


def urls() -> str:
    """The registered engines' example URLs (each backend's registration; no backend module imported),
    for help and errors."""
    return ", ".join(dict.fromkeys(examples()))


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=default_url(),
        help=f"database: {urls()}, or any SQLAlchemy URL (default: $SQLRP_DB)",
    )


def add_table(
    p: argparse.ArgumentParser,
    table_required: bool = True,
    layouts: Sequence[str] = ("wide", "long", "array"),
) -> None:
    """The options that name an input table and its layout (every command that reads one)."""
    add_db(p)
    g = p.add_argument_group("the input table")
    g.add_argument(
        "--table",
        help="input table, exactly (a dot is part of the name; it is quoted); on DuckDB a file or glob that is "
        "no table: data.parquet, part-*.csv, rows.jsonl",
    )
    g.add_argument("--input", help="input file or glob, whatever its ending (read by DuckDB; instead of --table)")
    p.set_defaults(table_required=table_required)
    g.add_argument("--id-column", required=table_required, help="row id column, copied to the output")
    add_input(
        p,
        g.add_argument("--schema", help="schema of the input (and output) tables"),
        g.add_argument("--catalog", help="catalog (database, project) holding --schema: catalog.schema.table"),
        g.add_argument(
            "--layout",
            choices=layouts,
            default="wide",
            help="wide: a column per feature; array: one LIST/ARRAY column"
            + ("; long: (id, feature, value) rows" if "long" in layouts else ""),
        ),
        g.add_argument("--columns", help="wide layout: comma-separated feature columns (default: all numeric but id)"),
        g.add_argument("--column", action="append", help="a feature column (repeatable; for names with commas)"),
        g.add_argument("--array-column", help="array layout: the LIST/ARRAY column"),
        g.add_argument("--exclude", type=names, help="wide layout: comma-separated columns left out of the features"),
        g.add_argument("--nulls", choices=["error", "zero"], default="error", help="NULL features: fail, or read as 0"),
    )
    if "long" in layouts:
        add_input(
            p,
            g.add_argument("--feature-column", default="feature", help="long layout: feature index column (0..d-1)"),
            g.add_argument("--value-column", default="value", help="long layout: value column"),
        )


def add_input(p: argparse.ArgumentParser, *options: argparse.Action) -> None:
    """Mark ``options`` (the actions ``add_argument`` returned) as the input's: each a field of
    :class:`sqlrp.Source` (:class:`sqlrp.core.layout.SourceOptions`) under its own name, read back by
    :func:`input_options` (``--columns`` and the repeatable ``--column`` as one list)."""
    p.set_defaults(input_dests=(*(p.get_default("input_dests") or ()), *(option.dest for option in options)))


def input_options(args: argparse.Namespace) -> dict:
    """The input's options as every command that reads a table forwards them: exactly those
    :func:`add_input` marked, read off the command line here only."""
    given = {dest: getattr(args, dest) for dest in args.input_dests if dest not in ("columns", "column")}
    return {**given, "columns": feature_columns(args)}


def add_source(p: argparse.ArgumentParser) -> None:
    add_table(p)
    g = p.add_argument_group("the projection (a stored one, or a new one's method and parameters)")
    g.add_argument(
        "--projection",
        help="stored projection name: reused if it exists, else created and stored; or a projection file "
        "(NAME.sqlrp.json written beside a projected file, or a projections export)",
    )
    g.add_argument("--method", choices=sorted(METHODS), help="new projections (default: achlioptas)")
    g.add_argument("--k", type=arg_count("k"), help="output dimension (new projections)")
    add_method_params(p, g)
    g.add_argument(
        "--seed", type=arg_count("seed"), help="seed of a new projection (default 0); a stored one keeps its own"
    )
    g.add_argument("--d", type=arg_count("d"), help="input dimension, when it cannot be read off the table")
    o = p.add_argument_group("the output")
    add_input(p, o.add_argument("--group-column", help="pool (sum) the projections of rows sharing this key (CBP-KRP)"))
    o.add_argument(
        "--standardize", action="store_true", help="centre and scale every feature in SQL first (wide/array)"
    )
    o.add_argument("--output", choices=["wide", "array"], default="wide", help="output columns or one array")
    o.add_argument("--prefix", default="p", help="output column prefix (array output: the column name)")
    o.add_argument(
        "--dtype",
        choices=["float64", "float32"],
        default=None,
        help="output type: float64 (DOUBLE) or float32 (FLOAT, half the bytes to write; DuckDB, PostgreSQL); "
        "default: float32 for float32 features where the engine has it, else float64",
    )
    q = p.add_argument_group("how the SQL is written")
    q.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        default="auto",
        help="SQL formulation: auto (measured rule), inline, pairs, mailman or list_transform (DuckDB) (wide/array), "
        "join or lookup (long)",
    )
    q.add_argument("--block", type=arg_count("block"), help="mailman strategy: features per block (default: chosen)")
    q.add_argument(
        "--matrix",
        default="auto",
        help="long layout: where the matrix comes from -- registry (the stored rows), values (inlined in the "
        "SQL), or the name of a table holding (vector, feature, weight), e.g. one loaded from "
        "'sqlrp projections export' (default: registry on the same database, else values)",
    )
    add_profile(p)


def plan_options(args: argparse.Namespace) -> dict:
    options = dict(
        input_options(args),
        method=args.method,
        k=args.k,
        seed=args.seed,
        output=args.output,
        prefix=args.prefix,
        dtype=args.dtype,
        d=args.d,
        standardize=args.standardize,
    )
    options.update(method_params(args))
    return options


def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=arg_count("threads"), help="small-device profile: DuckDB threads")
    p.add_argument("--memory-limit", help="small-device profile: DuckDB memory_limit, e.g. 1GB")
    p.add_argument("--temp-directory", help="small-device profile: where DuckDB spills beyond --memory-limit")


def add_method_params(p: argparse.ArgumentParser, group: argparse._ArgumentGroup | None = None) -> None:
    """Parameters of the methods; each is passed to the method only when given (``method_params``
    reads back exactly the options added here).  ``--s`` goes in ``group`` (the projection's), if given."""
    given = [add_s(group or p, None, "; default per method")]
    k = p.add_argument_group("polynomial-kernel methods (p-rp, pk-rp, cbp, maclaurin, craftmap)")
    given += [
        k.add_argument("--m", type=arg_count("m"), help="p-rp: number of sign matrices summed (CLT; default 10, even)"),
        k.add_argument("--degree", type=arg_count("degree"), help="pk-rp, maclaurin, craftmap: polynomial degree"),
        k.add_argument("--t", type=arg_count("t"), help="pk-rp, cbp: products summed per output (CLT)"),
        k.add_argument("--p", type=arg_count("p"), help="pk-rp, cbp: number of random vectors (default g*t*k)"),
        k.add_argument("--c", type=arg_finite, help="constant of the inhomogeneous kernel (x.y + c)^degree"),
        k.add_argument(
            "--kernel-modified",
            dest="modified",
            action="store_true",
            default=None,
            help="p-rp: the modified kernel (x.y)^2 - (x^2).(y^2)",
        ),
        k.add_argument("--index", choices=["distinct", "balanced"], help="pk-rp: index scheme"),
        k.add_argument("--distribution", choices=["achlioptas", "gaussian"], help="pk-rp, cbp: random vectors"),
        k.add_argument("--up", choices=["maclaurin", "pk-rp"], help="craftmap: up-projection method"),
        k.add_argument("--up-k", type=arg_count("up_k"), help="craftmap: up-projection dimension D (default 4k)"),
        k.add_argument("--down-s", type=sparsity, help="craftmap: sparsity of the down-projection (default 3)"),
        k.add_argument("--sampling", choices=SAMPLINGS, help="maclaurin: how degrees are drawn (default support)"),
        k.add_argument("--base", type=arg_finite, help="maclaurin: base of the geometric or paper law (default 2)"),
        k.add_argument(
            "--truncate", action="store_true", default=None, help="maclaurin: the paper's law, N <= degree only"
        ),
    ]
    r = p.add_argument_group("random Fourier features (rff)")
    given += [
        r.add_argument("--kernel", choices=list(KERNELS), help="rff: the kernel, rbf (Gaussian) or laplacian"),
        r.add_argument(
            "--gamma",
            type=gamma_value,
            help="rff: the kernel's bandwidth, a number > 0 or scale: 1/(d Var(X)), default",
        ),
        r.add_argument(
            "--weights",
            choices=list(WEIGHTS),
            help=f"rff: the directions (default {DEFAULT_WEIGHTS}; laplacian: gaussian, i.e. Cauchy)",
        ),
    ]
    p.set_defaults(method_params=tuple(action.dest for action in given))


def method_params(args: argparse.Namespace) -> dict:
    """The method parameters given on the command line, by the names the methods take."""
    return {name: getattr(args, name) for name in args.method_params if getattr(args, name) is not None}


def hand_on(p: argparse.ArgumentParser, *options: argparse.Action) -> None:
    """Mark ``options`` (the actions ``add_argument`` returned) as handed on as they are, under their
    own names, to the function the command wraps; ``handed_on`` reads back exactly these (every call
    adds to the command's list)."""
    p.set_defaults(handed_on=(*(p.get_default("handed_on") or ()), *(option.dest for option in options)))


def handed_on(args: argparse.Namespace) -> dict:
    """The options of :func:`hand_on` as keyword arguments."""
    return {name: getattr(args, name) for name in args.handed_on}


def connect_args(args: argparse.Namespace):
    profile = {name: getattr(args, name, None) for name in ("threads", "memory_limit", "temp_directory")}
    db = connect(need_db(args), **profile)
    if getattr(args, "input", None):  # any ending: read as the table named by the path
        read_input(db, args.input)
    return db


#: commands that may make a new database file; every other one reads a table first (issue 26)
_CREATING = {"create", "migrate", "demo", ("projections", "import")}
#: commands that write what they make (a table, a stored projection, an index) and so may make a new
#: database file when their input is a file (issue 42): a table named in a database not there is no input.
#: A new verb that writes adds its name here.
WRITING = {"project", "tune", "index", "fit"}


def need_db(args: argparse.Namespace) -> str:
    """The database URL of ``--db``; a database file that is not there is refused unless the command makes
    one (:data:`WRITING`, ``_CREATING``), and then noted as ``args.new_db_file``: a command that fails
    leaves no new file behind (:func:`discard_new_db`)."""
    if not args.db:
        if files_only(args):
            return ":memory:"  # both ends are files: an in-memory DuckDB reads and writes them
        table = getattr(args, "table", None) or ""
        if looks_like_a_file(table) and not Path(table).exists():
            raise InputError(f"{no_such_file(table)}; a table in a database needs --db URL")
        raise InvalidParameter("name the database with --db URL (or set SQLRP_DB)")
    creating = args.command in _CREATING or (args.command, getattr(args, "action", None)) in _CREATING
    # a command that writes from a file (Parquet, CSV, ...) may write into a new database file
    table_file = bool(getattr(args, "input", None) or file_format(getattr(args, "table", None) or ""))
    creating = creating or (args.command in WRITING and table_file)
    path = _check_file_db(args.db, creating)
    if path is not None and not path.exists() and getattr(args, "new_db_file", None) is None:
        args.new_db_file = path
    return args.db


def settle_new_db(args: argparse.Namespace, status: int) -> None:
    """Remove the database file the command made (``args.new_db_file``, with its write-ahead log or journal)
    if the command failed or was interrupted -- the disk is as it was before it -- or if a command of
    :data:`WRITING` put nothing in it (``project --into out.parquet`` made only the registry's empty tables):
    a new database file is kept only when a write into it committed.  Its connections are closed by then."""
    path = getattr(args, "new_db_file", None)
    if path is None or not path.exists():
        return
    if not status and (args.command not in WRITING or not _holds_nothing(args.db)):
        return
    for made in (path, path.with_name(path.name + ".wal"), path.with_name(path.name + "-journal")):
        with contextlib.suppress(FileNotFoundError):
            made.unlink()


def _holds_nothing(url: str) -> bool:
    """True if the database holds no table but the registry's, and those without rows (its schema version
    aside)."""
    with connect(url) as db:
        tables = db.table_names()
        if any(not t.startswith("sqlrp_") for t in tables):
            return False
        counts = [db.fetchall(f'SELECT COUNT(*) FROM "{t}"')[0][0] for t in tables if t != "sqlrp_schema_version"]
        return not any(counts)


def files_only(args: argparse.Namespace) -> bool:
    """The input is a file and the output a file, stdout or a report folder (``project``,
    ``compile``, ``evaluate``): no database is needed.  ``project --into TABLE`` without ``--db`` is
    refused here, naming both ways out."""
    table = getattr(args, "table", None)
    if args.command not in ("project", "compile", "evaluate") or getattr(args, "index", None) or not table:
        return False
    if not (getattr(args, "input", None) or file_format(table)):
        return False
    into = getattr(args, "into", None)
    if args.command == "project" and into:
        refuse_file_ending(into, "with --db URL it writes a table, named without a file ending")
    if args.command == "project" and into and output_format(into) is None:
        raise InvalidParameter(
            f"--into {into!r} writes a table: name the database with --db URL, or write a file (--into out.parquet)"
        )
    return True


def input_table(args: argparse.Namespace) -> None:
    """``--input PATH`` is the table named by the path; one of ``--table`` and ``--input`` is needed."""
    if getattr(args, "input", None):
        if args.table:
            raise InvalidParameter("give the input as --table NAME or --input PATH, not both")
        args.table = args.input
    if getattr(args, "table_required", False) and not args.table:
        raise InvalidParameter("the input is missing: give --table NAME (a table or a file) or --input PATH")


def _check_file_db(url: str, creating: bool) -> Path | None:
    """A database file named in ``url`` (``duckdb:///``, ``sqlite:///``, ``chdb:///``) that is not
    there is refused -- connecting would create an empty one -- unless the command makes one; a
    ClickHouse path must be a folder.  The DuckDB or SQLite file's path, if it names one."""
    for scheme in ("duckdb:///", "sqlite:///", "chdb:///"):
        if url.startswith(scheme):
            path = (
                Path("/" + url[len(scheme) :].split("?")[0].lstrip("/"))
                if scheme == "chdb:///"
                else Path(url[len(scheme) :].split("?")[0])
            )
            break
    else:
        return None
    if str(path) in (":memory:", "/:memory:", ""):
        return None
    if scheme == "chdb:///" and path.exists() and not path.is_dir():
        raise InputError(
            f"chdb:///{str(path).lstrip('/')} must name a folder (ClickHouse's data directory); it is a file"
        )
    if not path.exists() and not creating:
        raise InputError(
            f"no database file {str(path)!r}: nothing to read (check the path; a command that writes from a "
            "file -- project, tune, index -- or `sqlrp create` makes a new database)"
        )
    return None if scheme == "chdb:///" else path


def positive_list(text: str, flag: str, limit: str) -> list[int]:
    """``10,20,50`` as whole numbers in ``LIMITS[limit]``'s range; an InvalidParameter naming ``flag`` otherwise."""
    try:
        return arg_count_list(limit)(text)
    except argparse.ArgumentTypeError as exc:
        raise InvalidParameter(f"{flag} takes comma-separated positive whole numbers: {exc}") from None


class Help(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default (unless its text already says it) and keeps the
    examples' lines as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and not isinstance(action.default, list)
        shown = shown and action.nargs != 0  # a flag's default is its absence (--no-check: True)
        if shown and "default" not in text and action.option_strings:
            text += " (default: %(default)s)"
        return text


def command(sub: Any, name: str, summary: str, examples: Sequence[str]) -> argparse.ArgumentParser:
    """A subcommand: its one-line summary is the list's entry and its description; its examples close
    its ``--help``."""
    lines = "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=summary, description=summary, epilog=f"examples:\n{lines}", formatter_class=Help)
