"""``sqlrp dbt`` / :func:`sqlrp.dbt_model` for real: a dbt project made in a temporary folder, models written
by sqlrp, then ``dbt build`` (seeds, the input checks, the models, the self-checks) on dbt-duckdb and
dbt-postgres, each materialised model compared with NumPy's reference (:func:`sqlrp.transform`) to 1e-9.
dbt runs are slow (seconds each): one project per engine, several models, few dbt invocations.  Under
``CI=true`` a missing dbt fails the run instead of skipping."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import InputError, InvalidParameter, ProjectionExists, cli_words
from sqlrp.datasets import load_digits
from sqlrp.dbt import dbt_model
from sqlrp.dbt_project import read_project

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
N, D = 40, 6
RTOL = 1e-9


@pytest.fixture(scope="module")
def dbt_bin() -> str:
    found = shutil.which("dbt")
    if found is None:
        if IN_CI:
            pytest.fail("CI=true and dbt is missing: pip install '.[dbt]' (the test extra includes it)")
        pytest.skip("dbt is not installed: pip install '.[dbt]'")
    return found


def run_dbt(dbt_bin: str, project: Path, *args: str) -> tuple[int, dict[str, str], str]:
    """``dbt ARGS`` in ``project`` (offline, no usage statistics): its status, each node's status by name
    (run_results.json) and its output."""
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    done = subprocess.run(
        [dbt_bin, *args, "--project-dir", str(project), "--profiles-dir", str(project), "--no-version-check"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    results = project / "target" / "run_results.json"  # not written when dbt fails before it runs anything
    listed = json.loads(results.read_text())["results"] if results.exists() else []
    results.unlink(missing_ok=True)  # the next run's, not this one's, is read next
    status = {r["unique_id"].split(".")[-1]: r["status"] for r in listed}
    return done.returncode, status, done.stdout + done.stderr


def make_project(root: Path, output: str, schema: str) -> Path:
    """An empty dbt project whose profile's target is ``output`` (YAML) and whose source ``raw`` is ``schema``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nconfig-version: 2\nprofile: shop\n")
    (root / "profiles.yml").write_text(f"shop:\n  target: dev\n  outputs:\n    dev:\n{output}")
    (root / "models").mkdir()
    tables = "".join(f"      - name: {t}\n" for t in ("features", "pairs", "growing", "arrays"))
    (root / "models" / "sources.yml").write_text(
        f"version: 2\nsources:\n  - name: raw\n    schema: {schema}\n    tables:\n{tables}"
    )
    return root


def features(seed: int, n: int = N, start: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    X = np.random.default_rng(seed).normal(size=(n, D)) * np.array([1, 10, 0.1, 1e3, 1, 1e-3])
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(D)])
    frame.insert(0, "id", np.arange(start, start + n, dtype=np.int64))
    return frame, X


def long_rows(frame: pd.DataFrame) -> pd.DataFrame:
    X = frame.iloc[:, 1:].to_numpy()
    rows = [(int(i), j, float(v)) for i, x in zip(frame["id"], X, strict=True) for j, v in enumerate(x)]
    return pd.DataFrame([r for r in rows if r[2] != 0], columns=["id", "feature", "value"])


def assert_matches(got: pd.DataFrame, projection, X: np.ndarray, ids) -> None:
    """The model's rows (by id) equal NumPy's projection of ``X`` (rows ``ids``) to 1e-9 relative."""
    got = got.sort_values("id").reset_index(drop=True)
    assert got["id"].tolist() == sorted(ids)
    order = np.argsort(np.asarray(ids))
    want = sqlrp.transform(projection, X)[order]
    Y = got[[f"p{j}" for j in range(projection.k)]].to_numpy()
    np.testing.assert_allclose(Y, want, rtol=RTOL, atol=RTOL * np.abs(want).max())


def test_dbt_build_on_duckdb_matches_numpy(dbt_bin, tmp_path):
    """Wide (a stored projection, a fresh one, a kernel method, the input a dbt model), long (the matrix
    as a seed), array and incremental models: one ``dbt build`` green, each model equal to NumPy; then an
    incremental run adds the new ids only; then a NaN in the input and an edited seed fail their tests."""
    file = tmp_path / "shop.duckdb"
    project = make_project(tmp_path / "shop", f"      type: duckdb\n      path: {file}\n      threads: 1\n", "main")
    frame, X = features(1)
    growing, G = features(2, n=25)
    url = f"duckdb:///{file}"
    with sqlrp.connect(url) as db:
        db.write_dataframe("features", frame)
        db.write_dataframe("pairs", long_rows(frame))
        db.write_dataframe("growing", growing)
        db.execute(f"CREATE TABLE arrays AS SELECT id, [{', '.join(f'f{i}' for i in range(D))}] AS x FROM features")
        stored = sqlrp.create_projection(db, "rp5", method="achlioptas", d=D, k=5, seed=7, s=3)
    (project / "models" / "stg_features.sql").write_text("select * from {{ source('raw', 'features') }}\n")
    cols = ",".join(f"f{i}" for i in range(D))
    common = ["dbt", "--project-dir", str(project), "--id-column", "id"]
    calls = [
        ["--source", "raw.features", "--db", url, "--projection", "rp5", "--into", "wide_stored"],
        ["--ref", "stg_features", "--columns", cols, "--method", "gaussian", "--k", "3", "--seed", "4",
         "--into", "wide_fresh"],
        ["--source", "raw.features", "--columns", cols, "--method", "pk-rp", "--degree", "2", "--t", "2", "--k", "3",
         "--seed", "5", "--into", "wide_kernel"],
        ["--source", "raw.pairs", "--layout", "long", "--db", url, "--projection", "rp5", "--into", "long_stored"],
        ["--source", "raw.arrays", "--db", url, "--k", "4", "--seed", "2", "--s", "1", "--into", "array_fresh"],
        ["--source", "raw.growing", "--db", url, "--projection", "rp5", "--incremental", "--into", "inc"],
    ]  # fmt: skip
    for call in calls:
        assert main(common + call) == 0, call
    assert (project / "seeds" / "long_stored_matrix.csv").exists()
    assert not (project / "seeds" / "wide_stored_matrix.csv").exists()  # the wide SQL holds its matrix
    for model in ("wide_stored", "long_stored", "inc"):
        text = (project / "models" / f"{model}.sql").read_text()
        assert "{{ source('raw'," in text and not text.rstrip().endswith(";")
    assert "is_incremental()" in (project / "models" / "inc.sql").read_text()

    status, nodes, out = run_dbt(dbt_bin, project, "build")
    assert status == 0, out[-3000:]
    assert set(nodes.values()) <= {"success", "pass"} and len(nodes) == 1 + 7 + 12, nodes

    fresh = sqlrp.make_projection("gaussian", D, 3, seed=4)
    kernel = sqlrp.make_projection("pk-rp", D, 3, seed=5, degree=2, t=2)
    with duckdb.connect(str(file)) as con:
        assert_matches(con.sql("select * from wide_stored").df(), stored, X, frame["id"])
        assert_matches(con.sql("select * from wide_fresh").df(), fresh, X, frame["id"])
        assert_matches(con.sql("select * from wide_kernel").df(), kernel, X, frame["id"])
        assert_matches(con.sql("select * from long_stored").df(), stored, X, frame["id"])
        assert_matches(con.sql("select * from inc").df(), stored, G, growing["id"])
        arrays = con.sql("select * from array_fresh").df()
    with sqlrp.connect(url) as db:
        array_projection = sqlrp.load_projection(db, "arrays_achlioptas_k4_seed2")
    assert_matches(arrays, array_projection, X, frame["id"])

    more, M = features(3, n=10, start=1000)
    with duckdb.connect(str(file)) as con:
        con.execute("update inc set p0 = 12345 where id = 0")  # an old row is kept as it is, not re-projected
        con.register("more", more)
        con.execute("insert into growing select * from more")
    status, nodes, out = run_dbt(dbt_bin, project, "run", "--select", "inc")
    assert status == 0 and nodes == {"inc": "success"}, out[-3000:]
    with duckdb.connect(str(file)) as con:
        got = con.sql("select * from inc").df()
    assert got.loc[got["id"] == 0, "p0"].tolist() == [12345]
    assert_matches(got[got["id"] != 0], stored, np.vstack([G[1:], M]), [*growing["id"][1:], *more["id"]])

    # a NaN feature fails the input check (and the model's own guard); an edited seed fails the self-check
    with duckdb.connect(str(file)) as con:
        con.execute("insert into features (id, f0, f1, f2, f3, f4, f5) values (999, 'NaN', 1, 1, 1, 1, 1)")
    seed = project / "seeds" / "long_stored_matrix.csv"
    lines = seed.read_text().splitlines()
    lines[1] = ",".join([*lines[1].split(",")[:2], "2.0"])
    seed.write_text("\n".join(lines) + "\n")
    status, nodes, out = run_dbt(dbt_bin, project, "build")
    assert status != 0
    assert nodes["wide_stored_input_check"] == "fail" and nodes["long_stored_self_check"] == "fail", nodes
    assert nodes["long_stored_input_check"] == "pass", nodes


def test_dbt_build_on_postgres_matches_numpy(dbt_bin, tmp_path, pg_url):
    """The Python API on dbt-postgres: a wide model of a stored projection, a long one with its seed, a fresh
    one, and an incremental one that a second run tops up."""
    import psycopg

    schema = f"dbt_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    user, rest = pg_url.split("://", 1)[1].split("@", 1)
    host, port = rest.split("/")[0].split(":")
    output = (
        f"      type: postgres\n      host: {host}\n      port: {port}\n      user: {user}\n      password: ''\n"
        f"      dbname: postgres\n      schema: {schema}\n      threads: 1\n"
    )
    project = make_project(tmp_path / "shop", output, schema)
    frame, X = features(4)
    try:
        with sqlrp.connect(f"{pg_url}?options=-csearch_path%3D{schema}") as db:
            db.write_dataframe("features", frame)
            db.write_dataframe("pairs", long_rows(frame))
            stored = sqlrp.create_projection(db, "rp4", method="achlioptas", d=D, k=4, seed=3, s=2)
            dbt_model(project, "wide_pg", "id", "rp4", db=db, source="raw.features")
            dbt_model(project, "long_pg", "id", "rp4", db=db, source="raw.pairs", layout="long")
            db.write_dataframe("growing", frame.iloc[:30])
            dbt_model(project, "inc_pg", "id", "rp4", db=db, source="raw.growing", incremental=True)
        fresh = sqlrp.make_projection("achlioptas", D, 2, seed=9, s=1)
        cols = [f"f{i}" for i in range(D)]
        dbt_model(project, "fresh_pg", "id", source="raw.features", columns=cols, k=2, seed=9, s=1)
        assert read_project(project).dialect == "postgres"
        status, nodes, out = run_dbt(dbt_bin, project, "build")
        assert status == 0 and set(nodes.values()) <= {"success", "pass"} and len(nodes) == 1 + 4 + 8, out[-3000:]
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute(f'insert into "{schema}".growing select * from "{schema}".features where id >= 30')
        status, nodes, out = run_dbt(dbt_bin, project, "run", "--select", "inc_pg")
        assert status == 0 and nodes == {"inc_pg": "success"}, out[-3000:]
        with psycopg.connect(pg_url) as con:

            def table(name: str) -> pd.DataFrame:
                cur = con.execute(f'select * from "{schema}"."{name}"')
                return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])

            assert_matches(table("wide_pg"), stored, X, frame["id"])
            assert_matches(table("long_pg"), stored, X, frame["id"])
            assert_matches(table("fresh_pg"), fresh, X, frame["id"])
            assert_matches(table("inc_pg"), stored, X, frame["id"])
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


# ---- refusals: before anything is written, in one line (no dbt run needed) ----


def _project(tmp_path: Path, adapter: str = "duckdb") -> Path:
    return make_project(tmp_path / "p", f"      type: {adapter}\n      path: x.duckdb\n", "main")


def test_an_unknown_adapter_is_refused_in_one_line(tmp_path):
    project = _project(tmp_path, "oracle")
    with pytest.raises(InvalidParameter, match="dbt adapter 'oracle' .* has no sqlrp rendering"):
        dbt_model(project, "m", "id", source="raw.features", columns=["a", "b"], k=2)
    assert not (project / "models" / "m.sql").exists()


def test_an_existing_model_is_kept_without_replace(tmp_path, capsys):
    project = _project(tmp_path)
    (project / "models" / "m.sql").write_text("select 1 as id\n")
    args = ["dbt", "--project-dir", str(project), "--source", "raw.features", "--id-column", "id"]
    args += ["--columns", "a,b", "--k", "2", "--into", "m"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "models/m.sql" in err and "--replace" in err
    assert (project / "models" / "m.sql").read_text() == "select 1 as id\n"
    assert not (project / "tests").exists()
    assert main([*args, "--replace"]) == 0
    assert "{{ source('raw', 'features') }}" in (project / "models" / "m.sql").read_text()
    assert [p.name for p in project.rglob(".*sqlrp-*")] == []  # no staging file left


def test_a_model_of_that_name_elsewhere_is_refused(tmp_path):
    project = _project(tmp_path)
    (project / "models" / "staging").mkdir()
    (project / "models" / "staging" / "m.sql").write_text("select 1 as id\n")
    with pytest.raises(ProjectionExists, match="staging/m.sql"):
        dbt_model(project, "m", "id", source="raw.features", columns=["a", "b"], k=2, replace=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "features", "columns": ["a"], "k": 1}, "SOURCE.TABLE"),
        ({"source": "raw.f", "ref": "m", "columns": ["a"], "k": 1}, "name the input once"),
        ({"ref": "stg-x", "columns": ["a"], "k": 1}, "dbt name"),
        ({"ref": "stg", "k": 2}, "without --db the features"),
        ({"ref": "stg", "columns": ["a"], "k": 1, "incremental": True, "group_column": "g"}, "--group-column"),
        ({"ref": "stg", "columns": ["a"], "projection": "rp"}, "no stored projection 'rp'"),
        ({"ref": "stg", "layout": "array", "d": 3, "k": 2}, "--array-column"),
        ({"ref": "stg", "columns": ["a", "b"], "d": 3, "k": 2}, "--d 3 but --columns names 2 features"),
    ],
)
def test_bad_options_are_refused(tmp_path, kwargs, message):
    project = _project(tmp_path)
    with pytest.raises(InvalidParameter) as raised:
        dbt_model(project, "m", "id", **kwargs)
    assert message in cli_words(raised.value)
    assert not (project / "models" / "m.sql").exists()


def test_the_profile_is_found_as_dbt_finds_it(tmp_path, monkeypatch):
    project = _project(tmp_path)
    elsewhere = tmp_path / "profiles"
    elsewhere.mkdir()
    (elsewhere / "profiles.yml").write_text("shop:\n  target: prod\n  outputs:\n    prod:\n      type: postgres\n")
    assert read_project(project).dialect == "duckdb"
    monkeypatch.setenv("DBT_PROFILES_DIR", str(elsewhere))
    assert read_project(project).dialect == "postgres"
    assert read_project(project, profiles_dir=project).dialect == "duckdb"
    with pytest.raises(InputError, match="no target 'qa'"):
        read_project(project, target="qa")
    with pytest.raises(InputError, match="no dbt_project.yml"):
        read_project(tmp_path / "nowhere")


def test_a_column_name_holding_jinja_is_kept_raw(tmp_path):
    project = _project(tmp_path)
    dbt_model(project, "m", "id", source="raw.features", columns=["a{{b}}", "c"], k=2)
    text = (project / "models" / "m.sql").read_text()
    assert "{% raw %}" in text and '"a{{b}}"' in text


def guide_script() -> str:
    """The shell blocks of docs/guide/dbt.md's "From an empty folder" section, as one script (the
    ``pip install`` line aside: the environment has the packages)."""
    page = (ROOT / "docs" / "guide" / "dbt.md").read_text()
    section = page.split("## From an empty folder", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    lines = [line for block in blocks for line in block.splitlines() if not line.startswith("pip install")]
    return "\n".join(lines) + "\n"


def test_the_guide_goes_from_an_empty_folder_to_dbt_build(dbt_bin, tmp_path):
    """docs/guide/dbt.md as a newcomer runs it: an empty folder, then `dbt build` green, and the model
    equal to NumPy's projection of the digits with the projection sqlrp stored."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    env.pop("SQLRP_DB", None)
    env.pop("DBT_PROFILES_DIR", None)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", guide_script()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Done. PASS=3 WARN=0 ERROR=0" in done.stdout
    X, _ = load_digits()
    with sqlrp.connect(f"duckdb:///{tmp_path / 'shop' / 'shop.duckdb'}") as db:
        projection = sqlrp.load_projection(db, "digits_achlioptas_k16_seed0")
        got = db.query_df("select * from digits_rp")
    assert_matches(got, projection, X, list(range(len(X))))


def test_replacing_a_long_model_by_a_wide_one_removes_its_seed(tmp_path):
    project = _project(tmp_path)
    dbt_model(project, "m", "id", source="raw.pairs", layout="long", d=4, k=2)
    seeds = sorted(p.name for p in (project / "seeds").iterdir())
    assert seeds == ["m_matrix.csv", "m_matrix.yml"]
    (project / "seeds" / "mine.csv").write_text("a\n1\n")
    dbt_model(project, "m", "id", source="raw.features", columns=["a", "b"], k=2, replace=True)
    assert sorted(p.name for p in (project / "seeds").iterdir()) == ["mine.csv"]
    assert "ref('m_matrix')" not in (project / "models" / "m.sql").read_text()


def test_a_refused_model_stores_no_projection(tmp_path):
    project = _project(tmp_path)
    (project / "models" / "m.sql").write_text("select 1 as id\n")
    with sqlrp.connect() as db:
        db.write_dataframe("features", features(1)[0])
        with pytest.raises(ProjectionExists):
            dbt_model(project, "m", "id", "fresh", db=db, source="raw.features", k=2)
        assert sqlrp.list_projections(db).empty
