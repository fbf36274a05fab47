"""Shared fixtures of every folder of tests/: a DuckDB in memory, real PostgreSQL and MariaDB servers
and one Spark local[2] session started for the session (the helpers the tests and the benchmarks share
are in ``testkit/``).

Under ``CI=true`` a PostgreSQL, a MariaDB, a Spark or a Sail that cannot be started fails the run instead of
skipping.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import numpy as np
import pytest

import sqlrp
from testkit.mariadbserver import MariaDBUnavailable, TempMariaDB
from testkit.pgserver import PostgresUnavailable, TempPostgres
from testkit.sailserver import SailUnavailable, TempSail

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def pg_url():
    if os.environ.get("SQLRP_PG_URL"):
        yield os.environ["SQLRP_PG_URL"]
        return
    server = None
    try:
        server = TempPostgres()
        url = server.start()
    except (PostgresUnavailable, OSError) as exc:
        if server is not None:
            server.stop()
        if IN_CI:
            pytest.fail(f"CI=true and PostgreSQL could not be started: {exc}")
        pytest.skip(f"PostgreSQL unavailable (CI would fail here): {exc}")
    yield url
    server.stop()


@pytest.fixture
def duck():
    db = sqlrp.connect()
    yield db
    db.close()


@pytest.fixture
def pg(pg_url):
    """A fresh schema per test on the session's PostgreSQL server."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    db = sqlrp.connect(f"{pg_url}{sep}options=-csearch_path%3D{schema}")
    yield db
    db.close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="session")
def maria_url():
    """The SQLAlchemy URL (``mysql+pymysql://root@127.0.0.1:PORT``, no database) of a throw-away
    MariaDB server started for the session (testkit/mariadbserver.py); ``SQLRP_MARIADB_URL`` uses an
    existing one.  Under ``CI=true`` a server that cannot be started fails the run."""
    if os.environ.get("SQLRP_MARIADB_URL"):
        yield os.environ["SQLRP_MARIADB_URL"].rstrip("/")
        return
    server = None
    try:
        server = TempMariaDB()
        url = server.start()
    except (MariaDBUnavailable, OSError, ImportError) as exc:
        if server is not None:
            server.stop()
        if IN_CI:
            pytest.fail(f"CI=true and MariaDB could not be started: {exc}")
        pytest.skip(f"MariaDB unavailable (CI would fail here): {exc}")
    yield url
    server.stop()


@pytest.fixture
def maria(maria_url):
    """A fresh database per test on the session's MariaDB server, through sqlrp's SQLAlchemy backend
    (PyMySQL)."""
    from sqlalchemy import create_engine

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(maria_url)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{name}`")
    db = sqlrp.connect(f"{maria_url}/{name}")
    yield db
    db.close()
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE `{name}`")
    admin.dispose()


@pytest.fixture(scope="session")
def sail_url():
    """The ``sc://127.0.0.1:PORT`` URL of a throw-away Sail server (a Spark Connect server in Rust, pip
    ``pysail``) started for the session (testkit/sailserver.py); ``SQLRP_SAIL_URL`` uses a running one.
    Under ``CI=true`` a server that cannot be started fails the run."""
    if os.environ.get("SQLRP_SAIL_URL"):
        yield os.environ["SQLRP_SAIL_URL"].rstrip("/")
        return
    server = None
    try:
        server = TempSail()
        url = server.start()
    except (SailUnavailable, OSError) as exc:
        if server is not None:
            server.stop()
        if IN_CI:
            pytest.fail(f"CI=true and Sail could not be started: {exc}")
        pytest.skip(f"Sail unavailable (CI would fail here): {exc}")
    yield url
    server.stop()


@pytest.fixture
def sail(sail_url):
    """A session of its own per test on the session's Sail server (``;session_id=``: its own catalog)."""
    db = sqlrp.connect(f"{sail_url}/;session_id={uuid.uuid4()}")
    yield db
    db._keep_session = False  # released: the test's tables go with its session
    db.close()


@pytest.fixture(scope="session", autouse=True)
def _statement_cache_of_the_run(tmp_path_factory):
    """The ``sqlrp`` commands the tests start keep their statement cache's entries (:mod:`sqlrp.start`) in a
    folder of the test run, not in the user's ``~/.cache``."""
    if "SQLRP_CACHE_DIR" not in os.environ:
        os.environ["SQLRP_CACHE_DIR"] = str(tmp_path_factory.mktemp("statement-cache"))
        yield
        del os.environ["SQLRP_CACHE_DIR"]
    else:
        yield


@pytest.fixture(autouse=True)
def _connect_mark_left_as_found():
    """pyspark marks the whole process as Spark Connect (``SPARK_CONNECT_MODE_ENABLED``) once a remote session
    is made (the Sail and Spark Connect tests), and its builder then refuses a classic ``local`` session for
    the rest of the run ("CONNECT_URL_NOT_SET"): each test leaves the mark as it found it, so the order of the
    test files does not decide whether Spark starts."""
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    yield
    if before is None:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    else:
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = before


@pytest.fixture(params=["duckdb", "postgres"])
def db(request):
    """Each test that takes ``db`` runs on DuckDB and on PostgreSQL."""
    return request.getfixturevalue("duck" if request.param == "duckdb" else "pg")


#: the C1 compiler only and the serial collector: a JVM that starts and runs small jobs faster on two
#: cores (measured: the suite's wall time, see the report); not for real workloads
SPARK_FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark_db():
    """One ``SparkBackend.from_master("local[2]")`` for every Spark test of the session
    (``tests/engines/test_engine_spark.py``, the fuzzer's Spark run in ``tests/fuzz/``); starting
    Spark takes 10-20 s."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # before the JVM starts: every Spark socket on loopback
    try:
        from sqlrp.backends.spark import SparkBackend

        started = time.perf_counter()
        db = SparkBackend.from_master("local[2]", conf={"spark.driver.extraJavaOptions": SPARK_FAST_START})
        db.fetchall("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure to start is reported the same way
        if IN_CI:
            pytest.fail(f"CI=true and Spark could not be started: {type(exc).__name__}: {exc}")
        pytest.skip(f"Spark unavailable (CI would fail here): {type(exc).__name__}: {exc}")
    print(f"\nSpark local[2] started in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    yield db
    db.close()


@pytest.fixture(scope="session")
def digits():
    from sklearn.datasets import load_digits

    return load_digits().data.astype(np.float64)


# the differential fuzzer's hypothesis profiles (testkit/fuzz_tables.py; docs/tests.md)
from testkit.fuzz_tables import register_profiles  # noqa: E402

register_profiles()
