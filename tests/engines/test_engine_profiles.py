"""Engine profiles: the compiler never emits what an engine's limits reject, splits what it can into
staged blocks (exact, tested on DuckDB and PostgreSQL with the limits of other engines), refuses the
rest naming the engine, and picks strategies per engine."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import sqlrp
from sqlrp.compiler import Source, compile_sql, compile_statements
from sqlrp.compiler.strategies import choose
from sqlrp.core.errors import EngineLimit
from sqlrp.core.layout import Formulation, Target
from sqlrp.core.plan import Plan
from sqlrp.dialects import get_dialect
from sqlrp.methods import make_projection
from sqlrp.pipeline.materialise import run
from testkit.frames import assert_parity, long_frame, wide_frame


def limited(name: str, **limits) -> sqlrp.dialects.SqlrpDialect:
    """``name``'s dialect with other limits (a copy: the cached one is untouched)."""
    dialect = copy.copy(get_dialect(name))
    for key, value in limits.items():
        setattr(dialect, key, value)
    return dialect


@pytest.fixture
def data():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((50, 40)) * 10
    X[rng.random(X.shape) < 0.3] = 0.0
    return X


def test_every_profile_cites_its_limits():
    for name in ("sqlite", "clickhouse", "spark", "snowflake", "bigquery", "tsql", "mysql", "trino", "postgres"):
        d = get_dialect(name)
        assert d.name == name
    assert get_dialect("sqlite").max_columns == 2000
    assert get_dialect("clickhouse").max_statement_bytes == 262_144
    assert get_dialect("clickhouse").max_ast_nodes == 50_000
    assert get_dialect("clickhouse").max_plan_optimizations == 10_000  # query_plan_max_optimizations_to_apply
    assert get_dialect("postgres").max_columns == 1600
    assert get_dialect("snowflake").max_statement_bytes == 1_000_000
    assert get_dialect("tsql").max_columns == 4096 and get_dialect("mysql").max_columns == 1017  # InnoDB
    assert get_dialect("spark").array_base == 0


def test_split_into_staged_blocks_is_exact(db, data):
    """A statement over the byte limit becomes staged blocks of outputs joined on the id."""
    dialect_name = db.dialect
    proj = make_projection("achlioptas", data.shape[1], 30, seed=2, s=1)
    db.write_dataframe("t", wide_frame(data))
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(data.shape[1])))
    whole = compile_sql(proj, source, db.dialect, strategy="inline")
    tight = limited(dialect_name, max_statement_bytes=len(whole.encode()) // 3)
    statements = compile_statements(Plan(proj, source, how=Formulation(strategy="inline")), tight, Target(ordered=True))
    assert len(statements.setup) >= 3 and len(statements.cleanup) == len(statements.setup)
    assert all(len(s.encode()) <= tight.max_statement_bytes for s in [*statements.setup, statements.main])
    out = run(db, statements, db.query_df)
    assert_parity(out, proj, data)
    assert not [t for t in db.table_names() if t.startswith("_sqlrp_block_")]  # cleaned up
    # into a table, through the same path
    into = compile_statements(Plan(proj, source, how=Formulation(strategy="inline")), tight, Target(into="out"))
    run(db, into, db.execute)
    assert_parity(db.query_df('SELECT * FROM "out" ORDER BY "id"'), proj, data)


def test_refused_when_nothing_splits(data):
    """A kernel projection (or a source wider than the column limit) cannot be split: refused,
    naming the engine and the limit."""
    proj = make_projection("pk-rp", 40, 8, seed=1, degree=2, t=2)
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(40)))
    tight = limited("clickhouse", max_statement_bytes=2000)
    with pytest.raises(EngineLimit, match=r"clickhouse: .*2,000"):
        compile_sql(proj, source, tight)
    wide = Source("t", "id", "wide", tuple(f"f{i}" for i in range(2100)))
    with pytest.raises(EngineLimit, match="sqlite"):
        compile_sql(make_projection("achlioptas", 2100, 4, seed=1, s=3), wide, "sqlite")


def test_inline_matrix_over_the_limit_names_the_fix():
    """A kernel's inlined matrix cannot be split by outputs: the error names the small-SQL options."""
    proj = make_projection("pk-rp", 100, 20, seed=0, degree=2, t=2, s=1)
    tight = limited("clickhouse", max_statement_bytes=50_000)
    with pytest.raises(EngineLimit, match=r"matrix='registry' or matrix=TABLE"):
        compile_sql(proj, Source("t", "id", "long"), tight, matrix="values", strategy="join")


def test_long_layout_splits_too(db, data):
    """A linear projection of a long table with its matrix inlined splits by outputs: exact."""
    proj = make_projection("achlioptas", data.shape[1], 12, seed=3, s=1)
    db.write_dataframe("t", long_frame(data))
    source = Source("t", "id", "long")
    whole = compile_sql(proj, source, db.dialect, matrix="values", strategy="join")
    tight = limited(db.dialect, max_statement_bytes=len(whole.encode()) // 2)
    statements = compile_statements(Plan(proj, source, how=Formulation("values", "join")), tight, Target(ordered=True))
    assert statements.setup
    assert_parity(run(db, statements, db.query_df), proj, data)


def test_auto_per_engine():
    proj = make_projection("achlioptas", 200, 60, seed=0, s=3)
    dense, long = Source("t", "id", "wide", tuple(f"f{i}" for i in range(200))), Source("t", "id", "long")
    assert choose(proj, dense, "duckdb") == "pairs"
    for engine in ("spark", "clickhouse", "sqlite", "snowflake", "trino"):
        assert choose(proj, dense, engine) == "inline", engine
    assert choose(proj, long, "duckdb") == "lookup" and choose(proj, long, "postgres") == "lookup"
    for engine in ("spark", "clickhouse", "sqlite", "mysql", "tsql"):
        assert choose(proj, long, engine) == "join", engine
        with pytest.raises(EngineLimit, match=f"{get_dialect(engine).name}: the lookup strategy"):
            choose(proj, long, engine, "lookup")


def test_portable_long_layout_runs_exactly(db, data):
    """The pivot without FILTER and the matrix as a CTE with column names (what SQLite, MySQL and
    unknown engines get) are exact on DuckDB and PostgreSQL too."""
    proj = make_projection("achlioptas", data.shape[1], 9, seed=4, s=3)
    db.write_dataframe("t", long_frame(data))
    portable = limited(db.dialect, filter_clause=False, values_column_names=False, ordered_array_agg=False)
    sql = compile_sql(proj, Source("t", "id", "long"), portable, matrix="values", strategy="join")
    assert "FILTER" not in sql and "WITH" in sql
    out = db.query_df(sql + ' ORDER BY "id"')
    assert_parity(out, proj, data)


def test_matrix_from_a_named_table(db, data):
    """``matrix=TABLE``: the warehouse recipe -- the matrix bulk-loaded as (vector, feature, weight)."""
    import pandas as pd

    proj = make_projection("achlioptas", data.shape[1], 7, seed=5, s=3)
    lin = proj.linear
    db.write_dataframe("rp7", pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight}))
    db.write_dataframe("t", long_frame(data))
    sql = compile_sql(proj, Source("t", "id", "long"), db.dialect, matrix="rp7", strategy="join")
    assert_parity(db.query_df(sql + ' ORDER BY "id"'), proj, data)


def test_arrays_refused_where_missing():
    proj = make_projection("achlioptas", 5, 3, seed=1, s=3)
    with pytest.raises(EngineLimit, match="sqlite: the array layout"):
        compile_sql(proj, Source("t", "id", "array", array_column="x"), "sqlite")
    with pytest.raises(EngineLimit, match="mysql: array output"):
        compile_sql(proj, Source("t", "id", "wide", ("a", "b", "c", "d", "e")), "mysql", sqlrp.Output("array"))


def test_deep_sums_are_shallow_on_sqlite():
    """SQLite refuses expressions deeper than 1,000 (a left-deep ``x + x + ...``); sums are rendered
    in nested groups of 100 terms there, and stay exact."""
    import sqlite3

    from sqlglot import exp

    from sqlrp.core.nodes import Inputs, SignedSum

    con = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError, match="too large"):
        con.execute(f"SELECT {' + '.join(['x'] * 1500)} FROM (SELECT 1.0 AS x)")
    signs = np.where(np.arange(1500) % 3 == 0, -1.0, 1.0)
    node = SignedSum.of(Inputs([exp.column("x")]), np.zeros(1500, dtype=int), signs)
    shallow = get_dialect("sqlite").render(exp.select(node).from_("(SELECT 1.0 AS x)"))
    assert con.execute(shallow).fetchone()[0] == signs.sum()


def test_snowflake_folds_plain_names():
    proj = make_projection("achlioptas", 2, 2, seed=1, s=1)
    sql = compile_sql(proj, Source("digits", "id", "wide", ("f0", "Weird Name")), "snowflake", into="out")
    assert '"DIGITS"' in sql and '"ID"' in sql and '"F0"' in sql and '"Weird Name"' in sql
    assert '"OUT"' in sql and '"P0"' in sql and '"P1"' in sql


def test_qualified_names():
    proj = make_projection("achlioptas", 2, 1, seed=1, s=1)
    src = Source("tab.le", "id", "wide", ("a", "b"), schema="sch", catalog="cat")
    sql = compile_sql(proj, src, "trino", into="out", pretty=False)
    assert 'FROM "cat"."sch"."tab.le"' in sql and 'CREATE TABLE "cat"."sch"."out"' in sql
