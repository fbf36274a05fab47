"""The cross-engine matrix: every method x layout x strategy x output either matches the NumPy
reference (relative 1e-9) or is refused with a :class:`sqlrp.SqlrpError` that names the engine.
Never wrong numbers, never a silently empty result.

Each engine's test file calls :func:`run_case` for the cases it can afford (Spark runs fewer).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.dialects import get_dialect

RTOL = 1e-9

#: a table name no engine can take unquoted: quotes, a semicolon, spaces, a dot, unicode
HOSTILE_TABLE = 'dig"its; DROP TABLE x --.é'
HOSTILE_ID = "row id"


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    method: str = "achlioptas"
    layout: str = "wide"
    params: tuple = ()  # (key, value) pairs for the method
    strategy: str = "auto"
    output: str = "wide"
    into: bool = False
    k: int = 6

    def options(self) -> dict:
        return dict(self.params)


CASES = [
    Case("achlioptas-s1", params=(("s", 1),)),
    Case("achlioptas-s3-pairs", params=(("s", 3),), strategy="pairs"),
    Case("achlioptas-sqrt-d", params=(("s", "auto"),), into=True),
    Case("gaussian", method="gaussian"),
    Case("achlioptas-array-output", params=(("s", 3),), output="array"),
    Case("long-join", layout="long", params=(("s", 3),), strategy="join"),
    Case("long-lookup", layout="long", params=(("s", 3),), strategy="lookup"),
    Case("long-auto", layout="long", params=(("s", 3),), into=True),
    Case("array", layout="array", params=(("s", 3),)),
    Case("p-rp", method="p-rp", params=(("m", 2), ("s", 3))),
    Case("pk-rp-3", method="pk-rp", params=(("degree", 3), ("t", 2))),
    Case("pk-rp-long", method="pk-rp", layout="long", params=(("degree", 2), ("t", 2))),
    Case("maclaurin", method="maclaurin", params=(("degree", 2), ("c", 1.0))),
    # random Fourier features: the output function cos in SQL (gamma="scale": the variance read in SQL)
    Case("rff-structured", method="rff", params=(("weights", "structured"),)),
    Case("rff-laplacian-long", method="rff", layout="long", params=(("kernel", "laplacian"), ("gamma", 0.02))),
]

#: a smaller set for slow engines (Spark): one of each layout, a kernel, materialisation
SMALL = [
    c
    for c in CASES
    if c.name in ("achlioptas-s1", "achlioptas-sqrt-d", "long-auto", "array", "pk-rp-3", "rff-structured")
]


#: one small parameter set per method, for the engines that run every method in every layout (DataFusion,
#: Hyper, MariaDB); each engine's test asserts it covers sqlrp.methods.METHODS
EVERY_METHOD = {
    "achlioptas": {"s": 3},
    "gaussian": {},
    "p-rp": {"m": 2, "s": 3},
    "pk-rp": {"degree": 2, "t": 2},
    "cbp": {"t": 3},
    "maclaurin": {"degree": 2, "c": 1.0},
    "craftmap": {"degree": 2},
    "rff": {"gamma": 0.05},
}


def data(rows: int = 40, d: int = 10, seed: int = 0) -> np.ndarray:
    """Digits-like data with zeros (the long layout stores only non-zeros) and one all-zero row."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(0, 16, (rows, d)))
    X[rng.random(X.shape) < 0.3] = 0.0
    X[3] = 0.0
    return X


def frame(X: np.ndarray, layout: str, id_name: str = HOSTILE_ID) -> pd.DataFrame:
    ids = np.arange(len(X), dtype=np.int64) * 3 + 1  # ids that are not row numbers
    if layout == "wide":
        out = pd.DataFrame(X, columns=[f"f {i}" for i in range(X.shape[1])])
        out.insert(0, id_name, ids)
        return out
    if layout == "long":
        r, c = np.nonzero(X)
        return pd.DataFrame({id_name: ids[r], "feature": c.astype(np.int64), "value": X[r, c]})
    return pd.DataFrame({id_name: ids, "x": list(X)})


def expected(projection, X: np.ndarray) -> np.ndarray:
    return sqlrp.transform(projection, X)


def run_case(db, case: Case, X: np.ndarray, table: str = HOSTILE_TABLE, tag: str = "") -> str:
    """Project ``X`` on ``db`` as ``case`` says; return ``"ok"`` after checking the numbers, or
    ``"refused"`` after checking the error names the engine.  Anything else fails the test."""
    dialect = get_dialect(db.dialect)
    name = f"{table}{tag}"
    projection_name = f"proj {case.name}{tag}"
    if case.layout == "array" and not dialect.arrays:
        try:
            db.write_dataframe(name, frame(X, "wide"), replace=True)
            sqlrp.project(db, name, HOSTILE_ID, projection_name, layout="array", array_column="x", k=case.k)
        except sqlrp.SqlrpError as exc:
            assert dialect.name in str(exc) or "array" in str(exc), str(exc)
            return "refused"
        raise AssertionError(f"{dialect.name}: the array layout ran on an engine without arrays")
    db.write_dataframe(name, frame(X, case.layout), replace=True)
    into = f"out {case.name}{tag}" if case.into else None
    kwargs = dict(
        layout=case.layout,
        method=case.method,
        k=case.k,
        seed=7,
        d=X.shape[1],
        strategy=case.strategy,
        output=case.output,
        into=into,
        **case.options(),
    )
    if case.layout == "array":
        kwargs["array_column"] = "x"
    try:
        result = sqlrp.project(db, name, HOSTILE_ID, projection_name, **kwargs)
    except sqlrp.SqlrpError as exc:
        message = str(exc)
        assert dialect.name in message, f"refused without naming the engine: {message}"
        return "refused"
    if into is not None:
        assert result is None
        from sqlrp.compiler import ident

        result = db.query_df(f"SELECT * FROM {ident(into).sql(dialect.sqlglot)}")
    projection = sqlrp.load_projection(db, projection_name)
    check(result, projection, X, case)
    return "ok"


def check(result: pd.DataFrame, projection, X: np.ndarray, case: Case) -> None:
    """``result`` (id column first) equals the reference for every row that must be there."""
    ids = (X.shape[0] and (np.arange(len(X)) * 3 + 1)).astype(np.int64)
    result = result.sort_values(HOSTILE_ID).reset_index(drop=True)
    got_ids = result[HOSTILE_ID].to_numpy(dtype=np.int64)
    if case.layout == "long":  # only ids with a stored non-zero have a row
        want_ids = ids[np.flatnonzero(np.any(X != 0, axis=1))]
    else:
        want_ids = ids
    assert len(result) > 0, "empty result"
    np.testing.assert_array_equal(got_ids, want_ids)
    if case.output == "array":
        got = np.vstack([np.asarray(v, dtype=float) for v in result.iloc[:, 1]])
    else:
        got = result.drop(columns=HOSTILE_ID).to_numpy(dtype=float)
    want = expected(projection, X)[(want_ids - 1) // 3]
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(np.abs(want).max(), 1e-300)
    err = np.max(np.abs(got - want)) / scale
    assert err <= RTOL, f"{case.name}: relative error {err:.3g}"


# ---- registry versions: databases made by earlier releases (testkit/registry_v4/) ----

V4 = Path(__file__).resolve().parent / "registry_v4"  # the hand-written SQL of registry versions 1-4


def build_by_hand(db, upto: int) -> None:
    """The registry as the hand-written files of ``testkit/registry_v4/<engine>/`` made it, up to ``upto``."""
    from sqlrp.registry.store import _statements

    folder = V4 / db.dialect
    for statement in _statements((folder / "bootstrap.sql").read_text()):
        db.execute(statement)
    for path in sorted(folder.glob("000*.sql"))[:upto]:
        for statement in _statements(path.read_text()):
            db.execute(statement)
        db.execute("INSERT INTO sqlrp_schema_version (version, name) VALUES (?, ?)", [int(path.name[:4]), path.name])


def use_registry(db) -> None:
    """Everything the registry's tables hold, written, read and deleted (all four versions' tables)."""
    p = sqlrp.create_projection(db, "rp", "achlioptas", d=12, k=4, s=3, seed=1)
    kernel = sqlrp.create_projection(db, "pk", "pk-rp", d=6, k=3, degree=2, t=2, seed=2)
    assert np.array_equal(sqlrp.load_projection(db, "rp").linear.dense(), p.linear.dense())
    back = sqlrp.load_projection(db, "pk")
    X = np.random.default_rng(0).standard_normal((3, 6))
    assert np.allclose(sqlrp.transform(back, X), sqlrp.transform(kernel, X), rtol=1e-12)
    assert list(sqlrp.list_projections(db)["name"]) == ["pk", "rp"]
    db.insert_columns(
        "sqlrp_pairs_entry",
        {
            "projection": "rp",
            "budget": -1,
            "node": np.arange(2, dtype=np.int32),
            "level": np.zeros(2, np.int32),
            "reads": np.arange(2, dtype=np.int32),
            "sign": np.ones(2, np.int16),
        },
    )
    db.execute(
        "INSERT INTO sqlrp_index (name, projection, source, bits, band_bits, means, vectors, params) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ["idx", "rp", "{}", 64, 8, None, True, '{"kind": "ivf"}'],
    )
    assert db.fetchall("SELECT params FROM sqlrp_index WHERE name = 'idx'") == [('{"kind": "ivf"}',)]
    sqlrp.drop_projection(db, "rp")
    assert db.fetchall("SELECT count(*) FROM sqlrp_pairs_entry")[0][0] == 0  # owned rows go with it
    assert db.fetchall("SELECT count(*) FROM sqlrp_linear_entry WHERE projection = 'rp'")[0][0] == 0
