"""The registry: migrations, save / load / list / drop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import sqlrp
from sqlrp.registry.store import Registry, migration_files
from testkit.engine_cases import build_by_hand, use_registry


def test_migrations_apply_once(db):
    reg = Registry(db, migrate=False)
    first = reg.migrate()
    assert first == [name for _, name, _ in migration_files(db.dialect)]
    assert reg.migrate() == []  # re-running is a no-op
    assert reg.version() == max(v for v, _, _ in migration_files(db.dialect))
    assert db.fetchall("SELECT count(*) FROM sqlrp_schema_version")[0][0] == len(first)


def test_both_dialects_have_the_same_migrations():
    assert [v for v, _, _ in migration_files("duckdb")] == [v for v, _, _ in migration_files("postgres")]


def test_save_list_show_drop(db):
    p = sqlrp.create_projection(db, "a name with 'quotes'", "achlioptas", d=30, k=8, s=3, seed=4)
    sqlrp.create_projection(db, "g", "gaussian", d=5, k=2)
    listing = sqlrp.list_projections(db)
    assert list(listing["name"]) == ["a name with 'quotes'", "g"]
    row = listing.iloc[0]
    assert (row["method"], row["d"], row["k"], row["nnz"], row["seed"]) == ("achlioptas", 30, 8, p.linear.nnz, 4)
    loaded = sqlrp.load_projection(db, "a name with 'quotes'")
    assert loaded.params == {"s": 3.0, "s_requested": 3.0}
    assert np.array_equal(loaded.linear.dense(), p.linear.dense())
    assert loaded.combiner.is_identity
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        sqlrp.create_projection(db, "g", "gaussian", d=5, k=2)
    sqlrp.create_projection(db, "g", "gaussian", d=5, k=3, replace=True)
    assert sqlrp.load_projection(db, "g").k == 3
    sqlrp.drop_projection(db, "g")
    with pytest.raises(sqlrp.ProjectionNotFound, match="no stored projection named 'g'.*Stored: a name"):
        sqlrp.load_projection(db, "g")
    with pytest.raises(sqlrp.ProjectionNotFound):
        sqlrp.drop_projection(db, "g")
    assert db.fetchall("SELECT count(*) FROM sqlrp_linear_entry WHERE projection = 'g'")[0][0] == 0


def test_kernel_shaped_ir_round_trips(db):
    """Bias, power and a non-identity combiner survive storage (the kernel methods rely on it)."""
    from sqlrp.core.ir import Combiner, LinearStage, Projection

    lin = LinearStage(
        d=4,
        p=3,
        vector=[0, 0, 1, 2, 2],
        feature=[0, 3, 1, 2, 3],
        weight=[1, -1, 1, 1, -1],
        bias=[0.5, 0, 0],
        power=[1, 1, 2],
    )
    comb = Combiner(
        k=2,
        term_component=[0, 0, 1],
        term_weight=[1.0, -1.0, 2.0],
        factor_term=[0, 0, 1, 2],
        factor_vector=[0, 1, 2, 1],
    )
    proj = Projection("custom", lin, comb, scale=0.25, params={"note": "test"}, seed=None)
    Registry(db).save(proj, "k")
    back = sqlrp.load_projection(db, "k")
    X = np.random.default_rng(0).standard_normal((6, 4))
    assert np.allclose(sqlrp.transform(back, X), sqlrp.transform(proj, X), rtol=1e-12)
    # and the SQL path computes the same thing
    from testkit.frames import wide_frame

    db.write_dataframe("t", wide_frame(X))
    out = sqlrp.project(db, "t", "id", "k")
    assert np.allclose(out.drop(columns="id").to_numpy(), sqlrp.transform(proj, X), rtol=1e-9)


# ---- registry versions: databases made by earlier releases keep working ----


@pytest.fixture(params=["duckdb", "postgres", "sqlite"])
def any_db(request):
    """DuckDB, PostgreSQL and SQLite: the engines whose registry these tests build by hand."""
    if request.param == "sqlite":
        db = sqlrp.connect("sqlite://")
        yield db
        db.close()
        return
    yield request.getfixturevalue("duck" if request.param == "duckdb" else "pg")


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_registry_made_by_earlier_releases_is_upgraded_and_works(any_db, version):
    """A database at registry version 1, 2, 3 or 4, made by the hand-written migrations of earlier
    releases, is brought to the latest version by the rendered ones (version 4: nothing to do)."""
    from sqlrp.registry.schema import VERSIONS

    build_by_hand(any_db, version)
    reg = Registry(any_db, migrate=False)
    assert reg.version() == version
    assert reg.migrate() == [v.file for v in VERSIONS if v.number > version]
    assert reg.version() == VERSIONS[-1].number and reg.migrate() == []
    use_registry(any_db)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_the_rendered_migrations_upgrade_from_each_version(any_db, version):
    """The rendered registry, stopped at each version and then upgraded, ends as a fresh one does."""
    from sqlrp.registry.schema import VERSIONS, bootstrap, statements

    any_db.execute(bootstrap(any_db.dialect))
    for v in VERSIONS[:version]:
        for statement in statements(v, any_db.dialect):
            any_db.execute(statement)
        any_db.execute("INSERT INTO sqlrp_schema_version (version, name) VALUES (?, ?)", [v.number, v.file])
    assert Registry(any_db, migrate=False).migrate() == [v.file for v in VERSIONS[version:]]
    use_registry(any_db)


def test_postgres_columns_are_written_exactly_without_pandas(pg):
    """PostgreSQL's ``insert_columns`` (how the registry stores a matrix) writes its own COPY text:
    every double back bit for bit (a float32 widened exactly, NaN and the infinities), integers at
    the ends of BIGINT, text with tabs, backslashes and line ends, booleans, a scalar on every row."""
    pg.execute("CREATE TABLE ic (a bigint, b double precision, c double precision, s text, f boolean)")
    a = np.array([-(2**63), 2**63 - 1, 0, 7])
    b = np.array([0.1, np.nan, -np.inf, 5e-324])
    c = np.array([1 / 3, 3e38, -0.0062582386, -0.0], dtype=np.float32)
    flags = np.array([True, False, True, False])
    pg.insert_columns("ic", {"a": a, "b": b, "c": c, "s": "x\ty\\z\n\r", "f": flags})
    rows = pg.fetchall("SELECT a, b, c, s, f FROM ic ORDER BY a")
    order = np.argsort(a)
    assert [r[0] for r in rows] == a[order].tolist()
    np.testing.assert_array_equal(np.array([r[1] for r in rows]), b[order])
    assert [r[2] for r in rows] == c[order].astype(np.float64).tolist()
    assert {r[3] for r in rows} == {"x\ty\\z\n\r"}
    assert [r[4] for r in rows] == flags[order].tolist()
    # the block path (integers, finite floats, a scalar string): the same exactness and escapes
    pg.execute("CREATE TABLE ic2 (a bigint, c double precision, s text)")
    finite = np.array([1 / 3, 3e38, -0.0062582386, 5e-39], dtype=np.float32)
    pg.insert_columns("ic2", {"a": a, "c": finite, "s": "x\ty\\z\n\r"})
    rows = pg.fetchall("SELECT a, c, s FROM ic2 ORDER BY a")
    assert [r[1] for r in rows] == finite[order].astype(np.float64).tolist()
    assert {r[2] for r in rows} == {"x\ty\\z\n\r"}


def test_project_into_a_postgres_table_never_imports_pandas(pg_url, tmp_path):
    """``sqlrp project --into`` on PostgreSQL stores the matrix without pandas (importing it cost
    the command about 0.3 s, issue 34); the outputs equal the NumPy reference."""
    table = f"t_{uuid.uuid4().hex[:10]}"
    code = f"""
import json, sys
import numpy as np, psycopg
from sqlrp import cli
url, table = {pg_url!r}, {table!r}
with psycopg.connect(url) as con:
    cols = ", ".join(f"((i * 7 + {{j}} * 13) % 17) / 17.0 AS x{{j}}" for j in range(12))
    con.execute(f"CREATE TABLE {{table}} AS SELECT i::bigint AS id, {{cols}} FROM generate_series(0, 299) i")
status = cli.main(["project", "--db", url, "--table", table, "--id-column", "id", "--k", "5",
                   "--projection", table + "_rp", "--into", table + "_out", "--no-progress"])
loaded = "pandas" in sys.modules
import sqlrp
db = sqlrp.connect(url)
got = np.array(db.fetchall(f"SELECT * FROM {{table}}_out ORDER BY id"))[:, 1:]
X = np.array(db.fetchall(f"SELECT * FROM {{table}} ORDER BY id"))[:, 1:]
want = sqlrp.transform(sqlrp.load_projection(db, table + "_rp"), X)
print(json.dumps({{"status": status, "pandas": loaded, "err": float(np.abs(got - want).max())}}))
"""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))  # this checkout's sqlrp
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == 0 and out["pandas"] is False, out
    assert out["err"] <= 1e-12
