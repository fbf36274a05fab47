"""The similarity-search tests' tables and oracle (``tests/search/``, ``tests/reliability/``): integer
clusters whose sums are exact, embedding-like rows, their DataFrame, the NumPy oracle replayed on an
index's own centroids and rotation, and the check that two result lists rank the same."""

from __future__ import annotations

import numpy as np
import pandas as pd

import sqlrp
from sqlrp.search.index import load_lists
from sqlrp.search.reference import reference_search

D = 12


def clustered(n: int, seed: int, d: int = D, centres: int = 10) -> np.ndarray:
    """Integer features around a few centres: with centroids rounded to 20 bits every sum is exact,
    in SQL and in NumPy alike, so lists, codes and estimates are equal, not merely close."""
    rng = np.random.default_rng(seed)
    C = rng.integers(-30, 31, size=(centres, d))
    return (C[rng.integers(0, centres, n)] + rng.integers(-4, 5, size=(n, d))).astype(np.float64)


def embedding_like(n: int, seed: int, d: int = 32) -> np.ndarray:
    """Gaussian rows whose covariance has a power-law spectrum (eigenvalue i ~ 1/i), randomly rotated."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal((n, d)) / np.sqrt(np.arange(1, d + 1))) @ basis.T


def frame(X: np.ndarray, id_name: str = "id", names: list[str] | None = None, ids=None) -> pd.DataFrame:  # noqa: ANN001
    df = pd.DataFrame(X, columns=names or [f"f{i}" for i in range(X.shape[1])])
    df.insert(0, id_name, np.arange(len(X), dtype=np.int64) if ids is None else ids)
    return df


def replay(db, name, X, ids, Q, qids, top, candidates, probes):  # noqa: ANN001
    """The NumPy oracle on the index's own centroids and rotation."""
    idx = sqlrp.load_index(db, name)
    return reference_search(
        X, ids, Q, qids, load_lists(db, idx), idx.signs, idx.metric, top=top, candidates=candidates, probes=probes
    )


def same_ranks(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    assert len(got) == len(ref) > 0
    np.testing.assert_array_equal(
        got[["query_id", "id", "rank"]].to_numpy(), ref[["query_id", "id", "rank"]].to_numpy()
    )
    np.testing.assert_allclose(got["distance"].to_numpy(), ref["distance"].to_numpy(), rtol=1e-9, atol=1e-12)
