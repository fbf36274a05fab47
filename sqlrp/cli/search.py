"""``sqlrp index``, ``search`` and ``indexes``: similarity search (:mod:`sqlrp.search`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..backends import connect
from ..core.params import arg_count
from ..search.build import build_index
from ..search.index import describe_defaults, describe_index, drop_index, list_indexes, load_index
from ..search.lookup import search
from .options import add_db, add_profile, add_table, command, connect_args, hand_on, handed_on, input_options, need_db


def add_index(sub: Any) -> None:
    """index: lists and codes of a table."""
    p = command(
        sub,
        "index",
        "index a table for similarity search: lists and RaBitQ codes (build_index)",
        [
            "sqlrp index --db duckdb:///w.db --table emb --id-column id --layout array --array-column v --name ix",
        ],
    )
    add_table(p, layouts=("wide", "array"))
    hand_on(
        p,
        p.add_argument("--name", required=True, help="the index: tables <name>, <name>__lists and <name>__tops"),
        p.add_argument("--lists", type=arg_count("lists"), help="inverted lists (default: about sqrt(rows))"),
        p.add_argument(
            "--bits", type=arg_count("bits"), help="code bits, a power of two >= d (default: 256 for d = 128)"
        ),
        p.add_argument(
            "--probes",
            type=arg_count("probes"),
            help="lists a search probes by default (default: calibrated on the table, adaptive)",
        ),
        p.add_argument(
            "--recall", type=float, default=0.95, help="Recall@10 the search defaults are calibrated for (default 0.95)"
        ),
        p.add_argument(
            "--calibration-queries",
            type=arg_count("calibration_queries"),
            default=100,
            help="table rows searched as queries to calibrate the defaults (default 100; 0: none)",
        ),
        p.add_argument(
            "--metric", choices=["euclidean", "angular"], default="euclidean", help="angular: cosine distance"
        ),
        p.add_argument(
            "--sample",
            type=arg_count("index_sample"),
            help="rows k-means trains the lists on (default 40 a list, <= 100,000)",
        ),
        p.add_argument(
            "--seed", type=arg_count("seed"), default=0, help="seed of the sample, k-means and the rotation"
        ),
        p.add_argument(
            "--incremental", action="store_true", help="refresh: new, changed and deleted rows (same lists)"
        ),
        p.add_argument("--replace", action="store_true", help="rebuild an existing index"),
        p.add_argument("--no-check", dest="check", action="store_false", help="skip the NULL/NaN scan of the input"),
    )
    add_profile(p)
    p.set_defaults(func=cmd_index)


def cmd_index(args: argparse.Namespace) -> int:
    with connect_args(args) as db:
        index = build_index(
            db,
            args.table,
            args.id_column,
            progress=sys.stderr.isatty(),  # on a terminal only, as project's bar
            **handed_on(args),
            **input_options(args),  # add_table(layouts=("wide", "array")): no long layout, no pooling
        )
        print(("refreshed " if args.incremental else "") + describe_index(index), file=sys.stderr)
    return 0


def add_search(sub: Any) -> None:
    """search: the nearest indexed rows of every query row."""
    p = command(
        sub,
        "search",
        "nearest indexed rows of every query row: (query_id, id, rank, distance)",
        [
            "sqlrp search --db duckdb:///w.db --index ix --query-table q --query-id-column id --top 10",
        ],
    )
    add_db(p)
    hand_on(
        p,
        p.add_argument("--index", required=True, help="an index built by `sqlrp index`"),
        p.add_argument("--query-table", required=True, help="queries: the index's feature columns and an id"),
        p.add_argument("--query-id-column", required=True, help="the query table's id column (query_id of the result)"),
        p.add_argument("--schema", help="schema of the query (and output) tables"),
        p.add_argument("--catalog", help="catalog holding --schema"),
        p.add_argument("--top", type=arg_count("top"), default=10, help="neighbours per query (K)"),
        p.add_argument(
            "--candidates",
            type=arg_count("candidates"),
            help="rows re-ranked exactly per query (C; default: calibrated)",
        ),
        p.add_argument(
            "--probes",
            type=arg_count("probes"),
            help="lists probed per query (P; default: the index's calibrated rule)",
        ),
        p.add_argument("--metric", choices=["euclidean", "angular"], help="check the index was built for it"),
        p.add_argument("--strict", action="store_true", help="refuse (rather than warn) if the table changed since"),
        p.add_argument("--into", help="write the result to this table (default: CSV on stdout)"),
        p.add_argument("--replace", action="store_true", help="replace an existing --into table"),
        p.add_argument("--no-check", dest="check", action="store_false", help="skip the NULL/NaN scan of the queries"),
        p.add_argument(
            "--exact", action="store_true", help="brute force: every query against every row (the baseline)"
        ),
    )
    add_profile(p)
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    with connect_args(args) as db:
        result = search(db, progress=sys.stderr.isatty(), **handed_on(args))
        if not args.exact and args.probes is None and args.candidates is None:
            line = describe_defaults(db, args.index, args.top)
            if line:
                print(line, file=sys.stderr)
        if args.into:
            print(f"wrote table {args.into!r}", file=sys.stderr)
        else:
            result.to_csv(sys.stdout, index=False)
    return 0


def add_indexes(sub: Any) -> None:
    """indexes: list, show or drop."""
    p = command(
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
    add_db(p)
    p.set_defaults(func=cmd_indexes)


def cmd_indexes(args: argparse.Namespace) -> int:
    with connect(need_db(args)) as db:
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
