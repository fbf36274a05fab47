"""MariaDB as a first-class engine (issue 45): the registry kept there, and everything that stands on it,
on the real MariaDB 10.11 the test setup starts (``testkit/mariadbserver.py``; fixtures ``maria_url`` and
``maria`` in ``tests/conftest.py``; under ``CI=true`` a missing server fails).

Every method on the layouts MariaDB holds (wide, long; it has no arrays, and the array layout is refused
naming the engine) equals the NumPy reference (1e-9 relative) through ``project`` (a stored projection,
its rows and metadata read back), ``--into``, a Projection object with ``store=False`` and the SQL
``compile --db ... --check`` prints; ``tune`` draws the sample DuckDB draws; ``evaluate``'s SQL metrics
equal its NumPy ones; an index (BIT_COUNT codes) finds what DuckDB's index of the same table and seed
finds.  The registry's own contract: migrations idempotent and equal to ``migrations/mysql/``, names
compared byte for byte, bulk rows within the server's ``max_allowed_packet``.  The cross-engine
matrix runs with hostile identifiers (``testkit.engine_cases``).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import EngineLimit
from sqlrp.dialects.mysql import PACKET_HEADROOM
from sqlrp.registry.schema import VERSIONS
from sqlrp.registry.store import _statements
from testkit.engine_cases import (
    CASES,
    EVERY_METHOD,
    HOSTILE_ID,
    HOSTILE_TABLE,
    RTOL,
    Case,
    check,
    data,
    frame,
    run_case,
)

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "mysql"

METHODS = EVERY_METHOD
LAYOUTS = ("wide", "long")

#: ids the server's default collation takes for one another (case, accents, trailing spaces)
CONFUSABLE = ["a", "A", "a ", "b", "é", "e", "E ", "", " ", "ß", "s"]


def close(got: np.ndarray, want: np.ndarray, rtol: float = RTOL) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(got - want).max()) <= rtol * scale


def printed(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue().rstrip().rstrip(";")


def database_url(maria_url: str, maria) -> str:
    return f"{maria_url}/{maria.fetchall('SELECT DATABASE()')[0][0]}"


def text_frame(X: np.ndarray, ids: list[str]) -> pd.DataFrame:
    out = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    out.insert(0, "id", ids)
    return out


# ---- everything that runs, with hostile identifiers ---------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_matrix(maria, case):
    """The cross-engine matrix: the table ``dig"its; DROP TABLE x --.é``, the id ``row id``; a stored
    projection named after the case (spaces), its outputs exact; arrays (the array layout and output, the
    ``lookup`` strategy's ARRAY_AGG) refused naming mysql."""
    arrays = case.layout == "array" or case.output == "array" or case.strategy == "lookup"
    assert run_case(maria, case, data()) == ("refused" if arrays else "ok")
    assert HOSTILE_TABLE in maria.table_names()


def test_every_method_is_tested():
    from sqlrp.methods import METHODS as ALL

    assert set(METHODS) == set(ALL)


@pytest.mark.parametrize("into", [False, True], ids=["rows", "into"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_and_layout_stored(maria, method, layout, into):
    """A stored projection (written to the registry, read back, its digest checked), rows or a table."""
    case = Case(f"{method}-{layout}", method=method, layout=layout, params=tuple(METHODS[method].items()), into=into)
    assert run_case(maria, case, data(), tag=f" {method} {layout}") == "ok"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_projection_objects_with_store_false(maria, method, layout):
    """A Projection object, nothing stored: its matrix inlined (``values``) or, for the long layout by
    default, staged for the call and dropped after it."""
    X = data()
    maria.write_dataframe("t", frame(X, layout), replace=True)
    p = sqlrp.make_projection(method, d=X.shape[1], k=5, seed=3, **METHODS[method])
    for matrix in ("values", "auto"):
        out = sqlrp.project(maria, "t", HOSTILE_ID, p, layout=layout, matrix=matrix, store=False, d=X.shape[1])
        check(out, p, X, Case(method, layout=layout))
    assert sqlrp.list_projections(maria).empty
    assert sorted(maria.table_names()) == ["t"] or all(n.startswith("sqlrp_") for n in maria.table_names() if n != "t")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("method", sorted(METHODS))
def test_compile_db_check_of_a_stored_projection(maria, maria_url, method, layout):
    """``compile --db URL --projection NAME --check`` prints one statement; run on MariaDB it says 'ok'.
    The plain ``compile --db`` SQL (the matrix read from the registry's rows) equals NumPy."""
    X = data()
    maria.write_dataframe("t", frame(X, layout, "id"), replace=True)
    p = sqlrp.create_projection(maria, "rp", method, d=X.shape[1], k=5, seed=3, **METHODS[method])
    url = database_url(maria_url, maria)
    base = ["compile", "--db", url, "--table", "t", "--id-column", "id", "--projection", "rp", "--layout", layout]
    verdict = maria.fetchall(printed([*base, "--check"]))
    assert verdict[0][0] == "ok", verdict
    out = maria.query_df(printed(base)).rename(columns={"id": HOSTILE_ID})
    check(out, p, X, Case(method, layout=layout))


# ---- tune, evaluate, index and search ------------------------------------------------------------


def test_tune_draws_duckdbs_sample_and_projects_exactly(maria):
    """DT-RP on a seeded sample: the same rows as on DuckDB (``md5`` order), so the same matrix; stored
    here, then projected exactly."""
    X = np.random.default_rng(11).normal(size=(120, 8))
    table = text_frame(X, [f"r{i}" for i in range(120)])
    maria.write_dataframe("t", table)
    options = dict(k=4, sample=60, iterations=200, seed=5)
    tuned = sqlrp.tune(maria, "t", "id", name="tuned", **options)
    with sqlrp.connect("duckdb://") as duck:
        duck.write_dataframe("t", table)
        want = sqlrp.tune(duck, "t", "id", name="tuned", **options)
    assert np.array_equal(tuned.linear.dense(), want.linear.dense()) and tuned.scale == want.scale
    out = sqlrp.project(maria, "t", "id", "tuned").set_index("id").loc[table["id"]]
    close(out.to_numpy(dtype=float), sqlrp.transform(sqlrp.load_projection(maria, "tuned"), X))


@pytest.mark.parametrize("ids", ["numbers", "look-alikes"])
def test_evaluate_sql_metrics_equal_numpys(maria, ids):
    """The SQL metrics (pairs, distortion mean, median, p95, max, Recall@K) equal the NumPy ones: the
    percentiles spelt out by rank (no PERCENTILE_CONT aggregate here), each pair of text ids once and
    the queries kept apart from the database though the collation ties them."""
    rng = np.random.default_rng(12)
    keys = [*CONFUSABLE, *[f"r{i}" for i in range(40)]] if ids == "look-alikes" else list(range(51))
    table = text_frame(rng.normal(size=(len(keys), 7)), keys)
    maria.write_dataframe("t", table)
    sqlrp.create_projection(maria, "rp", "gaussian", d=7, k=4, seed=2)
    report = sqlrp.evaluate(maria, "t", "id", "rp", sample=len(keys), queries=12, recall_k=3)
    python, sql = report.metrics, report.metrics["sql"]
    n = len(keys)
    assert sql["pairs"] == python["pairs"] == n * (n - 1) // 2
    for name in ("distortion_mean", "distortion_median", "distortion_p95", "distortion_max", "recall@3"):
        assert sql[name] == pytest.approx(python[name], rel=1e-9, abs=1e-12), name


@pytest.mark.parametrize("ids", ["numbers", "look-alikes"])
def test_search_finds_what_duckdbs_index_finds(maria, ids):
    """An index of the same table and seed, built here (BIT_COUNT of BIGINT code words) and on DuckDB
    (128-bit words): the same neighbours, ranks and distances, and so the same recall -- with queries
    whose ids the server's collation takes for one another ('a', 'A', 'a ' ...: the query id ``_qid``
    joins the id ``_id`` byte for byte)."""
    rng = np.random.default_rng(13)
    keys = [*CONFUSABLE, *[f"r{i}" for i in range(109)]] if ids == "look-alikes" else list(range(120))
    table = text_frame(rng.normal(size=(len(keys), 6)), keys)
    queries = pd.concat([table.iloc[:11], table.iloc[20::20]]).reset_index(drop=True)
    found = {}
    with sqlrp.connect("duckdb://") as duck:
        for name, db in (("mariadb", maria), ("duckdb", duck)):
            db.write_dataframe("pts", table)
            db.write_dataframe("q", queries)
            sqlrp.build_index(db, "pts", "id", "idx", lists=4, seed=4, calibration_queries=0)
            result = sqlrp.search(db, "idx", "q", "id", top=5, probes=2)
            found[name] = result.sort_values(["query_id", "rank"]).reset_index(drop=True)
    got, want = found["mariadb"], found["duckdb"]
    assert len(got) == len(queries) * 5
    assert got["query_id"].tolist() == want["query_id"].tolist() and got["id"].tolist() == want["id"].tolist()
    close(got["distance"].to_numpy(), want["distance"].to_numpy())
    # each query finds itself first, at distance 0: no look-alike taken for it
    first = got[got["rank"] == 1]
    assert first["id"].tolist() == first["query_id"].tolist() and np.all(first["distance"].to_numpy() == 0.0)


def test_index_and_search_from_the_cli(maria, maria_url, capsys):
    X = np.random.default_rng(14).normal(size=(40, 5))
    maria.write_dataframe("pts", text_frame(X, list(range(40))))
    url = database_url(maria_url, maria)
    index = ["index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "idx", "--lists", "4"]
    assert main([*index, "--calibration-queries", "0"]) == 0
    capsys.readouterr()
    argv = ["search", "--db", url, "--index", "idx", "--query-table", "pts", "--query-id-column", "id", "--top", "1"]
    assert main([*argv, "--into", "nn"]) == 0
    nn = maria.query_df("SELECT * FROM `nn` ORDER BY `query_id`")
    assert nn["id"].tolist() == list(range(40)) and np.all(nn["distance"].to_numpy() == 0.0)  # each row itself


# ---- the registry's own contract ---------------------------------------------------------------


def test_migrations_are_idempotent_and_equal_the_rendered_files(maria, maria_url):
    applied = sqlrp.migrate(maria)
    assert applied == [v.file for v in VERSIONS]
    assert sqlrp.migrate(maria) == []  # a second run: nothing
    with sqlrp.connect(database_url(maria_url, maria)) as again:  # another connection: nothing either
        assert sqlrp.migrate(again) == []
    assert maria.fetchall("SELECT version FROM sqlrp_schema_version ORDER BY version") == [
        (v.number,) for v in VERSIONS
    ]
    # the files of migrations/mysql/, run by hand on an empty database, are the registry sqlrp makes
    admin = sa.create_engine(maria_url)
    with admin.connect() as conn:
        conn.exec_driver_sql("CREATE DATABASE `by_hand`")
    try:
        with sqlrp.connect(f"{maria_url}/by_hand") as db:
            for path in [MIGRATIONS / "bootstrap.sql", *[MIGRATIONS / v.file for v in VERSIONS]]:
                for statement in _statements(path.read_text()):
                    db.execute(statement)
                if path.name != "bootstrap.sql":
                    record = "INSERT INTO sqlrp_schema_version (version, name) VALUES (?, ?)"
                    db.execute(record, [int(path.name[:4]), path.name])
            assert sqlrp.migrate(db) == []
            p = sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=3, seed=1)
            assert np.array_equal(sqlrp.load_projection(db, "rp").linear.dense(), p.linear.dense())
            columns = {r[0]: r[1] for r in db.fetchall(
                "SELECT column_name, collation_name FROM information_schema.columns "
                "WHERE table_schema = 'by_hand' AND table_name = 'sqlrp_projection' AND data_type <> 'json'"
            )}  # fmt: skip
            assert columns["name"] == "utf8mb4_bin" and columns["method"] == "utf8mb4_bin"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql("DROP DATABASE `by_hand`")
        admin.dispose()


def test_names_are_compared_byte_for_byte(maria):
    """Under the server's default collation 'rp', 'RP' and 'ŕp' would be one name; in the registry they
    are three projections.  A name ending in a space is refused (the key's PAD SPACE), as is one longer
    than the key column."""
    names = ["rp", "RP", "ŕp", "r p"]
    made = {n: sqlrp.create_projection(maria, n, "gaussian", d=4, k=2, seed=i) for i, n in enumerate(names)}
    assert sorted(sqlrp.list_projections(maria)["name"]) == sorted(names)
    for n, p in made.items():
        assert np.array_equal(sqlrp.load_projection(maria, n).linear.dense(), p.linear.dense())
    for bad, reason in (("rp ", "ends in a space"), ("x" * 256, "too long")):
        with pytest.raises(EngineLimit, match=rf"^mysql: .*{reason}"):
            sqlrp.create_projection(maria, bad, "gaussian", d=4, k=2, seed=1)
        with pytest.raises(EngineLimit, match=rf"^mysql: .*{reason}"):
            sqlrp.load_projection(maria, bad)
    assert sorted(sqlrp.list_projections(maria)["name"]) == sorted(names)
    sqlrp.drop_projection(maria, "RP")
    assert sorted(sqlrp.list_projections(maria)["name"]) == sorted(set(names) - {"RP"})


@contextlib.contextmanager
def small_packet(maria_url: str, database: str, limit: int):
    """A new connection while the server's ``max_allowed_packet`` is ``limit`` bytes, then 16 MiB again."""
    admin = sa.create_engine(maria_url)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"SET GLOBAL max_allowed_packet = {limit}")
    try:
        with sqlrp.connect(f"{maria_url}/{database}") as db:
            yield db
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql("SET GLOBAL max_allowed_packet = 16777216")
        admin.dispose()


def test_registry_rows_and_frames_are_written_within_the_packet(maria, maria_url):
    """A dense 120 x 100 matrix is 12,000 registry rows, about 400 KB as one multi-row INSERT (the driver
    joins up to 1 MB): over a 64 KiB packet the server dropped the connection.  The rows go in
    batches that fit; so do a frame's."""
    limit = 64 * 1024
    with small_packet(maria_url, maria.fetchall("SELECT DATABASE()")[0][0], limit) as db:
        assert db.sql_dialect.max_statement_bytes == limit - PACKET_HEADROOM
        p = sqlrp.create_projection(db, "dense", "gaussian", d=120, k=100, seed=1)
        assert db.fetchall("SELECT COUNT(*) FROM sqlrp_linear_entry")[0][0] == 12_000
        assert np.array_equal(sqlrp.load_projection(db, "dense").linear.dense(), p.linear.dense())
        X = np.random.default_rng(15).normal(size=(600, 30))
        db.write_dataframe("wide", text_frame(X, [f"row {i} " + "é" * 20 for i in range(600)]))
        back = db.query_df("SELECT * FROM `wide`").set_index("id").loc[[f"row {i} " + "é" * 20 for i in range(600)]]
        assert np.array_equal(back.to_numpy(dtype=float), X)
        with pytest.raises(EngineLimit, match=r"^mysql: a row of about .* max_allowed_packet"):
            db.write_dataframe("huge", pd.DataFrame({"id": [1], "text": ["x" * limit]}))
        assert db.fetchall("SELECT 1") == [(1,)]


def test_bit_count_and_row_hash_as_the_search_spells_them(maria):
    """BIT_COUNT counts the 64 bits of a BIGINT's two's complement; the row hash tells NULL from the
    text 'NULL' and a changed value, and 5,000 of them sum without overflow (a DECIMAL)."""
    from sqlglot import exp

    from sqlrp.compiler import col
    from sqlrp.dialects import get_dialect

    dialect = get_dialect("mysql")
    big = exp.DataType.build("BIGINT")
    words = [exp.Cast(this=exp.Literal.number(v), to=big) for v in ("-1", "5")]
    words.append(
        exp.Cast(this=exp.Sub(this=exp.Literal.number(-(2**63 - 1)), expression=exp.Literal.number(1)), to=big)
    )
    counts = [dialect.popcount(w) for w in words]
    xor = dialect.popcount(exp.BitwiseXor(this=words[0].copy(), expression=words[1].copy()))
    assert maria.fetchall(dialect.render(exp.select(*counts, xor)))[0] == (64, 2, 1, 62)
    maria.write_dataframe("h", pd.DataFrame({"id": np.arange(5000, dtype=np.int64)}))
    total = exp.select(exp.Sum(this=dialect.row_hash([col("id")]))).from_("h")
    assert int(maria.fetchall(dialect.render(total))[0][0]) > 2**64  # 5,000 64-bit hashes, summed exactly
    values = [exp.Null(), exp.Literal.string("NULL"), exp.Literal.number(1), exp.Literal.number(2)]
    hashes = maria.fetchall(dialect.render(exp.select(*[dialect.row_hash([v, exp.Literal.number(0)]) for v in values])))
    assert len(set(hashes[0])) == 4


def test_exact_keys_covers_partitions_orders_pairs_and_memberships():
    """The class of the collation defect, in the SQL the search and the evaluation write: a window's
    PARTITION BY, an ORDER BY of a key, a pair order ``a._id < b._id``, a membership ``_id IN (SELECT
    _id ...)`` and the query id joining the id (``_qid = _id``) are compared byte for byte; a feature's
    comparison is left as it is (-0.0 = 0.0); a second render changes nothing."""
    import sqlglot

    from sqlrp.dialects import get_dialect

    statement = sqlglot.parse_one(
        "SELECT ROW_NUMBER() OVER (PARTITION BY t._qid ORDER BY t._d, t._id) FROM t JOIN q ON q._id = t._qid "
        "JOIN x ON x.v = t.v WHERE a._id < b._id AND a.x < b.x AND t._id IN (SELECT _id FROM s) ORDER BY t._id",
        read="mysql",
    )
    profile = get_dialect("mysql")
    once = profile.render(statement)
    assert profile.render(statement) == once
    assert "PARTITION BY t._qid, CAST(t._qid AS BINARY)" in once
    assert "ORDER BY t._d, CASE WHEN CHARSET(t._id) = 'binary' THEN t._id END, CAST(t._id AS BINARY))" in once
    assert "(q._id = t._qid AND CAST(q._id AS BINARY) = CAST(t._qid AS BINARY))" in once
    assert "(a._id < b._id OR (a._id = b._id AND CAST(a._id AS BINARY) < CAST(b._id AS BINARY)))" in once
    assert "(t._id, CAST(t._id AS BINARY)) IN (SELECT _id, CAST(_id AS BINARY) FROM s)" in once
    assert " AND a.x < b.x AND " in once


def test_index_names_are_keys_too(maria):
    """An index named with a trailing space would be the key of the index without it: refused in one
    line, nothing built; 'Idx' and 'idx' are two indexes."""
    X = np.random.default_rng(16).normal(size=(30, 3))
    maria.write_dataframe("pts", text_frame(X, list(range(30))))
    with pytest.raises(EngineLimit, match=r"^mysql: the index name 'idx ' ends in a space"):
        sqlrp.build_index(maria, "pts", "id", "idx ", lists=2, calibration_queries=0)
    for name in ("idx", "Idx"):
        sqlrp.build_index(maria, "pts", "id", name, lists=2, calibration_queries=0)
    assert sorted(sqlrp.list_indexes(maria)["name"]) == ["Idx", "idx"]
    with pytest.raises(EngineLimit, match=r"^mysql: the index name 'idx ' ends in a space"):
        sqlrp.search(maria, "idx ", "pts", "id", top=1)


def test_processes_that_migrate_at_once_take_turns(maria, maria_url):
    """Four connections migrate one fresh database at once: under the named lock (GET_LOCK) one
    creates the registry, the others find it made -- no "Table already exists"; the lock is released."""
    import threading

    url, errors, applied = database_url(maria_url, maria), [], []

    def migrate() -> None:
        try:
            with sqlrp.connect(url) as db:
                applied.append(sqlrp.migrate(db))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(map(len, applied)) == [0, 0, 0, len(VERSIONS)]
    assert maria.fetchall("SELECT IS_FREE_LOCK('sqlrp migrations')") == [(1,)]
