"""``sqlrp tune`` and ``sqlrp evaluate``: DT-RP, and the metrics of a projection or a search index."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import api
from ..backends import connect
from ..core.errors import InvalidParameter
from ..core.params import arg_count, arg_count_list, arg_finite
from ..evaluation.metrics import Kernel
from ..registry.transfer import is_projection_file, read_projection
from ..search.evaluate import evaluate_search
from .options import add_s, add_table, command, connect_args, hand_on, handed_on, input_options, need_db, positive_list


def add_tune(sub: Any) -> None:
    """tune: DT-RP on a sample of a table."""
    p = command(
        sub,
        "tune",
        "tune a projection on a sample of a table (DT-RP) and store it",
        [
            "sqlrp tune --db duckdb:///w.db --table events --id-column id --k 32 --name dt32",
        ],
    )
    add_table(p)
    hand_on(
        p,
        p.add_argument("--sample", type=arg_count("sample"), default=500, help="training rows (a seeded sample)"),
        p.add_argument("--k", type=arg_count("k"), required=True, help="output dimension"),
        add_s(p),
        p.add_argument(
            "--iterations", type=arg_count("iterations"), default=4000, help="tuning steps (sign flips tried)"
        ),
        p.add_argument(
            "--seed", type=arg_count("seed"), default=0, help="seed of the sample and of the starting matrix"
        ),
        p.add_argument("--name", help="store under this name (default: <table>_<method>_k<k>_seed<seed>)"),
        p.add_argument("--replace", action="store_true", help="overwrite a stored projection of that name"),
        p.add_argument("--baseline", choices=["dt-rp", "best-of-n"], default="dt-rp", help="tuner"),
        p.add_argument("--draws", type=arg_count("draws"), default=20, help="best-of-n: how many random matrices"),
    )
    p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    with connect_args(args) as db:
        proj = api.tune(db, args.table, args.id_column, **handed_on(args), **input_options(args))
        print(json.dumps(proj.describe(), indent=2, default=str))
    return 0


def add_evaluate(sub: Any) -> None:
    """evaluate: a stored projection on a table, or a search index (--index)."""
    p = command(
        sub,
        "evaluate",
        "metrics and plots of a stored projection on a table, or of a search index (--index)",
        [
            "sqlrp evaluate --db duckdb:///w.db --table events --id-column id --projection rp64 --out report",
            "sqlrp evaluate --db duckdb:///w.db --index ix --top 10",
        ],
    )
    add_table(p, table_required=False)
    p.add_argument("--projection", help="stored projection name (with --table and --id-column)")
    p.add_argument(
        "--index", help="instead: Recall@K of this search index against exact k-NN, per number of candidates"
    )
    p.add_argument("--top", type=arg_count("top"), default=10, help="--index: K of Recall@K")
    p.add_argument("--candidates", help="--index: comma-separated candidate counts (default K, 2K, 5K, 10K, ...)")
    p.add_argument("--metric", choices=["euclidean", "angular"], help="--index: check the index was built for it")
    hand_on(  # to api.evaluate (a search index's evaluation takes some of them: cmd_evaluate)
        p,
        p.add_argument("--out", help="folder for metrics.csv/json and the PNG plots"),
        p.add_argument("--sample", type=arg_count("sample"), default=300, help="rows in the seeded evaluation sample"),
        p.add_argument(
            "--queries", type=arg_count("queries"), default=100, help="Recall@K queries (the rest is the database)"
        ),
        p.add_argument("--recall-k", type=arg_count("recall_k"), default=5, help="K of Recall@K"),
        p.add_argument("--seed", type=arg_count("seed"), default=0, help="seed of the evaluation sample"),
        p.add_argument("--ks", type=arg_count_list("k"), help="comma-separated k values for the distortion-vs-k plot"),
    )
    p.add_argument(
        "--kernel-degree",
        type=arg_count("kernel_degree"),
        help="measure distortion in this polynomial kernel's space (default: the kernel the projection "
        "approximates, from its stored parameters; 1: the input space)",
    )
    p.add_argument("--kernel-c", type=arg_finite, default=0.0, help="kernel constant c in (x.y + c)^degree")
    p.add_argument("--modified-kernel", action="store_true", help="degree-2 kernel without its diagonal")
    p.add_argument("--label-column", help="class labels: adds linear-classifier accuracies")
    p.add_argument("--no-sql", action="store_true", help="skip the in-database metrics")
    p.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.index:
        with connect(need_db(args)) as db:
            report = evaluate_search(
                db,
                args.index,
                queries=args.queries,
                top=args.top,
                candidates=positive_list(args.candidates, "--candidates", "candidates") if args.candidates else None,
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
    with connect_args(args) as db:
        report = api.evaluate(
            db,
            args.table,
            args.id_column,
            read_projection(args.projection) if is_projection_file(args.projection) else args.projection,
            kernel=kernel,
            label_column=args.label_column,
            in_sql=not args.no_sql,
            **handed_on(args),
            **input_options(args),
        )
        print(report)
        for f in report.files:
            print(f"wrote {f}", file=sys.stderr)
    return 0
