"""A Parquet file of embeddings projected into a Parquet file with ``--db`` omitted (issue 24),
against the same projection from a table in a DuckDB file into a table.

    PYTHONPATH=. python bench/files.py                 # 1,000,000 x 384 FLOAT[384] -> k = 64
    PYTHONPATH=. python bench/files.py --smoke         # 20,000 x 32, seconds (CI)

Each projection is the command a user types, run as a child process (``python -m sqlrp project``),
so that its peak resident memory is its own: ``os.wait4`` returns the child's ``ru_maxrss`` (which
counts the pages a fork shares with its parent: the data is made in another child, so that this
process stays small).

- ``file``:  ``sqlrp project --table emb.parquet --id-column doc_id --k 64 --into out.parquet``
  (no ``--db``: an in-memory DuckDB reads the file and ``COPY``s the result to a temporary name,
  reads it back for the non-finite check, then renames it; ``out.parquet.sqlrp.json`` beside it);
- ``table``: ``sqlrp project --db duckdb:///emb.db --table emb ... --into emb_rp`` (the same rows in
  a DuckDB file as ``FLOAT[384]``, into a table).

The file is written by pyarrow (1 MiB pages, row groups of 65,536 rows).  DuckDB's own ``COPY``
writes a row group's list column in pages of up to about 100 MB, and reading such a page takes it
whole: a file DuckDB wrote (122,880-row row groups, 190 MB column chunks) needs ``memory_limit``
of about 1 GB at 2 threads for one scan (``SELECT max(len(emb))``: 850 MB RSS; 800MB fails).

Both with ``--memory-limit`` (default 600MB) and ``--threads`` (default 2), the same seed and
default sparsity, and the NULL/NaN check on.  The two run alternately, ``--repeat`` times each; the
best time of each and the largest peak are printed, with the ratio file / table (issue target: at
most 1.5) and the file's peak against 1 GB.  The generated data (about 1.5 GB of Parquet and the
DuckDB file) goes to ``--dir`` or a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(folder: Path, rows: int, d: int, row_group: int = 65_536) -> None:
    """``emb.parquet`` (``doc_id``, ``emb`` a list of ``d`` float32, standard normal), written by
    pyarrow as embedding pipelines write them (pandas, Hugging Face datasets): 1 MiB pages, row groups
    of ``row_group`` rows; and ``emb.db`` holding the same rows as table ``emb`` (``FLOAT[d]``)."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    schema = pa.schema([("doc_id", pa.int64()), ("emb", pa.list_(pa.float32()))])
    with pq.ParquetWriter(folder / "emb.parquet", schema) as writer:
        for start in range(0, rows, row_group):
            n = min(row_group, rows - start)
            values = pa.array(rng.standard_normal(n * d, dtype=np.float32))
            offsets = pa.array(np.arange(0, (n + 1) * d, d, dtype=np.int32))
            emb = pa.ListArray.from_arrays(offsets, values)
            ids = pa.array(np.arange(start, start + n, dtype=np.int64))
            writer.write_table(pa.table([ids, emb], schema=schema), row_group_size=row_group)
    con = duckdb.connect(str(folder / "emb.db"))
    con.execute("SET preserve_insertion_order = false")
    parquet = str(folder / "emb.parquet").replace("'", "''")
    con.execute(f"CREATE TABLE emb AS SELECT doc_id, emb::FLOAT[{d}] AS emb FROM read_parquet('{parquet}')")
    con.execute("CHECKPOINT")
    con.close()


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``python -m sqlrp <argv>`` in ``cwd``; its wall seconds and peak RSS in MB (``os.wait4``)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "sqlrp", *argv], cwd=cwd, env=env, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    err = child.stderr.read().decode() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"sqlrp {' '.join(argv)} failed:\n{err}")
    return seconds, usage.ru_maxrss / 1024  # Linux: kilobytes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=384)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--memory-limit", default="600MB")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", help="where the data goes (default: a temporary folder, removed)")
    parser.add_argument("--smoke", action="store_true", help="20,000 x 32, one round")
    parser.add_argument("--reuse", action="store_true", help="keep the data already in --dir (same --rows, --d)")
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows, args.d, args.repeat = 20_000, 32, 1
    if args.generate:  # the child that makes the data: this process stays small, and so do its forks
        generate(Path(args.generate), args.rows, args.d)
        return 0
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sqlrp_files_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        if not (args.reuse and (folder / "emb.parquet").exists() and (folder / "emb.db").exists()):
            for old in ("emb.parquet", "emb.db"):
                (folder / old).unlink(missing_ok=True)
            make = [sys.executable, __file__, "--generate", str(folder), "--rows", str(args.rows), "--d", str(args.d)]
            subprocess.run(make, check=True)
        size = (folder / "emb.parquet").stat().st_size / 1e9
        made = time.perf_counter() - t0
        print(f"{args.rows:,} x {args.d} FLOAT[{args.d}]: emb.parquet {size:.2f} GB, made in {made:.1f} s")
        common = ["--id-column", "doc_id", "--k", str(args.k), "--memory-limit", args.memory_limit]
        common += ["--threads", str(args.threads), "--no-progress"]
        runs: dict[str, list[tuple[float, float]]] = {"file": [], "table": []}
        for _ in range(args.repeat):
            for out in ("out.parquet", "out.parquet.sqlrp.json"):
                (folder / out).unlink(missing_ok=True)
            runs["file"].append(timed(["project", "--table", "emb.parquet", "--into", "out.parquet", *common], folder))
            runs["table"].append(
                timed(
                    ["project", "--db", "duckdb:///emb.db", "--table", "emb", "--into", "emb_rp", "--replace", *common],
                    folder,
                )
            )
        best = {name: min(s for s, _ in r) for name, r in runs.items()}
        peak = {name: max(m for _, m in r) for name, r in runs.items()}
        for name, label in (("file", "emb.parquet -> out.parquet, no --db"), ("table", "table emb -> table emb_rp")):
            times = ", ".join(f"{s:.2f}" for s, _ in runs[name])
            print(f"{name:>5}: {label:<38} best {best[name]:7.2f} s ({times}); peak RSS {peak[name]:6.0f} MB")
        ratio = best["file"] / best["table"]
        print(f"ratio file / table: {ratio:.2f}x (target <= 1.5x): {'MET' if ratio <= 1.5 else 'not met'}")
        print(f"file peak RSS {peak['file']:.0f} MB (target < 1024 MB): {'MET' if peak['file'] < 1024 else 'not met'}")
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
