"""``sqlrp fit``: the top principal components (``--method pca``) or singular vectors (``svd``) of a table,
fitted by the randomized range finder in a few passes over its rows and stored as a projection
(:func:`sqlrp.fit`); then ``sqlrp project --projection NAME`` scores every row."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import api
from ..core.layout import ROUTES
from ..core.params import arg_count, arg_fraction
from .options import add_profile, add_table, command, connect_args, hand_on, handed_on, input_options


def power_iterations(value: str) -> int | str:
    """``auto`` or a whole number of power iterations (``LIMITS["power_iterations"]``)."""
    return value if value == "auto" else arg_count("power_iterations")(value)


power_iterations.limit = "power_iterations"  # type: ignore[attr-defined] - the CLI fuzzer finds it by this


def add_fit(sub: Any) -> None:
    """fit: PCA / SVD of a table, stored as a projection."""
    p = command(
        sub,
        "fit",
        "fit the top k principal components (pca) or singular vectors (svd) of a table and store them",
        [
            "sqlrp fit --method pca --db duckdb:///w.db --table emb --id-column id --k 32 --name pca32",
            "sqlrp fit --method svd --db duckdb:///w.db --table emb.parquet --id-column id --k 8 --name svd8",
            "sqlrp fit --method pca --db duckdb:///w.db --table emb --id-column id --variance 0.9 --name pca90",
        ],
    )
    add_table(p)
    add_profile(p)
    p.add_argument("--method", choices=["pca", "svd"], default="pca", help="pca: centred; svd: as stored")
    hand_on(
        p,
        p.add_argument("--k", type=arg_count("k"), help="number of components (or --variance)"),
        p.add_argument(
            "--variance",
            type=arg_fraction,
            help="instead of --k: the fewest components whose explained-variance ratio exceeds this (0 < v < 1)",
        ),
        p.add_argument("--name", help="store under this name (default: <table>_<method>_k<k>)"),
        p.add_argument(
            "--oversample", type=arg_count("oversample"), default=10, help="extra sketch columns p (l = k + p)"
        ),
        p.add_argument(
            "--power-iterations",
            type=power_iterations,
            default="auto",
            help="passes of subspace iteration after the first; auto: chosen from the spectrum after each pass",
        ),
        p.add_argument("--seed", type=arg_count("seed"), default=0, help="seed of the sketch's sign matrix"),
        p.add_argument("--whiten", action="store_true", help="scores divided by the square root of their variance"),
        p.add_argument("--replace", action="store_true", help="overwrite a stored projection of that name"),
        p.add_argument(
            "--route",
            choices=list(ROUTES),
            default="auto",
            help="sql: aggregate statements; arrow: record batches into NumPy (in-process DuckDB); auto: arrow there",
        ),
        p.add_argument(
            "--gram",
            choices=["auto", "always", "never"],
            default="auto",
            help="the exact route: one pass summing the d x d Gram matrix; auto: where that costs less than sketching",
        ),
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar over the passes")
    p.add_argument("--progress", action="store_true", help="a progress bar on stderr even when it is not a terminal")
    p.set_defaults(func=cmd_fit)


def cmd_fit(args: argparse.Namespace) -> int:
    progress = args.progress or (sys.stderr.isatty() and not args.no_progress)
    with connect_args(args) as db:
        proj = api.fit(
            db, args.table, args.id_column, args.method, progress=progress, **handed_on(args), **input_options(args)
        )
        params = proj.params
        print(
            f"fitted {proj.name!r}: {proj.k} components of d = {proj.d}, {params['passes']} passes of "
            f"{params['rows']:,} rows ({params['route']}); {params['power_iterations_why']}; "
            f"{params['components_why']}",
            file=sys.stderr,
        )
        print(json.dumps(proj.describe(), indent=2, default=str))
    return 0
