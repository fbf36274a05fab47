"""The bound behind ``sqlrp fit`` on a small device (issue 42): what DuckDB's Parquet reader needs to stream a
file of large column chunks to Python, beside the ``COPY`` that ``project`` runs and an aggregate.

    PYTHONPATH=. python -m bench.probes parquet-stream                       # the bench's 3,000,000 x 384 file
    PYTHONPATH=. python -m bench.probes parquet-stream --file F.parquet --limits 227MiB,600MiB

Each case runs in a fresh interpreter inside a cgroup of 1 GB and one CPU (:func:`testkit.cgroup.run_limited`,
root) with DuckDB ``threads = 1``, the ``memory_limit`` given and the rest of sqlrp's small-device profile
(insertion order off, Parquet prefetching off: :func:`sqlrp.backends.duckdb_settings.session_statements`), and
reads 300,000 rows:

- ``arrow``: ``to_arrow_reader`` of every column (what ``fit``'s Arrow pass and ``project``'s Arrow route read);
- ``copy``: ``COPY (SELECT * ...) TO`` a Parquet file (``project``'s statement, without the projection);
- ``sum``: one aggregate over 48 columns (what a pass of ``fit``'s SQL route sums, a slice of it).

Measured 2026-12-02 (DuckDB 2.0.1, ``bench/small_device.py``'s 3,000,000 x 384 float32 file, 100,000-row
groups, 400 KB column chunks: above DuckDB's 256 KiB block), at 227 MiB (``memory_limit`` pinned by
:mod:`sqlrp.backends.scan_fit` under 512 MB): ``arrow`` finished (1.3 s, peak 225 MB), ``cursor`` failed
(out of memory), ``sum`` finished.  Without the profile's two settings, ``arrow`` failed at 200, 212 and 250
MiB and finished at 600 MiB (peak 731 MB).  The cursor's failure was ``fit``'s under 512 MB: its Arrow pass
reads on a cursor, and ``SET disable_parquet_prefetching`` holds for one connection only, so the cursor
prefetched whole column chunks.  ``DuckDBBackend._cursor`` now gives a cursor its connection's settings
(:func:`sqlrp.backends.duckdb_settings.same_settings`); ``fit`` of that file then finished under 512 MB and
one CPU (``docs/guide/small-devices.md``).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

CASE = textwrap.dedent(
    """
    import sys, time, duckdb
    case, path, limit = sys.argv[1:4]
    con = duckdb.connect()
    con.execute(f"SET threads = 1; SET memory_limit = '{limit}'")
    con.execute("SET preserve_insertion_order = false; SET disable_parquet_prefetching = true")
    src = "read_parquet(" + repr(path) + ")"
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
    start = time.perf_counter()
    try:
        if case in ("arrow", "cursor"):
            n = 0
            reader = con if case == "arrow" else con.cursor()  # a cursor: a connection of its own
            for batch in reader.sql(f"SELECT * FROM {src}").to_arrow_reader(1365):
                n += batch.num_rows
                if n >= 300_000:
                    break
        elif case == "copy":
            con.execute(f"COPY (SELECT * FROM {src} WHERE id < 300000) TO '/dev/null' (FORMAT parquet)")
        else:
            con.execute("SELECT " + ", ".join(f'sum("{c}")' for c in cols[1:49]) + f" FROM {src}").fetchall()
        print(f"finished in {time.perf_counter() - start:.1f} s")
    except duckdb.Error as exc:
        print("failed: " + str(exc).splitlines()[0][:120])
    """
)


def parquet_stream(argv: list[str] | None = None) -> None:
    """Print, per case and memory limit, whether DuckDB finished and the group's peak memory."""
    from testkit.cgroup import run_limited

    parser = argparse.ArgumentParser(prog="python -m bench.probes parquet-stream")
    parser.add_argument("--file", default="/work/data/emb_3000000x384_rg100000.parquet")
    parser.add_argument("--limits", default="212MiB,227MiB,250MiB,600MiB")
    args = parser.parse_args(argv if argv is not None else sys.argv[2:])
    for case in ("arrow", "cursor", "copy", "sum"):
        for limit in args.limits.split(","):
            done = run_limited([sys.executable, "-c", CASE, case, args.file, limit], 1024, 1, timeout=900)
            said = (done.stdout.strip() or done.stderr.strip()[-120:]).splitlines()[-1:] or ["no output"]
            print(f"{case:6s} memory_limit {limit:>7s}: {said[0]:60s} peak {done.peak_mb:6.0f} MB", flush=True)


__all__ = ["parquet_stream"]
