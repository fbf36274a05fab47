"""DataFrames of a matrix in the three layouts sqlrp reads (wide, long, array), and the parity check
of a projection's rows against the NumPy reference on the same stored matrix (relative 1e-9)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import sqlrp

RTOL = 1e-9


def wide_frame(X: np.ndarray, names: list[str] | None = None, id_name: str = "id") -> pd.DataFrame:
    names = names or [f"f{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X, columns=names)
    df.insert(0, id_name, np.arange(len(X), dtype=np.int64))
    return df


def long_frame(X: np.ndarray) -> pd.DataFrame:
    rows, cols = np.nonzero(X)
    return pd.DataFrame({"id": rows.astype(np.int64), "feature": cols.astype(np.int64), "value": X[rows, cols]})


def array_frame(X: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"id": np.arange(len(X), dtype=np.int64), "x": list(X)})


def assert_parity(sql_frame, projection, X, id_col="id"):
    ids = sql_frame[id_col].to_numpy()
    got = sql_frame.drop(columns=id_col).to_numpy(dtype=float)
    want = sqlrp.transform(projection, X)[ids]
    assert got.shape == want.shape
    scale = np.abs(want).max()
    assert np.max(np.abs(got - want)) <= RTOL * scale, np.max(np.abs(got - want)) / scale
