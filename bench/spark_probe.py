"""Probe: where Spark's time goes in the engines case, and what s = 3 as one statement costs.

    PYTHONPATH=. SPARK_LOCAL_IP=127.0.0.1 python bench/spark_probe.py                  # 200,000 rows
    PYTHONPATH=. SPARK_LOCAL_IP=127.0.0.1 python bench/spark_probe.py --driver-memory 6g --s3
    PYTHONPATH=. SPARK_LOCAL_IP=127.0.0.1 python bench/spark_probe.py --rows 2000      # a quick check

One local[2] session, the table of ``bench/engines.py``, the s = sqrt(d) projection compiled inline
(k = 200), each variant run ``--repeat`` times in turn (first runs compile the generated code):

- ``noop``: the projection into Spark's ``noop`` sink (everything but writing the output);
- ``ctas``: ``CREATE TABLE ... USING parquet AS`` the projection, at the default
  ``spark.sql.codegen.hugeMethodLimit`` (65,535) and raised (what ``SparkDialect.local_settings`` sets);
- with ``--s3``: s = 3 as one statement (no staged blocks), which needs more than the default 1 GB
  driver heap (``--driver-memory``), beside s = sqrt(d) in the same session.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from engines import make_table  # noqa: E402

import sqlrp  # noqa: E402
from sqlrp.dialects import get_dialect  # noqa: E402
from sqlrp.dialects.spark import HUGE_METHOD_LIMIT  # noqa: E402

D, K = 784, 200


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--driver-memory", default=None, help="e.g. 6g (local mode: the whole JVM)")
    parser.add_argument("--s3", action="store_true", help="also s = 3 as one statement")
    parser.add_argument("--java-options", default=None, help="e.g. -XX:-DontCompileHugeMethods")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    get_dialect("spark").split_statement_bytes = None  # one statement per projection, for the probe only
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
    if args.java_options:
        conf["spark.driver.extraJavaOptions"] = args.java_options
    db = sqlrp.connect("local[2]", conf=conf or None)
    spark = db.spark  # type: ignore[attr-defined]
    make_table(db, "spark", args.rows, D)
    source = sqlrp.Source("t", "id", "wide", tuple(f"f{j}" for j in range(D)))
    select = {}
    for s in ("auto", 3) if args.s3 else ("auto",):
        projection = sqlrp.make_projection("achlioptas", D, K, seed=1, s=s)
        select[s] = sqlrp.compile_sql(projection, source, "spark", pretty=False, strategy="inline")

    def run(label: str, s: object, limit: int, sink: str) -> None:
        spark.conf.set("spark.sql.codegen.hugeMethodLimit", str(limit))
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            if sink == "noop":
                spark.sql(select[s]).write.mode("overwrite").format("noop").save()
            else:
                db.execute("DROP TABLE IF EXISTS o")
                db.execute(f"CREATE TABLE o USING parquet AS {select[s]}")
            times.append(time.perf_counter() - t0)
        shown = ", ".join(f"{t:.2f}" for t in times)
        line = f"{label:34s} s={s!s:4s} hugeMethodLimit={limit:<8d} best {min(times):7.2f} s  (runs: {shown})"
        print(line, flush=True)

    print(f"spark local[2], {args.rows:,} x {D} -> {K}, driver memory {args.driver_memory or 'default'}", flush=True)
    run("projection into the noop sink", "auto", 65535, "noop")
    run("CREATE TABLE AS (parquet)", "auto", 65535, "ctas")
    run("CREATE TABLE AS (parquet)", "auto", HUGE_METHOD_LIMIT, "ctas")
    if args.s3:
        try:
            run("CREATE TABLE AS, s = 3, one statement", 3, 65535, "ctas")
        except Exception as exc:  # noqa: BLE001 - the driver dying is the finding at 1 GB
            print(f"s = 3 as one statement failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    with contextlib.suppress(Exception):  # the JVM may be gone (the s = 3 finding at 1 GB)
        db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
