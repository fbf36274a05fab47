"""Files as tables and outputs on DuckDB (issue 24): Parquet, CSV and JSON in, Parquet, CSV and JSON
out (checked against the NumPy reference), globs, hostile paths, failures that leave no file, the
projection written beside the output and read back, and the CLI without --db."""

from __future__ import annotations

import io
import json
import os

import duckdb
import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import EXIT_INPUT
from sqlrp.core.files import definition_path
from sqlrp.methods import reference
from sqlrp.pipeline.sources import resolve_source
from sqlrp.registry.transfer import read_projection

D, K = 12, 5


#: float32 features give float32 outputs (issue 34): one rounding of each double sum, 2^-24 relative
FLOAT32 = 1.2e-7


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def embeddings(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


def write_embeddings(path, X: np.ndarray, first_id: int = 0) -> None:
    """``doc_id BIGINT, emb FLOAT[D]`` written by DuckDB, as embeddings are stored."""
    frame = pd.DataFrame({"doc_id": np.arange(first_id, first_id + len(X)), "emb": list(X)})
    con = duckdb.connect()
    con.register("frame", frame)
    target = str(path).replace("'", "''")
    con.execute(f"COPY (SELECT doc_id, emb::FLOAT[{D}] AS emb FROM frame) TO '{target}' (FORMAT parquet)")
    con.close()


def write_wide(path, X: np.ndarray, fmt: str) -> None:
    frame = pd.DataFrame(X.astype(np.float64), columns=[f"f{i}" for i in range(X.shape[1])])
    frame.insert(0, "id", np.arange(len(X)))
    if fmt == "csv":
        frame.to_csv(path, index=False, float_format="%.17g")
    elif fmt == "json":
        frame.to_json(path, orient="records", lines=True, double_precision=15)
    else:
        frame.to_parquet(path, index=False)


def read_back(path, key: str = "doc_id") -> tuple[np.ndarray, np.ndarray]:
    """The ids and values of an output file, read by a fresh DuckDB, ordered by id."""
    con = duckdb.connect()
    frame = con.execute(f"SELECT * FROM '{str(path).replace(chr(39), chr(39) * 2)}' ORDER BY 1").df()
    con.close()
    return frame[key].to_numpy(), frame.drop(columns=key).to_numpy(dtype=float)


def test_parquet_embeddings_into_parquet_match_numpy(tmp_path):
    X = embeddings(300)
    write_embeddings(tmp_path / "emb.parquet", X)
    with sqlrp.connect() as db:  # the array layout is found: the only numeric column is one FLOAT[] list
        written = sqlrp.project(db, str(tmp_path / "emb.parquet"), "doc_id", k=K, into=str(tmp_path / "out.parquet"))
        stored = sqlrp.load_projection(db, "emb_achlioptas_k5_seed0")  # named after the file's stem
    out = tmp_path / "out.parquet"
    assert written == [out, definition_path(out)]
    saved = read_projection(definition_path(out))
    np.testing.assert_array_equal(saved.linear.weight, stored.linear.weight)
    assert (saved.d, saved.k, saved.scale) == (stored.d, stored.k, stored.scale)
    ids, Y = read_back(out)
    assert ids.tolist() == list(range(300))
    assert rel_err(Y, reference.transform(saved, X.astype(np.float64))) < FLOAT32
    assert sorted(os.listdir(tmp_path)) == ["emb.parquet", "out.parquet", "out.parquet.sqlrp.json"]  # no leftovers
    # the output type follows the input's (FLOAT[12] in, FLOAT out), and the file's definition says so
    con = duckdb.connect()
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{out}')").fetchall())
    assert types["p0"] == "FLOAT"
    assert json.loads(definition_path(out).read_text())["output"]["dtype"] == "float32"
    with sqlrp.connect() as db:  # --dtype float64 still asks for doubles: the sums exactly as NumPy's
        sqlrp.project(
            db, str(tmp_path / "emb.parquet"), "doc_id", k=K, dtype="float64", into=str(tmp_path / "d.parquet")
        )
    assert rel_err(read_back(tmp_path / "d.parquet")[1], reference.transform(saved, X.astype(np.float64))) < 1e-9
    assert json.loads(definition_path(tmp_path / "d.parquet").read_text())["output"]["dtype"] == "float64"


def test_saved_definition_projects_another_file_the_same_way(tmp_path):
    """Project a file with no database, then a second file with the definition saved beside the
    first output, in another process's worth of state (a new connection): equal to NumPy."""
    X1, X2 = embeddings(200, seed=1), embeddings(150, seed=2)
    write_embeddings(tmp_path / "a.parquet", X1)
    write_embeddings(tmp_path / "b.parquet", X2, first_id=1000)
    kernel = dict(method="pk-rp", degree=2, t=3, k=K, seed=7)
    with sqlrp.connect() as db:
        sqlrp.project(db, str(tmp_path / "a.parquet"), "doc_id", into=str(tmp_path / "a_rp.parquet"), **kernel)
    definition = definition_path(tmp_path / "a_rp.parquet")
    with sqlrp.connect() as db:
        sqlrp.project(db, str(tmp_path / "b.parquet"), "doc_id", str(definition), into=str(tmp_path / "b_rp.csv"))
    projection = read_projection(definition)
    assert projection.method == "pk-rp"
    _, Y1 = read_back(tmp_path / "a_rp.parquet")
    ids, Y2 = read_back(tmp_path / "b_rp.csv")
    assert ids.tolist() == list(range(1000, 1150))
    assert rel_err(Y1, reference.transform(projection, X1.astype(np.float64))) < FLOAT32
    assert rel_err(Y2, reference.transform(projection, X2.astype(np.float64))) < FLOAT32
    # the second output's definition is the same projection again
    again = read_projection(definition_path(tmp_path / "b_rp.csv"))
    np.testing.assert_array_equal(again.linear.weight, projection.linear.weight)


@pytest.mark.parametrize("source", ["csv", "json", "parquet"])
@pytest.mark.parametrize("target", ["csv", "json", "parquet"])
def test_wide_files_in_every_format(tmp_path, source, target):
    X = np.random.default_rng(3).standard_normal((80, D))
    write_wide(tmp_path / f"rows.{source}", X, source)
    with sqlrp.connect() as db:
        sqlrp.create_projection(db, "rp", "achlioptas", d=D, k=K, s=3, seed=4)
        sqlrp.project(db, str(tmp_path / f"rows.{source}"), "id", "rp", into=str(tmp_path / f"out.{target}"))
        projection = sqlrp.load_projection(db, "rp")
    ids, Y = read_back(tmp_path / f"out.{target}", key="id")
    assert ids.tolist() == list(range(80))
    assert rel_err(Y, reference.transform(projection, X)) < 1e-9


def test_array_output_into_csv(tmp_path):
    X = embeddings(50)
    write_embeddings(tmp_path / "emb.parquet", X)
    with sqlrp.connect() as db:
        sqlrp.project(db, str(tmp_path / "emb.parquet"), "doc_id", k=K, output="array", into=str(tmp_path / "o.csv"))
    con = duckdb.connect()
    frame = con.execute(f"SELECT doc_id, p::DOUBLE[] AS p FROM read_csv('{tmp_path / 'o.csv'}') ORDER BY 1").df()
    Y = np.stack(frame["p"].to_numpy())
    projection = read_projection(definition_path(tmp_path / "o.csv"))
    assert rel_err(Y, reference.transform(projection, X.astype(np.float64))) < FLOAT32


def test_glob_of_files(tmp_path):
    X = embeddings(90)
    (tmp_path / "parts").mkdir()
    for i, start in enumerate((0, 30, 60)):
        write_embeddings(tmp_path / "parts" / f"part-{i}.parquet", X[start : start + 30], first_id=start)
    with sqlrp.connect() as db:
        frame = sqlrp.project(db, str(tmp_path / "parts" / "part-*.parquet"), "doc_id", k=K, save_as="g")
        projection = sqlrp.load_projection(db, "g")
    assert frame["doc_id"].tolist() == list(range(90))
    assert rel_err(frame.drop(columns="doc_id").to_numpy(), reference.transform(projection, X.astype(float))) < FLOAT32
    with sqlrp.connect() as db, pytest.raises(sqlrp.InputError, match="no file matches"):
        sqlrp.project(db, str(tmp_path / "parts" / "nothing-*.parquet"), "doc_id", k=K)


@pytest.mark.parametrize("name", ["it's.parquet", 'say "hi".parquet', "a'; DROP TABLE x; --.csv", "sp ace.json"])
def test_hostile_paths(tmp_path, name):
    folder = tmp_path / 'o\'dd "dir"'
    folder.mkdir()
    X = np.random.default_rng(5).standard_normal((40, D))
    source = folder / name
    write_wide(source, X, name.rsplit(".", 1)[1])
    out = folder / ("out " + name.rsplit(".", 1)[0] + ".parquet")
    with sqlrp.connect() as db:
        sqlrp.project(db, str(source), "id", k=K, into=str(out))
    ids, Y = read_back(out, key="id")
    assert ids.tolist() == list(range(40))
    assert rel_err(Y, reference.transform(read_projection(definition_path(out)), X)) < 1e-9


def test_failure_leaves_no_file_and_keeps_the_old_one(tmp_path):
    """An overflow found by the read-back check: nothing new is left, an existing output is whole."""
    X = np.full((10, D), 1e308)
    write_wide(tmp_path / "big.parquet", X, "parquet")
    with sqlrp.connect() as db:
        with pytest.raises(sqlrp.InputError, match="overflowed"):
            sqlrp.project(db, str(tmp_path / "big.parquet"), "id", k=K, s=1, into=str(tmp_path / "out.parquet"))
        assert sorted(os.listdir(tmp_path)) == ["big.parquet"]
        # with --replace over a good file: the failure leaves it as it was
        write_wide(tmp_path / "ok.csv", np.ones((3, D)), "csv")
        sqlrp.project(db, str(tmp_path / "ok.csv"), "id", k=K, s=1, into=str(tmp_path / "out.parquet"))
        before = (tmp_path / "out.parquet").read_bytes(), definition_path(tmp_path / "out.parquet").read_bytes()
        with pytest.raises(sqlrp.InputError, match="overflowed"):
            sqlrp.project(
                db, str(tmp_path / "big.parquet"), "id", k=K, s=1, into=str(tmp_path / "out.parquet"), replace=True
            )
    after = (tmp_path / "out.parquet").read_bytes(), definition_path(tmp_path / "out.parquet").read_bytes()
    assert after == before
    assert sorted(os.listdir(tmp_path)) == ["big.parquet", "ok.csv", "out.parquet", "out.parquet.sqlrp.json"]


def test_bad_input_rows_write_nothing(tmp_path):
    (tmp_path / "rows.csv").write_text("id,a,b\n1,1.0,2.0\n2,,3.0\n")
    with sqlrp.connect() as db, pytest.raises(sqlrp.InputError, match="rows with id 2"):
        sqlrp.project(db, str(tmp_path / "rows.csv"), "id", k=2, into=str(tmp_path / "o.parquet"))
    assert sorted(os.listdir(tmp_path)) == ["rows.csv"]


def test_existing_output_missing_input_and_the_source_itself(tmp_path):
    write_wide(tmp_path / "rows.parquet", np.ones((4, D)), "parquet")
    with sqlrp.connect() as db:
        sqlrp.project(db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "o.csv"))
        with pytest.raises(sqlrp.ProjectionExists, match="already exist"):
            sqlrp.project(db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "o.csv"))
        sqlrp.project(db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "o.csv"), replace=True)
        with pytest.raises(sqlrp.InvalidParameter, match="never writes the source"):
            sqlrp.project(
                db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "rows.parquet"), replace=True
            )
        with pytest.raises(sqlrp.InputError, match="no table or file named 'absent.parquet'"):
            sqlrp.project(db, "absent.parquet", "id", k=K)
        with pytest.raises(sqlrp.InputError, match="no folder"):
            sqlrp.project(db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "no" / "o.parquet"))
        with pytest.raises(sqlrp.InvalidParameter, match="written whole"):
            sqlrp.project(db, str(tmp_path / "rows.parquet"), "id", k=K, into=str(tmp_path / "v.csv"), view=True)


def test_an_engine_that_cannot_read_files_says_so(tmp_path):
    write_wide(tmp_path / "rows.csv", np.ones((4, 3)), "csv")
    with sqlrp.connect(f"sqlite:///{tmp_path / 'x.sqlite'}") as db:
        with pytest.raises(sqlrp.InvalidParameter, match=r"sqlite cannot read the file .*DuckDB"):
            sqlrp.project(db, str(tmp_path / "rows.csv"), "id", k=2)
        db.write_dataframe("t", pd.DataFrame({"id": [1, 2], "a": [1.0, 2.0]}))
        with pytest.raises(sqlrp.InvalidParameter, match=r"sqlite cannot write the file .*DuckDB"):
            sqlrp.project(db, "t", "id", k=2, into=str(tmp_path / "o.parquet"))
    assert not (tmp_path / "o.parquet").exists()


def test_array_layout_detected_or_named_in_the_error(duck):
    duck.execute("CREATE TABLE one AS SELECT range AS id, [range::DOUBLE, 1.0, 2.0] AS e, 'x' AS tag FROM range(5)")
    source = resolve_source(duck, "one", "id")
    assert (source.layout, source.array_column) == ("array", "e")
    duck.execute("CREATE TABLE two AS SELECT range AS id, [1.0, 2.0] AS e, [3.0] AS f FROM range(5)")
    with pytest.raises(sqlrp.InputError, match=r"layout='array' and array_column=NAME"):
        resolve_source(duck, "two", "id")
    duck.execute("CREATE TABLE mixed AS SELECT range AS id, 1.0 AS a, [1.0, 2.0] AS e FROM range(5)")
    assert resolve_source(duck, "mixed", "id").columns == ("a",)  # scalars present: wide, as before


# ----------------------------------------------------------------------------------------------
# the command line


def test_cli_files_without_db(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQLRP_DB", raising=False)
    X1, X2 = embeddings(60, seed=8), embeddings(30, seed=9)
    write_embeddings(tmp_path / "emb.parquet", X1)
    write_embeddings(tmp_path / "queries.bin", X2)  # Parquet under an ending that says nothing: --input
    base = ["project", "--id-column", "doc_id"]
    assert main([*base, "--table", "emb.parquet", "--k", "8", "--into", "emb_rp.parquet"]) == 0
    assert "wrote" in capsys.readouterr().err
    definition = "emb_rp.parquet.sqlrp.json"
    assert main([*base, "--input", "queries.bin", "--projection", definition, "--into", "q_rp.csv"]) == 0
    projection = read_projection(definition)
    for out, X in (("emb_rp.parquet", X1), ("q_rp.csv", X2)):
        assert rel_err(read_back(tmp_path / out)[1], reference.transform(projection, X.astype(float))) < FLOAT32
    capsys.readouterr()
    assert main([*base, "--table", "emb.parquet", "--projection", definition]) == 0  # CSV on stdout
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    Y = printed.drop(columns="doc_id").to_numpy()
    assert rel_err(Y, reference.transform(projection, X1.astype(float))) < FLOAT32
    # a table as the output needs a database; so does a table as the input
    assert main([*base, "--table", "emb.parquet", "--k", "8", "--into", "emb_rp"]) == 2
    assert "--into 'emb_rp' writes a table: name the database with --db" in capsys.readouterr().err
    assert main([*base, "--table", "emb", "--k", "8"]) == 2
    assert "--db" in capsys.readouterr().err
    assert main([*base, "--table", "nope.csv", "--k", "8"]) == EXIT_INPUT
    assert "no table or file named 'nope.csv'" in capsys.readouterr().err
    assert main([*base, "--table", "emb.parquet", "--input", "queries.bin", "--k", "8"]) == 2
    assert "not both" in capsys.readouterr().err


def test_cli_evaluate_and_compile_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQLRP_DB", raising=False)
    write_embeddings(tmp_path / "emb.parquet", embeddings(120, seed=10))
    assert main(["project", "--table", "emb.parquet", "--id-column", "doc_id", "--k", "6", "--into", "o.json"]) == 0
    capsys.readouterr()
    args = ["--table", "emb.parquet", "--id-column", "doc_id", "--projection", "o.json.sqlrp.json"]
    assert main(["evaluate", *args, "--sample", "60", "--queries", "10"]) == 0
    assert "distortion_mean" in capsys.readouterr().out
    assert main(["compile", *args]) == 0
    sql = capsys.readouterr().out
    assert '"emb.parquet"' in sql and "sqlrp_linear_entry" not in sql  # the file is the table; the matrix inline


def test_cli_search_with_a_query_file(tmp_path, capsys):
    """A file works as the query table of a search on an index in a DuckDB file."""
    X = np.random.default_rng(11).standard_normal((200, 8))
    url = f"duckdb:///{tmp_path / 'w.db'}"
    with sqlrp.connect(url) as db:
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)]).rename_axis("id").reset_index()
        db.write_dataframe("base", frame)
        sqlrp.build_index(db, "base", "id", "idx", lists=4)
    frame.iloc[:5].to_parquet(tmp_path / "q.parquet", index=False)
    argv = ["search", "--db", url, "--index", "idx", "--query-table", str(tmp_path / "q.parquet")]
    assert main([*argv, "--query-id-column", "id", "--top", "1", "--exact"]) == 0
    hits = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert hits.sort_values("query_id")["id"].tolist() == [0, 1, 2, 3, 4]  # each query's nearest row is itself


def test_sidecar_is_one_json_document(tmp_path):
    write_wide(tmp_path / "rows.csv", np.ones((3, 4)), "csv")
    with sqlrp.connect() as db:
        sqlrp.project(db, str(tmp_path / "rows.csv"), "id", k=2, into=str(tmp_path / "o.parquet"))
    document = json.loads(definition_path(tmp_path / "o.parquet").read_text())
    assert document["format"] == "sqlrp-projection" and set(document["entries"]) == {"vector", "feature", "weight"}


def test_an_index_of_a_file_is_searched_from_another_folder(tmp_path, monkeypatch):
    """A file indexed by a relative path is kept by its absolute path: a search from another working
    folder reads the same file, and finds what NumPy finds."""
    import duckdb

    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    X = rng.integers(-8, 8, size=(300, 16)).astype(np.float64)
    Q = rng.integers(-8, 8, size=(5, 16)).astype(np.float64)
    con = duckdb.connect()
    for name, M, key in (("pts", X, "id"), ("qs", Q, "qid")):
        frame_ = pd.DataFrame(M, columns=[f"f{i}" for i in range(16)])
        frame_.insert(0, key, np.arange(len(M)))
        con.register("_f", frame_)
        con.execute(f"COPY (SELECT * FROM _f) TO '{data / (name + '.parquet')}' (FORMAT parquet)")
        con.unregister("_f")
    url = f"duckdb:///{tmp_path / 'w.db'}"
    monkeypatch.chdir(data)
    db = sqlrp.connect(url)
    sqlrp.build_index(db, "pts.parquet", "id", "pidx", lists=4)
    db.close()
    monkeypatch.chdir(tmp_path)
    db = sqlrp.connect(url)
    got = sqlrp.search(db, "pidx", str(data / "qs.parquet"), "qid", top=3, exact=True)
    db.close()
    dist = np.sqrt(((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    order = np.lexsort((np.broadcast_to(np.arange(300), dist.shape), dist), axis=1)[:, :3]
    np.testing.assert_array_equal(got["id"].to_numpy().reshape(5, 3), order)
