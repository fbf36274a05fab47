"""``project(..., output_format=...)``: pandas, Arrow, polars and NumPy give the same rows, whole and
in chunks, on DuckDB (Arrow handed over directly) and PostgreSQL (through pandas); every format gets
the finiteness check; ``transform_frame`` takes and returns pandas, polars and Arrow."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sqlrp
from sqlrp.registry.store import Registry
from testkit.frames import wide_frame

polars = pytest.importorskip("polars")


def as_pandas(result, fmt: str, key: str = "id") -> pd.DataFrame:
    if fmt == "numpy":
        ids, Y = result
        return pd.DataFrame(Y, columns=[f"p{j}" for j in range(Y.shape[1])]).assign(**{key: ids})[
            [key, *[f"p{j}" for j in range(Y.shape[1])]]
        ]
    return result if fmt == "pandas" else result.to_pandas()


@pytest.mark.parametrize("fmt", ["pandas", "arrow", "polars", "numpy"])
def test_every_format_gives_the_same_rows(db, fmt):
    X = np.random.default_rng(4).normal(size=(250, 7))
    db.write_dataframe("t", wide_frame(X))
    want = sqlrp.project(db, "t", "id", "rp", k=5, s=3, seed=2)
    got = sqlrp.project(db, "t", "id", "rp", output_format=fmt)
    kind = {"pandas": pd.DataFrame, "arrow": pa.Table, "polars": polars.DataFrame, "numpy": tuple}[fmt]
    assert isinstance(got, kind)
    pd.testing.assert_frame_equal(as_pandas(got, fmt).reset_index(drop=True), want, check_dtype=False)
    np.testing.assert_allclose(
        as_pandas(got, fmt).drop(columns="id").to_numpy(),
        sqlrp.transform(sqlrp.load_projection(db, "rp"), X),
        rtol=1e-12,
    )
    chunks = list(sqlrp.project(db, "t", "id", "rp", output_format=fmt, chunk_rows=100))
    assert all(isinstance(c, kind) for c in chunks) and 3 <= len(chunks)
    joined = pd.concat([as_pandas(c, fmt) for c in chunks], ignore_index=True)
    assert max(len(as_pandas(c, fmt)) for c in chunks) <= 100
    pd.testing.assert_frame_equal(joined, want, check_dtype=False)


@pytest.mark.parametrize("fmt", ["arrow", "polars", "numpy"])
def test_every_format_is_checked_and_keeps_an_empty_header(duck, fmt):
    X = np.ones((10, 3))
    X[4] = 1e308
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.make_projection("achlioptas", 3, 2, seed=1, s=1)
    proj.linear.weight[:] = 1.0  # 3e308 overflows to infinity on DuckDB
    Registry(duck).save(proj, "ones")
    with pytest.raises(sqlrp.InputError, match=r"overflowed.*rows with id 4"):
        sqlrp.project(duck, "t", "id", "ones", output_format=fmt)
    with pytest.raises(sqlrp.InputError, match=r"overflowed.*rows with id 4"):
        list(sqlrp.project(duck, "t", "id", "ones", output_format=fmt, chunk_rows=3))
    duck.execute('CREATE TABLE "none" AS SELECT * FROM "t" WHERE "id" < 0')
    (empty,) = list(sqlrp.project(duck, "none", "id", "ones", output_format=fmt, chunk_rows=3))
    if fmt == "numpy":
        assert len(empty[0]) == 0
    else:
        assert list(empty.columns if fmt == "polars" else empty.column_names) == ["id", "p0", "p1"]


def test_unknown_format_is_refused_before_any_work(duck):
    duck.write_dataframe("t", wide_frame(np.ones((3, 2))))
    with pytest.raises(sqlrp.InvalidParameter, match="output_format must be one of"):
        sqlrp.project(duck, "t", "id", "never_stored", k=2, output_format="excel")
    assert sqlrp.list_projections(duck).empty


def test_transform_frame_takes_polars_and_arrow():
    X = np.random.default_rng(5).normal(size=(20, 4))
    proj = sqlrp.make_projection("achlioptas", 4, 3, seed=3, s=1)
    frame = pd.DataFrame(X, columns=list("abcd"))
    want = sqlrp.transform_frame(proj, frame)
    from_polars = sqlrp.transform_frame(proj, polars.from_pandas(frame))
    from_arrow = sqlrp.transform_frame(proj, pa.Table.from_pandas(frame))
    assert isinstance(from_polars, polars.DataFrame) and isinstance(from_arrow, pa.Table)
    np.testing.assert_allclose(from_polars.to_numpy(), want.to_numpy(), rtol=1e-15)
    np.testing.assert_allclose(from_arrow.to_pandas().to_numpy(), want.to_numpy(), rtol=1e-15)


def test_numeric_frames_reach_postgres_bit_for_bit(pg):
    """``insert_frame`` writes numeric frames as one block of COPY text: every double comes back
    identical (extreme exponents, negative zero, NaN, infinities), integers and booleans too."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(2000) * 10.0 ** rng.integers(-300, 300, 2000)
    x[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324]
    frame = pd.DataFrame({"id": np.arange(2000, dtype=np.int64), "x": x, "b": np.arange(2000) % 2 == 0})
    pg.write_dataframe("bits", frame)
    back = pg.query_df('SELECT * FROM "bits" ORDER BY "id"')
    assert back["id"].tolist() == list(range(2000)) and back["b"].tolist() == frame["b"].tolist()
    got = back["x"].to_numpy(dtype=float)
    assert np.array_equal(got.view(np.int64)[~np.isnan(x)], x.view(np.int64)[~np.isnan(x)])
    assert np.isnan(got[2])


def _rows(pg, sql: str) -> pd.DataFrame:
    with pg.conn.cursor() as cur:
        cur.execute(sql.encode())
        return pd.DataFrame.from_records(cur.fetchall(), columns=[d.name for d in cur.description])


def test_postgres_reads_numeric_results_as_binary_copy(pg):
    """Every fixed-width type, extremes included, read through binary COPY equals the row path
    value for value; the order of the query is kept."""
    pg.execute(
        "CREATE TABLE r AS SELECT i::bigint AS id, (i - 3)::smallint AS a, (i * 1000003)::int AS b, "
        "(i / 7.0)::real AS c, (i * pi() * 1e300)::float8 AS d FROM generate_series(0, 999) AS g(i)"
    )
    pg.execute("INSERT INTO r VALUES (-9223372036854775808, -32768, 2147483647, 'Infinity', '-Infinity')")
    sql = "SELECT * FROM r ORDER BY id DESC;"
    columns = pg.query_columns(sql)
    assert columns is not None and list(columns) == ["id", "a", "b", "c", "d"]
    assert [columns[c].dtype for c in columns] == [np.int64, np.int16, np.int32, np.float32, np.float64]
    got = pg.query_df(sql)
    pd.testing.assert_frame_equal(got, _rows(pg, sql), check_dtype=False)
    assert got["id"].iloc[0] == 999 and got["id"].iloc[-1] == -(2**63)
    assert got["d"].iloc[-1] == -np.inf


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT i AS id, CASE WHEN i = 500 THEN NULL ELSE i * 0.5::float8 END AS x FROM generate_series(0, 999) i",
        "SELECT i AS id, NULL::float8 AS x FROM generate_series(0, 2) i",  # NULLs: read, then the row path
        "SELECT i AS id, i::text AS x FROM generate_series(0, 2) i",  # not fixed-width: the row path
        "SELECT i::numeric AS id FROM generate_series(0, 2) i",
        "SELECT 1 AS x, 2 AS x",  # a repeated name
    ],
)
def test_postgres_results_binary_copy_cannot_hold_take_the_row_path(pg, sql):
    assert pg.query_columns(sql) is None
    pd.testing.assert_frame_equal(pg.query_df(sql), _rows(pg, sql))


def test_postgres_empty_numeric_result_keeps_its_columns_and_types(pg):
    got = pg.query_df("SELECT i::bigint AS id, i * 0.5::float8 AS x FROM generate_series(1, 0) i")
    assert list(got.columns) == ["id", "x"] and len(got) == 0
    assert list(got.dtypes) == [np.int64, np.float64]


def test_postgres_projection_through_binary_copy_matches_numpy(pg):
    X = np.random.default_rng(8).normal(size=(400, 9))
    pg.write_dataframe("t", wide_frame(X))
    got = sqlrp.project(pg, "t", "id", "rp", k=6, s=3, seed=3)
    assert list(got["id"]) == list(range(400))
    want = sqlrp.transform(sqlrp.load_projection(pg, "rp"), X)
    np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("form", ["wide", "array"])
def test_float32_outputs(db, form):
    """``dtype="float32"``: the outputs are stored as 4-byte floats (DuckDB FLOAT, PostgreSQL REAL),
    each the float64 projection rounded once: equal to the NumPy reference in float32."""
    X = np.random.default_rng(21).normal(size=(40, 30))
    db.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(db, "f32", "pk-rp", d=30, k=6, seed=1)
    expected = sqlrp.transform(proj, X).astype(np.float32)
    sqlrp.project(db, "t", "id", "f32", into="o32", dtype="float32", output=form)
    types = db.fetchall(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'o32' AND column_name <> 'id'"
    )
    want = {"duckdb": {"FLOAT", "FLOAT[]"}, "postgres": {"real", "ARRAY"}}[db.dialect]
    assert {t[0] for t in types} <= want and types
    rows = db.fetchall('SELECT * FROM "o32" ORDER BY "id"')
    got = np.array([r[1] for r in rows], dtype=np.float64) if form == "array" else np.array([r[1:] for r in rows])
    np.testing.assert_allclose(got, expected, rtol=1e-6)  # float32's half ulp, if the double straddled a tie
    assert np.mean(got.astype(np.float32) == expected) > 0.99
    frame = sqlrp.project(db, "t", "id", "f32", dtype="float32")
    assert all(frame[f"p{j}"].dtype == np.float32 for j in range(6))


def test_float32_is_refused_where_floats_have_8_bytes():
    proj = sqlrp.make_projection("achlioptas", 4, 2, seed=0)
    source = sqlrp.compiler.Source("t", "id", "wide", ("a", "b", "c", "d"))
    output = sqlrp.compiler.Output(dtype="float32")
    for dialect in ("sqlite", "snowflake"):
        with pytest.raises(sqlrp.core.errors.EngineLimit, match=f"{dialect}.*float32"):
            sqlrp.compiler.compile_sql(proj, source, dialect, output)
    assert "AS REAL)" in sqlrp.compiler.compile_sql(proj, source, "duckdb", output)  # DuckDB: REAL is FLOAT4
    with pytest.raises(sqlrp.core.errors.InvalidParameter, match="dtype"):
        sqlrp.compiler.Output(dtype="float16")


def test_cli_dtype_float32(tmp_path):
    from sqlrp.cli import main

    path = tmp_path / "w.duckdb"
    db = sqlrp.connect(str(path))
    db.write_dataframe("t", wide_frame(np.random.default_rng(2).normal(size=(10, 8))))
    db.close()
    assert main(["project", "--db", str(path), "--table", "t", "--id-column", "id", "--k", "3",
                 "--dtype", "float32", "--into", "o", "--no-progress"]) == 0  # fmt: skip
    db = sqlrp.connect(str(path))
    assert {r[1] for r in db.fetchall("DESCRIBE o") if r[0] != "id"} == {"FLOAT"}
