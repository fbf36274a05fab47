"""Issue 31, by class: every writer refuses a target the same operation reads or sqlrp owns (files
compared resolved -- symlinks, hard links, other spellings; tables as catalogue entries -- schema
and the engine's case rules), and an index's fingerprint notices rows that trade values and an id
column that changes type (a refresh then refuses and names the rebuild; a search refuses).

DuckDB and PostgreSQL (a real server) everywhere; ClickHouse (chdb) where it has the writer (tables,
indexes); SQLite and DataFusion for the table writers they have.  Under ``CI=true`` a missing chdb
fails instead of skipping.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
import warnings
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import InvalidParameter, ProjectionExists
from sqlrp.registry.transfer import export_projection
from sqlrp.search.fresh import check_fresh
from sqlrp.search.index import StaleIndex
from testkit.search_cases import clustered, frame

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module")
def chdb_engine():
    """The connection that keeps chdb's in-memory engine up for the module (one engine per process)."""
    try:
        from sqlrp.backends.clickhouse import ChdbBackend

        db = ChdbBackend(":memory:")
    except Exception as exc:  # noqa: BLE001
        if IN_CI:
            pytest.fail(f"CI=true and chdb is unavailable: {exc}")
        pytest.skip(f"chdb unavailable (CI would fail here): {exc}")
    yield db
    db.close()


@pytest.fixture
def chdb(chdb_engine):
    """A fresh ClickHouse database (chdb) per test."""
    from sqlrp.backends.clickhouse import ChdbBackend

    db = ChdbBackend(":memory:")
    database = f"r_{uuid.uuid4().hex[:12]}"
    db.execute(f"CREATE DATABASE {database}")
    db.execute(f"USE {database}")
    yield db
    chdb_engine.execute(f"DROP DATABASE IF EXISTS {database}")
    db.close()


@pytest.fixture(params=["duckdb", "postgres", "clickhouse"])
def idb(request):
    """An engine with indexes: DuckDB, PostgreSQL, ClickHouse (chdb)."""
    return request.getfixturevalue({"duckdb": "duck", "postgres": "pg", "clickhouse": "chdb"}[request.param])


def _rows(db, table: str) -> pd.DataFrame:  # noqa: ANN001
    return db.query_df(f'SELECT * FROM "{table}"' if db.dialect != "clickhouse" else f"SELECT * FROM `{table}`")


def _sorted(frame_: pd.DataFrame) -> pd.DataFrame:
    return frame_.sort_values("id").reset_index(drop=True)


def _indexed(db, rows: int = 200):  # noqa: ANN001
    """``pts`` (``rows`` x 12, ids 0..rows-1) indexed as ``ix``, and 6 queries ``qs``."""
    X = clustered(rows, 41)
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(clustered(6, 42), "qid"))
    sqlrp.build_index(db, "pts", "id", "ix", lists=6, bits=64)
    return X


def _cli(*argv: str) -> tuple[int, str]:
    """The exit code and stderr, less the note of which feature columns a file gives (not an error)."""
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(list(argv))
    return code, "".join(line for line in err.getvalue().splitlines(True) if not line.startswith("reading "))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# files: the output compared with what is read, resolved


def _parquet(path: Path, rows: int = 30) -> None:
    db = sqlrp.connect()
    X = np.random.default_rng(5).standard_normal((rows, 4))
    db.write_dataframe("t", frame(X))
    db.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    db.close()


@pytest.mark.parametrize("how", ["symlinked input", "hard-linked input", "symlinked output", "other spelling", "glob"])
def test_a_file_output_that_reaches_the_input_is_refused(tmp_path, monkeypatch, how):
    """``ln -s real.parquet link.parquet; project --table link.parquet --into real.parquet --replace``
    overwrote the source: the check compared spellings.  Now every way of naming the input file
    -- a symlink either side, a hard link, ``..``, a glob -- is refused in one line, the file untouched."""
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real.parquet"
    _parquet(real)
    before = _digest(real)
    table, into = {
        "symlinked input": ("link.parquet", "real.parquet"),
        "hard-linked input": ("hard.parquet", "real.parquet"),
        "symlinked output": ("real.parquet", "link.parquet"),
        "other spelling": ("real.parquet", f"../{tmp_path.name}/./real.parquet"),
        "glob": ("re*.parquet", "real.parquet"),
    }[how]
    (tmp_path / "link.parquet").symlink_to(real)
    os.link(real, tmp_path / "hard.parquet")
    code, err = _cli("project", "--table", table, "--id-column", "id", "--k", "2", "--into", into, "--replace")
    assert code == 2, err
    assert err.count("\n") == 1 and "reads" in err and "real.parquet" in err, err
    assert _digest(real) == before
    assert not (tmp_path / "real.parquet.sqlrp.json").exists()


def test_the_projection_read_and_definitions_are_never_overwritten(tmp_path, monkeypatch):
    """The projection file read (here: the definition beside the output being replaced) is not
    written; nor are rows written under a definition's name (``*.sqlrp.json``)."""
    monkeypatch.chdir(tmp_path)
    _parquet(tmp_path / "a.parquet")
    assert _cli("project", "--table", "a.parquet", "--id-column", "id", "--k", "2", "--into", "o.parquet")[0] == 0
    definition = tmp_path / "o.parquet.sqlrp.json"
    (tmp_path / "def.sqlrp.json").symlink_to(definition)
    before = _digest(definition)
    code, err = _cli(
        "project", "--table", "a.parquet", "--id-column", "id", "--projection", "def.sqlrp.json",
        "--into", "o.parquet", "--replace",
    )  # fmt: skip
    assert code == 2 and "projection file" in err and err.count("\n") == 1, err
    assert _digest(definition) == before
    code, err = _cli("project", "--table", "a.parquet", "--id-column", "id", "--k", "2", "--into", "x.sqlrp.json")
    assert code == 2 and ".sqlrp.json is a projection definition" in err, err
    assert not (tmp_path / "x.sqlrp.json").exists()


def test_an_export_never_overwrites_the_database_file(tmp_path):
    path = tmp_path / "store.parquet"  # a DuckDB database under a name an export also writes
    db = sqlrp.connect(f"duckdb:///{path}")
    sqlrp.create_projection(db, "p", "achlioptas", d=4, k=2, s=3, seed=1)
    db.execute("CHECKPOINT")
    before = _digest(path)
    with pytest.raises(InvalidParameter, match="the database file"):
        export_projection(db, "p", str(path), replace=True)
    assert _digest(path) == before and sqlrp.load_projection(db, "p").k == 2
    db.close()


def test_a_report_never_overwrites_the_table_it_evaluates(tmp_path, monkeypatch):
    """``evaluate --out rep`` of ``rep/metrics.csv`` wrote its metrics over the input; so did a search
    evaluation of an index whose table is ``rep/search_metrics.csv``."""
    pytest.importorskip("matplotlib")
    from sqlrp.search.evaluate import evaluate_search

    monkeypatch.chdir(tmp_path)
    (tmp_path / "rep").mkdir()
    for name in ("metrics.csv", "search_metrics.csv"):
        frame(clustered(60, 47)).to_csv(tmp_path / "rep" / name, index=False)
    before = {p.name: _digest(p) for p in (tmp_path / "rep").iterdir()}
    url = f"duckdb:///{tmp_path / 'e.duckdb'}"
    assert _cli("create", "--db", url, "--name", "p1", "--method", "achlioptas", "--d", "12", "--k", "3")[0] == 0
    options = ["--id-column", "id", "--projection", "p1", "--sample", "50", "--queries", "10", "--out", "rep"]
    code, err = _cli("evaluate", "--db", url, "--table", "rep/metrics.csv", *options)
    assert code == 2 and "the report file" in err and "input file" in err and err.count("\n") == 1, err
    with sqlrp.connect(url) as db:
        sqlrp.build_index(db, "rep/search_metrics.csv", "id", "ix", lists=2, bits=64)
        with pytest.raises(InvalidParameter, match="search_metrics.csv.*input file"):
            evaluate_search(db, "ix", queries=5, top=2, out=str(tmp_path / "rep"))
    assert {p.name: _digest(p) for p in (tmp_path / "rep").iterdir()} == before


# ----------------------------------------------------------------------------------------------
# tables: the output compared with what is read and what sqlrp owns, as catalogue entries


def test_search_into_the_indexed_table_is_refused(idb):
    """chdb replaced the user's 200-row table with the 6-row result; DuckDB refused with "Table with
    name pts does not exist!".  Now every engine names the conflict, before any work."""
    db = idb
    _indexed(db)
    before = _sorted(_rows(db, "pts"))
    for into in ("pts", "ix", "ix__lists", "ix__tops", "sqlrp_index"):
        with pytest.raises(InvalidParameter, match="cannot write|registry") as err:
            sqlrp.search(db, "ix", "qs", "qid", top=3, into=into, replace=True)
        assert "\n" not in str(err.value)
    pd.testing.assert_frame_equal(_sorted(_rows(db, "pts")), before)
    assert check_fresh(db, sqlrp.load_index(db, "ix"))
    sqlrp.search(db, "ix", "qs", "qid", top=3, into="hits")  # a name of its own is written
    assert len(_rows(db, "hits")) == 18


@pytest.mark.parametrize("table", ["ix", "ix__lists", "ix__tops"])
def test_project_into_an_index_table_is_refused(idb, table):
    """``project --into ix --replace`` replaced the index's rows and broke the index: an index's
    tables are sqlrp's, as the registry's are."""
    db = idb
    _indexed(db)
    db.write_dataframe("other", frame(clustered(20, 43)))
    before = _rows(db, table)
    with pytest.raises(InvalidParameter, match="index 'ix'.*which sqlrp owns") as err:
        sqlrp.project(db, "other", "id", method="achlioptas", k=3, seed=1, into=table, replace=True)
    assert "\n" not in str(err.value)
    assert len(_rows(db, table)) == len(before)
    sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)  # the index is whole


def test_an_index_build_never_overwrites_another_index_or_its_source(idb):
    db = idb
    _indexed(db)
    db.write_dataframe("more", frame(clustered(50, 44)))
    with pytest.raises((InvalidParameter, ProjectionExists), match="ix__lists"):  # index ix's lists table
        sqlrp.build_index(db, "more", "id", "ix__lists", lists=2, bits=64)
    with pytest.raises(InvalidParameter, match="source table"):
        sqlrp.build_index(db, "more", "id", "more", lists=2, bits=64)
    sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)


def test_case_rules_are_the_engines(duck, pg):
    """DuckDB takes ``"IX"`` for ``ix`` (refused); PostgreSQL keeps them apart (written)."""
    for db in (duck, pg):
        _indexed(db)
        db.write_dataframe("other", frame(clustered(20, 43)))
    with pytest.raises(InvalidParameter, match="index 'ix'"):
        sqlrp.project(duck, "other", "id", method="achlioptas", k=3, seed=1, into="IX", replace=True)
    sqlrp.project(pg, "other", "id", method="achlioptas", k=3, seed=1, into="IX")
    assert len(_rows(pg, "IX")) == 20 and len(_rows(pg, "ix")) == 200


def test_schemas_are_resolved_not_spelled(pg):
    """An index in schema ``other`` owns ``other.ix``, not ``ix`` of the current schema; a search of
    queries in ``other`` must not write ``other.pts``, nor a query table named with its schema."""
    current = pg.fetchall("SELECT current_schema()")[0][0]
    pg.execute("CREATE SCHEMA IF NOT EXISTS other")
    try:
        for schema in ("other", current):
            pg.write_dataframe("tmp_pts", frame(clustered(200, 41)))
            pg.execute(f'ALTER TABLE tmp_pts SET SCHEMA "{schema}"')
            pg.execute(f'ALTER TABLE "{schema}".tmp_pts RENAME TO pts')
            pg.write_dataframe("tmp_qs", frame(clustered(6, 42), "qid"))
            pg.execute(f'ALTER TABLE tmp_qs SET SCHEMA "{schema}"')
            pg.execute(f'ALTER TABLE "{schema}".tmp_qs RENAME TO qs')
        sqlrp.build_index(pg, "pts", "id", "ix", lists=6, bits=64, schema="other")
        with pytest.raises(InvalidParameter, match="index 'ix'"):
            sqlrp.project(pg, "qs", "qid", method="achlioptas", k=3, seed=1, into="ix", schema="other")
        sqlrp.project(pg, "qs", "qid", method="achlioptas", k=3, seed=1, into="ix")  # current.ix: no index's
        # an index "ix__lists" here; rebuilding "ix" from this schema would write its rows table
        sqlrp.build_index(pg, "pts", "id", "ix__lists", lists=6, bits=64)
        with pytest.raises(InvalidParameter, match="index 'ix__lists''s rows table, which sqlrp owns"):
            sqlrp.build_index(pg, "pts", "id", "ix", lists=6, bits=64, replace=True)
        sqlrp.search(pg, "ix", "qs", "qid", top=3, schema="other", strict=True)  # the old index is whole
        with pytest.raises(InvalidParameter, match="source table"):
            sqlrp.search(pg, "ix", "qs", "qid", top=3, schema="other", into="pts", replace=True)
        with pytest.raises(InvalidParameter, match="query table"):  # the schema spelled out: the same table
            sqlrp.search(pg, "ix", "qs", "qid", top=3, schema=current, into="qs", replace=True)
        sqlrp.search(pg, "ix", "qs", "qid", top=3, into="pts", replace=True)  # current.pts: not the indexed table
        assert len(pg.query_df("SELECT * FROM other.pts")) == 200
    finally:
        pg.execute("DROP SCHEMA other CASCADE")


@pytest.mark.parametrize("engine", ["duckdb", "postgres", "clickhouse", "sqlite"])
def test_a_table_read_through_views_is_never_written(request, tmp_path, engine):
    """The input is a view of a view of ``t``: ``t`` is what the operation reads, and is refused."""
    if engine == "sqlite":
        db = sqlrp.connect(f"sqlite:///{tmp_path / 'x.db'}")
    else:
        db = request.getfixturevalue({"duckdb": "duck", "postgres": "pg", "clickhouse": "chdb"}[engine])
    db.write_dataframe("t", frame(clustered(20, 46)))
    db.execute("CREATE VIEW v AS SELECT * FROM t WHERE id > 2")
    db.execute("CREATE VIEW v2 AS SELECT * FROM v")
    with pytest.raises(InvalidParameter, match="under the view 'v'") as err:
        sqlrp.project(db, "v2", "id", method="achlioptas", k=3, seed=1, into="t", replace=True)
    assert "\n" not in str(err.value)
    assert len(_rows(db, "t")) == 20
    sqlrp.project(db, "v2", "id", method="achlioptas", k=3, seed=1, into="out")
    assert len(_rows(db, "out")) == 17


def test_a_file_read_through_a_view_is_never_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _parquet(tmp_path / "real.parquet")
    before = _digest(tmp_path / "real.parquet")
    url = f"duckdb:///{tmp_path / 'u.duckdb'}"
    db = sqlrp.connect(url)
    db.execute("CREATE VIEW v AS SELECT * FROM read_parquet('real.parquet')")
    db.execute("CREATE VIEW w AS SELECT * FROM 'real.parquet'")
    db.close()
    for view in ("v", "w"):
        options = ["--id-column", "id", "--k", "2", "--into", "real.parquet", "--replace"]
        code, err = _cli("project", "--db", url, "--table", view, *options)
        assert code == 2 and f"under the view '{view}'" in err and err.count("\n") == 1, err
    assert _digest(tmp_path / "real.parquet") == before


@pytest.mark.parametrize("engine", ["sqlite", "datafusion"])
def test_project_into_the_input_spelled_otherwise_is_refused(tmp_path, engine):
    """SQLite and DataFusion have no indexes; their table writer still refuses the input under
    another case where the engine takes it for the same table, and the registry's tables."""
    db = sqlrp.connect(f"sqlite:///{tmp_path / 'x.db'}") if engine == "sqlite" else None
    if db is None:
        pytest.importorskip("datafusion")
        db = sqlrp.connect("datafusion://")
    db.write_dataframe("pts", frame(clustered(20, 45)))
    into = "PTS" if engine == "sqlite" else "pts"
    with pytest.raises(InvalidParameter):
        sqlrp.project(db, "pts", "id", method="achlioptas", k=3, seed=1, into=into, replace=True)
    with pytest.raises(InvalidParameter, match="registry"):
        sqlrp.project(db, "pts", "id", method="achlioptas", k=3, seed=1, into="sqlrp_projection", replace=True)
    assert len(db.query_df("SELECT * FROM pts")) == 20
    db.close()


# ----------------------------------------------------------------------------------------------
# the fingerprint: rows as wholes, and the id's type


def _sql(db, text: str) -> str:  # noqa: ANN001
    return text.replace('"', "`") if db.dialect == "clickhouse" else text


def _update_id(db, old, new) -> None:  # noqa: ANN001
    if db.dialect == "clickhouse":
        db.execute(f"ALTER TABLE pts UPDATE id = {new} WHERE id = {old} SETTINGS mutations_sync = 1")
    else:
        db.execute(f"UPDATE pts SET id = {new} WHERE id = {old}")


def test_rows_that_trade_ids_make_the_index_stale(idb):
    """PostgreSQL's row hash is linear in its fields' hashes, so a sum of row hashes did not move when
    two rows swapped ids: a strict search passed 11 times in 20.  Every swap is caught now (and a
    swap back is fresh again), on every engine with indexes."""
    db = idb
    _indexed(db)
    rng = np.random.default_rng(7)
    for _ in range(10):
        a, b = (int(v) for v in rng.choice(200, 2, replace=False))
        _update_id(db, a, -1)
        _update_id(db, b, a)
        _update_id(db, -1, b)
        with pytest.raises(StaleIndex, match="changed since index 'ix'"):
            sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)
        _update_id(db, a, -1)
        _update_id(db, b, a)
        _update_id(db, -1, b)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert check_fresh(db, sqlrp.load_index(db, "ix"))


def test_rows_that_trade_a_feature_or_change_an_id_make_the_index_stale(idb):
    db = idb
    X = _indexed(db)
    col = '"f3"' if db.dialect != "clickhouse" else "f3"
    a, b = 11, 12
    assert X[a, 3] != X[b, 3]
    if db.dialect == "clickhouse":
        for i, v in ((a, float(X[b, 3])), (b, float(X[a, 3]))):
            db.execute(f"ALTER TABLE pts UPDATE {col} = {v!r} WHERE id = {i} SETTINGS mutations_sync = 1")
    else:
        swap = f"CASE WHEN id = {a} THEN {float(X[b, 3])!r} ELSE {float(X[a, 3])!r} END"
        db.execute(f"UPDATE pts SET {col} = {swap} WHERE id IN ({a}, {b})")
    with pytest.raises(StaleIndex):
        sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)
    sqlrp.build_index(db, "pts", "id", "ix", incremental=True)
    sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)
    _update_id(db, 5, 1005)
    with pytest.raises(StaleIndex):
        sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)


def _retype(db, kind: str) -> None:  # noqa: ANN001
    """The id column becomes DOUBLE (ids below 5 get + 0.25) or TEXT."""
    if db.dialect == "clickhouse":
        db.execute(f"ALTER TABLE pts MODIFY COLUMN id {'Float64' if kind == 'DOUBLE' else 'String'}")
        if kind == "DOUBLE":
            db.execute("ALTER TABLE pts UPDATE id = id + 0.25 WHERE id < 5 SETTINGS mutations_sync = 1")
        return
    db.execute(f"ALTER TABLE pts ALTER id TYPE {'DOUBLE PRECISION' if kind == 'DOUBLE' else kind}")
    if kind == "DOUBLE":
        db.execute("UPDATE pts SET id = id + 0.25 WHERE id < 5")


@pytest.mark.parametrize("kind", ["DOUBLE", "TEXT"])
def test_an_id_column_that_changes_type_refuses_the_refresh_and_the_search(idb, kind):
    """``ALTER TABLE pts ALTER id TYPE DOUBLE; UPDATE ... id + 0.25`` then ``--incremental``: the new
    ids were cast into the index's BIGINT ids and a strict search returned the wrong ids; on
    PostgreSQL a TEXT id failed the refresh with ``operator does not exist``.  Now the refresh refuses
    in one line naming the rebuild, a search refuses, and the rebuild it names gives exact results."""
    db = idb
    X = _indexed(db)
    _retype(db, kind)
    with pytest.raises(StaleIndex, match=r"again with replace=True \(table='pts' id_column='id' name='ix'\)"):
        sqlrp.build_index(db, "pts", "id", "ix", incremental=True)
    for strict in (True, False):
        with pytest.raises(StaleIndex, match="id column 'id'.*replace=True"):
            sqlrp.search(db, "ix", "qs", "qid", top=3, strict=strict)
    sqlrp.build_index(db, "pts", "id", "ix", replace=True, lists=6, bits=64)
    got = sqlrp.search(db, "ix", "qs", "qid", top=3, candidates=200, probes=6, strict=True)
    exact = sqlrp.search(db, "ix", "qs", "qid", top=3, exact=True)
    assert list(got["id"].astype(str)) == list(exact["id"].astype(str))
    if kind == "DOUBLE":  # the ids are the table's: 0.25, 1.25 ... where they were moved
        ids = np.arange(200, dtype=np.float64)
        ids[:5] += 0.25
        Q = clustered(6, 42)
        order = np.argsort(((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2), axis=1, kind="stable")[:, :3]
        np.testing.assert_array_equal(exact["id"].to_numpy(dtype=np.float64), ids[order].ravel())


def test_an_index_of_an_older_sqlrp_still_notices_a_type_change(db):
    """An index built before the id type was recorded compares with its own id column's type."""
    _indexed(db)
    params = json.loads(db.fetchall("SELECT params FROM sqlrp_index WHERE name = 'ix'")[0][0])
    assert params.pop("id_type")
    db.execute("UPDATE sqlrp_index SET params = ? WHERE name = 'ix'", [json.dumps(params)])
    sqlrp.search(db, "ix", "qs", "qid", top=3, strict=True)  # same type: fresh
    _retype(db, "DOUBLE")
    with pytest.raises(StaleIndex, match="replace=True"):
        sqlrp.build_index(db, "pts", "id", "ix", incremental=True)


def test_the_cli_refuses_a_retyped_refresh_in_one_line(tmp_path):
    url = f"duckdb:///{tmp_path / 'x.duckdb'}"
    db = sqlrp.connect(url)
    _indexed(db)
    _retype(db, "DOUBLE")
    db.close()
    code, err = _cli("index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "ix", "--incremental")
    assert code == 3 and err.count("\n") == 1, err  # an input error
    assert "was BIGINT when index 'ix' was built and is DOUBLE now" in err, err
    assert "again with --replace (--table=pts --id-column=id --name=ix)" in err, err
    search = ["search", "--db", url, "--index", "ix", "--query-table", "qs", "--query-id-column", "qid"]
    code, err = _cli(*search, "--strict")
    assert code == 3 and err.count("\n") == 1 and "--replace" in err, err
