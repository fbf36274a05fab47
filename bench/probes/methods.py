"""The methods themselves: DT-RP, the NumPy reference, PK-RP against its floor."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import sqlrp
from sqlrp.compiler import compile_sql
from sqlrp.methods import make_projection

from .common import best


def dtrp() -> None:
    from sqlrp.methods.tuning import tune_matrix

    X = np.random.default_rng(0).random((500, 784))
    print("DT-RP, n=500, d=784, k=200, s=sqrt(d), 4000 iterations")
    for seed in range(3):
        t0 = time.perf_counter()
        result = tune_matrix(X, 200, s="auto", iterations=4000, seed=seed)
        spent = time.perf_counter() - t0
        print(f"  seed {seed}: {spent:5.2f} s, loss {result.initial_loss:.4f} -> {result.loss:.4f}")


def reference_speed(n: int = 20_000, d: int = 784, k: int = 160) -> None:
    """The NumPy reference (the oracle, and the transformer's in-memory path) on PK-RP degree 2 with
    its defaults, n x d: the linear stage by dense BLAS against scipy.sparse, then the combiner;
    best of 3 each."""
    import scipy.sparse as sp

    from sqlrp.methods import reference

    X = np.random.default_rng(0).normal(size=(n, d))
    proj = make_projection("pk-rp", d, k, seed=0)
    lin = proj.linear
    W = np.zeros((d, lin.p))
    W[lin.feature, lin.vector] = lin.weight
    S = sp.csc_matrix((lin.weight, (lin.feature, lin.vector)), shape=(d, lin.p))
    K = X @ W
    print(f"NumPy reference, PK-RP degree 2, {n} x {d} -> {k} ({lin.p} vectors, {lin.nnz:,} non-zeros), best of 3")
    print(f"  linear stage, dense BLAS    {best(lambda: X @ W):6.2f} s")
    print(f"  linear stage, scipy.sparse  {best(lambda: np.asarray(X @ S)):6.2f} s")
    print(f"  linear stage, as used       {best(lambda: reference.linear_outputs(lin, X)):6.2f} s")
    print(f"  combiner                    {best(lambda: reference.combine(proj.combiner, K)):6.2f} s")
    print(f"  transform, in all           {best(lambda: reference.transform(proj, X)):6.2f} s")


def kernel_floor(n: int = 50_000, side: int = 28, k: int = 160) -> None:
    """Issue 12's PK-RP speed targets against a floor for any inline query DuckDB runs.  On the
    bench's kernel table (n standardised photo patches, d = 784), PK-RP degree 2 with its defaults
    (the fewest additions that keep the accuracy bar: ``examples/kernel_frontier.py``):

    - DuckDB's fixed cost: EXPLAIN of the query (parse, bind, optimise; no rows);
    - its execution at the cache-resident rate: the same query, same shape and number of terms,
      with every feature index folded onto the first 32 columns (so every vector fits the cache),
      its run minus its EXPLAIN;
    - the floor is their sum; against the author's PK-RP (003 Pseudocode 1 with numba) and
      scikit-learn's PolynomialCountSketch in the same run, and sqlrp's own run.  Best of 2 each."""
    import dataclasses

    from sklearn.kernel_approximation import PolynomialCountSketch

    from bench import kernel_peers
    from bench.run import photo_patches
    from sqlrp import api
    from sqlrp.compiler import Source

    X = photo_patches(n, side)
    d = X.shape[1]
    db = sqlrp.connect(threads=2)
    from testkit.frames import wide_frame

    db.write_dataframe("t", wide_frame(X))
    proj = make_projection("pk-rp", d, k, seed=0)
    source = Source("t", "id", "wide", tuple(f"f{i}" for i in range(d)))
    folded = dataclasses.replace(proj, linear=dataclasses.replace(proj.linear, feature=proj.linear.feature % 32))
    sql = compile_sql(proj, source, "duckdb", strategy="inline")
    cached = compile_sql(folded, source, "duckdb", strategy="inline")

    def ctas(q: str) -> Callable[[], None]:
        return lambda: db.execute(f'CREATE OR REPLACE TABLE "o" AS {q}')

    bind = best(lambda: db.fetchall("EXPLAIN " + sql), runs=2)
    run_sql = best(ctas(sql), runs=2)
    cached_exec = best(ctas(cached), runs=2) - best(lambda: db.fetchall("EXPLAIN " + cached), runs=2)
    kernel_peers.warm_up()
    author = kernel_peers.author_config(d, k)
    author_s = best(lambda: kernel_peers.author_pk_rp(X, author), runs=2)
    sketch = PolynomialCountSketch(degree=2, n_components=k, random_state=0)
    sketch_s = best(lambda: sketch.fit(X[:2]).transform(X), runs=2)
    project_s = best(lambda: api.project(db, "t", "id", proj, into="o2", replace=True, check=False), runs=2)
    floor_s = bind + cached_exec
    print(f"PK-RP degree 2, {n} x {d} -> {k}, {proj.linear.nnz:,} additions a row (s = sqrt(d), p = {proj.linear.p})")
    print(f"  DuckDB EXPLAIN (parse, bind, optimise)       {bind:6.2f} s")
    print(f"  execution at the cache-resident rate         {cached_exec:6.2f} s")
    print(f"  floor (their sum)                            {floor_s:6.2f} s")
    print(f"  the query as compiled, CREATE TABLE AS       {run_sql:6.2f} s")
    print(f"  sqlrp.project(..., into=)                    {project_s:6.2f} s")
    print(f"  author's PK-RP (Pseudocode 1, numba)         {author_s:6.2f} s   floor / it {floor_s / author_s:5.2f}x")
    print(f"  PolynomialCountSketch                        {sketch_s:6.2f} s   floor / it {floor_s / sketch_s:5.2f}x")
    # P-RP m = 10 (s = 3, its default: s = sqrt(d) doubles its distortion on digits, the frontier):
    # DuckDB's fixed cost alone against the same matrix in memory
    prp = make_projection("p-rp", d, k, seed=0, m=10)
    prp_sql = compile_sql(prp, source, "duckdb", strategy="inline")
    prp_bind = best(lambda: db.fetchall("EXPLAIN " + prp_sql), runs=1)
    in_memory = best(lambda: kernel_peers.in_memory_p_rp(X, prp), runs=2)
    print(f"P-RP m = 10, {prp.linear.nnz:,} additions a row (s = 3)")
    print(f"  DuckDB EXPLAIN of the inline query           {prp_bind:6.2f} s")
    ratio = prp_bind / in_memory
    print(f"  the same matrix in memory (BLAS)             {in_memory:6.2f} s   EXPLAIN / it {ratio:5.2f}x")
