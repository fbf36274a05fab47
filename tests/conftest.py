"""Shared fixtures: a DuckDB in memory and a real PostgreSQL server started for the session.

Under ``CI=true`` a PostgreSQL that cannot be started fails the run instead of skipping.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pandas as pd
import pytest
from pgserver import PostgresUnavailable, TempPostgres

import sqlrp

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


@pytest.fixture(params=["duckdb", "postgres"])
def db(request):
    """Each test that takes ``db`` runs on DuckDB and on PostgreSQL."""
    return request.getfixturevalue("duck" if request.param == "duckdb" else "pg")


@pytest.fixture(scope="session")
def digits():
    from sklearn.datasets import load_digits

    return load_digits().data.astype(np.float64)


def wide_frame(X: np.ndarray, names: list[str] | None = None, id_name: str = "id") -> pd.DataFrame:
    names = names or [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=names)
    df.insert(0, id_name, np.arange(len(X), dtype=np.int64))
    return df


def long_frame(X: np.ndarray) -> pd.DataFrame:
    rows, cols = np.nonzero(X)
    return pd.DataFrame({"id": rows.astype(np.int64), "feature": cols.astype(np.int64), "value": X[rows, cols]})


def array_frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"id": np.arange(len(X), dtype=np.int64), "x": list(X)})


# the differential fuzzer's hypothesis profiles (tests/fuzz_tables.py; docs/tests.md)
from fuzz_tables import register_profiles  # noqa: E402

register_profiles()
