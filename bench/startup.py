"""Start-up of ``sqlrp project`` of a stored projection against ``import duckdb`` (issue 42, item 4).

    PYTHONPATH=. python bench/startup.py              # median of 7 fresh interpreters per case
    PYTHONPATH=. python bench/startup.py --repeat 15
    PYTHONPATH=. python bench/startup.py --smoke      # one round, every case runs (CI): no figures kept

On a tiny table (200 x 16 in a DuckDB file, a stored projection to k = 8), so that what is timed is the
fixed cost, each case in a fresh interpreter, the cases interleaved round by round (the machine is shared:
a slow minute slows them all alike) and the median kept:

- ``python``: an interpreter that does nothing; ``import duckdb``: the issue's yardstick;
- ``duckdb by hand``: ``import duckdb``, connect, and the ``COPY`` of the very statement sqlrp runs
  (``sqlrp.compile_projection`` of the plan, taken once beforehand) to a Parquet file -- the issue's
  "``import duckdb`` plus the statement run by hand";
- the floors of the present design: ``import duckdb, numpy`` and ``import duckdb, numpy, sqlglot``
  (the stored-projection path builds the matrix with NumPy and the statement with sqlglot);
- ``import sqlrp.cli``, ``sqlrp --version``, and the command itself:
  ``sqlrp project --db x.duckdb --projection rp --table t --id-column id --into out.parquet --replace``,
  ``(stored)`` in full (``SQLRP_STATEMENT_CACHE=off``) and ``(cached)`` from the statement cache's entry
  the warm-up run stored (:mod:`sqlrp.start`; its entries in the work folder, ``SQLRP_CACHE_DIR``), the
  database unchanged since the last run (its fingerprint not asked again), and ``(cached, fingerprint)``
  with the fingerprint's two catalog queries asked (as after any write to the database): the issue's
  target is the cached run within 1.2x of ``duckdb by hand``.

Bytecode is cached (``PYTHONPYCACHEPREFIX`` in the work folder; a ``PYTHONDONTWRITEBYTECODE`` of the
environment is dropped): an installed package has its ``.pyc`` files, and compiling sqlrp's sources on
every run would be timed otherwise.  The third-party modules each case imports are listed (``numpy``,
``sqlglot``, ``pandas``, ``pyarrow``, ``tqdm``).  Results are printed and written to
``bench/results/startup-<time>.json``.

Then the probe of the bound: the same command in one interpreter, its time split -- NumPy and sqlglot
(the floor of the present design: the stored-projection path builds the matrix with NumPy and the
statement with sqlglot), sqlrp's own modules, DuckDB, the DuckDB backend's module (the other engines'
modules are not imported: the URL is resolved and the help's example URLs are read from the strings of
``sqlrp/backends/catalog.py``), the parser, and the command's own work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "sqlglot", "pandas", "pyarrow", "tqdm")
ROWS, D, K = 200, 16, 8


def prepare(work: Path) -> tuple[str, str]:
    """The DuckDB file (table ``t``, projection ``rp``) and the SQL text ``project`` runs on it."""
    import numpy as np
    import pandas as pd

    import sqlrp

    db_path = work / "x.duckdb"
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(ROWS, D)), columns=[f"f{j}" for j in range(D)])
    frame.insert(0, "id", np.arange(ROWS))
    with sqlrp.connect(f"duckdb:///{db_path}") as db:
        db.write_dataframe("t", frame)
        sqlrp.create_projection(db, "rp", "achlioptas", d=D, k=K, seed=1)
        sql = sqlrp.compile_projection(db, sqlrp.plan(db, "t", "id", "rp"))
    return str(db_path), sql


def cases(db_path: str, sql: str, work: Path) -> dict[str, list[str]]:
    """Each case's command line (a fresh interpreter each)."""
    py = sys.executable
    by_hand = (
        "import duckdb\n"
        f"con = duckdb.connect({db_path!r})\n"
        f"con.execute('COPY (' + {sql.rstrip().rstrip(';')!r} + ') TO ' + {repr(repr(str(work / 'hand.parquet')))}"
        " + ' (FORMAT parquet)')\n"
    )
    project = ["project", "--db", f"duckdb:///{db_path}", "--projection", "rp", "--table", "t", "--id-column", "id"]
    return {
        "python": [py, "-c", "pass"],
        "import duckdb": [py, "-c", "import duckdb"],
        "duckdb by hand": [py, "-c", by_hand],
        "import duckdb, numpy": [py, "-c", "import duckdb, numpy"],
        "import duckdb, numpy, sqlglot": [py, "-c", "import duckdb, numpy, sqlglot"],
        "import sqlrp.cli": [py, "-c", "import sqlrp.cli"],
        "sqlrp --version": [py, "-m", "sqlrp", "--version"],
        "sqlrp project (stored)": [py, "-m", "sqlrp", *project, "--into", str(work / "out.parquet"), "--replace"],
        "sqlrp project (cached)": [py, "-m", "sqlrp", *project, "--into", str(work / "cached.parquet"), "--replace"],
        "sqlrp project (cached, fingerprint)": [
            *[py, "-m", "sqlrp", *project, "--into", str(work / "checked.parquet"), "--replace"]
        ],
    }


#: the environment a case runs in besides the common one: the full command without the statement cache
CASE_ENV = {"sqlrp project (stored)": {"SQLRP_STATEMENT_CACHE": "off"}}


def imported(argv: list[str], env: dict[str, str]) -> list[str]:
    """The modules of :data:`HEAVY` the case's interpreter had imported when it exited."""
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print('HEAVY', *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr))\n"
    )
    if argv[1] == "-m":
        code = probe + f"import runpy; sys.argv = {argv[2:]!r}; runpy.run_module({argv[2]!r}, run_name='__main__')"
    else:
        code = probe + argv[2]
    done = subprocess.run([argv[0], "-c", code], env=env, capture_output=True, text=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("HEAVY")]
    return lines[-1].split()[1:] if lines else ["?"]


#: one interpreter, the command's fixed cost split where it goes (the probe of the bound)
SPLIT = """
import sys, time
t0 = time.perf_counter()
import numpy, sqlglot
t1 = time.perf_counter()
import sqlrp.cli
t2 = time.perf_counter()
import duckdb
t3 = time.perf_counter()
import sqlrp.backends
sqlrp.backends.backend_of(next(reg for reg in sqlrp.backends.registrations() if reg.default))
t4 = time.perf_counter()
sqlrp.cli.build_parser()
t5 = time.perf_counter()
status = sqlrp.cli.main(sys.argv[1:])
t6 = time.perf_counter()
print("SPLIT", t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, file=sys.stderr)
"""
PARTS = (
    "import numpy, sqlglot",
    "sqlrp's own modules (import sqlrp.cli)",
    "import duckdb (by the backends)",
    "the engine's backend module (its catalog entry's module:Class; no other engine's module)",
    "the parser",
    "the command (connect, registry, checks, compile, COPY, read-back, sidecar)",
)


def split(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    """The medians of :data:`PARTS` for the ``project`` command ``argv`` (its arguments after ``-m sqlrp``)."""
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", SPLIT, *argv], env=env, capture_output=True, text=True)
        line = [x for x in done.stderr.splitlines() if x.startswith("SPLIT")][-1]
        runs.append([float(v) for v in line.split()[1:]])
    return [statistics.median(part) for part in zip(*runs, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh interpreters per case (the median is kept)")
    parser.add_argument("--smoke", action="store_true", help="one round: every case runs; nothing is written")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    with tempfile.TemporaryDirectory(prefix="sqlrp-startup-") as tmp:
        work = Path(tmp)
        db_path, sql = prepare(work)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        commands = cases(db_path, sql, work)
        env["SQLRP_CACHE_DIR"] = str(work / "cache")
        envs = {name: {**env, **CASE_ENV.get(name, {})} for name in commands}
        for name, argv in commands.items():  # warm: bytecode written, files in the page cache, the cache's entry
            subprocess.run(argv, env=envs[name], check=True, capture_output=True)
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeat):
            for name, argv in commands.items():
                if name == "sqlrp project (cached, fingerprint)":  # as after a write to the database: asked again
                    for seen in (work / "cache" / "statements").glob("*.seen"):
                        seen.unlink()
                started = time.perf_counter()
                subprocess.run(argv, env=envs[name], check=True, capture_output=True)
                seconds[name].append(time.perf_counter() - started)
        heavy = {name: imported(argv, envs[name]) for name, argv in commands.items()}
        used = subprocess.run(
            commands["sqlrp project (cached)"],
            env={**env, "SQLRP_STATEMENT_CACHE": "trace"},
            capture_output=True,
            text=True,
        ).stderr
        assert "statement cache: used" in used, used  # the cached case ran from its entry, not in full
        parts = split(commands["sqlrp project (stored)"][3:], envs["sqlrp project (stored)"], repeat)
    median = {name: statistics.median(v) for name, v in seconds.items()}
    base, hand = median["import duckdb"], median["duckdb by hand"]
    print(f"{'case':36s} {'median':>9s} {'/ import duckdb':>16s} {'/ by hand':>10s}  imports")
    for name, m in median.items():
        print(f"{name:36s} {m * 1000:7.0f} ms {m / base:15.2f}x {m / hand:9.2f}x  {' '.join(heavy[name]) or '-'}")
    cached = median["sqlrp project (cached)"]
    asked = median["sqlrp project (cached, fingerprint)"]
    print(
        f"target: sqlrp project of a stored projection within 1.2x of duckdb by hand = {1.2 * hand * 1000:.0f} ms; "
        f"from the statement cache {cached * 1000:.0f} ms ({cached / hand:.2f}x by hand, {cached / base:.2f}x import "
        f"duckdb; the fingerprint asked: {asked / hand:.2f}x by hand); in full "
        f"{median['sqlrp project (stored)'] * 1000:.0f} ms, whose import floor "
        f"(duckdb, numpy, sqlglot) is {median['import duckdb, numpy, sqlglot'] / base:.2f}x import duckdb"
    )
    print("where sqlrp project's time goes in full (one interpreter, medians):")
    for part, value in zip(PARTS, parts, strict=True):
        print(f"  {value * 1000:7.0f} ms  {value / base:5.2f}x import duckdb  {part}")
    if args.smoke:
        return
    out = ROOT / "bench" / "results" / f"startup-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "repeat": repeat,
                "median_s": median,
                "runs_s": seconds,
                "imports": heavy,
                "split_s": dict(zip(PARTS, parts, strict=True)),
            },
            indent=1,
        )
    )
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
