"""Text ids under engine collations (issue 41, silently wrong #9): ids that differ only by case,
trailing or leading spaces, accents (composed or not), ``ß``/``ss`` or the empty string, in the long
layout's table, projected on MariaDB (default ``utf8mb4_general_ci``: case- and accent-insensitive,
PAD SPACE), DuckDB, PostgreSQL and SQLite.  NumPy keys rows by the exact string, so every engine
must give one output row per distinct id, equal to the reference to 1e-9; a collation that merges
ids (a ``GROUP BY`` or a join on the key comparing under it) gives fewer rows or summed ones.

The long layout joins a matrix table loaded on each engine (``matrix=TABLE``; stored projections in
MariaDB's registry on text ids: ``tests/fuzz/test_fuzz_mariadb_methods.py``), and MariaDB also runs
the wide layout pooled by a text group (its ``GROUP BY`` on the group key).  Budget: a few
derandomized examples per engine in CI (``fuzz_settings``);
``SQLRP_FUZZ_EXAMPLES=N`` for a long random run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.methods import make_projection, reference
from testkit.fuzz_tables import fuzz_settings

RTOL = 1e-9
D, K = 4, 3

#: look-alikes under case-, accent- and space-insensitive collations
LOOKALIKES = ["a", "A", "a ", " a", "a  ", "é", "É", "e", "E", "e\u0301", "ß", "ss", "s", "S", "", " ", "Ǆ", "ǅ", "ǆ"]
text_id = st.one_of(st.sampled_from(LOOKALIKES), st.text(alphabet="aAeéÉ ßs\u0301", min_size=0, max_size=4))
#: a set of distinct ids (distinct as strings: as NumPy keys them)
id_sets = st.lists(text_id, min_size=1, max_size=8, unique=True)
#: the instance of the issue: 'a', 'A', 'a ' and three more
ISSUE_IDS = ["a", "A", "a ", "b", "é", "e"]


def case(ids: list[str], seed: int, method: str) -> tuple[object, np.ndarray, pd.DataFrame, pd.DataFrame]:
    """The projection, the rows (one per id, every feature non-zero), the long table and the matrix table."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 2.0, size=(len(ids), D)) * rng.choice([-1.0, 1.0], size=(len(ids), D))
    projection = make_projection(method, D, K, seed=seed, **({"s": 1} if method == "achlioptas" else {}))
    rows, cols = np.nonzero(X)
    long = pd.DataFrame({"id": np.array(ids, dtype=object)[rows], "feature": cols, "value": X[rows, cols]})
    lin = projection.linear
    matrix = pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight})
    return projection, X, long, matrix


def same(out: pd.DataFrame, ids: list[str], want: np.ndarray, key: str, engine: str) -> None:
    """One output row per distinct id, exactly those ids, each equal to NumPy's to 1e-9."""
    got_ids = out[key].tolist()
    assert sorted(got_ids) == sorted(ids), f"{engine}: ids {sorted(ids)!r} came back as {sorted(got_ids)!r}"
    got = out.set_index(key).loc[ids].to_numpy(dtype=float)
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(got - want).max()) <= RTOL * scale, f"{engine}: {np.abs(got - want).max()}"


def check_long(db, engine: str, ids: list[str], seed: int, method: str) -> None:
    projection, X, long, matrix = case(ids, seed, method)
    db.write_dataframe("lt", long, replace=True)
    db.write_dataframe("m", matrix, replace=True)
    out = sqlrp.project(db, "lt", "id", projection, layout="long", matrix="m", d=D, store=False)
    same(out, ids, reference.transform(projection, X), "id", engine)


def draw(data: st.DataObject) -> tuple[list[str], int, str]:
    ids = data.draw(id_sets, label="ids")
    return ids, data.draw(st.integers(0, 2**16), label="seed"), data.draw(st.sampled_from(["achlioptas", "gaussian"]))


def test_fuzz_collation_mariadb(maria) -> None:
    @fuzz_settings(8)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        ids, seed, method = draw(data)
        check_long(maria, "mariadb", ids, seed, method)
        # the wide layout pooled by a text group: one output row per distinct group
        projection, X, _, _ = case(ids, seed, method)
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(D)])
        frame.insert(0, "id", np.arange(len(ids)))
        frame["grp"] = ids
        maria.write_dataframe("w", frame, replace=True)
        pooled = sqlrp.project(maria, "w", "id", projection, group_column="grp", store=False)
        keys = sorted(set(ids))
        same(pooled, keys, reference.transform(projection, X, groups=np.array(ids, dtype=object)), "grp", "mariadb")

    check_long(maria, "mariadb", ISSUE_IDS, 1, "achlioptas")  # the issue's instance, always
    run()


def test_fuzz_collation_duckdb(duck) -> None:
    @fuzz_settings(8)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        check_long(duck, "duckdb", *draw(data))

    check_long(duck, "duckdb", ISSUE_IDS, 1, "achlioptas")
    run()


def test_fuzz_collation_sqlite(tmp_path) -> None:
    db = sqlrp.connect(f"sqlite:///{tmp_path}/c.sqlite")

    @fuzz_settings(8)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        check_long(db, "sqlite", *draw(data))

    try:
        check_long(db, "sqlite", ISSUE_IDS, 1, "achlioptas")
        run()
    finally:
        db.close()


def test_fuzz_collation_postgres(pg) -> None:
    @fuzz_settings(8)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        check_long(pg, "postgres", *draw(data))

    check_long(pg, "postgres", ISSUE_IDS, 1, "achlioptas")
    run()
