"""Property-based identifier suite (issue 13): generated names in every role, on DuckDB and PostgreSQL.

Each example draws a name for the schema, the table, the id column, three feature columns, the
output table, the projection and the output prefix (8+ names; 130 examples per engine, so more than
1,000 names per engine per run), with quotes, semicolons, dots, backslashes, spaces, unicode of 1-4
bytes, names of 55-80 bytes (PostgreSQL keeps 63), names that differ from another only in case
(feature columns, the output against the input table, the prefix against the id column), and a NUL
now and then.  The test creates the table as the engine can hold it, then projects through
``sqlrp.project``, in turn returning a frame and writing a table.

The property: the call either returns the NumPy reference's numbers (relative 1e-9) under the names
asked for, or raises one of sqlrp's own errors (:class:`sqlrp.SqlrpError`) -- never a raw database
error, a wrong number, an empty result, or a touched source table; a refused ``into=`` leaves no table.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlrp
from sqlrp.compiler import ident
from sqlrp.dialects import get_dialect

EXAMPLES = 130
ALPHABET = list("aAbBqQzZ09_ .-;'\"`\\/*%$()\t") + ["é", "É", "ß", "表", "😀", "\u0301", "Σ", "ς"]
plain = st.text(alphabet=st.sampled_from(ALPHABET), min_size=1, max_size=24)
long_ = st.text(alphabet=st.sampled_from(ALPHABET), min_size=55, max_size=80)  # around 63 bytes


def with_nul(draw: st.DrawFn, value: str) -> str:
    """``value``, once in 20 with a NUL inside (only where the test never creates the object)."""
    if draw(st.integers(1, 20)) == 20:
        cut = draw(st.integers(0, len(value)))
        return value[:cut] + "\x00" + value[cut:]
    return value


ROLES = ("schema", "table", "id", "feature", "into", "projection", "prefix")


@st.composite
def names(draw: st.DrawFn) -> dict:
    long_role = draw(st.sampled_from((None,) * 4 + ROLES))  # one role in three gets a long name

    def pick(role: str) -> str:
        return draw(long_ if role == long_role else plain)

    table = pick("table")
    id_column, prefix = pick("id"), pick("prefix")
    if draw(st.integers(1, 5)) == 5:  # an output column that differs from the id only in case
        id_column = prefix.swapcase() + "1"
    features = draw(st.lists(plain, min_size=3, max_size=3, unique=True))
    features[1] = pick("feature") if long_role == "feature" else features[1]
    if draw(st.booleans()) and features[0].swapcase() not in features:  # one that differs only in case
        features[2] = features[0].swapcase()
    into = draw(st.sampled_from([pick("into"), pick("into"), table.swapcase(), table]))
    return {
        "schema": pick("schema") if draw(st.booleans()) else None,
        "table": table,
        "id": id_column,
        "features": features,
        "into": with_nul(draw, into),
        "projection": with_nul(draw, pick("projection")),
        "prefix": with_nul(draw, prefix),
        "as_table": draw(st.booleans()),
        "replace": draw(st.booleans()),
    }


def engine_key(dialect: str, value: str) -> str:
    """Two names with one key are one object to the engine (the setup must not create both)."""
    if dialect == "postgres":
        value = value.encode()[:63].decode(errors="ignore")
    return get_dialect(dialect).identifier_key(value)


def create_source(db, dialect: str, n: dict, X: np.ndarray) -> list[str]:
    """The source table as the engine can hold it (names the engine takes for one are created
    once); returns the feature names created."""
    render = get_dialect(dialect).sqlglot
    columns, seen = [], {engine_key(dialect, n["id"])}
    for f in n["features"]:
        if engine_key(dialect, f) not in seen:
            seen.add(engine_key(dialect, f))
            columns.append(f)
    table = ident(n["table"]).sql(render)
    if n["schema"] is not None:
        db.execute(f"CREATE SCHEMA {ident(n['schema']).sql(render)}")
        table = f"{ident(n['schema']).sql(render)}.{table}"
    defs = ", ".join(
        [f"{ident(n['id']).sql(render)} BIGINT"] + [f"{ident(c).sql(render)} DOUBLE PRECISION" for c in columns]
    )
    db.execute(f"CREATE TABLE {table} ({defs})")
    marks = ", ".join("?" for _ in range(len(columns) + 1))
    for i, row in enumerate(X[:, : len(columns)]):
        db.execute(f"INSERT INTO {table} VALUES ({marks})", [i, *map(float, row)])
    return columns


def check(db, dialect: str, n: dict) -> str:
    """Run one example; returns "ok" or the name of the clean error (for the tally)."""
    X = np.random.default_rng(len(n["table"])).standard_normal((6, 3))
    columns = create_source(db, dialect, n, X)
    render = get_dialect(dialect).sqlglot
    source = ident(n["table"]).sql(render)
    if n["schema"] is not None:
        source = f"{ident(n['schema']).sql(render)}.{source}"
    before = db.fetchall(f"SELECT * FROM {source} ORDER BY 1")
    asked = n["features"]  # the drawn list: may name a column the engine folded together with another
    into = n["into"] if n["as_table"] else None
    try:
        out = sqlrp.project(
            db, n["table"], n["id"], n["projection"], k=3, s=1, seed=7, columns=asked,
            schema=n["schema"], prefix=n["prefix"], into=into, replace=n["replace"],
        )  # fmt: skip
    except sqlrp.SqlrpError as exc:
        assert str(exc), "an error without a message"
        assert db.fetchall(f"SELECT * FROM {source} ORDER BY 1") == before, "the source changed"
        if into is not None and "\x00" not in into and not get_dialect(dialect).same_identifier(into, n["table"]):
            assert not _exists(db, into, n["schema"]), f"a refused projection left the table {into!r}"
        return type(exc).__name__
    assert asked == columns, "sqlrp projected columns the engine does not hold as named"
    if into is not None:
        assert out is None
        target = ident(into).sql(render)
        if n["schema"] is not None:
            target = f"{ident(n['schema']).sql(render)}.{target}"
        out = db.query_df(f"SELECT * FROM {target}")
    assert list(out.columns) == [n["id"], *(f"{n['prefix']}{j}" for j in range(3))]
    out = out.sort_values(n["id"])
    assert out[n["id"]].tolist() == list(range(len(X)))
    want = sqlrp.transform(sqlrp.load_projection(db, n["projection"]), X)
    got = out.drop(columns=n["id"]).to_numpy(dtype=float)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12), (got, want)
    assert db.fetchall(f"SELECT * FROM {source} ORDER BY 1") == before, "the source changed"
    return "ok"


def _exists(db, table: str, schema: str | None) -> bool:
    try:
        db.columns(table, schema)
    except sqlrp.SqlrpError:
        return False
    return True


TALLY: dict[str, dict[str, int]] = {"duckdb": {}, "postgres": {}}


def _run(dialect: str, connect, n: dict) -> None:
    db = connect()
    try:
        outcome = check(db, dialect, n)
    finally:
        db.close()
    tally = TALLY[dialect]
    tally[outcome] = tally.get(outcome, 0) + 1


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@FUZZ
@given(n=names())
def test_names_on_duckdb(n: dict) -> None:
    _run("duckdb", sqlrp.connect, n)


@pytest.fixture(scope="module")
def pg_schema_url(pg_url):
    """A PostgreSQL URL whose search_path is a schema of this module's own (dropped at the end)."""
    import psycopg

    schema = f"fuzz_{uuid.uuid4().hex[:10]}"
    yield pg_url, schema
    with psycopg.connect(pg_url, autocommit=True) as admin:
        for (s,) in admin.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [schema + "%"]):
            admin.execute(f'DROP SCHEMA "{s}" CASCADE')


def test_names_on_postgres(pg_schema_url) -> None:
    import psycopg

    pg_url, base = pg_schema_url

    @FUZZ
    @given(n=names())
    def run(n: dict) -> None:
        schema = f"{base}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in pg_url else "?"
        url = f"{pg_url}{sep}options=-csearch_path%3D{schema}"
        n = dict(n)
        # the drawn schema lives beside this example's own, so one DROP ... CASCADE clears both
        try:
            _run("postgres", lambda: sqlrp.connect(url), n)
        finally:
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
                if n["schema"] is not None:
                    admin.execute(
                        "DROP SCHEMA IF EXISTS " + psycopg.sql.Identifier(n["schema"]).as_string(admin) + " CASCADE"
                    )

    run()


def test_the_suite_saw_both_outcomes() -> None:
    """The property is only worth something if both branches ran: projections that worked (and
    were compared with NumPy) and names refused with a clean error."""
    print(TALLY)
    for dialect, tally in TALLY.items():
        if not tally:
            pytest.skip(f"the {dialect} suite did not run in this session")
        assert tally.get("ok", 0) >= 10, (dialect, tally)
        assert sum(tally.values()) - tally.get("ok", 0) >= 1, (dialect, tally)
