"""Output formats on DuckDB: the same projection handed back as pandas, Arrow, polars and NumPy.

    PYTHONPATH=. python bench/output_formats.py                # 20,000 x 784 -> 200, s = sqrt(d)
    PYTHONPATH=. python bench/output_formats.py --rows 2000    # quick

``sqlrp.project(db, ..., output_format=F)`` on an in-memory DuckDB table (``bench/engines.py``'s
formula), best of ``--repeat`` rounds, the formats in turn within each round; the ratio is to
pandas in the same run.  Arrow comes from DuckDB without a pandas copy, polars reads that Arrow table.
"""

from __future__ import annotations

import argparse
import time

import sqlrp
from bench.engines import make_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    db = sqlrp.connect()
    make_table(db, "duckdb", args.rows, 784)
    sqlrp.create_projection(db, "rp", "achlioptas", d=784, k=200, seed=1)
    formats = ("pandas", "arrow", "polars", "numpy")
    times: dict[str, list[float]] = {fmt: [] for fmt in formats}
    for _ in range(args.repeat):  # round robin: drift of the machine hits every format alike
        for fmt in formats:
            t0 = time.perf_counter()
            sqlrp.project(db, "t", "id", "rp", output_format=fmt)
            times[fmt].append(time.perf_counter() - t0)
    for fmt in formats:
        best = min(times[fmt])
        print(f"{fmt:7s} {best:6.2f} s  = {best / min(times['pandas']):.2f}x pandas", flush=True)
    db.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
