"""Every strategy matches the NumPy reference (rel 1e-9) on DuckDB and PostgreSQL, and ``auto``
picks the measured rule.  No timings here: those live in ``bench/``."""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import pytest

import sqlrp
from sqlrp import api
from sqlrp.compiler import Source, compile_sql
from sqlrp.compiler import lists as lists_module
from sqlrp.compiler import pairs as pairs_module
from sqlrp.compiler.pairs import plan_pairs
from sqlrp.compiler.strategies import (
    PLANNER_SECONDS,
    best_mailman,
    best_pairs,
    choose,
    plan_mailman,
    planner_seconds,
    prefers_lists,
    prefers_long,
)
from sqlrp.core.errors import EngineLimit, InvalidParameter
from sqlrp.core.layout import Formulation, Target
from sqlrp.core.plan import Plan
from sqlrp.methods import make_projection, reference
from sqlrp.pipeline.plan import registry_of
from testkit.frames import array_frame, long_frame, wide_frame


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max())))


def _sparse(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    X = X.copy()
    X[rng.random(X.shape) < 0.6] = 0.0
    return X


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 24))
    return _sparse(X, rng)


@pytest.mark.parametrize("s", [1, 3, "auto"])
@pytest.mark.parametrize("strategy", ["inline", "mailman", "pairs"])
@pytest.mark.parametrize("layout", ["wide", "array"])
def test_dense_strategies_match_reference(db, data, s, strategy, layout):
    proj = make_projection("achlioptas", data.shape[1], 9, seed=3, s=s)
    want = reference.transform(proj, data)
    if layout == "wide":
        db.write_dataframe("t", wide_frame(data))
        opts = {}
    else:
        db.write_dataframe("t", array_frame(data))
        opts = {"layout": "array", "array_column": "x"}
    got = api.project(db, "t", "id", proj, strategy=strategy, **opts)
    _close(got[[f"p{j}" for j in range(9)]].to_numpy(), want)


@pytest.mark.parametrize("block", [2, 3, 5, 8])
def test_mailman_block_sizes(db, data, block):
    proj = make_projection("achlioptas", data.shape[1], 7, seed=1, s=1)
    db.write_dataframe("t", wide_frame(data))
    got = api.project(db, "t", "id", proj, strategy="mailman", block=block)
    _close(got[[f"p{j}" for j in range(7)]].to_numpy(), reference.transform(proj, data))


@pytest.mark.parametrize("strategy", ["join", "lookup"])
@pytest.mark.parametrize("s", [1, "auto"])
def test_long_strategies_match_reference(db, data, strategy, s):
    proj = make_projection("achlioptas", data.shape[1], 9, seed=5, s=s)
    db.write_dataframe("t", long_frame(data))
    got = api.project(db, "t", "id", proj, layout="long", strategy=strategy)
    ids = got["id"].to_numpy()
    _close(got[[f"p{j}" for j in range(9)]].to_numpy(), reference.transform(proj, data)[ids])


@pytest.mark.parametrize("strategy", ["join", "lookup"])
def test_long_strategies_stored_matrix_and_gaussian(db, data, strategy):
    proj = sqlrp.create_projection(db, "g", method="gaussian", d=data.shape[1], k=5, seed=2)
    db.write_dataframe("t", long_frame(data))
    got = api.project(db, "t", "id", "g", layout="long", strategy=strategy)
    ids = got["id"].to_numpy()
    _close(got[[f"p{j}" for j in range(5)]].to_numpy(), reference.transform(proj, data)[ids])


def test_mailman_array_output_and_materialised(db, data):
    proj = make_projection("achlioptas", data.shape[1], 6, seed=4, s=3)
    db.write_dataframe("t", wide_frame(data))
    api.project(db, "t", "id", proj, into="out", strategy="mailman", output="array", prefix="v")
    rows = db.fetchall('SELECT "id", "v" FROM "out" ORDER BY "id"')
    _close(np.array([list(r[1]) for r in rows]), reference.transform(proj, data))


def test_mailman_plan_is_exact_and_smaller():
    proj = make_projection("achlioptas", 784, 200, seed=0, s=1)
    plan = plan_mailman(proj.linear, 6)
    # rebuild the dense matrix from partials and terms
    d = proj.d
    P = np.zeros((d, len(plan.partials)))
    for q, (feat, sign) in enumerate(plan.partials):
        P[feat, q] = sign
    E = np.hstack([np.eye(d), P])
    W = np.zeros((d, proj.linear.p))
    for v, (idx, sign) in enumerate(plan.terms):
        W[:, v] = E[:, idx] @ sign
    np.testing.assert_array_equal(W, proj.linear.dense())
    assert sum(len(t[0]) for t in plan.terms) < proj.linear.nnz / 5


def _expand(plan, d: int) -> np.ndarray:
    """The d x p matrix a pairs plan computes, rebuilt from its partials and terms."""
    E = np.zeros((d, d + len(plan.partials)))
    E[:, :d] = np.eye(d)
    for q, (cols, signs) in enumerate(plan.partials):
        E[:, d + q] = E[:, cols] @ signs
    return np.column_stack([E[:, cols] @ signs for cols, signs in plan.terms])


@pytest.mark.parametrize("s", [1, 3])
def test_pairs_plan_is_exact_and_smaller(s):
    proj = make_projection("achlioptas", 784, 200, seed=0, s=s)
    plan = plan_pairs(proj.linear)
    np.testing.assert_array_equal(_expand(plan, 784), proj.linear.dense())
    # d = 784, k = 200: s = 1 156,600 -> 26,354 additions; s = 3 52,186 -> 23,249 (the figures the
    # docs quote; the greedy's incremental counting, sparse column writes included, must keep them)
    assert plan.additions == {1: 26_354, 3: 23_249}[s]
    assert plan.additions < (proj.linear.nnz - proj.linear.p) / (5 if s == 1 else 2)
    # a partial reads only lower levels
    for q, (cols, _) in enumerate(plan.partials):
        below = cols[cols >= 784] - 784
        assert (plan.level[below] < plan.level[q]).all()


def test_pairs_feature_blocks_and_budget(monkeypatch, db, data):
    """Wide inputs are planned in feature blocks; a budget caps the partials; both stay exact."""
    monkeypatch.setattr(pairs_module, "FEATURE_BLOCK", 10)
    proj = make_projection("achlioptas", data.shape[1], 30, seed=2, s=1)
    plan = plan_pairs(proj.linear)
    np.testing.assert_array_equal(_expand(plan, data.shape[1]), proj.linear.dense())
    assert all(len(np.unique(c[c < 24] // 10)) <= 1 for c, _ in plan.partials)  # within one block
    capped = plan_pairs(proj.linear, max_partials=5)
    assert len(capped.partials) <= 5
    np.testing.assert_array_equal(_expand(capped, data.shape[1]), proj.linear.dense())
    db.write_dataframe("t", wide_frame(data))
    got = api.project(db, "t", "id", proj, strategy="pairs")
    _close(got[[f"p{j}" for j in range(30)]].to_numpy(), reference.transform(proj, data))


def test_auto_choice():
    wide = Source("t", "id", "wide", tuple(f"f{i}" for i in range(784)))
    dense = make_projection("achlioptas", 784, 200, seed=0, s=1)
    sparse = make_projection("achlioptas", 784, 200, seed=0, s="auto")
    assert choose(dense, wide) == "pairs"
    assert choose(sparse, wide) == "inline"
    assert choose(sparse, Source("t", "id", "long")) == "lookup"
    assert choose(sparse, wide, strategy="mailman") == "mailman"  # a user can force one
    gauss = make_projection("gaussian", 784, 20, seed=0)
    assert choose(gauss, wide) == "inline"
    with pytest.raises(InvalidParameter):
        choose(gauss, wide, strategy="mailman")
    assert choose(sparse, wide, strategy="lookup") == "lookup"  # the wide table unnested (DuckDB, PostgreSQL)
    with pytest.raises(EngineLimit, match="^spark: the lookup strategy on a wide table"):  # no lockstep unnest
        choose(sparse, wide, "spark", strategy="lookup")
    with pytest.raises(InvalidParameter):
        choose(sparse, wide, strategy="fastest")


def test_postgres_column_limit_respected():
    dense = make_projection("achlioptas", 784, 200, seed=0, s=1)
    plan = best_mailman(dense.linear, "postgres")
    assert plan is not None and 784 + len(plan.partials) <= 1600
    pairs = best_pairs(dense.linear, "postgres")
    assert pairs is not None and 784 + len(pairs.partials) + 2 <= 1600
    sql = compile_sql(dense, Source("t", "id", "wide", tuple(f"f{i}" for i in range(784))), "postgres")
    assert "LIMIT ALL" in sql and '"_m0"' in sql


@pytest.mark.parametrize("strategy", ["inline", "mailman", "pairs", "join", "lookup"])
@pytest.mark.parametrize(
    "method, params",
    [("pk-rp", {"degree": 3, "t": 2, "c": 1.5}), ("p-rp", {"m": 2, "s": 1}), ("cbp", {"t": 2})],
)
def test_kernel_projections_under_every_strategy(db, data, strategy, method, params):
    """Bias (inhomogeneous kernels) and non-identity combiners go through every strategy."""
    proj = make_projection(method, data.shape[1], 5, seed=1, **params)
    layout = "long" if strategy in ("join", "lookup") else "wide"
    X = data.copy()
    X[:, 0] += 1.0  # no all-zero rows: the long layout has no row for them
    frame = long_frame(X) if layout == "long" else wide_frame(X)
    db.write_dataframe("k", frame)
    out = sqlrp.project(db, "k", "id", proj, layout=layout, strategy=strategy, d=X.shape[1])
    _close(out.iloc[:, 1:].to_numpy(dtype=float), reference.transform(proj, X))


def test_pairs_plan_exact_when_the_matrix_is_as_wide_as_the_count_matrices():
    """p = 2d: the sign matrix has as many columns as the count matrices when they first grow."""
    proj = make_projection("achlioptas", 10, 20, seed=0, s=1)
    plan = plan_pairs(proj.linear)
    assert len(plan.partials) > 10  # grew past the first capacity
    np.testing.assert_array_equal(_expand(plan, 10), proj.linear.dense())


def test_pairs_plan_with_no_pair_worth_sharing():
    """d = 12, k = 5, seed 0: no pair of signed features repeats, so the plan has no partials and
    every output reads features only (this raised IndexError once, from the renumbering)."""
    from sqlrp.compiler.pairs import plan_pairs_transposed

    proj = make_projection("achlioptas", 12, 5, seed=0)
    for planner in (plan_pairs, plan_pairs_transposed):
        plan = planner(proj.linear)
        assert plan.partials == []
        np.testing.assert_array_equal(_expand(plan, 12), proj.linear.dense())


def test_auto_skips_pairs_for_pk_rp():
    pk = make_projection("pk-rp", 784, 200, seed=0, degree=2, t=5, s="auto")
    assert choose(pk, Source("t", "id", "wide", tuple(f"f{i}" for i in range(784)))) == "inline"


def _counting_planner(monkeypatch) -> list[int]:
    """Count the calls of the real pair planner (instrumentation only: it still plans)."""
    from sqlrp.compiler import strategies

    calls: list[int] = []
    real = strategies.plan_pairs

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(strategies, "plan_pairs", counted)
    return calls


def test_stored_projection_keeps_its_pairs_plan(db, monkeypatch):
    """The pairs plan is planned once per stored matrix: stored by the first projection, read back
    (not planned) by the next one in a fresh load, and dropped with the projection."""
    X = np.random.default_rng(3).normal(size=(30, 50))
    db.write_dataframe("t", wide_frame(X))
    calls = _counting_planner(monkeypatch)
    proj = sqlrp.create_projection(db, "p3", "achlioptas", d=50, k=40, seed=1, s=1)
    api.project(db, "t", "id", "p3", into="out1", strategy="pairs")  # auto takes lists at 30 rows on DuckDB
    assert calls == [1]
    stored = db.fetchall("SELECT count(*), count(DISTINCT node) FROM sqlrp_pairs_entry WHERE projection = 'p3'")[0]
    assert stored[0] > 0 and stored[1] > 40  # 40 outputs plus the partials
    again = sqlrp.load_projection(db, "p3")  # a new object: nothing memoised for it
    out = api.project(db, "t", "id", again, strategy="pairs")
    assert calls == [1]  # read from the registry, not planned again
    expected = reference.transform(proj, X)
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), expected, rtol=1e-9, atol=1e-12)
    rows = db.fetchall('SELECT * FROM "out1" ORDER BY "id"')
    np.testing.assert_allclose(np.array([r[1:] for r in rows]), expected, rtol=1e-9, atol=1e-12)
    sqlrp.drop_projection(db, "p3")
    assert db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'p3'")[0][0] == 0


def test_a_stored_pairs_plan_that_does_not_compute_the_matrix_is_replaced(db, monkeypatch):
    X = np.random.default_rng(4).normal(size=(25, 50))
    db.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(db, "p4", "achlioptas", d=50, k=40, seed=2, s=3)
    api.project(db, "t", "id", "p4", strategy="pairs")
    total = db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'p4'")[0][0]
    db.execute("DELETE FROM sqlrp_pairs_entry WHERE projection = 'p4' AND node = -1")  # output 0 loses its terms
    calls = _counting_planner(monkeypatch)
    out = api.project(db, "t", "id", sqlrp.load_projection(db, "p4"), strategy="pairs")
    assert calls == [1]  # the damaged plan was detected and planned again, and stored
    assert db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'p4'")[0][0] == total
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(proj, X), rtol=1e-9, atol=1e-12)


def test_a_named_projection_that_is_not_stored_leaves_no_plan_rows(db):
    X = np.random.default_rng(5).normal(size=(20, 50))
    db.write_dataframe("t", wide_frame(X))
    ghost = sqlrp.create_projection(None, "ghost", "achlioptas", d=50, k=40, seed=3, s=3)
    out = api.project(db, "t", "id", ghost, check=False)
    assert db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry")[0][0] == 0
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(ghost, X), rtol=1e-9, atol=1e-12)


def test_a_plan_made_before_storing_is_stored_once(db, monkeypatch):
    X = np.random.default_rng(6).normal(size=(20, 50))
    db.write_dataframe("t", wide_frame(X))
    proj = make_projection("achlioptas", 50, 40, seed=4, s=1)
    best_pairs(proj.linear, db.dialect)  # planned in this process first
    registry_of(db).save(proj, "early")
    statements: list[str] = []
    real = db.execute

    def counting(sql, params=None):
        statements.append(sql)
        return real(sql, params)

    monkeypatch.setattr(db, "execute", counting)
    for _ in range(3):
        out = api.project(db, "t", "id", proj, strategy="pairs")  # auto takes lists at 20 rows on DuckDB
    assert sum("DELETE FROM sqlrp_pairs_entry" in sql for sql in statements) == 1  # stored by the first run only
    assert db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'early'")[0][0] > 0
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(proj, X), rtol=1e-9, atol=1e-12)


def test_plan_expand_and_computes_agree_with_an_independent_rebuild():
    """``PairsPlan.expand`` (what ``computes`` checks stored plans with) against this file's own
    float rebuild; and ``computes`` refuses a plan with one sign flipped."""
    proj = make_projection("achlioptas", 60, 30, seed=7, s=1)
    plan = plan_pairs(proj.linear)
    np.testing.assert_array_equal(plan.expand().T, _expand(plan, 60))
    assert plan.computes(proj.linear)
    cols, signs = plan.terms[0]
    plan.terms[0] = (cols, np.r_[-signs[0], signs[1:]])
    assert not plan.computes(proj.linear)


def test_a_signed_sum_opens_with_a_positive_term():
    """``b - a`` rather than ``-a + b``: DuckDB evaluates a leading negation as one more node."""
    from sqlglot import exp

    from sqlrp.core.nodes import Inputs, SignedSum
    from sqlrp.dialects import get_dialect

    inputs = Inputs(exp.column(n, quoted=True) for n in "abc")
    render = get_dialect("duckdb").render
    assert render(SignedSum.of(inputs, [0, 1, 2], [-1.0, -1.0, 1.0])) == '("c" - "a" - "b")'
    assert render(SignedSum.of(inputs, [0, 1], [-1.0, -2.0])) == '(-"a" - 2.0 * "b")'
    assert render(SignedSum.of(inputs, [0, 1], [1.0, -1.0])) == '("a" - "b")'


@pytest.mark.parametrize("s", [1, 3])
def test_transposed_pairs_plan_is_exact(s):
    """Paar's greedy on the transpose, its circuit transposed back: exact, children before readers,
    and the figures the docs quote (d = 784, k = 200)."""
    from sqlrp.compiler.pairs import plan_pairs_transposed

    proj = make_projection("achlioptas", 784, 200, seed=0, s=s)
    plan = plan_pairs_transposed(proj.linear)
    np.testing.assert_array_equal(_expand(plan, 784), proj.linear.dense())
    assert plan.computes(proj.linear)
    assert plan.additions == {1: 24_073, 3: 23_678}[s]
    # fewer partials, read back half as often as the plan on the matrix (s = 3: 7,737 read 22,967 times)
    assert (len(plan.partials), plan.partial_reads) == {1: (5_762, 11_591), 3: (5_361, 10_773)}[s]
    if s == 3:
        direct = plan_pairs(proj.linear)
        assert (len(direct.partials), direct.partial_reads) == (7_737, 22_967)
    for q, (cols, _) in enumerate(plan.partials):
        below = cols[cols >= 784] - 784
        assert (plan.level[below] < plan.level[q]).all()
        assert len(cols) >= 2  # a single-term z is folded into its readers
    # a partial of only negative terms is flipped (DuckDB would negate it as one more node)
    assert not any((signs < 0).all() for _, signs in plan.partials)
    capped = plan_pairs_transposed(proj.linear, max_partials=50)
    assert len(capped.partials) <= 50 and capped.computes(proj.linear)


def test_best_pairs_keeps_the_cheaper_orientation():
    """Wide Achlioptas matrices plan better transposed; PK-RP's 2,000 vectors over 784 features
    do not.  The estimated costs against inline's, (on the matrix, transposed), are the figures
    the docstrings of ``pairs_worth_planning`` and ``plan_pairs_transposed`` quote."""
    from sqlrp.compiler.pairs import plan_pairs_transposed
    from sqlrp.compiler.strategies import inline_cost, pairs_cost

    for proj, ratios in (
        (make_projection("achlioptas", 784, 200, seed=0, s=3), (0.67, 0.61)),
        (make_projection("achlioptas", 784, 200, seed=0, s="auto"), (1.04, 1.00)),
        (make_projection("pk-rp", 784, 200, seed=0, degree=2, t=5, s="auto"), (0.92, 0.98)),
    ):
        direct, transposed = plan_pairs(proj.linear), plan_pairs_transposed(proj.linear)
        cost = inline_cost(proj.linear)
        assert (round(pairs_cost(direct) / cost, 2), round(pairs_cost(transposed) / cost, 2)) == ratios
        kept = best_pairs(proj.linear)
        assert pairs_cost(kept) == min(pairs_cost(direct), pairs_cost(transposed))
        assert kept.additions == (transposed if proj.linear.p < proj.linear.d else direct).additions


@pytest.mark.parametrize("layout", ["wide", "array"])
def test_both_pair_orientations_match_reference(db, data, layout):
    """The SQL of either orientation's plan gives the NumPy reference, on DuckDB and PostgreSQL."""
    import copy

    from sqlrp.compiler.pairs import plan_pairs_transposed
    base = make_projection("achlioptas", data.shape[1], 30, seed=5, s=1)
    want = reference.transform(base, data)
    frame = wide_frame(data) if layout == "wide" else array_frame(data)
    db.write_dataframe("t", frame)
    opts = {} if layout == "wide" else {"layout": "array", "array_column": "x"}
    for planner in (plan_pairs, plan_pairs_transposed):
        proj = copy.deepcopy(base)
        plan = planner(proj.linear)
        assert plan.partials  # something is shared, so the levels are exercised
        how = Formulation("values", "pairs", pairs=plan)  # the plan the SQL is compiled from
        planned = dataclasses.replace(api.plan(db, "t", "id", proj, **opts), how=how)
        sql = sqlrp.compiler.compile_statements(planned, db.sql_dialect, Target(ordered=True)).main
        assert f'"_m{len(plan.partials) - 1}"' in sql and f'"_m{len(plan.partials)}"' not in sql
        got = db.query_df(sql)
        _close(got[[f"p{j}" for j in range(30)]].to_numpy(), want)


def test_pairs_levels_name_the_shorter_column_list(monkeypatch):
    """On DuckDB a level writes ``* EXCLUDE (dropped)`` or the kept columns, whichever list is
    shorter: the SQL is never longer than with the kept columns named everywhere."""
    from sqlrp.dialects.duckdb import DuckDBDialect

    proj = make_projection("achlioptas", 200, 100, seed=0, s=1)
    src = Source("t", "id", "wide", tuple(f"f{i}" for i in range(200)))
    mixed = compile_sql(proj, src, "duckdb", strategy="pairs", pretty=False)
    monkeypatch.setattr(DuckDBDialect, "star_exclude", False)
    named = compile_sql(proj, src, "duckdb", strategy="pairs", pretty=False)
    assert "EXCLUDE" in mixed and "EXCLUDE" not in named
    assert len(mixed) < len(named)
    assert 0 < mixed.count("EXCLUDE") < mixed.count("AS _l")  # other levels named their kept columns


@pytest.mark.parametrize("plan", ["direct", "transposed"])
def test_the_planner_stays_within_its_memory_cap(monkeypatch, plan):
    """The count matrices of a block never exceed ``PLANNER_BYTES``: its partials stop there, and the
    plan still computes the matrix exactly (issue 12: a wide P-RP grew them to (p + 16 d)^2)."""
    from sqlrp.compiler.pairs import plan_pairs_transposed

    proj = make_projection("p-rp", 300, 20, seed=4, m=5)
    free = (plan_pairs if plan == "direct" else plan_pairs_transposed)(proj.linear)
    monkeypatch.setattr(pairs_module, "PLANNER_BYTES", 2 * 2 * 350**2)
    seen = []
    greedy = pairs_module._greedy

    def watched(W, budget, min_uses, deadline=None):
        pairs, M, finished = greedy(W, budget, min_uses, deadline)
        itemsize = 1 if W.shape[0] < 256 else 2  # uint8 counts below 256 rows, else uint16
        limit = int(np.sqrt(pairs_module.PLANNER_BYTES // (2 * itemsize)))  # columns: block + partials
        seen.append((W.shape[1] + len(pairs), M.shape[1], limit))
        return pairs, M, finished

    monkeypatch.setattr(pairs_module, "_greedy", watched)
    capped = (plan_pairs if plan == "direct" else plan_pairs_transposed)(proj.linear)
    assert seen and all(used <= limit and cols <= limit for used, cols, limit in seen), seen
    assert capped.computes(proj.linear) and len(capped.partials) < len(free.partials)


def test_a_planner_deadline_gives_an_exact_plan_marked_incomplete():
    """The greedy stops at its deadline with the pairs found so far: the plan still computes the
    matrix, is marked incomplete, and is planned to completion when more time is allowed (the caller
    keeps the plan: nothing is memoised on the matrix)."""
    from sqlrp.compiler.pairs import plan_pairs, plan_pairs_transposed

    lin = make_projection("achlioptas", 300, 120, seed=0, s=3).linear
    for planner in (plan_pairs, plan_pairs_transposed):
        cut = planner(lin, deadline=time.perf_counter() - 1)
        assert not cut.complete and cut.computes(lin)
        assert cut.additions >= planner(lin).additions
    full = planner(lin)
    assert full.complete and full.partials
    fresh = make_projection("achlioptas", 300, 120, seed=1, s=3).linear
    assert not best_pairs(fresh, seconds=0.0).complete
    assert best_pairs(fresh, seconds=60.0).complete  # more time: planned in full
    assert not best_pairs(fresh, seconds=0.0).complete  # planned anew: no memo on the matrix


def test_planner_time_follows_the_table_size():
    lin = make_projection("achlioptas", 100, 50, seed=0, s=3).linear
    small, large, unknown = planner_seconds(lin, 200), planner_seconds(lin, 20_000_000), planner_seconds(lin)
    assert small == PLANNER_SECONDS[0] < large < unknown == PLANNER_SECONDS[1]


def test_row_estimates(db):
    X = np.random.default_rng(8).normal(size=(1234, 5))
    db.write_dataframe("t", wide_frame(X))
    if db.dialect == "postgres":
        assert db.estimate_rows("t") in (None, 1234)  # -1 (never counted) until ANALYZE
        db.execute('ANALYZE "t"')
    assert db.estimate_rows("t") == 1234
    assert db.estimate_rows("no_such_table") is None


WIDE_AS_LONG = [
    ("achlioptas", {"s": 3}),
    ("pk-rp", {"degree": 2, "c": 1.0}),  # every vector has a bias
    ("p-rp", {"m": 2, "modified": True}),  # sums of squared features beside the plain sums
    ("maclaurin", {"degree": 2}),  # constant terms, outputs without terms
    ("pk-rp", {"degree": 3, "s": 40.0}),  # d = 12: most vectors have no non-zero at all
]


@pytest.mark.parametrize("strategy", ["lookup", "join"])
@pytest.mark.parametrize("method, params", WIDE_AS_LONG, ids=lambda v: str(v))
def test_a_wide_table_unnested_matches_numpy(db, strategy, method, params):
    """``join`` / ``lookup`` on a wide table (unnested to a long one in SQL) equal the NumPy
    reference, with NULLs read as 0 (``nulls="zero"``) and pooled per group."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(25, 12))
    frame = wide_frame(X)
    frame["grp"] = np.arange(25) % 4
    db.write_dataframe("t", frame)
    db.execute('UPDATE "t" SET "f3" = NULL WHERE "id" = 2')
    X[2, 3] = 0.0
    proj = sqlrp.create_projection(db, "wl", method, d=12, k=7, seed=3, **params)
    if params.get("s") == 40.0:
        assert (np.bincount(proj.linear.vector, minlength=proj.linear.p) == 0).any()
    columns = [f"f{i}" for i in range(12)]
    out = api.project(db, "t", "id", "wl", strategy=strategy, nulls="zero", columns=columns)
    np.testing.assert_allclose(out[[f"p{j}" for j in range(7)]].to_numpy(), reference.transform(proj, X),
                               rtol=1e-9, atol=1e-9)
    pooled = api.project(db, "t", "id", "wl", strategy=strategy, nulls="zero", columns=columns, group_column="grp")
    expected = reference.transform(proj, X, groups=frame["grp"].to_numpy())
    np.testing.assert_allclose(pooled[[f"p{j}" for j in range(7)]].to_numpy(), expected, rtol=1e-9, atol=1e-9)
    sql = api.compile_projection(db, api.plan(db, "t", "id", "wl", columns=columns), strategy=strategy)
    assert "UNNEST" in sql.upper() and "sqlrp_linear_entry" in sql


def test_auto_takes_lists_for_small_tables_and_unnests_where_lists_are_missing():
    """Small tables on DuckDB: ``list_transform`` (any matrix, stored or inlined), outranking the
    unnested ``lookup`` that :func:`prefers_long` would still take; inline for large or unknown
    sizes and on engines without list lambdas."""
    proj = make_projection("pk-rp", 500, 160, seed=0)
    assert proj.linear.nnz >= 10_000
    columns = tuple(f"f{i}" for i in range(500))
    small, large = Source("t", "id", "wide", columns, rows=189), Source("t", "id", "wide", columns, rows=50_000)
    assert prefers_long(proj, small, matrix="registry")  # the unnested rule, now outranked by lists
    assert choose(proj, small, matrix="registry") == "list_transform"
    assert choose(proj, small, matrix="values") == "list_transform"  # positions are one string either way
    assert choose(proj, large, matrix="registry") == "inline"
    assert choose(proj, small, "postgres", matrix="registry") == "inline"  # not measured there
    assert choose(proj, Source("t", "id", "wide", columns), matrix="registry") == "inline"  # rows unknown
    tiny = make_projection("achlioptas", 500, 40, seed=0, s="auto")
    assert choose(tiny, small, matrix="registry") == "list_transform"  # binding 900 terms still costs more
    array = Source("t", "id", "array", array_column="x", rows=189)
    assert choose(proj, array) == "list_transform"
    assert choose(proj, Source("t", "id", "long", rows=189)) == "lookup"  # long tables: unchanged


def test_list_rule_crossing():
    """PK-RP degree 2, d = 784, k = 160: ``list_transform`` up to about 4,000 rows, inline above (the
    constants' docstrings in ``strategies.py`` give the timings); P-RP m = 10 at 200 rows of a stored
    projection: lists, not the unnested lookup (1.06 s against 1.58 s measured)."""
    proj = make_projection("pk-rp", 784, 160, seed=0, degree=2)
    columns = tuple(f"f{i}" for i in range(784))
    for rows, want in ((189, True), (2_000, True), (3_900, True), (4_200, False), (5_000, False)):
        assert prefers_lists(proj, Source("t", "id", "wide", columns, rows=rows)) is want, rows
    prp = make_projection("p-rp", 500, 160, seed=0, m=10)
    small = Source("t", "id", "wide", tuple(f"f{i}" for i in range(500)), rows=200)
    assert prefers_long(prp, small, matrix="registry") and choose(prp, small, matrix="registry") == "list_transform"
    # the sums' form: positions for sparse matrices, dense rows from about 1 in 12
    assert not lists_module.dense_rows(proj.linear) and lists_module.dense_rows(prp.linear)
    assert lists_module.dense_rows(make_projection("achlioptas", 500, 40, seed=0, s=3).linear)
    assert not lists_module.dense_rows(make_projection("achlioptas", 500, 40, seed=0, s=20.0).linear)


def test_list_rule_against_pairs():
    """Dense rows against ``pairs`` (estimated at most :data:`PAIRS_GAIN` of inline): Achlioptas
    s = 1, d = 500, k = 64 on 20,000 rows takes lists (0.83 s against pairs 1.04 s measured); s = 3
    with k = 160 and 200,000 rows does not (the dense rows' per-row cost overtakes)."""
    columns = tuple(f"f{i}" for i in range(500))
    dense = make_projection("achlioptas", 500, 64, seed=0, s=1)
    assert choose(dense, Source("t", "id", "wide", columns, rows=20_000)) == "list_transform"
    s3 = make_projection("achlioptas", 500, 160, seed=0, s=3)
    assert choose(s3, Source("t", "id", "wide", columns, rows=200_000)) in ("pairs", "inline")


def test_a_named_projection_stored_elsewhere_is_inlined_not_joined(db):
    """A projection with a name this database does not hold: the stored-matrix join would find no
    rows (all-zero outputs); the matrix is inlined instead, on the wide path the small-table rule
    picks and on the long layout."""
    X = np.random.default_rng(10).normal(size=(20, 100))
    db.write_dataframe("t", wide_frame(X))
    db.write_dataframe("tl", long_frame(X))
    ghost = sqlrp.create_projection(None, "ghost", "pk-rp", d=100, k=160, seed=3, s=10.0)
    assert ghost.linear.nnz >= 10_000
    expected = reference.transform(ghost, X)
    out = api.project(db, "t", "id", ghost, check=False)
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), expected, rtol=1e-9, atol=1e-9)
    out = api.project(db, "tl", "id", ghost, layout="long", check=False)
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), expected, rtol=1e-9, atol=1e-9)


def test_small_standardised_table_takes_lists_and_is_exact(db):
    """``standardize=True`` on a small table of a stored projection: the standardised relation goes
    through ``list_transform`` (the rows estimate reaches the rule through the standardising wrapper)
    and matches NumPy."""
    X = np.random.default_rng(12).normal(size=(40, 100)) * 3 + 1
    db.write_dataframe("t", wide_frame(X))
    if db.dialect == "postgres":
        db.execute('ANALYZE "t"')
    proj = sqlrp.create_projection(db, "pk", "pk-rp", d=100, k=160, seed=0, s=10.0)
    sql = api.compile_projection(db, api.plan(db, "t", "id", "pk", standardize=True))
    assert ("LIST_TRANSFORM" in sql.upper()) == (db.dialect == "duckdb")  # lists on DuckDB only
    out = api.project(db, "t", "id", "pk", standardize=True).drop(columns="id").to_numpy()
    expected = reference.transform(proj, (X - X.mean(axis=0)) / X.std(axis=0))
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_a_plan_cut_short_is_used_but_not_stored(duck):
    """A pairs plan the planner's time cut short computes the matrix exactly but is not written to
    the registry, so a later run with more time plans it in full."""
    X = np.random.default_rng(13).normal(size=(20, 60))
    duck.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(duck, "cut", "achlioptas", d=60, k=40, seed=2, s=1)
    plan = best_pairs(proj.linear, "duckdb", seconds=0.0)
    assert plan is not None and not plan.complete and plan.computes(proj.linear)
    assert not registry_of(duck).save_pairs(proj, "duckdb", plan)
    assert duck.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'cut'")[0][0] == 0
    full = best_pairs(proj.linear, "duckdb", seconds=60.0)
    assert full.complete and registry_of(duck).save_pairs(proj, "duckdb", full)
    assert duck.fetchall("SELECT count(*) FROM sqlrp_pairs_entry WHERE projection = 'cut'")[0][0] > 0
    assert registry_of(duck).load_pairs(proj, "duckdb").computes(proj.linear)


# ----------------------------------------------------------------------------------------------
# list_transform (DuckDB): every linear sum and the combiner in lists over constant positions

LIST_CASES = [
    ("achlioptas", {"k": 9, "s": 1}),
    ("achlioptas", {"k": 9, "s": 3}),
    ("achlioptas", {"k": 9, "s": "auto"}),
    ("gaussian", {"k": 5}),  # float weights: list_dot_product
    ("pk-rp", {"k": 6, "degree": 2, "t": 3, "c": 1.0}),  # a bias per vector
    ("pk-rp", {"k": 4, "degree": 3, "distribution": "gaussian", "c": 0.5}),  # weights and a bias
    ("pk-rp", {"k": 7, "degree": 3, "s": 40.0}),  # d = 24: most vectors have no non-zero at all
    ("p-rp", {"k": 6, "m": 4}),  # term weights -1
    ("p-rp", {"k": 6, "m": 3, "modified": True}),  # squared features (power 2)
    ("maclaurin", {"degree": 2, "k": 8}),  # constant terms, outputs without terms
]


def _quarters(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Multiples of 1/4 in [-2, 2), 40% zero: sums and products of them are exact in doubles."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-8, 8, size=(n, d)) / 4.0
    X[rng.random(X.shape) < 0.4] = 0.0
    return X


@pytest.fixture(params=["positions", "dense"])
def list_form(request, monkeypatch):
    """Each list_transform test in both forms of the sums: by positions, and dense weight rows."""
    monkeypatch.setattr(lists_module, "dense_rows", lambda linear: request.param == "dense")
    return request.param


@pytest.mark.parametrize("layout", ["wide", "array"])
@pytest.mark.parametrize("method, params", LIST_CASES, ids=lambda v: str(v))
def test_list_transform_matches_reference(duck, method, params, layout, list_form):
    X = _quarters(30, 24)
    proj = make_projection(method, 24, seed=2, **params)
    if params.get("s") == 40.0:
        assert (np.bincount(proj.linear.vector, minlength=proj.linear.p) == 0).any()
    if layout == "wide":
        duck.write_dataframe("t", wide_frame(X))
        opts = {}
    else:
        duck.write_dataframe("t", array_frame(X))
        opts = {"layout": "array", "array_column": "x"}
    got = api.project(duck, "t", "id", proj, strategy="list_transform", **opts)
    _close(got[[f"p{j}" for j in range(proj.k)]].to_numpy(), reference.transform(proj, X))
    sql = api.compile_projection(duck, api.plan(duck, "t", "id", proj, **opts), strategy="list_transform")
    assert "LIST_TRANSFORM" in sql.upper() and not re.search(r'_x\d+"? [-+] ', sql)  # no sum term by term
    assert ("LIST_SELECT(_XS" in sql.upper()) == (list_form == "positions")  # the sums' form


def test_list_transform_weighted_squares_and_biases(duck, list_form):
    """A stage of float weights with squared features, a bias and an entry given twice (no method
    makes one; the IR allows it): positions into ``x ++ x^2 ++ [0]`` or dense rows over ``x ++ x^2``,
    ``list_dot_product``, the bias added by index."""
    from sqlrp.core.ir import Combiner, LinearStage, Projection

    rng = np.random.default_rng(4)
    d, p = 10, 6
    vector, feature = np.repeat(np.arange(p - 1), 4), rng.integers(0, d, size=4 * (p - 1))
    feature[1] = feature[0]  # vector 0 lists one feature twice
    linear = LinearStage(d=d, p=p, vector=vector, feature=feature, weight=rng.integers(-8, 8, size=len(vector)) / 8,
                         bias=np.array([0.5, 0, -1.25, 0, 2, 0.75]), power=np.array([1, 2, 1, 2, 2, 1]))
    proj = Projection("custom", linear, Combiner.identity(p), scale=0.5)
    X = _quarters(12, d)
    duck.write_dataframe("t", wide_frame(X))
    got = api.project(duck, "t", "id", proj, strategy="list_transform")
    _close(got[[f"p{j}" for j in range(p)]].to_numpy(), reference.transform(proj, X))


def test_list_transform_nulls_pooling_and_standardising(duck, list_form):
    """NULLs as on every path: refused by the check, read as 0 with ``nulls="zero"``; with the check
    off a NULL counts as 0, as in ``lookup`` on the unnested table; pooled per group; standardised."""
    X = _quarters(25, 12, seed=5)
    frame = wide_frame(X)
    frame["grp"] = np.arange(25) % 4
    duck.write_dataframe("t", frame)
    duck.execute('UPDATE "t" SET "f3" = NULL WHERE "id" = 2')
    proj = sqlrp.create_projection(duck, "lt", "pk-rp", d=12, k=7, seed=3, degree=2, t=2, s=3)
    columns = [f"f{i}" for i in range(12)]
    with pytest.raises(sqlrp.SqlrpError, match="NULL"):
        api.project(duck, "t", "id", "lt", strategy="list_transform", columns=columns)
    zeroed = X.copy()
    zeroed[2, 3] = 0.0
    out = api.project(duck, "t", "id", "lt", strategy="list_transform", nulls="zero", columns=columns)
    _close(out[[f"p{j}" for j in range(7)]].to_numpy(), reference.transform(proj, zeroed))
    unchecked = api.project(duck, "t", "id", "lt", strategy="list_transform", check=False, columns=columns)
    looked_up = api.project(duck, "t", "id", "lt", strategy="lookup", check=False, columns=columns)
    _close(unchecked.drop(columns="id").to_numpy(), looked_up.drop(columns="id").to_numpy())
    pooled = api.project(duck, "t", "id", "lt", strategy="list_transform", nulls="zero", columns=columns,
                         group_column="grp")
    _close(pooled[[f"p{j}" for j in range(7)]].to_numpy(),
           reference.transform(proj, zeroed, groups=frame["grp"].to_numpy()))
    duck.execute('UPDATE "t" SET "f3" = 0 WHERE "id" = 2')
    standard = api.project(duck, "t", "id", "lt", strategy="list_transform", standardize=True, columns=columns)
    _close(standard[[f"p{j}" for j in range(7)]].to_numpy(),
           reference.transform(proj, (zeroed - zeroed.mean(axis=0)) / zeroed.std(axis=0)))


def test_list_transform_is_refused_where_it_does_not_apply():
    proj = make_projection("pk-rp", 20, 4, seed=0, degree=2, t=2)
    wide = Source("t", "id", "wide", tuple(f"f{i}" for i in range(20)))
    with pytest.raises(InvalidParameter, match="does not apply to the long layout"):
        choose(proj, Source("t", "id", "long"), "duckdb", "list_transform")
    for engine in ("postgres", "sqlite", "clickhouse", "spark"):
        with pytest.raises(EngineLimit, match=f"{engine}: the list_transform strategy needs list lambdas"):
            choose(proj, wide, engine, "list_transform")


@pytest.mark.parametrize("method, params", [("p-rp", {"m": 4, "s": 3}), ("gaussian", {})])
def test_dense_rows_bound_to_the_statement_equal_numpy(method, params):
    """DuckDB's ``list_transform`` with dense weight rows: executed, the matrix is read from a relation
    registered while the statement runs (no string literal, none left registered after); as text
    (``compile``), the literal.  Both equal the NumPy reference."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 20))
    db = sqlrp.connect()
    db.write_dataframe("t", wide_frame(X))
    proj = sqlrp.create_projection(db, "dense", method, d=20, k=6, seed=2, **params)
    columns = [f"f{i}" for i in range(20)]
    source = Source("t", "id", "wide", columns)
    assert lists_module.dense_rows(proj.linear)
    bound = sqlrp.compiler.compile_statements(
        Plan(proj, source, how=Formulation(strategy="list_transform", bind=True)), "duckdb"
    )
    assert len(bound.constants) == 1 and "DOUBLE[][]" not in bound.main
    (name, W), = bound.constants.items()
    assert name in bound.main and W.shape == (proj.linear.p, 20)
    text = compile_sql(proj, source, "duckdb", strategy="list_transform")
    assert "DOUBLE[][]" in text and "_sqlrp_w_" not in text
    want = reference.transform(proj, X)
    names = [f"p{j}" for j in range(6)]
    out = api.project(db, "t", "id", "dense", strategy="list_transform", columns=columns)
    _close(out[names].to_numpy(), want)
    api.project(db, "t", "id", "dense", strategy="list_transform", columns=columns, into="o")
    stored = np.array(db.fetchall(f'SELECT {", ".join(names)} FROM "o" ORDER BY "id"'))
    _close(stored, want)
    _close(np.array(db.fetchall(text.rstrip().rstrip(";") + ' ORDER BY "id"'))[:, 1:], want)
    left = db.fetchall("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '_sqlrp_w_%'")
    assert left == [(0,)]
