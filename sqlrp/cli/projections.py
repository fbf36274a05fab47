"""``sqlrp create``, ``projections``, ``migrate`` and ``demo``: the stored projections and the registry."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import api
from ..backends import connect
from ..core.errors import InvalidParameter
from ..core.lazy import pd
from ..core.params import arg_count, arg_count_list
from ..demo import run_demo
from ..methods import METHODS
from ..registry.store import Registry
from ..registry.transfer import export_projection, import_projection
from .options import S_HELP, add_db, add_method_params, command, method_params, need_db, sparsity, urls


def add_create(sub: Any) -> None:
    """create: a new projection stored under a name."""
    p = command(
        sub,
        "create",
        "generate a projection and store it under a name",
        [
            "sqlrp create --db duckdb:///w.db --name rp64 --d 300 --k 64 --s 3",
        ],
    )
    add_db(p)
    p.add_argument("--name", required=True, help="store the projection under this name")
    p.add_argument("--method", choices=sorted(METHODS), default="achlioptas", help="the projection's method")
    p.add_argument("--d", type=arg_count("d"), required=True, help="input dimension (feature columns)")
    p.add_argument("--k", type=arg_count("k"), required=True, help="output dimension")
    add_method_params(p)
    p.add_argument("--seed", type=arg_count("seed"), default=0, help="seed of the random matrix")
    p.add_argument("--replace", action="store_true", help="overwrite a stored projection of that name")
    p.set_defaults(func=cmd_create)


def cmd_create(args: argparse.Namespace) -> int:
    with connect(need_db(args)) as db:
        proj = api.create_projection(
            db, args.name, args.method, d=args.d, k=args.k, seed=args.seed, replace=args.replace, **method_params(args)
        )
        print(json.dumps(proj.describe(), default=str))
    return 0


def add_projections(sub: Any) -> None:
    """projections: list, show, copy, export, import or drop."""
    p = command(
        sub,
        "projections",
        "list, show, copy, export, import, drop or accept stored projections",
        [
            "sqlrp projections list --db duckdb:///w.db",
            "sqlrp projections export rp64 --db duckdb:///w.db --to rp64.parquet",
            "sqlrp projections import --db postgresql://localhost/w --from rp64.parquet",
            "sqlrp projections accept rp64 --db duckdb:///w.db",
        ],
    )
    p.add_argument(
        "action",
        choices=["list", "show", "copy", "export", "import", "drop", "accept"],
        help="list them; show, copy, export or drop the one named; import one from a file; accept the one named as "
        "its rows are now (after an edit made outside sqlrp on purpose: its digest is stored again)",
    )
    p.add_argument(
        "name", nargs="?", help="the projection (show, copy, export, drop, accept; import: the name to store)"
    )
    add_db(p)
    p.add_argument("--to", help="copy: the database URL to copy into; export: a .parquet or .csv file")
    p.add_argument("--from", dest="source", help="import: the file to read (written by export)")
    p.add_argument("--replace", action="store_true", help="copy, import: overwrite that projection; export: the file")
    p.add_argument(
        "--format", choices=["table", "json", "csv"], default="table", help="list: json (one object a line) or csv"
    )
    p.set_defaults(func=cmd_projections)


def cmd_projections(args: argparse.Namespace) -> int:
    with connect(need_db(args)) as db:
        if args.action == "list":
            _print_list(api.list_projections(db), args.format)
        elif args.action == "show":
            print(json.dumps(api.load_projection(db, args.name).describe(), indent=2, default=str))
        elif args.action == "copy":
            if not args.to or "://" not in args.to:
                raise InvalidParameter(
                    f"projections copy needs --to URL, a database ({urls()}); "
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
        elif args.action == "accept":
            if not args.name:
                raise InvalidParameter("projections accept needs the NAME of a stored projection")
            api.accept_projection(db, args.name)
            print(f"accepted {args.name!r} as its rows are now", file=sys.stderr)
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


def add_migrate(sub: Any) -> None:
    """migrate: the registry tables."""
    p = command(
        sub,
        "migrate",
        "create or upgrade the registry tables",
        [
            "sqlrp migrate --db postgresql://localhost/w",
        ],
    )
    add_db(p)
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    with connect(need_db(args)) as db:
        applied = Registry(db, migrate=False).migrate()
        print("\n".join(applied) if applied else "registry is up to date")
    return 0


def add_demo(sub: Any) -> None:
    """demo: the bundled digits."""
    p = command(
        sub,
        "demo",
        "project the bundled digits (UCI, 1,797 x 64) in an embedded DuckDB file",
        [
            "sqlrp demo",
            "sqlrp demo --db digits.duckdb --k 20,40",
        ],
    )
    p.add_argument("--db", default="sqlrp_demo.duckdb", help="the database to write (a DuckDB file, or any URL)")
    p.add_argument("--k", type=arg_count_list("k"), default=[20, 40, 80, 160], help="comma-separated output dimensions")
    p.add_argument("--s", type=sparsity, default="auto", help=S_HELP)
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    run_demo(args.db, ks=args.k, s=args.s)
    return 0
