"""Search defaults calibrated on the table (issue 33): the index measures, on its own rows, the
probing rule and candidates that reach the Recall@10 asked; the adaptive probing equals its NumPy
reference on DuckDB and PostgreSQL; held-out queries reach the target at the defaults; other
settings warn when their expected recall is below it; the k-means sample is a slice of a
permutation of the id ranks (the same rows on every engine)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.core.errors import InvalidParameter
from sqlrp.search.index import describe_defaults, load_lists
from sqlrp.search.reference import probe_counts, reference_search, result_recall
from sqlrp.search.sample import picked_ids, sample_rows
from testkit.search_cases import clustered, embedding_like, frame, same_ranks


def test_adaptive_defaults_match_the_numpy_reference(db):
    """The calibrated rule (floor, ratio, cap) probes per query what NumPy's probe_counts says; the
    whole search equals the oracle.  Queries far from the table probe more lists than the floor."""
    X = clustered(600, 4, centres=80)
    rng = np.random.default_rng(5)
    far = 3 * clustered(10, 7, centres=80) + rng.integers(-40, 41, size=(10, X.shape[1]))
    Q = np.vstack([clustered(20, 6, centres=80), far])
    db.write_dataframe("pts", frame(X))
    db.write_dataframe("qs", frame(Q, "qid"))
    idx = sqlrp.build_index(db, "pts", "id", "idx", lists=24, bits=64)
    cal = idx.calibration
    assert cal is not None and cal.ratio is not None and cal.floor < cal.cap <= 24
    assert sqlrp.load_index(db, "idx").calibration == cal  # stored with the index
    got = sqlrp.search(db, "idx", "qs", "qid", top=5)
    C = cal.default_candidates(5)
    lists = load_lists(db, idx)
    ref = reference_search(
        X, np.arange(600), Q, np.arange(30), lists, idx.signs, top=5, candidates=C, probes=cal.floor, ratio=cal.ratio,
        cap=cal.cap,
    )
    same_ranks(got, ref)
    counts = probe_counts(((Q[:, None, :] - lists.leaves[None]) ** 2).sum(axis=2), cal.floor, cal.cap, cal.ratio)
    assert cal.floor <= counts.min() < counts.max() <= cal.cap  # not vacuous: the rule adapts


def test_defaults_reach_the_target_on_held_out_queries(duck):
    both = embedding_like(6300, 11, d=24)
    X, Q = both[:6000], both[6000:]
    duck.write_dataframe("emb", frame(X))
    duck.write_dataframe("eq", frame(Q, "qid"))
    idx = sqlrp.build_index(duck, "emb", "id", "eidx")
    cal = idx.calibration
    assert cal.target == 0.95 and cal.recall >= 0.95 and cal.queries == 100 and cal.seconds > 0
    assert [p for p, _ in cal.probe_curve] == sorted(p for p, _ in cal.probe_curve)
    shares = [y for _, y in cal.probe_curve]
    assert shares == sorted(shares) and shares[-1] == 1.0  # every list probed holds every neighbour
    exact = sqlrp.search(duck, "eidx", "eq", "qid", top=10, exact=True)
    got = sqlrp.search(duck, "eidx", "eq", "qid", top=10)
    assert result_recall(got, exact) >= 0.93  # 300 held-out queries; calibrated on 100 rows for 0.95
    assert "calibrated for Recall@10 >= 0.95" in describe_defaults(duck, "eidx", 10)
    with pytest.warns(UserWarning, match="below the 0.95 index 'eidx' was calibrated for"):
        low = sqlrp.search(duck, "eidx", "eq", "qid", top=10, probes=1, candidates=10)
    assert result_recall(low, exact) < 0.95  # the warning was right
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # settings above the calibrated ones: no warning
        sqlrp.search(duck, "eidx", "eq", "qid", top=10, probes=cal.cap, candidates=cal.default_candidates(10) * 2)
    # a higher target asks for more
    strict = sqlrp.build_index(duck, "emb", "id", "eidx99", recall=0.99)
    assert (strict.calibration.mean_probes, strict.calibration.candidates) >= (cal.mean_probes, cal.candidates)
    assert strict.calibration.recall >= 0.99
    # none: the fixed defaults of before
    plain = sqlrp.build_index(duck, "emb", "id", "eidx0", calibration_queries=0)
    assert plain.calibration is None
    for bad in ({"recall": 0}, {"recall": 1.5}, {"calibration_queries": -1}):
        with pytest.raises(InvalidParameter):
            sqlrp.build_index(duck, "emb", "id", "bad", **bad)


def test_cli_says_what_the_defaults_were_calibrated_for(tmp_path, capsys):
    url = f"duckdb:///{tmp_path}/c.duckdb"
    db = sqlrp.connect(url)
    db.write_dataframe("pts", frame(clustered(500, 8)))
    db.write_dataframe("qs", frame(clustered(5, 9), "qid"))
    db.close()
    assert main(["index", "--db", url, "--table", "pts", "--id-column", "id", "--name", "idx", "--recall", "0.9"]) == 0
    assert "calibrated for Recall@10 >= 0.9" in capsys.readouterr().err
    assert main(["search", "--db", url, "--index", "idx", "--query-table", "qs", "--query-id-column", "qid"]) == 0
    assert "search defaults of index 'idx'" in capsys.readouterr().err
    assert main(["evaluate", "--db", url, "--index", "idx", "--queries", "20"]) == 0
    text = capsys.readouterr().out
    assert "calibration:" in text and "defaults" in text


def test_the_sample_is_a_slice_of_a_permutation_of_the_ranks(duck):
    """Slices of the seeded permutation are disjoint, exact in size, and cover every id once;
    another seed picks other rows; the k-means sample comes back in id order."""
    ids = [f"row-{i:04d}" for i in np.random.default_rng(1).permutation(997)]
    X = np.arange(997 * 3, dtype=np.float64).reshape(997, 3)
    duck.write_dataframe("t", frame(X, ids=ids))
    source = sqlrp.compiler.Source("t", "id", "wide", ("f0", "f1", "f2"))
    render = duck.sql_dialect.render
    slices = [
        sorted(r[0] for r in duck.fetchall(render(picked_ids(source, 997, lo, hi, 3))))
        for lo, hi in ((0, 300), (300, 400), (400, 997))
    ]
    assert [len(s) for s in slices] == [300, 100, 597]
    assert sorted(sum(slices, [])) == sorted(ids)
    other = sorted(r[0] for r in duck.fetchall(render(picked_ids(source, 997, 0, 300, 4))))
    assert other != slices[0]
    rows = sample_rows(duck, source, 3, "euclidean", 997, 300, 3)
    by_id = dict(zip(ids, X.tolist(), strict=True))
    np.testing.assert_array_equal(rows, np.array([by_id[i] for i in slices[0]]))
    assert isinstance(pd.DataFrame(rows), pd.DataFrame)


def test_index_of_a_file_creates_the_database_and_shows_progress(tmp_path, capsys):
    """``sqlrp index`` of a Parquet file into a DuckDB file that is not there yet makes it (issue 33:
    it told the user to run ``sqlrp migrate`` first); ``progress=True`` draws a bar on stderr."""
    path = tmp_path / "t.parquet"
    frame(clustered(400, 12)).to_parquet(path)
    url = f"duckdb:///{tmp_path}/new.duckdb"
    assert main(["index", "--db", url, "--table", str(path), "--id-column", "id", "--name", "idx"]) == 0
    assert "index 'idx'" in capsys.readouterr().err and (tmp_path / "new.duckdb").exists()
    assert (
        main(
            [
                "search",
                "--db",
                f"duckdb:///{tmp_path}/other.duckdb",
                "--index",
                "idx",
                "--query-table",
                str(path),
                "--query-id-column",
                "id",
            ]
        )
        != 0
    )  # search reads an index: no new file
    assert not (tmp_path / "other.duckdb").exists()
    db = sqlrp.connect(url)
    capsys.readouterr()
    sqlrp.build_index(db, str(path), "id", "idx2", progress=True)
    sqlrp.search(db, "idx2", str(path), "id", progress=True)
    err = capsys.readouterr().err
    assert "index idx2" in err and "calibrating" in err and "search idx2" in err
    db.close()


def test_queries_far_from_the_table_are_named_in_one_warning(duck):
    """A query unlike the table's rows does not silently get the recall measured on them: its K-th
    neighbour, farther than twice the calibration queries' (95th percentile), is named in a warning."""
    X = embedding_like(3000, 4)
    duck.write_dataframe("t", frame(X))
    sqlrp.build_index(duck, "t", "id", name="ix")
    cal = sqlrp.load_index(duck, "ix").calibration
    kth = np.sort(((X[:100, None, :] - X[None]) ** 2).sum(-1) ** 0.5, axis=1)[:, 10]  # rows as their own queries
    assert 0.5 * np.quantile(kth, 0.95) < cal.kth_distance < 2 * np.quantile(kth, 0.95)
    duck.write_dataframe("near", frame(X[:50] + 0.01))
    shifted = X[:50].copy()
    shifted[:5] += 10 * np.sqrt((X**2).sum(axis=1).mean())  # five queries far from every row
    duck.write_dataframe("far", frame(shifted))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sqlrp.search(duck, "ix", "near", "id", top=10)
    with pytest.warns(UserWarning, match=r"5 of 50 queries \(0, 1, 2, 3, 4\) are far from the indexed rows"):
        sqlrp.search(duck, "ix", "far", "id", top=10)
