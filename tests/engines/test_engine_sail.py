"""Sail (pip ``pysail``: a Spark Connect server in Rust on Apache DataFusion) through sqlrp's own Spark
Connect route, ``sc://``, on a real server the test setup starts on loopback (``testkit/sailserver.py``;
fixtures ``sail_url`` and ``sail`` -- a session of its own per test -- in ``tests/conftest.py``).

Every projection is compared with the NumPy reference (:mod:`sqlrp.methods.reference`) to 1e-9
relative.  Issue 45's Sail instances each have a regression test: the registry's parameterised
``INSERT`` refused ("command with parameters"), the half-made registry blocking later calls ("already
exists"), ``SET spark.sql.codegen.hugeMethodLimit`` refused ("Could not find config namespace"), and
each CLI call a new session that did not see the last one's tables.  Under ``CI=true`` a Sail that
cannot be started fails the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.backends import spark_connect
from sqlrp.core.errors import EngineLimit
from sqlrp.methods import make_projection, reference
from sqlrp.registry.schema import LATEST, REGISTRY_TABLES
from sqlrp.search.reference import result_recall
from testkit.frames import array_frame, wide_frame
from testkit.search_cases import clustered, frame

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
RTOL = 1e-9
ROOT = Path(__file__).resolve().parents[2]


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(got - want).max()) <= RTOL * scale


def values(out: pd.DataFrame, n: int) -> np.ndarray:
    """The output's projected columns in id order (each id 0..n-1 exactly once)."""
    assert sorted(out["id"].tolist()) == list(range(n))
    return out.sort_values("id").drop(columns="id").to_numpy(dtype=float)


def cli(*argv: str) -> subprocess.CompletedProcess:
    """``sqlrp ARGV`` in a new process (a new Spark Connect client, as each command is)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "sqlrp", *argv], capture_output=True, text=True, env=env, timeout=300, check=False
    )


# ---- the server, and what sqlrp found out on connecting ----


def test_the_server_is_sail_and_sqlrp_knows_it(sail):
    assert sail.fetchall("SELECT version()")[0][0].count(".") == 2  # Sail's release alone (Spark adds a revision)
    assert sail.adds_columns is False  # ALTER TABLE ... ADD COLUMN is refused there
    assert sail.fetchall("SELECT ? + 1", [1])[0][0] == 2  # queries bind parameters


@pytest.mark.parametrize(
    "value",
    [0.1, 1 / 3, -2.5e-300, 1e300, float("nan"), float("inf"), -7, 2**62, True, None, 'it\'s \\ "q" ?\n--', "ü"],
)
def test_a_parameter_written_as_a_literal_keeps_its_value(sail, value):
    """The literals :func:`spark_connect.bind` writes where commands cannot have parameters: read back
    exactly (doubles bit for bit: exponent form, never a DECIMAL; text with quotes, backslashes and a ?)."""
    kind = {float: "DOUBLE", int: "BIGINT", bool: "BOOLEAN", str: "STRING", type(None): "STRING"}[type(value)]
    sail.execute(f"CREATE TABLE lit (v {kind}) USING parquet")
    sail.execute("INSERT INTO lit VALUES (?)", [value])
    assert sail._literal_params  # the server refused the bound INSERT; the literal went in
    got = sail.fetchall("SELECT v FROM lit")[0][0]
    if isinstance(value, float) and np.isnan(value):
        assert np.isnan(got)
    else:
        assert got == value and type(got) is type(value)


def test_settings_the_server_lacks_are_skipped_and_others_still_fail(sail):
    sail.execute("SET spark.sql.codegen.hugeMethodLimit = 8000000")  # Spark's code generator: not on Sail
    assert "SET spark.sql.codegen.hugeMethodLimit = 8000000" in sail._no_setting
    with pytest.raises(Exception, match="not_a_table"):
        sail.execute("INSERT INTO not_a_table VALUES (1)")


# ---- projections, exact against NumPy ----


@pytest.mark.parametrize(
    ("method", "params"),
    [("achlioptas", {"s": 3}), ("gaussian", {}), ("cbp", {"s": 3}), ("maclaurin", {"degree": 2})],
)
@pytest.mark.parametrize("layout", ["wide", "array"])
def test_projection_matches_numpy(sail, method, params, layout):
    X = np.random.default_rng(4).normal(size=(60, 9))
    df = wide_frame(X) if layout == "wide" else array_frame(X)
    sail.write_dataframe("t", df)
    p = make_projection(method, d=9, k=5, seed=3, **params)
    options = {"array_column": "x"} if layout == "array" else {}
    out = sqlrp.project(sail, "t", "id", p, layout=layout, **options)
    close(values(out, 60), reference.transform(p, X))


def test_digits_stored_projection_into_a_table(sail, digits):
    X = digits[:400]
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(64)])
    df.insert(0, "id", np.arange(len(X), dtype=np.int64))
    sail.write_dataframe("digits", df)
    p = sqlrp.create_projection(sail, "digits16", "achlioptas", d=64, k=16, s=3, seed=5)
    sqlrp.project(sail, "digits", "id", "digits16", into="digits_rp")
    close(values(sail.query_df("SELECT * FROM digits_rp"), len(X)), reference.transform(p, X))
    assert sail.fetchall("SELECT max(version) FROM sqlrp_schema_version")[0][0] == LATEST
    sqlrp.drop_projection(sail, "digits16")  # DELETE: emulated on Sail's Parquet tables
    assert not sqlrp.list_projections(sail)["name"].eq("digits16").any()


# ---- the registry: a failed set-up leaves nothing ----


def test_a_failed_registry_setup_leaves_no_table_behind(sail, monkeypatch):
    """A statement refused halfway through the set-up (here the third table's) leaves no registry table;
    the next call sets the registry up whole ("already exists" was issue 45's)."""
    from sqlrp.backends.spark import SparkBackend

    real, made = SparkBackend.execute, []

    def refuse_third(self, sql, params=None):
        if sql.lstrip().upper().startswith("CREATE TABLE"):
            made.append(sql)
            if len(made) == 3:
                raise RuntimeError("refused by the test")
        return real(self, sql, params)

    monkeypatch.setattr(SparkBackend, "execute", refuse_third)
    with pytest.raises(RuntimeError, match="refused by the test"):
        sqlrp.create_projection(sail, "rp", "achlioptas", d=6, k=3, s=3, seed=2)
    assert not {t.lower() for t in sail.table_names()} & set(REGISTRY_TABLES)
    monkeypatch.setattr(SparkBackend, "execute", real)
    sail.__dict__.pop("_sqlrp_registry", None)
    p = sqlrp.create_projection(sail, "rp", "achlioptas", d=6, k=3, s=3, seed=2)
    assert sqlrp.load_projection(sail, "rp").d == p.d == 6


def test_a_server_beside_pyspark_it_does_not_know_is_named_in_one_line():
    exc = Exception("invalid argument: unsupported PySpark version: 4.3.0")
    found = spark_connect.refusal(exc, "sc://127.0.0.1:1")
    assert isinstance(found, EngineLimit) and "\n" not in str(found)
    assert "pyspark 4.3.0" in str(found) and "Sail" in str(found) and "pyspark<4.3" in str(found)
    assert spark_connect.refusal(Exception("something else"), "sc://x:1") is None


def test_the_spark_extra_installs_the_connect_client(monkeypatch):
    """``pip install 'sqlrp[spark]'`` brings what ``sc://`` needs (issue 45: grpcio, protobuf were missing),
    and a client without one of them is refused in one line naming the pip line."""
    import tomllib

    from sqlrp.core.errors import MissingExtra

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.replace(" ", "").startswith("pyspark[connect]") for req in extras["spark"])
    spark_connect.need_client()  # this environment has them all
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(MissingExtra, match=r"zstandard.*pip install 'pyspark\[connect\]'") as raised:
        spark_connect.need_client()
    assert "\n" not in str(raised.value)


# ---- sessions: two CLI calls share the registry and the tables ----


def test_stored_projection_and_into_across_two_cli_calls(sail_url):
    """Each command is a new client: sqlrp joins one kept session of its own on the server (Sail's
    catalog is per session), so the second call sees the first call's projection and table."""
    X = np.random.default_rng(8).normal(size=(40, 7))
    table, name, into = f"t_{uuid.uuid4().hex[:8]}", f"rp_{uuid.uuid4().hex[:8]}", f"o_{uuid.uuid4().hex[:8]}"
    db = sqlrp.connect(sail_url)
    db.write_dataframe(table, wide_frame(X))
    db.close()
    made = cli("create", "--db", sail_url, "--name", name, "--method", "achlioptas", "--d", "7", "--k", "4",
               "--s", "3", "--seed", "9")  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    ran = cli("project", "--db", sail_url, "--table", table, "--id-column", "id", "--projection", name, "--into", into)
    assert ran.returncode == 0, ran.stderr[-2000:]
    db = sqlrp.connect(sail_url)
    try:
        p = sqlrp.load_projection(db, name)
        close(values(db.query_df(f"SELECT * FROM {into}"), len(X)), reference.transform(p, X))
    finally:
        db.close()


def test_a_callers_own_session_is_used_as_it_is(sail_url):
    """``sqlrp.connect(session)`` of the caller's own Sail session: sqlrp sees the session's tables, keeps
    its registry there (made at its latest shape: Sail adds no columns) and leaves the session open."""
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(sail_url).create()
    try:
        session.sql(
            "CREATE TABLE mine USING parquet AS SELECT id, CAST(id AS DOUBLE) * 0.5 AS f0, "
            "CAST(id AS DOUBLE) - 3 AS f1 FROM range(10)"
        )
        db = sqlrp.connect(session)
        assert db.adds_columns is False
        p = sqlrp.create_projection(db, "mine_rp", "gaussian", d=2, k=2, seed=1)
        X = np.column_stack([np.arange(10) * 0.5, np.arange(10) - 3.0])
        close(values(sqlrp.project(db, "mine", "id", "mine_rp"), 10), reference.transform(p, X))
        db.close()
        assert session.sql("SELECT count(*) FROM mine").collect()[0][0] == 10  # still open
    finally:
        session.stop()


# ---- similarity search ----


def test_index_and_search_run_with_duckdbs_recall(sail):
    both = clustered(425, 1)
    X, Q = both[:400], both[400:]
    recalls = []
    for db in (sail, sqlrp.connect()):
        db.write_dataframe("pts", frame(X))
        db.write_dataframe("qs", frame(Q, "qid"))
        sqlrp.build_index(db, "pts", "id", "pts_idx", lists=16, bits=64, seed=3)
        got = sqlrp.search(db, "pts_idx", "qs", "qid", top=5, candidates=30, probes=4)
        exact = sqlrp.search(db, "pts_idx", "qs", "qid", top=5, exact=True)
        assert len(got) == 125
        recalls.append(result_recall(got, exact))
    assert recalls[0] == recalls[1] > 0.8
