"""Fuzzer of similarity search near the doubles' limits (issue 41, "silently wrong" 4): tables whose
features span 1e-323 (subnormal) to 1.7e308, one magnitude or mixed, negative, zero; queries that
are the table's own rows (each must find itself) or drawn apart, of the table's magnitude or not.
Each example builds an index and searches it three ways -- its defaults, every list probed and every
row a candidate, and ``exact=True`` -- on DuckDB and PostgreSQL (SQLite has no search).

The oracle is exact distances that nothing over- or underflows (:func:`~sqlrp.search.reference.true_distances`,
``math.dist``), on the values the engine stored, compared as distances, not ids (ties):

- a search either runs or is refused with one line (:class:`sqlrp.SqlrpError`).  It may refuse only
  queries beyond the index's limit (:func:`sqlrp.search.scale.limit`), angular rows too small beside
  the largest, and on PostgreSQL (which raises where a product underflows) data with values below
  ``2^-470`` after scaling; a build is refused only for the last two;
- every returned ``(id, distance)`` is at that id's true distance, to ``1e-9`` relative plus the
  documented resolution (:func:`sqlrp.search.scale.resolution`);
- with every list probed and every row a candidate, and exactly, the ``top`` distances are the true
  ``top`` smallest: the same neighbours wherever distances are distinct.
"""

from __future__ import annotations

import math
import uuid
import warnings

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import sqlrp
from sqlrp.search.index import load_index
from sqlrp.search.reference import true_distances
from sqlrp.search.scale import ANGULAR_LOW, limit, resolution, scale_exponent
from testkit.fuzz_tables import fuzz_settings

SEEN: dict[str, int] = {}
EXPONENTS = [0, -323, -310, -300, -200, -160, 150, 160, 200, 250, 300, 307]


def seen(what: str) -> None:
    SEEN[what] = SEEN.get(what, 0) + 1


def cell(mantissa: float, exponent: int) -> float:
    v = float(f"{mantissa!r}e{exponent}")
    return math.copysign(1.7e308, v) if math.isinf(v) else v


@st.composite
def case(draw: st.DrawFn) -> dict:
    d = draw(st.integers(1, 3))
    n = draw(st.integers(3, 7))
    base = draw(st.sampled_from(EXPONENTS))
    mixed = draw(st.booleans())
    mantissa = st.integers(-9, 9).map(float) | st.floats(-9.99, 9.99, allow_nan=False).map(lambda v: round(v, 2))

    def row(exponent: int) -> list[float]:
        exps = st.sampled_from(EXPONENTS) if mixed else st.just(exponent)
        return [cell(draw(mantissa), draw(exps)) for _ in range(d)]

    X = [row(base) for _ in range(n)]
    queries = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            queries.append(list(X[draw(st.integers(0, n - 1))]))  # a row of the table: it must find itself
        else:
            queries.append(row(draw(st.sampled_from([base, base, *EXPONENTS]))))
    metric = draw(st.sampled_from(["euclidean", "euclidean", "euclidean", "angular"]))
    return {"d": d, "X": X, "Q": queries, "metric": metric}


#: the issue's instances, run first in every run whatever hypothesis draws (its draws depend on its version)
EXAMPLES = [
    {  # 1e250: every distance inf on DuckDB, PostgreSQL's overflow; two queries are rows (find themselves)
        "d": 2,
        "X": [[1e250, -2e250], [3e250, 1e250], [0.0, 5e249], [-7e250, 2e250]],
        "Q": [[1e250, -2e250], [-7e250, 2e250]],
        "metric": "euclidean",
    },
    {  # subnormal features: every square 0, ties in id order
        "d": 2,
        "X": [[5e-324, 1e-323], [2e-323, -1e-323], [0.0, 3e-323], [-4e-323, 0.0]],
        "Q": [[2e-323, -1e-323]],
        "metric": "euclidean",
    },
    {  # a query of 1e300 against a table of ones: refused
        "d": 1,
        "X": [[1.0], [2.0], [-3.0]],
        "Q": [[1e300], [2.0]],
        "metric": "euclidean",
    },
    {  # angular rows of 1e300 and 1e-300: a norm would underflow, refused
        "d": 2,
        "X": [[1e300, 2e300], [1e-300, -1e-300], [3e300, 0.0]],
        "Q": [[1.0, 1.0]],
        "metric": "angular",
    },
    {  # distances beyond the largest double (found by the long run): inf, as math.dist; PostgreSQL raised
        "d": 2,
        "X": [[-7e307, 2e307], [0.0, -6e307], [5.3e306, 2.89e307], [-9e307, 1.05e307], [-9.68e307, 9.31e307]],
        "Q": [[0.0, -6e307], [8.5e306, -8e307]],
        "metric": "euclidean",
    },
]


def _with_examples(*which: int):  # noqa: ANN202 - a decorator of hypothesis tests
    def add(test):  # noqa: ANN001, ANN202
        for i in which:
            test = example(EXAMPLES[i])(test)
        return test

    return add


def _smallest(values: np.ndarray) -> float:
    nonzero = np.abs(values[values != 0])
    return float(nonzero.min()) if nonzero.size else math.inf


def _row_peaks(values: np.ndarray) -> np.ndarray:
    peaks = np.abs(values).max(axis=1)
    return peaks[peaks > 0]


def run_case(db, engine: str, c: dict) -> None:
    d, metric = c["d"], c["metric"]
    cols = ", ".join(f"f{i} DOUBLE PRECISION" for i in range(d))
    for table, key in (("t", "id"), ("q", "qid")):
        db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute(f"CREATE TABLE {table} ({key} BIGINT, {cols})")
    marks = ", ".join("?" * (d + 1))
    for i, v in enumerate(c["X"]):
        db.execute(f"INSERT INTO t VALUES ({marks})", [i, *v])
    for i, v in enumerate(c["Q"]):
        db.execute(f"INSERT INTO q VALUES ({marks})", [i, *v])
    feats = ", ".join(f"f{i}" for i in range(d))
    X = np.array([r[1:] for r in db.fetchall(f"SELECT id, {feats} FROM t ORDER BY id")], dtype=np.float64)
    Q = np.array([r[1:] for r in db.fetchall(f"SELECT qid, {feats} FROM q ORDER BY qid")], dtype=np.float64)
    e = scale_exponent(float(np.abs(X).max()))
    # PostgreSQL raises where a product underflows to 0 (NumPy and DuckDB round): only near 2^-470 scaled
    tiny = engine == "postgres" and min(_smallest(X), _smallest(Q)) < math.ldexp(1.0, -470 - e)
    small_rows = metric == "angular" and _row_peaks(X).size and _row_peaks(X).min() < math.ldexp(1.0, -ANGULAR_LOW - e)
    n, top = len(X), min(3, len(X))
    try:
        sqlrp.build_index(db, "t", "id", "ix", lists=2, metric=metric, replace=True, calibration_queries=20)
    except sqlrp.SqlrpError as exc:
        text = str(exc)
        assert "\n" not in text, text
        assert tiny or small_rows, f"a build of finite features was refused: {text}"
        seen("build refused")
        return
    assert not small_rows, "an angular build ran although a row's norm underflows"
    idx = load_index(db, "ix")
    assert (idx.scale or 0) == e, (idx.scale, e)
    T = true_distances(X, Q, metric)
    q_small = metric == "angular" and _row_peaks(Q).size and _row_peaks(Q).min() < math.ldexp(1.0, -ANGULAR_LOW - e)
    beyond = float(np.abs(Q).max()) >= limit(d, e) or q_small
    tol_abs = 4 * resolution(d, e, fine=engine != "postgres") if metric == "euclidean" else 1e-12
    for kind, options in (
        ("default", {}),
        ("everything", {"probes": idx.lists, "candidates": max(n, top)}),
        ("exact", {"exact": True}),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                hits = sqlrp.search(db, "ix", "q", "qid", top=top, **options)
            except sqlrp.SqlrpError as exc:
                text = str(exc)
                assert "\n" not in text, text
                assert beyond or tiny, f"{kind} search refused within range: {text}"
                seen(f"{kind} refused")
                continue
        assert not beyond, f"{kind} search ran on queries beyond the index's limit {limit(d, e):g}"
        for qi in range(len(Q)):
            got = hits[hits["query_id"] == qi].sort_values("rank")
            dist = got["distance"].to_numpy(dtype=np.float64)
            assert len(got) == top, (kind, qi, got)
            assert not np.isnan(dist).any(), (kind, got)
            true = T[qi, got["id"].to_numpy(dtype=np.int64)]
            close = (dist == true) | (np.abs(dist - true) <= 1e-9 * np.abs(true) + tol_abs)
            assert close.all(), f"{kind}: distances {dist} of ids {list(got['id'])}, true {true}"
            if kind != "default":
                want = np.sort(T[qi])[:top]
                close = (dist == want) | (np.abs(dist - want) <= 1e-9 * np.abs(want) + tol_abs)
                assert close.all(), f"{kind}: the top {top} distances {dist}, true {want} (all: {T[qi]})"
        seen(f"{kind} = oracle")


def test_fuzz_search_range_duckdb() -> None:
    db = sqlrp.connect("duckdb://")

    @_with_examples(0, 1, 2, 3)
    @given(case())
    @fuzz_settings(3)
    def check(c: dict) -> None:
        run_case(db, "duckdb", c)

    try:
        check()
    finally:
        db.close()


def test_fuzz_search_range_postgres(pg_url) -> None:
    import psycopg

    schema = f"range_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    db = sqlrp.connect(f"{pg_url}{sep}options=-csearch_path%3D{schema}")

    @_with_examples(0, 4)  # PostgreSQL's overflows
    @given(case())
    @fuzz_settings(2)
    def check(c: dict) -> None:
        run_case(db, "postgres", c)

    try:
        check()
    finally:
        db.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_fuzz_search_range_saw_both_sides() -> None:
    """Searches both compared with the oracle and were refused (queries beyond the limit)."""
    print("search range:", SEEN)
    if not SEEN:
        pytest.skip("the search range fuzzers did not run in this session")
    assert SEEN.get("exact = oracle", 0) >= 1 and SEEN.get("everything = oracle", 0) >= 1, SEEN
    assert sum(v for k, v in SEEN.items() if k.endswith("refused")) >= 1, SEEN
