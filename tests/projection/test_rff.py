"""Random Fourier features (issue 44): ``z = sqrt(2/k) cos(w.x + b)`` through the IR's output function, every
SQL path against the NumPy reference (relative 1e-9), the registry, files, ``compile`` for warehouses, the
kernel they approximate, and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.core.ir import Combiner, LinearStage, Projection
from sqlrp.core.layout import Source
from sqlrp.methods import make_projection, reference
from sqlrp.methods.rff import WEIGHTS, hadamard, kernel_matrix, resolve_gamma
from sqlrp.registry.transfer import read_projection
from sqlrp.registry.validate import digest
from testkit.frames import array_frame, assert_parity, long_frame, wide_frame


@pytest.fixture
def data() -> np.ndarray:
    rng = np.random.default_rng(4)
    X = rng.standard_normal((50, 12)) * rng.uniform(0.5, 3.0, 12)
    X[rng.random(X.shape) < 0.25] = 0.0  # the long layout stores non-zeros only
    return X


def _error(projection: Projection, X: np.ndarray) -> float:
    Z = reference.transform(projection, X)
    K = kernel_matrix(X, X, projection.params["kernel"], projection.params["gamma"])
    return float(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("layout", ["wide", "long", "array"])
def test_rff_parity(db, data, layout, weights):
    frame = {"wide": wide_frame, "long": long_frame, "array": array_frame}[layout](data)
    db.write_dataframe("t", frame)
    out = sqlrp.project(db, "t", "id", "z", layout=layout, method="rff", k=20, weights=weights, seed=2, d=12)
    proj = sqlrp.load_projection(db, "z")
    assert proj.function == "cos" and proj.params["weights"] == weights
    assert_parity(out, proj, data)
    assert np.all(np.abs(out.drop(columns="id").to_numpy()) <= np.sqrt(2 / 20) + 1e-12)


def test_gamma_scale_is_read_in_sql(db, data):
    """gamma="scale" is scikit-learn SVC's 1 / (d Var(X)), Var over every entry, computed in SQL."""
    db.write_dataframe("t", wide_frame(data))
    sqlrp.project(db, "t", "id", "z", method="rff", k=8, seed=0)
    proj = sqlrp.load_projection(db, "z")
    assert proj.params["gamma_requested"] == "scale"
    assert proj.params["gamma"] == pytest.approx(1.0 / (12 * data.var()), rel=1e-12)
    sqlrp.project(db, "t", "id", "zs", method="rff", k=8, seed=0, standardize=True)
    assert sqlrp.load_projection(db, "zs").params["gamma"] == pytest.approx(1.0 / 12, rel=1e-12)


def test_pooled_and_laplacian(duck, data):
    """The function applies per row, before pooling (CBP's GROUP BY) and the scale."""
    frame = wide_frame(data)
    frame["g"] = np.arange(len(data)) % 4
    duck.write_dataframe("t", frame)
    out = sqlrp.project(
        duck, "t", "id", "lap", method="rff", kernel="laplacian", gamma=0.1, k=9, columns=[f"f{i}" for i in range(12)],
        group_column="g",
    )  # fmt: skip
    proj = sqlrp.load_projection(duck, "lap")
    want = sqlrp.transform(proj, data, groups=frame["g"].to_numpy())
    got = out.sort_values("g").drop(columns="g").to_numpy()
    assert np.max(np.abs(got - want)) <= 1e-9 * np.abs(want).max()


def test_sign_function_is_in_the_ir(db, data):
    """The IR's third output function, ``sign`` (sign codes): -1, 0, 1 as NumPy's, on every row."""
    rng = np.random.default_rng(0)
    linear = LinearStage(d=12, p=5, vector=np.repeat(np.arange(5), 12), feature=np.tile(np.arange(12), 5),
                         weight=rng.standard_normal(60))  # fmt: skip
    proj = Projection("gaussian", linear, Combiner.identity(5), 0.5, params={"function": "sign"})
    data = data.copy()
    data[3] = 0.0  # sign(0) = 0
    db.write_dataframe("t", wide_frame(data))
    out = sqlrp.project(db, "t", "id", proj)
    assert set(np.unique(out.drop(columns="id").to_numpy())) <= {-0.5, 0.0, 0.5}
    assert_parity(out, proj, data)


def test_sqlite_cos(tmp_path, data):
    db = sqlrp.connect(f"sqlite:///{tmp_path / 'z.sqlite'}")
    db.write_dataframe("t", wide_frame(data))
    out = sqlrp.project(db, "t", "id", "z", method="rff", k=6, weights="signs", gamma=0.05)
    assert_parity(out, sqlrp.load_projection(db, "z"), data)


def test_registry_round_trip_and_digest(duck, data):
    made = sqlrp.create_projection(duck, "r", "rff", d=12, k=16, gamma=0.3, weights="structured", seed=5)
    back = sqlrp.load_projection(duck, "r")
    assert back.function == "cos" and back.function_scale == made.function_scale
    assert np.array_equal(back.linear.bias, made.linear.bias) and back.scale == made.scale
    assert digest(back) == digest(made)
    X = data[:5]
    np.testing.assert_array_equal(sqlrp.transform(back, X), sqlrp.transform(made, X))
    # the digest covers the function: the same matrix without it is another projection
    plain = Projection("rff", made.linear, made.combiner, made.scale, {**made.params, "function": "identity"})
    assert digest(plain) != digest(made)


def test_a_tampered_function_is_refused(duck):
    sqlrp.create_projection(duck, "r", "rff", d=4, k=3, gamma=1.0, seed=1)
    duck.execute("UPDATE sqlrp_projection SET params = replace(params, '\"cos\"', '\"tan\"') WHERE name = 'r'")
    with pytest.raises(InputError, match="output function"):
        sqlrp.load_projection(duck, "r")


def test_files_in_and_out(tmp_path, data, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQLRP_DB", raising=False)
    wide_frame(data).to_parquet("emb.parquet")
    args = ["project", "--table", "emb.parquet", "--id-column", "id", "--method", "rff", "--k", "10"]
    assert main([*args, "--weights", "orthogonal", "--gamma", "0.2", "--into", "out.parquet"]) == 0
    proj = read_projection("out.parquet.sqlrp.json")
    meta = json.loads((tmp_path / "out.parquet.sqlrp.json").read_text())
    assert meta["params"]["function"] == "cos" and proj.params["gamma"] == 0.2
    assert_parity(pd.read_parquet("out.parquet"), proj, data)


@pytest.mark.parametrize("dialect", ["snowflake", "bigquery", "tsql", "trino", "spark", "clickhouse"])
def test_compile_for_warehouses(dialect):
    proj = make_projection("rff", 3, 2, gamma=0.5, weights="gaussian", seed=0)
    sql = sqlrp.compile_sql(proj, Source(table="t", id_column="id", columns=("a", "b", "c")), dialect)
    assert sql.lower().count("cos(") == 2, sql


def test_kernel_approximation():
    """The features approximate the kernel (error shrinking as 1/sqrt(k)), and orthogonal directions
    do better than i.i.d. ones at the same k (Yu et al. 2016), mean of 5 seeds."""
    X = np.random.default_rng(1).standard_normal((120, 32))
    gamma = 1.0 / (32 * X.var())
    mean = {w: np.mean([_error(make_projection("rff", 32, 256, gamma=gamma, weights=w, seed=s), X) for s in range(5)])
            for w in WEIGHTS}  # fmt: skip
    assert all(value < 0.4 for value in mean.values()), mean
    assert mean["orthogonal"] < mean["gaussian"], mean
    small = np.mean(
        [_error(make_projection("rff", 32, 16, gamma=gamma, weights="gaussian", seed=s), X) for s in range(5)]
    )
    assert small > 2.5 * mean["gaussian"]


def test_structured_is_sorf():
    """SORF's unnormalised Hadamard blocks: H H = D I, every row of H D1 H D2 H D3 of norm D^(3/2)."""
    H = hadamard(16)
    np.testing.assert_array_equal(H @ H, 16 * np.eye(16))
    proj = make_projection("rff", 16, 16, gamma=0.5, weights="structured", seed=3)
    W = proj.linear.dense()
    np.testing.assert_allclose(np.linalg.norm(W, axis=0), 16**1.5)
    assert proj.function_scale == pytest.approx(1.0 / 16)  # sqrt(2 gamma) / D


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kernel": "laplacian", "weights": "orthogonal"}, "rotation-invariant"),
        ({"kernel": "poly"}, "kernel must be one of"),
        ({"weights": "dense"}, "weights must be one of"),
        ({"gamma": 0}, "gamma must be a finite number > 0"),
        ({"gamma": "wide"}, "gamma must be a number > 0 or 'scale'"),
        ({"gamma": "scale"}, "needs the data's variance"),
    ],
)
def test_refusals(params, message):
    with pytest.raises(InvalidParameter, match=message):
        make_projection("rff", 4, 3, **params)


def test_resolve_gamma():
    assert resolve_gamma("scale", 4, variance=0.5) == 0.5
    assert resolve_gamma("scale", 4, variance=0.0) == 1.0  # scikit-learn's rule for constant data
    assert resolve_gamma("0.25", 4) == 0.25


def test_transformer_is_an_rbf_sampler(data):
    """``method="rff"`` takes RBFSampler's names (gamma, n_components, random_state), gives the NumPy
    reference's numbers, stores them for SQL, and approximates the same kernel as RBFSampler does."""
    from sklearn.kernel_approximation import RBFSampler

    from sqlrp.transformer import SQLRandomProjection

    X = np.random.default_rng(2).standard_normal((150, 16))
    K = kernel_matrix(X, X, "rbf", 0.05)
    ours = SQLRandomProjection(method="rff", n_components=512, gamma=0.05, weights="gaussian", random_state=0)
    Z = ours.fit_transform(X)
    np.testing.assert_array_equal(Z, reference.transform(ours.projection_, X))
    theirs = RBFSampler(gamma=0.05, n_components=512, random_state=0).fit_transform(X)
    error = [np.linalg.norm(F @ F.T - K) / np.linalg.norm(K) for F in (Z, theirs)]
    assert error[0] < 1.5 * error[1] and error[1] < 1.5 * error[0], error
    scaled = SQLRandomProjection(method="rff", n_components=8, random_state=1).fit(data)
    assert scaled.projection_.params["gamma"] == pytest.approx(1 / (12 * data.var()))
    assert SQLRandomProjection(method="rff").fit(data).n_components_ == 100


@pytest.mark.parametrize("kind", ["rbf", "laplacian"])
def test_evaluate_reports_the_kernel_error(db, kind):
    """``evaluate`` measures an rff projection against its own kernel: ``||ZZ^T - K||_F / ||K||_F`` in Python
    and in SQL alike, and an exact kernel SVM's accuracy beside the linear model on the features."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 6))
    frame = wide_frame(X)
    frame["label"] = (X[:, 0] * X[:, 1] > 0).astype(int)
    db.write_dataframe("t", frame)
    sqlrp.project(db, "t", "id", "z", method="rff", kernel=kind, gamma=0.1, k=64, exclude=["label"])
    report = sqlrp.evaluate(db, "t", "id", "z", sample=60, queries=10, label_column="label")
    table = report.table.set_index("metric")
    Z = sqlrp.transform(sqlrp.load_projection(db, "z"), X)
    K = kernel_matrix(X, X, kind, 0.1)
    want = np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K)
    assert table.loc["kernel_nrmse", "python"] == pytest.approx(want, rel=1e-9)
    assert table.loc["kernel_nrmse", "sql"] == pytest.approx(want, rel=1e-6)
    assert report.metrics["kernel"] == {"kind": kind, "gamma": 0.1}
    assert 0.5 <= table.loc["accuracy_exact_kernel_svm", "python"] <= 1.0
    assert table.loc["distortion_mean", "sql"] == pytest.approx(table.loc["distortion_mean", "python"], rel=1e-6)


def test_the_random_kitchen_sinks_example_runs():
    """The docs' example (docs/guide/methods.md, "Kitchen sinks") as written: the linear model on
    the SQL features is within 3 points of the exact RBF SVM."""
    import contextlib
    import io
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "methods.md").read_text()
    code = re.search(r"```python\n(.*?)```", text[text.index("### Kitchen sinks") :], re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "methods.md", "exec"), {})  # noqa: S102 - the documentation's own code
    sinks, exact = map(float, re.findall(r"\d\.\d+", printed.getvalue()))
    assert exact > 0.95 and sinks > exact - 0.03, printed.getvalue()
