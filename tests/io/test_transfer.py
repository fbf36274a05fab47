"""Export a stored projection to Parquet / CSV and import it back: exactly the same projection."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.core.ir import Combiner, LinearStage, Projection
from sqlrp.registry.transfer import METADATA_KEY, export_projection, import_projection, read_projection, sidecar

METHODS = [
    ("achlioptas", {"s": 3}),
    ("gaussian", {}),
    ("p-rp", {"m": 2, "s": 3}),
    ("p-rp", {"m": 2, "s": 3, "modified": True}),  # power-2 vectors
    ("pk-rp", {"degree": 3, "t": 2}),
    ("maclaurin", {"degree": 2, "c": 1.0}),
]
FORMATS = ["parquet", "csv"]


@pytest.fixture
def other():
    db = sqlrp.connect()
    yield db
    db.close()


def _same(a: Projection, b: Projection) -> None:
    """``a`` and ``b`` are the same projection, bit for bit."""
    assert (a.method, a.params, a.seed, a.d, a.k, a.linear.p) == (b.method, b.params, b.seed, b.d, b.k, b.linear.p)
    assert a.scale == b.scale
    assert np.array_equal(a.linear.dense(), b.linear.dense())
    for name in ("vector", "feature", "weight"):
        assert np.array_equal(getattr(a.linear, name), getattr(b.linear, name)), name
    for name in ("bias", "power"):
        x, y = getattr(a.linear, name), getattr(b.linear, name)
        assert (x is None and y is None) or np.array_equal(x, y), name
    for name in ("term_component", "term_weight", "factor_term", "factor_vector"):
        assert np.array_equal(getattr(a.combiner, name), getattr(b.combiner, name)), name


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("method", "params"), METHODS, ids=lambda v: v if isinstance(v, str) else None)
def test_round_trip_is_exact(duck, other, tmp_path, method, params, fmt):
    sqlrp.create_projection(duck, "proj", method, d=12, k=7, seed=5, **params)
    original = sqlrp.load_projection(duck, "proj")
    path = tmp_path / f"proj.{fmt}"
    written = export_projection(duck, "proj", path)
    assert written == ([path] if fmt == "parquet" else [path, sidecar(path)])
    imported = import_projection(other, path)
    assert imported.name == "proj"
    stored = sqlrp.load_projection(other, "proj")
    _same(original, imported)
    _same(original, stored)
    X = np.random.default_rng(1).normal(size=(25, 12)) * 4
    assert np.array_equal(sqlrp.transform(original, X), sqlrp.transform(stored, X))


@pytest.mark.parametrize("fmt", FORMATS)
def test_bias_power_and_combiner_survive(duck, other, tmp_path, fmt):
    """A hand-made kernel-shaped IR: bias, power > 1 and a non-identity combiner with repeated factors."""
    lin = LinearStage(
        d=4,
        p=3,
        vector=[0, 0, 1, 2, 2],
        feature=[0, 3, 1, 2, 3],
        weight=[1, -1, 0.1, 1 / 3, -2.5e-300],
        bias=[0.5, 0, -1 / 7],
        power=[1, 2, 1],
    )
    comb = Combiner(
        k=2,
        term_component=[1, 0, 1],
        term_weight=[-1, 0.7, 1],
        factor_term=[2, 0, 1, 1, 0],
        factor_vector=[0, 1, 2, 2, 0],
    )
    p = Projection(method="custom", linear=lin, combiner=comb, scale=np.pi, params={"note": "é ?:"}, seed=None)
    sqlrp.registry.store.Registry(duck).save(p, "hand made")
    path = tmp_path / f"h.{fmt}"
    export_projection(duck, "hand made", path)
    _same(sqlrp.load_projection(duck, "hand made"), import_projection(other, path, name="copy"))
    _same(sqlrp.load_projection(duck, "hand made"), sqlrp.load_projection(other, "copy"))
    X = np.random.default_rng(2).normal(size=(6, 4))
    assert np.array_equal(sqlrp.transform(p, X), sqlrp.transform(sqlrp.load_projection(other, "copy"), X))


def test_matrix_file_is_plain(duck, tmp_path):
    """The matrix file has exactly vector, feature, weight: a warehouse loads it as it is."""
    sqlrp.create_projection(duck, "g", "gaussian", d=6, k=3, seed=1)
    stored = duck.query_df(
        "SELECT vector, feature, weight FROM sqlrp_linear_entry WHERE projection = 'g' ORDER BY vector, feature"
    )
    export_projection(duck, "g", tmp_path / "g.csv")
    export_projection(duck, "g", tmp_path / "g.parquet")
    csv = pd.read_csv(tmp_path / "g.csv", converters={"weight": float})  # Python's float(): exact
    assert list(csv.columns) == ["vector", "feature", "weight"]
    assert np.array_equal(csv.to_numpy(), stored.to_numpy())
    # DuckDB reads both files directly, as any engine's bulk loader would
    for name in ("g.csv", "g.parquet"):
        loaded = duck.query_df(f"SELECT * FROM '{tmp_path / name}' ORDER BY vector, feature")
        assert list(loaded.columns) == ["vector", "feature", "weight"]
        assert np.array_equal(loaded.to_numpy(), stored.to_numpy())
    meta = json.loads(sidecar(tmp_path / "g.csv").read_text())
    assert (meta["method"], meta["d"], meta["k"], meta["nnz"], meta["combiner"]) == ("gaussian", 6, 3, 18, "identity")
    import pyarrow.parquet as pq

    schema = pq.read_schema(tmp_path / "g.parquet")
    assert json.loads(schema.metadata[METADATA_KEY.encode()]) == meta
    assert schema.names == ["vector", "feature", "weight"]


@pytest.mark.parametrize("name", ["rp.txt", "rp.json", "rp", "rp.parquet.gz", "rp.tsv"])
def test_other_extensions_are_refused(duck, tmp_path, name):
    sqlrp.create_projection(duck, "rp", "achlioptas", d=5, k=2)
    with pytest.raises(sqlrp.InvalidParameter, match=r"\*\.parquet.*\*\.csv"):
        export_projection(duck, "rp", tmp_path / name)
    assert list(tmp_path.iterdir()) == []  # nothing written, in no format
    with pytest.raises(sqlrp.InvalidParameter, match=r"\*\.parquet.*\*\.csv"):
        import_projection(duck, tmp_path / name)


def test_missing_files(duck, tmp_path):
    with pytest.raises(sqlrp.InputError, match="no file"):
        import_projection(duck, tmp_path / "absent.parquet")
    with pytest.raises(sqlrp.InputError, match="no file"):
        import_projection(duck, tmp_path / "absent.csv")
    sqlrp.create_projection(duck, "rp", "achlioptas", d=5, k=2)
    export_projection(duck, "rp", tmp_path / "rp.csv")
    sidecar(tmp_path / "rp.csv").unlink()
    with pytest.raises(sqlrp.InputError, match=r"rp\.csv\.json"):
        import_projection(duck, tmp_path / "rp.csv", name="other")
    with pytest.raises(sqlrp.InputError, match="no folder"):
        export_projection(duck, "rp", tmp_path / "no" / "such" / "rp.parquet")
    with pytest.raises(sqlrp.ProjectionNotFound):
        export_projection(duck, "absent", tmp_path / "x.parquet")


def test_existing_name_needs_replace(duck, other, tmp_path):
    sqlrp.create_projection(duck, "rp", "achlioptas", d=8, k=3, seed=1)
    sqlrp.create_projection(other, "rp", "gaussian", d=4, k=2)
    export_projection(duck, "rp", tmp_path / "rp.parquet")
    with pytest.raises(sqlrp.ProjectionExists, match="already exists"):
        import_projection(other, tmp_path / "rp.parquet")
    assert sqlrp.load_projection(other, "rp").method == "gaussian"  # untouched
    import_projection(other, tmp_path / "rp.parquet", replace=True)
    _same(sqlrp.load_projection(duck, "rp"), sqlrp.load_projection(other, "rp"))
    import_projection(other, tmp_path / "rp.parquet", name="rp2")
    assert set(sqlrp.list_projections(other)["name"]) == {"rp", "rp2"}


def test_composed_projections_are_refused(duck, tmp_path):
    sqlrp.create_projection(duck, "cm", "craftmap", d=6, k=3, up_k=8, seed=1)
    with pytest.raises(sqlrp.InvalidParameter, match="cm__stage1.*cm__stage2"):
        export_projection(duck, "cm", tmp_path / "cm.parquet")
    assert list(tmp_path.iterdir()) == []
    # its stages are plain projections and export as such
    export_projection(duck, "cm__stage2", tmp_path / "s2.csv")
    _same(sqlrp.load_projection(duck, "cm__stage2"), read_projection(tmp_path / "s2.csv"))


def test_in_memory_projection_and_damaged_files(tmp_path):
    p = sqlrp.create_projection(None, "mem", "achlioptas", d=6, k=4, s=1, seed=3)
    export_projection(None, p, tmp_path / "m.csv")
    _same(p, read_projection(tmp_path / "m.csv"))
    # a matrix that no longer fits its metadata
    text = (tmp_path / "m.csv").read_text().splitlines()
    (tmp_path / "m.csv").write_text("\n".join(text[:-1]) + "\n")
    with pytest.raises(sqlrp.InputError, match="do not belong together"):
        read_projection(tmp_path / "m.csv")
    (tmp_path / "m.csv").write_text("vector,feature,weight\n0,99,1.0\n" + "\n".join(text[2:]) + "\n")
    with pytest.raises(sqlrp.InputError, match="feature index out of range"):
        read_projection(tmp_path / "m.csv")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(sqlrp.InputError, match="cannot read"):
        read_projection(tmp_path / "bad.parquet")
    pd.DataFrame({"vector": [0], "feature": [0], "weight": [1.0]}).to_parquet(tmp_path / "foreign.parquet")
    with pytest.raises(sqlrp.InputError, match="no sqlrp projection metadata"):
        read_projection(tmp_path / "foreign.parquet")


# ---- issue 26: files never overwritten, imports validated ----


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_refuses_an_existing_file(duck, tmp_path, fmt):

    sqlrp.create_projection(duck, "rp", "achlioptas", d=5, k=2, seed=1)
    mine = tmp_path / f"mydata.{fmt}"
    mine.write_bytes(b"x" * 8893)  # a user's file
    with pytest.raises(sqlrp.ProjectionExists, match="already exist.*replace"):
        export_projection(duck, "rp", mine)
    assert mine.read_bytes() == b"x" * 8893 and not sidecar(mine).exists()
    if fmt == "csv":  # the sidecar alone is a user's file too
        other = tmp_path / "other.csv"
        sidecar(other).write_text("mine")
        with pytest.raises(sqlrp.ProjectionExists, match=r"other\.csv\.json"):
            export_projection(duck, "rp", other)
        assert sidecar(other).read_text() == "mine" and not other.exists()
    export_projection(duck, "rp", mine, replace=True)
    _same(sqlrp.load_projection(duck, "rp"), read_projection(mine))
    assert list(tmp_path.glob(".*tmp")) == []  # no temporary file left behind


def test_cli_export_refuses_an_existing_file(tmp_path, capsys):
    from sqlrp.cli import main

    url = f"duckdb:///{tmp_path}/w.db"
    assert main(["create", "--db", url, "--name", "p1", "--method", "achlioptas", "--d", "5", "--k", "2"]) == 0
    mine = tmp_path / "mydata.csv"
    mine.write_text("id,a\n1,2\n")
    capsys.readouterr()
    assert main(["projections", "export", "p1", "--db", url, "--to", str(mine)]) != 0
    assert "already exist" in capsys.readouterr().err and mine.read_text() == "id,a\n1,2\n"
    assert main(["projections", "export", "p1", "--db", url, "--to", str(mine), "--replace"]) == 0


def _edited(tmp_path, change):  # noqa: ANN001
    """A CSV export whose metadata (or matrix) was edited by hand."""
    p = sqlrp.create_projection(None, "rp", "achlioptas", d=6, k=4, s=1, seed=3)
    path = tmp_path / "rp.csv"
    export_projection(None, p, path, replace=True)
    meta = json.loads(sidecar(path).read_text())
    matrix = pd.read_csv(path)
    change(meta, matrix)
    sidecar(path).write_text(json.dumps(meta))
    matrix.to_csv(path, index=False)
    return path


BAD_IMPORTS = {
    "scale NaN": (lambda m, x: m.update(scale=float("nan")), "scale"),
    "scale inf": (lambda m, x: m.update(scale=float("inf")), "scale"),
    "scale 0": (lambda m, x: m.update(scale=0), "scale"),
    "scale negative": (lambda m, x: m.update(scale=-1.5), "scale"),
    "scale text": (lambda m, x: m.update(scale="abc"), "scale"),
    "params a list": (lambda m, x: m.update(params=[1, 2]), "params"),
    "params a string": (lambda m, x: m.update(params="s=3"), "params"),
    "d below a feature": (lambda m, x: m.update(d=2), "feature index out of range"),
    "k smaller than p": (lambda m, x: m.update(k=2), "k = p"),
    "k zero": (lambda m, x: m.update(k=0), "k must be"),
    "d text": (lambda m, x: m.update(d="six"), "d must be"),
    "vector beyond int64": (
        lambda m, x: x.__setitem__("vector", x["vector"].astype(object).where(x.index > 0, 2**70)),
        "int64",
    ),
}


@pytest.mark.parametrize("case", list(BAD_IMPORTS))
def test_malformed_imports_are_refused_with_one_line(duck, tmp_path, case):
    from sqlrp.cli import main

    change, words = BAD_IMPORTS[case]
    path = _edited(tmp_path, change)
    with pytest.raises(sqlrp.InputError, match=words):
        import_projection(duck, path, name="imported")
    assert "imported" not in set(sqlrp.list_projections(duck)["name"])
    url = f"duckdb:///{tmp_path}/w.db"
    assert main(["projections", "import", "x", "--db", url, "--from", str(path)]) == 3
