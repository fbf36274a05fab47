"""Bad input gets a clear error naming the problem and the fix, and nothing is written."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import psycopg
import pytest

import sqlrp
from sqlrp import api
from sqlrp.methods import make_projection
from sqlrp.registry.store import REGISTRY_TABLES
from testkit.frames import array_frame, wide_frame

DB_ERRORS = (duckdb.Error, psycopg.Error)
HOSTILE = ['we"ird', "semi;colon", "has space", "ünïcødé_表", "select", "Robert'); DROP TABLE t;--", "a`b"]


def tables(db):
    return set(
        db.query_df("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")[
            "table_name"
        ]
    )


def test_unknown_table(db):
    with pytest.raises(sqlrp.InputError, match="no table named 'nope'"):
        sqlrp.project(db, "nope", "id", k=3)


def test_unknown_columns(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 2))))
    with pytest.raises(sqlrp.InputError, match="no id column 'key'.*columns are: id, f0, f1"):
        sqlrp.project(db, "t", "key", k=3)
    with pytest.raises(sqlrp.InputError, match="no feature column 'f9'"):
        sqlrp.project(db, "t", "id", k=3, columns=["f0", "f9"])


def test_non_numeric_feature_column(db):
    df = wide_frame(np.ones((3, 2)))
    df["label"] = ["a", "b", "c"]
    db.write_dataframe("t", df)
    with pytest.raises(sqlrp.InputError, match="column 'label' .* not a number"):
        sqlrp.project(db, "t", "id", k=3, columns=["f0", "label"])
    # the default picks the numeric columns only
    assert list(sqlrp.project(db, "t", "id", k=2).columns) == ["id", "p0", "p1"]


@pytest.mark.parametrize("bad", [None, np.nan])
def test_null_or_nan_features_error_by_default(db, bad):
    X = np.arange(12, dtype=float).reshape(4, 3)
    X[2, 1] = np.nan
    df = wide_frame(X)
    if bad is None:
        df["f1"] = df["f1"].astype(object).where(df["f1"].notna(), None)
    db.write_dataframe("t", df)
    before = tables(db)
    with pytest.raises(sqlrp.InputError, match=r"NULL or NaN .*id 2.*nulls='zero'"):
        sqlrp.project(db, "t", "id", k=2, s=1, into="out")
    assert "out" not in tables(db) and tables(db) - before <= REGISTRY_TABLES


def test_nulls_as_zero_option(db):
    X = np.arange(12, dtype=float).reshape(4, 3)
    df = wide_frame(X)
    df["f1"] = df["f1"].astype(object)
    df.loc[2, "f1"] = None
    db.write_dataframe("t", df)
    out = sqlrp.project(db, "t", "id", "z", k=2, s=1, nulls="zero")
    X0 = X.copy()
    X0[2, 1] = 0.0
    assert np.allclose(out.drop(columns="id").to_numpy(), sqlrp.transform(sqlrp.load_projection(db, "z"), X0))
    # NaN is not NULL: still an error with nulls='zero'
    db.write_dataframe("t2", df)
    db.execute('UPDATE "t2" SET "f0" = CAST(\'NaN\' AS DOUBLE PRECISION) WHERE "id" = 1')
    with pytest.raises(sqlrp.InputError, match="id 1"):
        sqlrp.project(db, "t2", "id", "z", nulls="zero")


def test_infinite_features_are_refused_by_both_checks(db):
    """DuckDB's check first sums each row (NaN if +inf meets -inf, inf for one infinity); the exact
    check then names the row.  Infinity is refused like NaN (issue 13, B1)."""
    X = np.arange(12, dtype=float).reshape(4, 3)
    X[1, 0], X[1, 2] = np.inf, -np.inf
    db.write_dataframe("t", wide_frame(X))
    proj = make_projection("achlioptas", 3, 2, seed=0, s=1)
    with pytest.raises(sqlrp.InputError, match=r"infinite .*\(rows with id 1\)"):
        api.check_source(db, proj, api.plan(db, "t", "id", proj).source)
    X[1] = 1.0
    X[2, 1] = np.inf
    db.write_dataframe("t2", wide_frame(X))
    with pytest.raises(sqlrp.InputError, match=r"\(rows with id 2\)"):
        api.check_source(db, proj, api.plan(db, "t2", "id", proj).source)
    X[2, 1] = 5.0
    db.write_dataframe("t3", wide_frame(X))
    api.check_source(db, proj, api.plan(db, "t3", "id", proj).source)  # finite again: no error


def test_array_of_wrong_length_and_nan_elements(db):
    df = array_frame(np.ones((4, 5)))
    df.at[1, "x"] = np.ones(4)
    db.write_dataframe("a", df)
    with pytest.raises(sqlrp.InputError, match=r"length is not d = 5.*id 1"):
        sqlrp.project(db, "a", "id", k=2, layout="array", d=5)
    good = array_frame(np.ones((3, 5)))
    good.at[2, "x"] = np.array([1, 2, np.nan, 4, 5.0])
    db.write_dataframe("b", good)
    with pytest.raises(sqlrp.InputError, match="id 2"):
        sqlrp.project(db, "b", "id", k=2, layout="array")


def test_long_feature_out_of_range(db):
    db.write_dataframe("l", pd.DataFrame({"id": [0, 0, 1], "feature": [0, 7, 1], "value": [1.0, 2.0, 3.0]}))
    sqlrp.create_projection(db, "five", "achlioptas", d=5, k=2)
    with pytest.raises(sqlrp.InputError, match=r"outside \[0, 5\).*id 0"):
        sqlrp.project(db, "l", "id", "five", layout="long")


def test_stored_projection_on_wrong_d(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 4))))
    sqlrp.create_projection(db, "d3", "achlioptas", d=3, k=2)
    with pytest.raises(sqlrp.InputError, match="expects d = 3 features but table 't' gives 4"):
        sqlrp.project(db, "t", "id", "d3")
    # the fix the message names works
    assert sqlrp.project(db, "t", "id", "d3", columns=["f0", "f1", "f2"]).shape == (3, 3)


@pytest.mark.parametrize("k, s, match", [(0, 3, "k .* >= 1"), (5, 0.5, "s must be >= 1")])
def test_bad_k_and_s(db, k, s, match):
    db.write_dataframe("t", wide_frame(np.ones((3, 4))))
    with pytest.raises(sqlrp.InvalidParameter, match=match):
        sqlrp.project(db, "t", "id", k=k, s=s)


def test_empty_table_gives_empty_result(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 4))))
    db.execute('DELETE FROM "t"')
    out = sqlrp.project(db, "t", "id", k=3)
    assert out.shape == (0, 4)
    sqlrp.project(db, "t", "id", k=3, into="empty_out")
    assert db.fetchall('SELECT count(*) FROM "empty_out"')[0][0] == 0


def test_empty_long_table_needs_d(db):
    db.write_dataframe("l", pd.DataFrame({"id": [1], "feature": [0], "value": [1.0]}))
    db.execute('DELETE FROM "l"')
    with pytest.raises(sqlrp.InputError, match="pass d explicitly"):
        sqlrp.project(db, "l", "id", k=2, layout="long")
    assert sqlrp.project(db, "l", "id", k=2, layout="long", d=4).shape == (0, 3)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_identifiers(db, name):
    X = np.random.default_rng(1).standard_normal((5, 3))
    cols = [f"{name} {i}" for i in range(3)]
    db.write_dataframe(name, wide_frame(X, cols, id_name=f"{name} id"))
    out = sqlrp.project(db, name, f"{name} id", f"proj {name}", k=2, s=1, prefix=f"{name}_p")
    assert list(out.columns) == [f"{name} id", f"{name}_p0", f"{name}_p1"]
    want = sqlrp.transform(sqlrp.load_projection(db, f"proj {name}"), X)
    assert np.allclose(out.drop(columns=f"{name} id").to_numpy(), want, rtol=1e-9)
    sqlrp.project(db, name, f"{name} id", f"proj {name}", into=f"{name} out")
    assert {name, f"{name} out"} <= tables(db)


def test_failed_materialisation_leaves_nothing_and_keeps_old_output(db):
    df = wide_frame(np.ones((10, 2)))
    df["txt"] = ["1.5"] * 10
    df.loc[7, "txt"] = "not a number"
    db.write_dataframe("src", df)
    db.execute('CREATE VIEW "bad" AS SELECT "id", "f0", CAST("txt" AS DOUBLE PRECISION) AS "f1" FROM "src"')
    with pytest.raises(DB_ERRORS):  # the database's own conversion error, mid-query
        sqlrp.project(db, "bad", "id", "b", k=2, into="out", check=False)
    assert "out" not in tables(db)
    # an existing output survives a failed replace
    sqlrp.project(db, "src", "id", "ok", k=2, columns=["f0"], into="out2")
    with pytest.raises(DB_ERRORS):
        sqlrp.project(db, "bad", "id", "b2", k=2, columns=["f0", "f1"], into="out2", replace=True, check=False)
    assert db.fetchall('SELECT count(*) FROM "out2"')[0][0] == 10
    assert db.fetchall('SELECT count(*) FROM "src"')[0][0] == 10  # the source is untouched


def test_output_exists_and_output_is_input(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 2))))
    sqlrp.project(db, "t", "id", k=2, into="o")
    with pytest.raises(sqlrp.ProjectionExists, match="already exists.*replace=True"):
        sqlrp.project(db, "t", "id", k=2, into="o")
    with pytest.raises(sqlrp.InvalidParameter, match="must not be the input"):
        sqlrp.project(db, "t", "id", k=2, into="t", replace=True)


def test_output_name_clash(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 2)), id_name="p0"))
    with pytest.raises(sqlrp.InvalidParameter, match="'p0' would appear twice.*prefix="):
        sqlrp.project(db, "t", "p0", k=2)


def test_options_that_a_stored_projection_would_ignore(db):
    db.write_dataframe("t", wide_frame(np.ones((3, 4))))
    sqlrp.project(db, "t", "id", "w", k=2, s=3)
    sqlrp.project(db, "t", "id", "w", k=2, s=3)  # the same options again: fine
    with pytest.raises(sqlrp.InvalidParameter, match="'w' has method achlioptas, not p-rp"):
        sqlrp.project(db, "t", "id", "w", method="p-rp", m=30)
    with pytest.raises(sqlrp.InvalidParameter, match="other s"):
        sqlrp.project(db, "t", "id", "w", s=1)


def test_float_overflow_matches_the_dialect_flag(db):
    """``nan_propagating_sums`` (the sum-first NULL/NaN check) holds only where float sums overflow
    to infinity: DuckDB does, PostgreSQL raises."""
    from sqlrp.dialects import get_dialect

    sql = "SELECT CAST(1e308 AS DOUBLE PRECISION) + CAST(1e308 AS DOUBLE PRECISION)"
    if get_dialect(db.dialect).nan_propagating_sums:
        assert db.fetchall(sql)[0][0] == float("inf")
    else:
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            db.fetchall(sql)


def test_output_in_a_schema_is_never_the_source(db):
    """``into`` goes to the source's schema: naming the source there is refused, ``replace`` or not."""
    db.execute('CREATE SCHEMA "s"')
    db.execute('CREATE TABLE "s"."t" ("id" BIGINT, "f" DOUBLE PRECISION)')
    db.execute('INSERT INTO "s"."t" VALUES (1, 2.0)')
    with pytest.raises(sqlrp.InvalidParameter, match="must not be the input"):
        sqlrp.project(db, "t", "id", k=2, schema="s", into="t", replace=True)
    assert db.fetchall('SELECT * FROM "s"."t"') == [(1, 2.0)]


def test_names_that_differ_only_in_case(db):
    """DuckDB matches quoted names ignoring (ASCII) case; PostgreSQL does not.  Where the engine
    would take one name for the other, sqlrp refuses before writing; where not, both work."""
    X = np.arange(6, dtype=float).reshape(3, 2)
    db.write_dataframe("T", wide_frame(X, id_name="P1"))
    if db.dialect == "duckdb":
        with pytest.raises(sqlrp.InvalidParameter, match="takes 't' for 'T'"):
            sqlrp.project(db, "T", "P1", k=2, prefix="q", into="t", replace=True)
        with pytest.raises(sqlrp.InvalidParameter, match="'P1' would appear twice.*ignores case"):
            sqlrp.project(db, "T", "P1", k=2, prefix="p")
        sqlrp.project(db, "T", "P1", "w", k=2, prefix="q", into="Out")
        with pytest.raises(sqlrp.ProjectionExists, match="already exists"):  # "out" is "Out" there
            sqlrp.project(db, "T", "P1", "w", prefix="q", into="out")
        sqlrp.project(db, "T", "P1", "w", prefix="q", into="out", replace=True)
        assert "T" in tables(db) and db.fetchall('SELECT count(*) FROM "OUT"')[0][0] == 3
        db.write_dataframe("É", wide_frame(X, id_name="P1"))  # only ASCII letters fold: "é" is another table
        sqlrp.project(db, "É", "P1", "w", prefix="q", into="é")
        assert {"É", "é"} <= tables(db)
    else:
        sqlrp.project(db, "T", "P1", "w", k=2, prefix="q", into="t")
        out = sqlrp.project(db, "T", "P1", "w", prefix="p")
        assert list(out.columns) == ["P1", "p0", "p1"]
        assert db.fetchall('SELECT count(*) FROM "t"')[0][0] == 3
    assert db.fetchall('SELECT count(*) FROM "T"')[0][0] == 3


@pytest.mark.parametrize("role", ["table", "id", "columns", "into", "projection", "prefix", "schema"])
def test_a_nul_in_any_name_is_refused(db, role):
    """C engines end a name at NUL (DuckDB read ``"t\\0x"`` as ``"t"``); PostgreSQL text cannot hold one."""
    db.write_dataframe("t", wide_frame(np.ones((2, 2))))
    kwargs = {"table": "t", "id_column": "id", "projection": "p", "k": 2}
    if role in ("into", "prefix", "schema", "columns"):
        kwargs[role] = ["f0", "f\x001"] if role == "columns" else "o\x00x"
    else:
        kwargs[{"id": "id_column"}.get(role, role)] = kwargs[{"id": "id_column"}.get(role, role)] + "\x00x"
    with pytest.raises(sqlrp.InvalidParameter, match="NUL"):
        sqlrp.project(db, kwargs.pop("table"), kwargs.pop("id_column"), kwargs.pop("projection"), **kwargs)
    assert "o" not in tables(db) and "o\x00x" not in tables(db)


def test_the_id_column_is_not_a_feature(db):
    db.write_dataframe("t", wide_frame(np.ones((2, 2))))
    with pytest.raises(sqlrp.InputError, match="'id' is the id column"):
        sqlrp.project(db, "t", "id", k=2, columns=["f0", "id"])


@pytest.mark.parametrize("name", ["a%b", "a?b", "100%", "%s", "?", "a%%b'?"])
def test_placeholder_characters_in_names(db, name):
    """PostgreSQL's driver reads ``%`` (and sqlrp's ``?``) anywhere in a statement with parameters:
    names holding them must still be looked up, written and read back whole."""
    X = np.random.default_rng(3).standard_normal((4, 2))
    db.write_dataframe(name, wide_frame(X, [f"{name}0", f"{name}1"], id_name=f"{name}id"))
    assert [c.name for c in db.columns(name)] == [f"{name}id", f"{name}0", f"{name}1"]
    quoted = '"' + name.replace('"', '""') + '"'
    db.execute(f"INSERT INTO {quoted} VALUES (?, ?, ?)", [4, 0.5, -0.5])  # the backend binds around the name
    X = np.vstack([X, [0.5, -0.5]])
    sqlrp.project(db, name, f"{name}id", name, k=2, prefix=name, into=f"{name}out")
    got = db.query_df(f'SELECT * FROM "{name}out" ORDER BY 1')
    want = sqlrp.transform(sqlrp.load_projection(db, name), X)
    assert np.allclose(got.drop(columns=f"{name}id").to_numpy(), want, rtol=1e-9)
