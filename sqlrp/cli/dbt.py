"""``sqlrp dbt``: a projection written into a dbt project as a model (:func:`sqlrp.dbt_model`)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from ..backends import connect
from ..compiler.strategies import STRATEGIES
from ..core.params import arg_count
from ..dbt import dbt_model
from ..dbt_project import ADAPTERS
from ..methods import METHODS
from .options import add_db, add_input, add_method_params, command, input_options, method_params, names, need_db


def add_dbt(sub: Any) -> None:
    """dbt: the project, the input (a dbt model or source), the projection, and the model to write."""
    p = command(
        sub,
        "dbt",
        "write a projection into a dbt project: the model, its matrix seed, and its checks as dbt tests",
        [
            "sqlrp dbt --project-dir shop --source raw.events --id-column id --db duckdb:///shop/shop.duckdb "
            "--k 16 --into events_rp",
            "sqlrp dbt --project-dir shop --ref stg_events --id-column id --columns a,b,c --k 2 --into events_rp",
            "sqlrp dbt --project-dir shop --source raw.pairs --id-column id --layout long --d 784 "
            "--projection rp64 --db postgresql://localhost/shop --into pairs_rp --incremental",
        ],
    )
    t = p.add_argument_group("the dbt project")
    t.add_argument("--project-dir", required=True, help="the dbt project's folder (its dbt_project.yml)")
    t.add_argument(
        "--profiles-dir",
        help="the folder of profiles.yml (default: $DBT_PROFILES_DIR, the project's folder, ~/.dbt)",
    )
    t.add_argument(
        "--target", help=f"the profile's target to render for (default: its own); adapters: {', '.join(ADAPTERS)}"
    )
    add_db(p)
    g = p.add_argument_group("the input (a dbt model or a dbt source; its columns from --db or --columns)")
    g.add_argument("--ref", help="the input is this dbt model: {{ ref('MODEL') }}")
    g.add_argument("--source", help="the input is this dbt source: SOURCE.TABLE, {{ source('SOURCE', 'TABLE') }}")
    g.add_argument("--id-column", required=True, help="row id column, the model's key (and unique_key)")
    add_input(
        p,
        g.add_argument("--schema", help="schema of the input's table in --db (where its columns are read)"),
        g.add_argument("--catalog", help="catalog (database) holding --schema in --db"),
        g.add_argument("--layout", choices=["wide", "long", "array"], default="wide", help="the input's layout"),
        g.add_argument("--columns", help="wide layout: comma-separated feature columns (default: read from --db)"),
        g.add_argument("--column", action="append", help="a feature column (repeatable; for names with commas)"),
        g.add_argument("--array-column", help="array layout: the LIST/ARRAY column"),
        g.add_argument("--exclude", type=names, help="wide layout: columns left out of the features"),
        g.add_argument("--nulls", choices=["error", "zero"], default="error", help="NULL features: fail, or read as 0"),
        g.add_argument("--feature-column", default="feature", help="long layout: feature index column (0..d-1)"),
        g.add_argument("--value-column", default="value", help="long layout: value column"),
        g.add_argument("--group-column", help="pool (sum) the projections of rows sharing this key (CBP-KRP)"),
    )
    _add_projection(p)
    w = p.add_argument_group("the model")
    w.add_argument("--into", required=True, help="the model's name: models/INTO.sql")
    w.add_argument("--incremental", action="store_true", help="an incremental model: each dbt run adds the new ids")
    w.add_argument("--replace", action="store_true", help="overwrite the files of a model sqlrp wrote before")
    p.set_defaults(func=cmd_dbt)


def _add_projection(p: argparse.ArgumentParser) -> None:
    """The projection (stored, a file, or a new one), the output's form and the strategy."""
    g = p.add_argument_group("the projection (a stored one with --db, a projection file, or a new one)")
    g.add_argument("--projection", help="stored projection name (with --db) or projection file")
    g.add_argument("--method", choices=sorted(METHODS), help="new projections (default: achlioptas)")
    g.add_argument("--k", type=arg_count("k"), help="output dimension (new projections)")
    add_method_params(p, g)
    g.add_argument("--seed", type=arg_count("seed"), help="seed of a new projection (default 0)")
    g.add_argument("--d", type=arg_count("d"), help="input dimension, when it cannot be read off a table")
    g.add_argument("--standardize", action="store_true", help="centre and scale every feature (needs --db)")
    g.add_argument("--output", choices=["wide", "array"], default="wide", help="output columns or one array")
    g.add_argument("--prefix", default="p", help="output column prefix (array output: the column name)")
    g.add_argument("--dtype", choices=["float64", "float32"], default=None, help="output type (default: as the input)")
    g.add_argument("--strategy", choices=list(STRATEGIES), default="auto", help="SQL formulation")
    g.add_argument("--block", type=arg_count("block"), help="mailman strategy: features per block")


def cmd_dbt(args: argparse.Namespace) -> int:
    options = dict(
        input_options(args),
        method=args.method,
        k=args.k,
        seed=args.seed,
        d=args.d,
        standardize=args.standardize,
        output=args.output,
        prefix=args.prefix,
        dtype=args.dtype,
        strategy=args.strategy,
        block=args.block,
        incremental=args.incremental,
        replace=args.replace,
        profiles_dir=args.profiles_dir,
        target=args.target,
        **method_params(args),
    )
    with connect(need_db(args)) if args.db else contextlib.nullcontext() as db:
        written = dbt_model(
            args.project_dir, args.into, args.id_column, args.projection, db=db, ref=args.ref, source=args.source,
            **options,
        )  # fmt: skip
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
