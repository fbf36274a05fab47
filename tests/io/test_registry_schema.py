"""The registry defined once (``sqlrp/registry/schema.py``): ``migrations/`` is its rendering, an engine
without a registry is refused with what to do, and the definition holds together."""

from __future__ import annotations

from pathlib import Path

import pytest

import sqlrp
from sqlrp.core.errors import EngineLimit
from sqlrp.dialects import get_dialect
from sqlrp.registry.schema import TABLES, VERSION_TABLE, VERSIONS, migration_files, render_file

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
FOLDERS = sorted(p.name for p in MIGRATIONS.iterdir() if p.is_dir() and not p.name.startswith("_"))


def test_the_engines_have_their_record():
    """A record for each engine that had hand-written migrations; a new engine may add its own folder
    (``python -m migrations ENGINE``), checked like the others, but needs none: sqlrp renders its
    registry itself."""
    assert {"clickhouse", "duckdb", "postgres", "spark", "sqlite"} <= set(FOLDERS)


@pytest.mark.parametrize("dialect", FOLDERS)
def test_migrations_folder_is_the_rendering(dialect):
    """Each file of ``migrations/<dialect>/`` is what the definition renders; after a change to the
    definition (or to a dialect's registry hooks), ``python -m migrations`` writes them again."""
    folder = MIGRATIONS / dialect
    want = {"bootstrap.sql": render_file(None, dialect), **{v.file: render_file(v, dialect) for v in VERSIONS}}
    assert sorted(p.name for p in folder.iterdir()) == sorted(want), "run: python -m migrations"
    for name, text in want.items():
        assert (folder / name).read_text() == text, f"migrations/{dialect}/{name} differs: run python -m migrations"


@pytest.mark.parametrize("dialect", ["trino", "snowflake", "bigquery", "tsql", "oracle"])
def test_an_engine_without_a_registry_is_refused_with_what_to_do(dialect):
    with pytest.raises(EngineLimit, match=rf"^{dialect}: .*projections export.*matrix=TABLE"):
        migration_files(dialect)
    with pytest.raises(EngineLimit, match=rf"^{dialect}: "):
        sqlrp.registry.store.bootstrap_sql(dialect)


def test_a_sqlalchemy_engine_without_a_registry_refuses_to_store():
    """``create_projection`` through SQLAlchemy on an engine sqlrp keeps no registry on: an
    :class:`EngineLimit` naming it, before any statement runs (here SQLite's driver under the name of
    a dialect without a registry, registered with SQLAlchemy by this test)."""
    pytest.importorskip("sqlalchemy")
    from sqlalchemy import create_engine
    from sqlalchemy.dialects import registry
    from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

    class TrinoNamed(SQLiteDialect_pysqlite):
        name = "trino"

    globals()["TrinoNamed"] = TrinoNamed
    registry.register("sqlrptrino", __name__, "TrinoNamed")
    engine = create_engine("sqlrptrino://")
    with sqlrp.connect(engine) as db:
        assert db.dialect == "trino"
        with pytest.raises(EngineLimit, match=r"^trino: sqlrp keeps no registry.*projections export"):
            sqlrp.create_projection(db, "rp", "achlioptas", d=4, k=2)
        assert db.table_names() == []  # nothing was created
    engine.dispose()


def test_the_definition_holds_together():
    numbers = [v.number for v in VERSIONS]
    assert numbers == list(range(1, len(VERSIONS) + 1))
    for table in (VERSION_TABLE, *TABLES):
        names = [c.name for c in table.columns]
        assert len(set(names)) == len(names) and set(table.key) <= set(names), table.name
        for column in table.columns:
            assert (column.since or table.since) >= table.since
            assert column.since is None or column.since in numbers
            assert not (column.null and column.name in table.key), f"{table.name}.{column.name}: a key is never NULL"
    assert {t.since for t in TABLES} <= set(numbers)


def test_dialect_hooks_shape_the_tables():
    ch = render_file(VERSIONS[0], "clickhouse")
    assert '"projection" String' in ch and "ENGINE=MergeTree" in ch and "PRIMARY KEY" not in ch
    assert "seed Nullable(Int64)" in ch and "scale Float64" in ch  # Nullable only where NULL may be
    spark = render_file(VERSIONS[0], "spark")
    assert "USING PARQUET" in spark and "PRIMARY KEY" not in spark and "NOT NULL" not in spark
    assert "params JSONB NOT NULL" in render_file(VERSIONS[0], "postgres")
    sqlite = render_file(VERSIONS[0], "sqlite")
    assert sqlite.count("WITHOUT ROWID") == 4 and "params TEXT NOT NULL" in sqlite  # composite keys only
    assert get_dialect("duckdb").keeps_registry and not get_dialect("snowflake").keeps_registry
