"""Project a DuckDB table several times larger than the memory limit (small-device profile).

    PYTHONPATH=. python bench/larger_than_memory.py                       # 3.8 GB table, 1GB limit
    PYTHONPATH=. python bench/larger_than_memory.py --rows 50000 --memory-limit 128MB   # quick

Three child processes, so each peak is its own: (1) generate the table in a DuckDB file (in SQL,
streamed), (2) ``sqlrp.project(..., into=...)`` under ``connect(path, threads=, memory_limit=)``,
(3) stream the projected rows to Python in chunks (``project(..., chunk_rows=...)``) and sum them.
Peak resident memory of each child is read from ``/proc/self/status`` (VmHWM) and
``resource.getrusage`` and printed next to the table size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def peak_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(step: str, path: str, rows: int, d: int, k: int, threads: int, memory_limit: str, chunk: int) -> dict:
    import sqlrp  # the checkout's: main() runs this child with PYTHONPATH set to the repository

    t0 = time.perf_counter()
    out: dict = {"step": step}
    with sqlrp.connect(f"duckdb:///{path}", threads=threads, memory_limit=memory_limit) as db:
        if step == "generate":
            cols = ", ".join(f"random() AS f{i}" for i in range(d))
            db.execute('DROP TABLE IF EXISTS "big"')
            db.execute(f'CREATE TABLE "big" AS SELECT range AS id, {cols} FROM range({rows})')
            db.execute("CHECKPOINT")
        elif step == "project":
            db.execute('DROP TABLE IF EXISTS "big_rp"')
            sqlrp.project(db, "big", "id", "big_rp_matrix", method="achlioptas", k=k, s="auto", into="big_rp")
            out["rows_out"] = db.fetchall('SELECT count(*) FROM "big_rp"')[0][0]
        elif step == "stream":
            total, n, largest = 0.0, 0, 0
            for frame in sqlrp.project(db, "big", "id", "big_rp_matrix", chunk_rows=chunk, check=False, ordered=False):
                total += float(frame.iloc[:, 1:].to_numpy().sum())
                n += len(frame)
                largest = max(largest, len(frame))
            out.update(rows_streamed=n, largest_chunk=largest, checksum=total)
        out["memory_limit_setting"] = db.fetchall("SELECT current_setting('memory_limit')")[0][0]
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_mb"] = peak_mb()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--d", type=int, default=784)
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--chunk-rows", type=int, default=20_000)
    parser.add_argument("--dir", help="where the DuckDB file goes (default: a temporary folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        res = child(args.child, args.path, args.rows, args.d, args.k, args.threads, args.memory_limit, args.chunk_rows)
        print(json.dumps(res))
        return 0
    folder = Path(args.dir or tempfile.mkdtemp(prefix="sqlrp_ltm_"))
    path = folder / "big.duckdb"
    raw_gb = args.rows * (args.d + 1) * 8 / 1e9
    print(f"table: {args.rows} rows x {args.d} DOUBLE = {raw_gb:.2f} GB raw; memory_limit {args.memory_limit}, "
          f"threads {args.threads}")  # fmt: skip
    results = []
    for step in ("generate", "project", "stream"):
        cmd = [sys.executable, __file__, "--child", step, "--path", str(path), "--rows", str(args.rows),
               "--d", str(args.d), "--k", str(args.k), "--threads", str(args.threads),
               "--memory-limit", args.memory_limit, "--chunk-rows", str(args.chunk_rows)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode != 0:
            print(done.stdout, done.stderr, file=sys.stderr)
            return 1
        res = json.loads(done.stdout.strip().splitlines()[-1])
        if step == "generate":
            res["file_gb"] = path.stat().st_size / 1e9
        results.append(res)
        extra = {k: v for k, v in res.items() if k not in ("step", "seconds", "peak_rss_mb")}
        print(f"  {step:9s} {res['seconds']:8.1f} s   peak RSS {res['peak_rss_mb']:8.1f} MB   {json.dumps(extra)}")
    file_gb = results[0]["file_gb"]
    print(f"DuckDB file {file_gb:.2f} GB on disk; peak RSS while projecting {results[1]['peak_rss_mb']:.0f} MB, "
          f"while streaming {results[2]['peak_rss_mb']:.0f} MB")  # fmt: skip
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"larger_than_memory-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
        json.dumps({"args": vars(args), "raw_gb": raw_gb, "steps": results}, indent=2)
    )
    if not args.dir:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
