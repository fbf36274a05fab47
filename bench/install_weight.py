"""The light core, measured on a clean virtual environment (issue 14).

    PYTHONPATH=. python bench/install_weight.py                # builds a venv in a temporary folder (package index)
    PYTHONPATH=. python bench/install_weight.py --venv /tmp/v  # reuse (or keep) that venv

Builds a venv with ``pip install <this repo>`` (the core: duckdb, numpy, pandas, sqlglot, tqdm) and
measures, in that venv:

- its size on disk (pip included), against the issue's target of 300 MB;
- ``import sqlrp`` against ``import numpy, pandas, sqlglot``: best of ``--repeat`` fresh interpreters
  each, ratio against the target of 1.2x;
- the peak RSS of ``sqlrp project`` of the bundled digits (1,797 x 64 -> 40) into a DuckDB table, run
  as the CLI in a child process (``ru_maxrss``), against the target of 150 MB; again with ``--threads 1``;
  and, for the breakdown, of ``import sqlrp`` alone and of a DuckDB connection alone;
- that none of scipy, scikit-learn, matplotlib, psycopg, SQLAlchemy was installed.

Printed, and written to ``bench/results/install-weight-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("scipy", "scikit-learn", "matplotlib", "psycopg", "SQLAlchemy", "pyarrow", "pyspark")


def size_mb(path: Path) -> float:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            f = Path(folder, name)
            if not f.is_symlink():
                total += f.stat().st_size
    return total / 1e6


def best_time(python: Path, code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([str(python), "-c", code], check=True)
        times.append(time.perf_counter() - t0)
    return min(times)


def peak_rss_mb(cmd: list[str], cwd: Path) -> float:
    """Peak RSS of the child ``cmd`` (Linux ``ru_maxrss`` is in KiB), run alone in a fresh process
    (``RUSAGE_CHILDREN`` covers every child waited for, so a wrapper process isolates this one)."""
    wrapper = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], cwd=cwd, check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1]) * 1024 / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", default=None, help="venv folder (default: a temporary one, removed)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sqlrp-venv-") as tmp:
        venv = Path(args.venv) if args.venv else Path(tmp, "venv")
        python = venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            t0 = time.perf_counter()
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)], check=True)
            print(f"pip install . took {time.perf_counter() - t0:.1f} s", flush=True)
        else:  # a kept venv: this checkout's sqlrp again, its dependencies as they are
            pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(ROOT)]
            subprocess.run(pip, check=True)
        listed = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json"], check=True, capture_output=True, text=True
        )
        installed = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
        heavy = [name for name in HEAVY if name.lower() in installed]
        mb = size_mb(venv)
        base = best_time(python, "import numpy, pandas, sqlglot", args.repeat)
        ours = best_time(python, "import sqlrp", args.repeat)
        work = Path(tmp, "work")
        work.mkdir()
        sqlrp_cli = venv / "bin" / "sqlrp"
        load = (
            "import pandas as pd, sqlrp; from sqlrp.datasets import load_digits; X, _ = load_digits(); "
            "f = pd.DataFrame(X, columns=[f'x{i}' for i in range(64)]); f.insert(0, 'id', range(len(X))); "
            "db = sqlrp.connect('d.duckdb'); db.write_dataframe('digits', f, replace=True); db.close()"
        )
        subprocess.run([str(python), "-c", load], cwd=work, check=True)
        project = [str(sqlrp_cli), "project", "--db", "d.duckdb", "--table", "digits", "--id-column", "id"]
        project += ["--k", "40", "--into", "digits_rp", "--replace", "--no-progress"]
        rss = peak_rss_mb(project, work)
        rss_one_thread = peak_rss_mb([*project, "--threads", "1"], work)
        rss_import = peak_rss_mb([str(python), "-c", "import sqlrp"], work)
        rss_duckdb = peak_rss_mb([str(python), "-c", "import duckdb; duckdb.connect().execute('SELECT 1')"], work)
        result = {
            "venv_mb": round(mb, 1),
            "import_numpy_pandas_sqlglot_s": round(base, 3),
            "import_sqlrp_s": round(ours, 3),
            "import_ratio": round(ours / base, 3),
            "project_digits_peak_rss_mb": round(rss, 1),
            "project_digits_one_thread_peak_rss_mb": round(rss_one_thread, 1),
            "import_sqlrp_peak_rss_mb": round(rss_import, 1),
            "duckdb_connection_peak_rss_mb": round(rss_duckdb, 1),
            "heavy_packages_installed": heavy,
            "packages": installed,
        }
    print(f"core venv: {mb:.0f} MB (target <= 300 MB); heavy packages installed: {heavy or 'none'}")
    print(f"import numpy, pandas, sqlglot: {base:.3f} s;  import sqlrp: {ours:.3f} s", end="")
    print(f" = {ours / base:.2f}x (target <= 1.2x)")
    print(f"sqlrp project digits -> 40 into a DuckDB table: peak RSS {rss:.0f} MB (target <= 150 MB); ", end="")
    print(f"with --threads 1 {rss_one_thread:.0f} MB")
    print(f"of which: import sqlrp alone {rss_import:.0f} MB, a DuckDB connection alone {rss_duckdb:.0f} MB")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / f"install-weight-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
