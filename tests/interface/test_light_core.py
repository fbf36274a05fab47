"""The light core (issue 14): with only duckdb, numpy, pandas, sqlglot and tqdm, sqlrp imports, runs
``sqlrp demo`` on the bundled digits and projects into a DuckDB table with the NumPy reference's
numbers; everything that needs an extra says which ``pip install`` line to run.

Each case runs in a fresh interpreter in which the extras cannot be imported (``sys.modules[name] =
None`` makes ``import name`` raise ImportError, as a machine without them would).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = ("scipy", "sklearn", "matplotlib", "psycopg", "sqlalchemy", "pyarrow", "polars", "pyspark", "chdb")
EXTRAS += ("clickhouse_connect",)


def run_without_extras(code: str, cwd: Path) -> subprocess.CompletedProcess:
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in EXTRAS)
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_demo_and_project_without_extras(tmp_path):
    done = run_without_extras(
        """
        import json
        import numpy as np
        import pandas as pd
        import sqlrp
        from sqlrp.datasets import load_digits
        from sqlrp.demo import run_demo

        report = run_demo("demo.duckdb", ks=(20, 40), seeds=(0,), echo=lambda *a: None)  # in the test's tmp_path
        X, y = load_digits()
        db = sqlrp.connect("p.duckdb")
        frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(64)]).assign(id=range(len(X)))
        db.write_dataframe("digits", frame)
        sqlrp.project(db, "digits", "id", "rp", k=40, s=3, into="out")
        got = db.query_df('SELECT * FROM "out" ORDER BY "id"').drop(columns="id").to_numpy()
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        loaded = [m for m in ("scipy", "sklearn", "matplotlib", "psycopg", "sqlalchemy") if sys.modules.get(m)]
        print(json.dumps({
            "distortion": report["mean_distortion"].tolist(),
            "floor": report["jl_floor"].tolist(),
            "err": float(np.abs(got - want).max() / np.abs(want).max()),
            "loaded": loaded,
        }))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []
    assert out["err"] < 1e-12
    assert out["floor"] == pytest.approx([0.2502200714422682, 0.17767063478416892], rel=1e-12)
    # the demo's distortion is a real measurement: near the JL floor, not zero, not wild
    assert all(0.5 * f < d < 2.0 * f for d, f in zip(out["distortion"], out["floor"], strict=True))


@pytest.mark.parametrize(
    ("code", "line"),
    [
        ("sqlrp.SQLRandomProjection", "pip install 'sqlrp[sklearn]'"),
        ("sqlrp.connect('postgresql://u@localhost/db')", "pip install 'sqlrp[postgres]'"),
        ("sqlrp.connect('snowflake://u@acct/db')", "pip install 'sqlrp[sqlalchemy]'"),
        ("sqlrp.connect('local[1]')", "pip install 'sqlrp[spark]'"),
        ("sqlrp.connect('chdb://')", "pip install 'sqlrp[clickhouse]'"),
        ("sqlrp.evaluation.report.write_report(None, '.')", "pip install 'sqlrp[eval]'"),
        ("sqlrp.pipeline.outputs.check_format('arrow')", "pip install 'sqlrp[arrow]'"),
        ("sqlrp.pipeline.outputs.check_format('polars')", "pip install 'sqlrp[polars]'"),
    ],
)
def test_each_extra_is_named_when_missing(tmp_path, code, line):
    done = run_without_extras(
        f"""
        import sqlrp
        try:
            {code}
        except sqlrp.core.errors.MissingExtra as exc:
            print("MISSING", exc)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MISSING" in done.stdout and line in done.stdout, done.stdout


def test_cli_demo_without_extras(tmp_path):
    done = run_without_extras("import sys; sys.argv = ['sqlrp', 'demo']; from sqlrp.cli import main; main()", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "jl_floor" in done.stdout and (tmp_path / "sqlrp_demo.duckdb").exists()


def test_the_numpy_fallbacks_equal_scipy(monkeypatch):
    """What the light core computes without SciPy -- distances, ``squareform``, the sparse product in
    both its forms (dense matrix; per-column sums) -- equals SciPy's."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.spatial.distance import cdist, pdist, squareform

    from sqlrp.evaluation import metrics
    from sqlrp.methods import reference

    rng = np.random.default_rng(0)
    X, Y, w = rng.normal(size=(40, 7)), rng.normal(size=(9, 7)), rng.random(7)
    np.testing.assert_allclose(metrics._pdist_numpy(X, "sqeuclidean", None), pdist(X, "sqeuclidean"), rtol=1e-12)
    np.testing.assert_allclose(metrics._cdist_numpy(Y, X, "sqeuclidean"), cdist(Y, X, "sqeuclidean"), rtol=1e-12)
    np.testing.assert_allclose(metrics._cdist_numpy(Y, X, "cityblock", w), cdist(Y, X, "cityblock", w=w), rtol=1e-12)
    d = pdist(X, "sqeuclidean")
    np.testing.assert_array_equal(metrics.squareform(d), squareform(d))
    row, col, weight = rng.integers(0, 7, 60), rng.integers(0, 5, 60), rng.normal(size=60)
    want = np.asarray(X @ sp.csc_matrix((weight, (row, col)), shape=(7, 6)))
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)  # import scipy.sparse now fails
    np.testing.assert_allclose(reference.sparse_product(X, row, col, weight, 6), want, rtol=1e-12, atol=1e-14)
    monkeypatch.setattr(reference, "DENSE_ENTRIES", 10)  # the per-column sums, in blocks of rows
    np.testing.assert_allclose(reference.sparse_product(X, row, col, weight, 6), want, rtol=1e-12, atol=1e-14)


def test_project_into_a_table_never_imports_pandas(tmp_path):
    """``sqlrp project --into`` on DuckDB builds no DataFrame (``sqlrp.core.lazy``): creating the
    registry, storing the matrix (NumPy columns straight into DuckDB) and the ``CREATE TABLE AS``
    leave pandas unimported, which keeps the command's peak RSS within issue 14's 150 MB.  The
    numbers are checked against the NumPy reference afterwards, in the same process."""
    done = run_without_extras(
        """
        import json
        import duckdb
        import numpy as np
        from sqlrp import cli

        con = duckdb.connect("p.duckdb")
        cols = ", ".join(f"((i * 7 + {j} * 13) % 17) / 17.0 AS x{j}" for j in range(12))
        con.execute(f"CREATE TABLE t AS SELECT i AS id, {cols} FROM range(300) r(i)")
        con.close()
        argv = ["project", "--db", "p.duckdb", "--table", "t", "--id-column", "id", "--k", "5",
                "--projection", "rp", "--into", "out", "--no-progress"]
        status = cli.main(argv)
        status += cli.main([*argv[:-3], "--into", "out", "--replace", "--strategy", "pairs", "--no-progress"])
        loaded = "pandas" in sys.modules
        import sqlrp
        db = sqlrp.connect("p.duckdb")
        got = np.array(db.fetchall('SELECT * FROM "out" ORDER BY "id"'))[:, 1:]
        X = np.array(db.fetchall('SELECT * EXCLUDE (id) FROM "t" ORDER BY "id"'))
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        print(json.dumps({"status": status, "pandas": loaded,
                          "err": float(np.abs(got - want).max() / np.abs(want).max())}))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"status": 0, "pandas": False, "err": out["err"]}
    assert out["err"] <= 1e-12


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_a_run_imports_no_other_engines_backend(tmp_path, engine):
    """``sqlrp project`` on one engine, after ``import sqlrp.cli`` and the parser with every engine's
    example URL in its help, imports that engine's backend module and dialect and no other engine's:
    the URL is matched against the strings of :mod:`sqlrp.backends.catalog` and only the chosen
    backend's module is imported (issue 42, item 4: the other modules cost a third of ``import duckdb``,
    the ClickHouse one bringing sqlglot's optimizer); on DuckDB, loading the stored projection imports no
    ``numpy.ma`` (``np.unique`` did).  The numbers are checked against NumPy."""
    done = run_without_extras(
        f"""
        import json, pkgutil
        import numpy as np
        import sqlrp.cli
        from sqlrp.backends.catalog import BUILT_IN
        from sqlrp.cli.options import urls

        engine = {engine!r}
        X = np.random.default_rng(3).normal(size=(40, 6))
        rows = [(i, *map(float, x)) for i, x in enumerate(X)]
        cols = ", ".join(f"x{{j}} DOUBLE" for j in range(6))
        if engine == "duckdb":
            import duckdb as driver
        else:
            import sqlite3 as driver
        con = driver.connect(f"t.{{engine}}")
        con.execute(f"CREATE TABLE t (id INTEGER, {{cols}})")
        con.executemany(f"INSERT INTO t VALUES ({{', '.join('?' * 7)}})", rows)
        con.commit()
        con.close()
        url = f"{{engine}}:///t.{{engine}}"
        argv = ["project", "--db", url, "--table", "t", "--id-column", "id", "--projection", "rp", "--no-progress"]
        status = sqlrp.cli.main([*argv, "--k", "3", "--into", "made"])
        status += sqlrp.cli.main([*argv, "--into", "out"])  # the stored projection, loaded and checked
        own = {{reg.backend.split(":")[0] for reg in BUILT_IN if engine in reg.schemes}}
        backends = sorted({{reg.backend.split(":")[0] for reg in BUILT_IN}} - own)
        dialects = [f"sqlrp.dialects.{{m.name}}" for m in pkgutil.iter_modules(sqlrp.dialects.__path__)]
        dialects = [m for m in dialects if m.rsplit(".", 1)[1] not in ("base", "portable", engine)]
        imported = [m for m in backends + dialects if m in sys.modules]
        missing = [reg.example for reg in BUILT_IN if reg.example not in urls()]
        db = sqlrp.connect(url)
        got = np.array(db.fetchall('SELECT * FROM "out" ORDER BY "id"'))[:, 1:]
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        masked = "numpy.ma" in sys.modules
        print(json.dumps({{"status": status, "own": sorted(own & set(sys.modules)), "imported": imported,
                          "masked": masked,
                          "missing": missing, "err": float(np.abs(got - want).max() / np.abs(want).max())}}))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == 0 and out["own"] == [f"sqlrp.backends.{engine}"]
    assert out["imported"] == [], f"a {engine} run imported other engines' modules: {out['imported']}"
    assert out["missing"] == []
    assert out["err"] <= 1e-12
    if engine == "duckdb":  # no DataFrame on this path, so no pandas, and no np.unique (numpy.ma: 40 ms)
        assert not out["masked"], "numpy.ma was imported"


def test_has_repeats_agrees_with_numpys_unique():
    """The registry's duplicate check without ``np.unique`` (which imports ``numpy.ma``) says what
    ``len(np.unique(keys)) != len(keys)`` says: empty, one key, repeats anywhere, negative and float keys."""
    import numpy as np

    from sqlrp.registry.validate import has_repeats

    rng = np.random.default_rng(5)
    cases = [np.array([], dtype=np.int64), np.array([7]), np.array([3, 3]), np.array([-1.0, 2.0, -1.0])]
    cases += [rng.integers(-20, 20, size=n) for n in (2, 5, 30, 60)] + [rng.permutation(50)]
    for keys in cases:
        assert has_repeats(keys) == (len(np.unique(keys)) != len(keys)), keys
    assert has_repeats(np.array([3, 3])) and not has_repeats(rng.permutation(50))


def test_a_stored_projection_run_again_imports_duckdb_alone(tmp_path):
    """Issue 42, item 4: ``sqlrp project --projection NAME --into FILE`` run again on a DuckDB file takes the
    statement cache's path (:mod:`sqlrp.start`): NumPy, sqlglot and pandas are not imported, nor sqlrp's
    layers, and the file holds the NumPy reference's numbers."""
    done = run_without_extras(
        f"""
        import json, runpy, subprocess
        import numpy as np
        import sqlrp

        X = np.random.default_rng(4).normal(size=(30, 5))
        with sqlrp.connect("p.duckdb") as db:
            db.write_dataframe("t", __import__("pandas").DataFrame(X, columns=list("abcde")).assign(id=range(30)))
            sqlrp.create_projection(db, "rp", "gaussian", d=5, k=3, seed=2)
            want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        argv = ["project", "--db", "duckdb:///p.duckdb", "--projection", "rp", "--table", "t", "--id-column", "id",
                "--into", "o.parquet", "--replace"]
        probe = (
            "import atexit, sys\\n"
            "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'sqlglot', 'pandas') or m.startswith('sqlrp.') and m not in ('sqlrp.start', "
            "'sqlrp.core', 'sqlrp.core.names', 'sqlrp.core.signals', 'sqlrp._resources_alone'))))\\n"
            f"sys.argv = ['sqlrp', *{{argv!r}}]\\nimport runpy; runpy.run_module('sqlrp', run_name='__main__')"
        )
        env = {{"PYTHONPATH": {str(ROOT)!r}, "SQLRP_CACHE_DIR": "cache", "PATH": "/usr/bin:/bin"}}
        runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True) for _ in "12"]
        import duckdb
        got = np.array(duckdb.sql("SELECT p0, p1, p2 FROM 'o.parquet' ORDER BY id").fetchall())
        print(json.dumps({{"status": [r.returncode for r in runs], "loaded": [r.stdout.strip() for r in runs],
                           "err": float(np.abs(got - want).max())}}))
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == [0, 0]
    assert "numpy" in out["loaded"][0] and out["loaded"][1] == "LOADED []", out["loaded"]
    assert out["err"] < 1e-12
