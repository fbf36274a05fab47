"""Issue 24: defaults a user can trust.  Every method's defaults on four kinds of table (dense
standardised, sparse binary standardised, raw non-negative counts, d > 5,000) keep the mean distortion
within 5% of the reference configuration at k = 160 over 10 seeds (``bench/defaults.py`` holds the
tables, the references and the printed figures); the sparsity rule's moments in SQL equal NumPy's;
each changed default runs in SQL and matches the NumPy oracle; ``evaluate`` measures a kernel
projection in its own kernel's space."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from bench import defaults as bench
from sqlrp.cli import main
from sqlrp.methods import make_projection, reference
from sqlrp.methods.sparsity import choose_s, data_sparsity, difference_kurtosis, kurtosis_of
from sqlrp.pipeline.moments import table_kurtosis
from sqlrp.pipeline.sources import resolve_source

SEEDS = 10


@pytest.fixture(scope="module")
def tables():
    return bench.tables(rows=100)


@pytest.mark.parametrize("kind", bench.KINDS)
@pytest.mark.parametrize("case", list(bench.CASES))
def test_default_within_5_percent_of_reference(tables, case, kind):
    got, ref, _ = bench.measure(case, tables[kind], SEEDS)
    assert got <= 1.05 * ref, f"{case} on {kind}: default {got:.4f} vs reference {ref:.4f} ({got / ref:.3f}x)"


def test_the_bar_can_fail(tables):
    """The old defaults miss it: P-RP m = 1, Maclaurin as in the paper, s = sqrt(d) on the wide table."""
    X = tables["wide"]
    d = X.shape[1]

    def mean(case: str, **params) -> float:
        method = case.removesuffix("-3")
        vals = [
            bench.distortion(case, X, reference.transform(make_projection(method, d, 160, seed=s, **params), X))
            for s in range(SEEDS)
        ]
        return float(np.mean(vals))

    gaussian = np.mean(
        [bench.distortion("achlioptas", X, bench.reference_outputs("achlioptas", X, s)) for s in range(10)]
    )
    assert mean("achlioptas", s="auto") > 1.15 * gaussian  # sqrt(d) = 77 on kurtosis ~100
    assert mean("p-rp", m=1) > 1.5 * mean("p-rp")


def test_kurtosis_rule():
    assert choose_s(784, 3.0) == pytest.approx(28.0)  # Gaussian-like data keeps sqrt(d)
    assert choose_s(6000, 110.0) == 8.0  # floor(3 + 2 * 6000 * 0.050625 / 110)
    assert choose_s(64, 60.0) == 3.0  # heavy tails: never sparser than Achlioptas
    assert choose_s(4, 100.0) == 2.0  # d < 9: sqrt(d)
    assert choose_s(500, None) == pytest.approx(np.sqrt(500))
    rng = np.random.default_rng(0)
    assert kurtosis_of(rng.standard_normal((20000, 50))) == pytest.approx(3.0, rel=0.03)
    calls = []
    params = data_sparsity("p-rp", {}, lambda: calls.append(1) or 5.0)
    assert params == {} and not calls  # P-RP's s = 3 is not a sparse default: no query
    assert data_sparsity("achlioptas", {"s": 3}, lambda: 5.0) == {"s": 3}
    assert data_sparsity("pk-rp", {"degree": 2}, lambda: 5.0)["kurtosis"] == 5.0
    assert "kurtosis" not in data_sparsity("pk-rp", {"degree": 3}, lambda: 5.0)
    assert difference_kurtosis(0, *np.zeros((4, 3))) is None


def _frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])]).rename_axis("id").reset_index()


@pytest.mark.parametrize("standardize", [False, True])
def test_kurtosis_in_sql_equals_numpy(db, standardize):
    rng = np.random.default_rng(3)
    X = np.where(rng.random((300, 20)) < 0.05, rng.integers(1, 9, (300, 20)), 0.0) + 100.0 * (np.arange(20) == 4)
    db.write_dataframe("kt", _frame(X), replace=True)
    got = table_kurtosis(db, resolve_source(db, "kt", "id"), 20, standardize)
    assert got == pytest.approx(kurtosis_of(X, standardize), rel=1e-9)
    rows, cols = np.nonzero(X)
    long = pd.DataFrame({"id": rows, "feature": cols, "value": X[rows, cols]})
    db.write_dataframe("kt_long", long, replace=True)
    source = resolve_source(db, "kt_long", "id", layout="long")
    assert table_kurtosis(db, source, 20, False) == pytest.approx(kurtosis_of(X), rel=1e-9)


def test_defaults_chosen_from_the_table_run_in_sql(duck):
    """``project`` measures the kurtosis in SQL, chooses s as the transformer's NumPy path does, and its
    SQL output equals the NumPy oracle (achlioptas, PK-RP, P-RP m = 10, Maclaurin at c = 0 and 1)."""
    X = bench.tables(rows=60)["sparse_binary"]
    duck.write_dataframe("bits", _frame(X), replace=True)
    cases = [("achlioptas", {}), ("pk-rp", {}), ("p-rp", {}), ("maclaurin", {"c": 0.0}), ("maclaurin", {})]
    for i, (method, params) in enumerate(cases):
        out = sqlrp.project(duck, "bits", "id", f"d{i}", method=method, k=24, seed=1, **params)
        proj = sqlrp.load_projection(duck, f"d{i}")
        if method in ("achlioptas", "pk-rp"):
            assert proj.params["kurtosis"] == pytest.approx(kurtosis_of(X), rel=1e-9)
            assert proj.params["s"] == choose_s(64, kurtosis_of(X)) == 3.0
        if method == "p-rp":
            assert proj.params["m"] == 10
        Y = out.drop(columns="id").to_numpy()
        np.testing.assert_allclose(Y, reference.transform(proj, X), rtol=1e-9, atol=1e-9)
        if method == "maclaurin":
            assert (np.ptp(Y, axis=0) > 0).sum() >= 23  # c = 1: one exact constant output, no zeros
            assert not np.any(np.all(Y == 0, axis=0))


@pytest.mark.parametrize(("degree", "c"), [(2, 0.0), (2, 1.0), (3, 0.0), (3, 1.0)])
def test_maclaurin_wastes_no_outputs(degree, c):
    X = np.random.default_rng(2).standard_normal((40, 12))
    Y = reference.transform(make_projection("maclaurin", 12, 160, seed=0, degree=degree, c=c), X)
    assert np.ptp(Y, axis=0).min() > 0 or (c > 0 and (np.ptp(Y, axis=0) == 0).sum() == 1)
    paper = reference.transform(make_projection("maclaurin", 12, 160, seed=0, degree=degree, c=c, sampling="paper"), X)
    assert np.all(paper == 0, axis=0).sum() > (100 if c == 0 else 10)  # the paper's sampling (001 Alg. 1)


def test_maclaurin_support_sampling_is_unbiased():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 5)) / np.sqrt(5)
    for c in (0.0, 1.0):
        est = [
            (Z := reference.transform(make_projection("maclaurin", 5, 2000, seed=s, degree=3, c=c), X)) @ Z.T
            for s in range(20)
        ]
        np.testing.assert_allclose(np.mean(est, axis=0), (X @ X.T + c) ** 3, atol=0.05)


def test_evaluate_uses_the_projections_kernel(tmp_path, capsys):
    url = f"duckdb:///{tmp_path / 'e.db'}"
    rng = np.random.default_rng(0)
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", _frame(rng.standard_normal((150, 40))), replace=True)
        sqlrp.create_projection(db, "pk", "pk-rp", d=40, k=64, seed=0)

    def mean(*extra: str) -> float:
        args = ["evaluate", "--db", url, "--table", "t", "--id-column", "id", "--projection", "pk", "--sample", "150"]
        assert main([*args, "--queries", "50", *extra]) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if x.split()[:1] == ["distortion_mean"])
        return float(line.split()[1])

    default, kernel, linear = mean(), mean("--kernel-degree", "2"), mean("--kernel-degree", "1")
    assert default == pytest.approx(kernel, rel=1e-12) and default < 0.3
    assert linear > 10  # what it reported before: the input space's distances
    with sqlrp.connect(url) as db:
        report = sqlrp.evaluate(db, "t", "id", "pk", sample=150, queries=50)
        assert report.metrics["kernel"]["degree"] == 2
        assert report.metrics["distortion_mean"] == pytest.approx(default, rel=1e-5)  # printed rounded


def test_dtrp_sparsity_from_the_sample_kurtosis():
    """DT-RP's ``s="auto"`` follows the same rule on its sample: sparse binary rows (kurtosis ~26) get
    a much denser matrix than a Gaussian sample (kurtosis 3), and both at most ``sqrt(d)``."""
    from sqlrp.methods.sparsity import choose_s
    from sqlrp.methods.tuning import tune_matrix

    rng = np.random.default_rng(0)
    binary = (rng.random((120, 400)) < 0.02).astype(np.float64)
    got = tune_matrix(binary, 16, iterations=0)
    assert got.s == choose_s(400, kurtosis_of(binary)) < np.sqrt(400)
    gaussian = rng.standard_normal((120, 400))
    dense = tune_matrix(gaussian, 16, iterations=0).s
    assert dense == choose_s(400, kurtosis_of(gaussian)) and 3 * got.s < dense <= np.sqrt(400)
