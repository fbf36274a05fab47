"""``sqlrp.fit`` / ``sqlrp fit`` (issue 43): randomized PCA / SVD of a table, stored as a projection.

The oracle: :func:`sqlrp.methods.lowrank.randomized_pca` -- Halko, Martinsson & Tropp's Alg. 4.4 + 5.1 on the
matrix in memory, with QR -- given the same ``Omega``: the components equal it to 1e-9 (signs fixed alike) on
every engine and both routes; the explained variance is within 1% of scikit-learn's exact PCA at the defaults.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import InputError, InvalidParameter
from sqlrp.methods.lowrank import flip_signs, oversampled, randomized_pca, sketch_matrix
from testkit.frames import array_frame, long_frame, wide_frame

TOL = 1e-9


def spectrum_table(n: int, d: int, seed: int, decay: float = 0.7, offset: float = 3.0) -> np.ndarray:
    """Rows with a decaying spectrum (``decay^i``) in a random basis, shifted off the origin."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (rng.normal(size=(n, d)) * decay ** np.arange(d)) @ basis.T + offset * rng.normal(size=d)


def oracle(X: np.ndarray, k: int, q: int, p: int = 10, seed: int = 0, centre: bool = True):
    return randomized_pca(X, sketch_matrix(X.shape[1], oversampled(k, p, X.shape[1]), seed), q, k, centre)


def close(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def check_fit(db, X: np.ndarray, k: int, q: int, route: str = "auto", method: str = "pca", **options) -> None:
    """The sketch's passes (``gram="never"``) equal the oracle given the same ``Omega``."""
    options = {"gram": "never", **options}
    fitted = sqlrp.fit(db, "t", "id", method, k=k, name="pc", power_iterations=q, route=route, replace=True, **options)
    want = oracle(X, k, q, centre=method == "pca")
    assert fitted.components_.shape == (k, X.shape[1])
    assert close(fitted.components_, want.components) <= TOL
    assert close(fitted.singular_values_, want.singular_values) <= TOL
    assert close(fitted.mean_, want.mean) <= TOL if method == "pca" else not np.any(fitted.mean_)
    ratio = want.singular_values**2 / want.total
    assert close(fitted.explained_variance_ratio_, ratio) <= TOL
    assert fitted.params["passes"] == q + 1 and fitted.params["rows"] == len(X)


@pytest.mark.parametrize("q", [0, 2])
@pytest.mark.parametrize("route", ["sql", "arrow"])
def test_duckdb_routes_equal_the_oracle(duck, q, route):
    X = spectrum_table(300, 40, seed=1)
    duck.write_dataframe("t", wide_frame(X))
    check_fit(duck, X, k=5, q=q, route=route)


@pytest.mark.parametrize("route", ["sql", "arrow"])
def test_a_dataframe_fits_as_its_table_does(route):
    """A frame is registered on DuckDB's connection; the Arrow route streams on a cursor, which must see it
    too (it raised "Table ... does not exist" before the cursor registered the caller's frames)."""
    X = spectrum_table(300, 40, seed=4)
    with sqlrp.connect() as db:
        fitted = sqlrp.fit(db, wide_frame(X), "id", k=5, name="pc", gram="never", power_iterations=1, route=route)
    want = oracle(X, 5, 1)
    assert close(fitted.components_, want.components) <= TOL
    assert close(fitted.singular_values_, want.singular_values) <= TOL


@pytest.mark.parametrize("method", ["pca", "svd"])
def test_postgres_equals_the_oracle(pg, method):
    X = spectrum_table(200, 24, seed=2)
    pg.write_dataframe("t", wide_frame(X))
    check_fit(pg, X, k=4, q=1, method=method)


def test_sqlite_equals_the_oracle():
    with sqlrp.connect("sqlite://") as db:
        X = spectrum_table(150, 20, seed=3)
        db.write_dataframe("t", wide_frame(X))
        check_fit(db, X, k=3, q=1)


@pytest.mark.parametrize("url", ["chdb://", "datafusion://", "hyper://"])
def test_in_process_engines_equal_the_oracle(url):
    pytest.importorskip({"chdb://": "chdb", "datafusion://": "datafusion", "hyper://": "tableauhyperapi"}[url])
    db = sqlrp.connect(url)
    try:
        X = spectrum_table(120, 16, seed=4)
        db.write_dataframe("t", wide_frame(X))
        check_fit(db, X, k=3, q=1)
    finally:
        db.close()


def test_array_layout_and_svd(duck):
    X = spectrum_table(200, 30, seed=5, offset=0.0)
    duck.write_dataframe("t", array_frame(X))
    check_fit(duck, X, k=3, q=1, method="svd", layout="array")


@pytest.mark.parametrize("route", ["sql", "arrow"])
@pytest.mark.parametrize("method", ["pca", "svd"])
def test_the_exact_route_is_exact_pca(duck, route, method):
    """Where ``d <= 8 (k + p)`` one pass sums the Gram matrix: its eigenvectors, exactly (NumPy's SVD)."""
    X = spectrum_table(150, 30, seed=11)
    duck.write_dataframe("t", wide_frame(X))
    fitted = sqlrp.fit(duck, "t", "id", method, k=4, name="pc", route=route)
    assert fitted.params["exact"] and fitted.params["passes"] == 1
    assert fitted.params["power_iterations_why"].startswith("exact: d = 30 <= 8 (k + p)")
    A = X - X.mean(axis=0) if method == "pca" else X
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    assert close(fitted.components_, flip_signs(Vt[:4])) <= TOL
    assert close(fitted.singular_values_, s[:4]) <= TOL


@pytest.mark.parametrize("whiten", [False, True])
def test_project_gives_the_pca_scores(db, whiten):
    """The stored projection scores ``(X - mean) @ components.T`` (divided by ``sqrt(variance)`` whitened),
    through ``project``, ``compile`` and ``--incremental`` alike."""
    X = spectrum_table(120, 10, seed=6)
    db.write_dataframe("t", wide_frame(X))
    fitted = sqlrp.fit(db, "t", "id", k=4, name="pc", whiten=whiten)
    want = (X - X.mean(axis=0)) @ fitted.components_.T
    if whiten:
        want = want / np.sqrt(fitted.explained_variance_)
    out = sqlrp.project(db, "t", "id", "pc").drop(columns="id").to_numpy(dtype=float)
    assert close(out, want) <= TOL
    loaded = sqlrp.load_projection(db, "pc")
    assert loaded.method == "pca" and loaded.params["explained_variance"] == list(fitted.explained_variance_)
    sqlrp.project(db, "t", "id", "pc", into="scores")
    more = wide_frame(X[:5] * 2.0)
    more["id"] += 1000
    db.insert_frame("t", more)
    sqlrp.project(db, "t", "id", "pc", into="scores", incremental=True)
    got = db.query_df("SELECT * FROM scores WHERE id >= 1000 ORDER BY id").drop(columns="id").to_numpy(dtype=float)
    scaled = (X[:5] * 2.0 - X.mean(axis=0)) @ fitted.components_.T
    assert close(got, scaled / np.sqrt(fitted.explained_variance_) if whiten else scaled) <= TOL


@pytest.mark.parametrize("dataset", ["load_digits", "load_breast_cancer"])
def test_explained_variance_within_one_percent_of_exact_pca(duck, dataset):
    datasets = pytest.importorskip("sklearn.datasets")
    from sklearn.decomposition import PCA

    X = getattr(datasets, dataset)().data.astype(np.float64)
    duck.write_dataframe("t", wide_frame(X))
    k = 10
    fitted = sqlrp.fit(duck, "t", "id", k=k, name="pc")
    exact = PCA(k, svd_solver="full").fit(X)
    got, want = fitted.explained_variance_ratio_.sum(), exact.explained_variance_ratio_.sum()
    assert abs(got - want) <= 0.01 * want, (got, want, fitted.params["power_iterations_why"])
    assert close(fitted.explained_variance_, exact.explained_variance_) <= 0.05
    assert close(fitted.mean_, exact.mean_) <= 1e-12


def test_rank_deficient_table_yields_fewer_components(duck):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(100, 2)) @ rng.normal(size=(2, 8)) + 1.0  # rank 2 after centring
    X[:, 5] = 4.0  # a constant column: no variance, no trouble
    duck.write_dataframe("t", wide_frame(X))
    with pytest.warns(UserWarning, match="rank is 2 < k=4: 2 components"):
        fitted = sqlrp.fit(duck, "t", "id", k=4, name="pc", power_iterations=0)
    assert fitted.k == 2 and fitted.params["rank"] >= 2
    assert np.allclose(fitted.explained_variance_ratio_.sum(), 1.0, atol=1e-9)
    assert np.all(np.abs(fitted.components_[:, 5]) <= 1e-9)


def test_refusals_are_one_line(duck):
    X = spectrum_table(30, 4, seed=8)
    duck.write_dataframe("t", wide_frame(X))
    with pytest.raises(InvalidParameter, match="k=6 is more than the table's 4 features"):
        sqlrp.fit(duck, "t", "id", k=6, name="pc")
    with pytest.raises(InvalidParameter, match="method must be 'pca' or 'svd'"):
        sqlrp.fit(duck, "t", "id", "ica", k=2, name="pc")
    duck.write_dataframe("c", wide_frame(np.ones((10, 3))))
    with pytest.raises(InputError, match="no variance to explain"):
        sqlrp.fit(duck, "c", "id", k=2, name="pc")
    duck.write_dataframe("one", wide_frame(X[:1]))
    with pytest.raises(InputError, match="a fit needs at least 2"):
        sqlrp.fit(duck, "one", "id", k=2, name="pc")
    assert "pc" not in set(sqlrp.list_projections(duck)["name"])


@pytest.mark.parametrize("route", ["sql", "arrow"])
def test_nulls_are_refused_or_read_as_zero(duck, route):
    X = spectrum_table(50, 6, seed=9)
    frame = wide_frame(X)
    frame.loc[3, "f2"] = None
    duck.write_dataframe("t", frame)
    with pytest.raises(InputError, match="1 rows of 't' hold NULL in 'f2'"):
        sqlrp.fit(duck, "t", "id", k=2, name="pc", route=route)
    X0 = X.copy()
    X0[3, 2] = 0.0
    fitted = sqlrp.fit(duck, "t", "id", k=2, name="pc", route=route, nulls="zero", power_iterations=1)
    assert close(fitted.components_, oracle(X0, 2, 1).components) <= TOL


def test_cli_mirrors_the_api(tmp_path, capsys):
    X = spectrum_table(80, 8, seed=10)
    path = tmp_path / "t.parquet"
    wide_frame(X).to_parquet(path)
    url = f"duckdb:///{tmp_path / 'w.db'}"
    status = main(["fit", "--method", "pca", "--db", url, "--table", str(path), "--id-column", "id", "--k", "3",
                   "--name", "pc", "--power-iterations", "1", "--oversample", "2", "--gram", "never"])  # fmt: skip
    assert status == 0
    err = capsys.readouterr().err
    assert "fitted 'pc': 3 components of d = 8, 2 passes of 80 rows (arrow)" in err
    assert main(["project", "--db", url, "--table", str(path), "--id-column", "id", "--projection", "pc"]) == 0
    printed = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out)).drop(columns="id").to_numpy()
    want = oracle(X, 3, 1, p=2)
    assert close(printed, (X - X.mean(axis=0)) @ want.components.T) <= 1e-9
    assert main(["fit", "--db", url, "--table", str(path), "--id-column", "id", "--k", "9"]) == 2
    assert capsys.readouterr().err == "error: --k=9 is more than the table's 8 features: ask for at most 8 components\n"


def test_spark_equals_the_oracle(spark_db):
    X = spectrum_table(60, 14, seed=12)
    spark_db.write_dataframe("lowrank_t", wide_frame(X), replace=True)
    fitted = sqlrp.fit(spark_db, "lowrank_t", "id", k=2, name="lowrank_pc", power_iterations=1, gram="never",
                       oversample=3, replace=True)  # fmt: skip
    want = oracle(X, 2, 1, p=3)
    assert close(fitted.components_, want.components) <= TOL
    assert close(fitted.singular_values_, want.singular_values) <= TOL


@pytest.mark.parametrize("gram", ["auto", "never"])
def test_variance_keeps_scikit_learns_number_of_components(duck, gram):
    """``variance=v``: the fewest components whose explained-variance ratio exceeds ``v``, as scikit-learn's
    ``PCA(n_components=v, svd_solver="full")`` counts them (digits: d = 64, the exact route under
    ``gram="auto"``; the sketch, k = 32 then 64 where 32 fall short, under ``"never"``)."""
    datasets = pytest.importorskip("sklearn.datasets")
    from sklearn.decomposition import PCA

    X = datasets.load_digits().data.astype(np.float64)
    duck.write_dataframe("t", wide_frame(X))
    for v, fits in [(0.5, 1), (0.9, 1), (0.95, 1), (0.99, 2)]:
        exact = PCA(n_components=v, svd_solver="full").fit(X)
        fitted = sqlrp.fit(duck, "t", "id", variance=v, name="pc", gram=gram, replace=True)
        assert fitted.k == exact.n_components_ and fitted.params["variance"] == v
        tol = 1e-9 if gram == "auto" or fits == 2 else 1e-3
        assert close(fitted.explained_variance_ratio_, exact.explained_variance_ratio_) <= tol
        assert fitted.explained_variance_ratio_.sum() > v >= fitted.explained_variance_ratio_[:-1].sum()
        if gram == "auto":
            assert np.max(np.abs(np.abs(fitted.components_ @ exact.components_.T) - np.eye(fitted.k))) <= 1e-9
        how = "1 fit, the last with k = 64" if gram == "auto" else f"{fits} fit{'s' * (fits > 1)}, the last with k = "
        how += "" if gram == "auto" else "64" if fits == 2 else "32"
        said = f"--variance {v:g}: kept {fitted.k} of d = 64 components"
        assert fitted.params["components_why"].startswith(said) and fitted.params["components_why"].endswith(f"({how})")


def test_variance_grows_the_sketch_and_equals_the_oracle(duck):
    """A flat spectrum needs more than the first sketch's 32 components: k doubles to 64, and the kept
    components are the oracle's (the same ``Omega`` at k = 64), cut where its cumulative ratio exceeds v;
    never fewer than exact PCA's count (a sketch's singular values are at most the table's)."""
    X = spectrum_table(400, 700, seed=13, decay=0.985)
    duck.write_dataframe("t", wide_frame(X))
    fitted = sqlrp.fit(duck, "t", "id", variance=0.75, name="pc", power_iterations=1)
    want = oracle(X, 64, 1)
    ratio = np.cumsum(want.singular_values**2 / want.total)
    kept = int(np.searchsorted(ratio, 0.75, side="right")) + 1
    assert 32 < kept == fitted.k < 64 and fitted.params["components_why"].endswith("(2 fits, the last with k = 64)")
    assert close(fitted.components_, want.components[:kept]) <= TOL
    exact = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    assert fitted.k >= int(np.searchsorted(np.cumsum(exact) / exact.sum(), 0.75, side="right")) + 1


def test_variance_refusals(duck, capsys):
    duck.write_dataframe("t", wide_frame(spectrum_table(30, 4, seed=8)))
    for k, v in [(2, 0.9), (None, None)]:
        with pytest.raises(InvalidParameter, match=r"give either k= \(components\) or variance="):
            sqlrp.fit(duck, "t", "id", k=k, variance=v, name="pc")
    for v in [0.0, 1.0, 1.5, float("nan"), "x"]:
        with pytest.raises(InvalidParameter, match="variance=? must be a f"):
            sqlrp.fit(duck, "t", "id", variance=v, name="pc")
    assert main(["fit", "--db", "duckdb://", "--table", "t", "--id-column", "id", "--variance", "1"]) == 2
    assert "expected a fraction strictly between 0 and 1, got '1'" in capsys.readouterr().err
    assert "pc" not in set(sqlrp.list_projections(duck)["name"])


def test_cli_variance(tmp_path, capsys):
    X = spectrum_table(80, 8, seed=10)
    path = tmp_path / "t.parquet"
    wide_frame(X).to_parquet(path)
    url = f"duckdb:///{tmp_path / 'w.db'}"
    assert main(["fit", "--db", url, "--table", str(path), "--id-column", "id", "--variance", "0.9"]) == 0
    err = capsys.readouterr().err
    exact = np.linalg.svd(X - X.mean(axis=0), compute_uv=False) ** 2
    kept = int(np.searchsorted(np.cumsum(exact) / exact.sum(), 0.9, side="right")) + 1
    assert f"t.parquet_pca_var0.9': {kept} components of d = 8" in err
    assert f"--variance 0.9: kept {kept} of d = 8 components" in err


def test_a_table_three_times_duckdbs_memory_limit(tmp_path):
    """A 64 MB ``memory_limit`` and a table of over three times that: both routes complete (the ``sql``
    route's statements hold fewer aggregates under a small limit: a 2,273-aggregate statement ran out of
    memory) and equal NumPy's exact PCA of the same rows, read separately in chunks."""
    duckdb = pytest.importorskip("duckdb")
    path, n, d = str(tmp_path / "big.db"), 450_000, 64

    def u(j: int) -> str:
        return f"CAST((i * {2654435761 + 7919 * j} + {40503 * j}) % 1000003 AS DOUBLE) / 1000003.0"

    features = ", ".join(f"{u(j)} * {0.9**j!r} + 0.5 * {u(0)} AS f{j}" for j in range(d))
    with duckdb.connect(path) as con:  # no memory limit: the oracle's reader
        con.execute(f"CREATE TABLE big AS SELECT i AS id, {features} FROM range({n}) r(i)")
        total, gram, rows = np.zeros(d), np.zeros((d, d)), 0
        con.execute("SELECT * EXCLUDE (id) FROM big")
        while chunk := con.fetchmany(50_000):
            X = np.asarray(chunk, dtype=np.float64)
            total, gram, rows = total + X.sum(axis=0), gram + X.T @ X, rows + len(X)
    mean = total / rows
    values, vectors = np.linalg.eigh((gram - rows * np.outer(mean, mean)) / (rows - 1))
    want = flip_signs(vectors[:, ::-1][:, :5].T)
    with sqlrp.connect(f"duckdb:///{path}", memory_limit="64MB", threads=1) as db:
        limit = db.scan_room()[0]
        stored = db.fetchall("SELECT total_blocks * block_size FROM pragma_database_size()")[0][0]
        assert limit <= 64 << 20 and stored >= 3 * limit
        for route in ["arrow", "sql"]:
            fitted = sqlrp.fit(db, "big", "id", k=5, name=f"pc_{route}", route=route)
            assert fitted.params["rows"] == n and fitted.params["exact"]
            assert close(fitted.components_, want) <= TOL and close(fitted.mean_, mean) <= TOL
            assert close(fitted.explained_variance_, values[::-1][:5]) <= TOL


def sparse_long(seed: int) -> tuple[np.ndarray, pd.DataFrame]:
    """A table with about half its entries 0 (no row in the long layout) and some values split over two
    rows of the same ``(id, feature)`` (they add, as the long layout's projection reads them)."""
    X = spectrum_table(90, 18, seed=seed)
    X[np.random.default_rng(seed).random(X.shape) < 0.5] = 0.0
    X[:, 0] = 1.0 + np.arange(len(X)) % 3  # every id keeps a row
    frame = long_frame(X)
    split = frame.iloc[::7].copy()
    frame.loc[split.index, "value"] /= 4.0
    split["value"] *= 0.75
    return X, pd.concat([frame, split], ignore_index=True)


def check_long(db, X: np.ndarray, q: int = 1) -> None:
    for gram in ["never", "always"]:
        fitted = sqlrp.fit(db, "t", "id", k=3, name="pc", layout="long", power_iterations=q, gram=gram, replace=True)
        want = oracle(X, 3, q) if gram == "never" else exact_pca(X, 3)
        assert close(fitted.components_, want.components) <= 1e-8, gram
        assert close(fitted.singular_values_, want.singular_values) <= TOL and close(fitted.mean_, want.mean) <= TOL
        assert fitted.params["rows"] == len(X) and fitted.params["route"] == "sql"


def exact_pca(X: np.ndarray, k: int):
    """Exact PCA: the oracle with the identity for ``Omega`` (its range is everything)."""
    return randomized_pca(X, np.eye(X.shape[1]), 0, k)


@pytest.mark.parametrize("url", ["duckdb://", "sqlite://", "chdb://", "datafusion://", "hyper://"])
def test_long_layout_equals_the_oracle(url):
    module = {"chdb://": "chdb", "datafusion://": "datafusion", "hyper://": "tableauhyperapi"}.get(url)
    if module:
        pytest.importorskip(module)
    X, frame = sparse_long(seed=14)
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", frame)
        check_long(db, X)


def test_long_layout_on_postgres(pg):
    X, frame = sparse_long(seed=15)
    pg.write_dataframe("t", frame)
    check_long(pg, X, q=0)


def test_long_layout_refusals(duck):
    X, frame = sparse_long(seed=16)
    frame.loc[5, "value"] = None
    duck.write_dataframe("t", frame)
    with pytest.raises(InputError, match="1 rows of 't' hold NULL in 'value'"):
        sqlrp.fit(duck, "t", "id", k=2, name="pc", layout="long")
    X[int(frame.loc[5, "id"]), int(frame.loc[5, "feature"])] = 0.0
    fitted = sqlrp.fit(duck, "t", "id", k=2, name="pc", layout="long", nulls="zero", power_iterations=0, gram="never")
    assert close(fitted.components_, oracle(X, 2, 0).components) <= 1e-8
    with pytest.raises(InvalidParameter, match="a long table takes route=.?sql"):
        sqlrp.fit(duck, "t", "id", k=2, name="pc2", layout="long", route="arrow")
    frame.loc[6, "feature"] = -1
    duck.write_dataframe("t", frame, replace=True)
    with pytest.raises(InputError, match="holds the feature -1, outside 0 .. 17"):
        sqlrp.fit(duck, "t", "id", k=2, name="pc2", layout="long", nulls="zero")
    assert "pc2" not in set(sqlrp.list_projections(duck)["name"])
