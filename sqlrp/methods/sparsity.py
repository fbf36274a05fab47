"""The sparsity ``s`` of the sign matrices, chosen from the data's fourth moments (issue 24).

Li, Hastie & Church (2006, "Very sparse random projections", Lemma 1) give the variance of the
squared-distance estimate of a sparse projection with entries ``sqrt(s) * {+1, 0, -1}``
(probabilities ``1/(2s), 1 - 1/s, 1/(2s)``) of a difference vector ``u = x - y`` to ``k`` dimensions:

    Var(||uR||^2 / k) = (2 ||u||^4 + (s - 3) sum_i u_i^4) / k

so relative to a Gaussian (or ``s = 3``) projection the variance grows by the factor
``1 + (s - 3)/2 * sum_i u_i^4 / ||u||^4``.  Averaged over pairs of rows, ``sum_i u_i^4 / ||u||^4`` is about
``kappa / d`` with

    kappa = d * sum_i E[u_i^4] / (sum_i E[u_i^2])^2,   E[u_i^2] = 2 mu2_i,  E[u_i^4] = 2 mu4_i + 6 mu2_i^2

(``mu2_i``, ``mu4_i`` the central moments of column ``i``): the kurtosis of the coordinates of a difference
of two rows (3 for Gaussian data; for standardised columns, the mean of ``(kurt_i + 3) / 2``).  The mean
distortion scales with the standard deviation, so it grows by ``sqrt(1 + (s - 3) kappa / (2 d))``.  The rule
(:func:`choose_s`): the sparsest ``s`` (at most Li et al.'s ``sqrt(d)``, at least Achlioptas' 3) whose
predicted loss is at most :data:`TOLERANCE` (2.5%, half the 5% bar of issue 24):

    s = min(sqrt(d), max(3, floor(3 + 2 d (TOLERANCE^2 - 1) / kappa)))

Light-tailed data keeps ``sqrt(d)`` (Gaussian columns at d = 784: ``3 + 0.10 * 784 / 3 = 29 > 28``); heavy
tails (sparse binary columns, standardised: a bit set in 1% of the rows has kurtosis ~100) get denser
matrices.  Data behind it, ``PYTHONPATH=. python bench/defaults.py --sparsity`` (figures in its docstring): on a
200 x 6,000 table of standardised sparse bits (``kappa = 128``) the linear projection's distortion as a
ratio to a Gaussian RP is 1.001 at s = 3, 1.038 at s = 12, 1.088 at 24, 1.19 at 48, 1.32 at sqrt(d) = 77
(predicted 1.00, 1.05, 1.11, 1.21, 1.34); PK-RP degree 2 (t = 10) loses about 0.6x as much (measured
factor 0.60-0.66), so the same rule is conservative there.

``kappa`` is estimated on a bounded sample when ``project``/``plan`` generate a projection from a table
(:func:`sqlrp.pipeline.moments.sample_kurtosis`, issue 34: never a whole extra read of the table for a
default): the :data:`SAMPLE_ROWS` rows of smallest id, a rule every engine applies alike, and at most
:data:`SAMPLE_FEATURES` features, evenly spaced (:func:`sample_features`); :func:`sample_kurtosis_of` is
the same sample in NumPy.  The error it gives: each column's fourth moment from ``n`` rows has a relative
standard error of ``sqrt((E x^8 / (E x^4)^2 - 1) / n)``, 7.2% for a Gaussian column at n = 2,048 (1.6%
for ``kappa`` averaged over 20 such columns); a bit set in 1% of the rows, 22%.  The rule is forgiving of
such errors: ``kappa`` underestimated by a fraction ``e`` predicts a loss of ``sqrt(1 + (TOLERANCE^2 - 1)
/ (1 - e))``, 3.7% for e = 0.5, still under the 5% bar; ``s`` is floored, so small errors seldom change
it.  What a sample cannot promise: a feature of outlying scale or tails outside the sampled rows or
columns; pass ``s`` to choose it yourself.  The scikit-learn transformer, fitted in memory, measures
all of its rows (:func:`kurtosis_of`); without data (``create_projection`` with only ``d``), ``"auto"``
stays ``sqrt(d)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

#: allowed growth of the mean distortion over a Gaussian (s = 3) projection, predicted by the rule
TOLERANCE = 1.025
#: rows of the kurtosis sample: those of smallest id (module docstring)
SAMPLE_ROWS = 2048
#: most features of the kurtosis sample, evenly spaced (a wide Parquet file is read column by column:
#: reading all of them costs about the whole file's read; docs/benchmarks.md, "Methods")
SAMPLE_FEATURES = 64


def choose_s(d: int, kurtosis: float | None, tolerance: float = TOLERANCE) -> float:
    """``min(sqrt(d), max(3, floor(3 + 2 d (tolerance^2 - 1) / kurtosis)))`` (module docstring);
    ``sqrt(d)`` when the kurtosis is unknown (``None``) or ``d < 9``."""
    cap = math.sqrt(d)
    if kurtosis is None or not math.isfinite(kurtosis) or kurtosis <= 0 or cap <= 3:
        return cap
    best = math.floor(3 + 2 * d * (tolerance**2 - 1) / kurtosis)
    return cap if best >= cap else float(max(3, best))


@np.errstate(over="ignore", invalid="ignore")
def difference_kurtosis(
    n: float, s1: np.ndarray, s2: np.ndarray, s3: np.ndarray, s4: np.ndarray, standardize: bool = False
) -> float | None:
    """``kappa`` (module docstring) from ``n`` rows and the per-column sums of ``x, x^2, x^3, x^4``;
    ``standardize``: of the standardised columns (constant columns stay 0).  ``None`` for no rows or
    no variation, or non-finite sums (the NULL/NaN check refuses those inputs later)."""
    sums = [np.asarray(v, dtype=np.float64) for v in (s1, s2, s3, s4)]
    if not n or any(not np.all(np.isfinite(v)) for v in sums):
        return None
    m1, m2, m3, m4 = (v / float(n) for v in sums)
    mu2 = np.maximum(m2 - m1**2, 0.0)
    mu4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4
    mu4 = np.maximum(mu4, mu2**2)  # a kurtosis is >= 1; raw-moment rounding cannot push it below
    if standardize:
        varies = mu2 > 0
        mu4 = np.where(varies, mu4 / np.where(varies, mu2, 1.0) ** 2, 0.0)
        mu2 = varies.astype(np.float64)
    e2, e4 = 2 * mu2, 2 * mu4 + 6 * mu2**2
    total = float(e2.sum())
    square = total**2  # 0 for moments below 1e-154 (values of about 1e-77 and less): no estimate
    if total <= 0 or square == 0 or not np.isfinite(square):
        return None
    kappa = float(len(e2) * e4.sum() / square)
    return kappa if np.isfinite(kappa) else None


@np.errstate(over="ignore", invalid="ignore")  # powers of huge values: inf sums give None, not warnings
def kurtosis_of(X: Any, standardize: bool = False) -> float | None:
    """``kappa`` of the rows of ``X`` (dense or SciPy sparse), in NumPy: the oracle of the SQL query."""
    if hasattr(X, "tocsc"):  # scipy.sparse
        X = X.tocsc().astype(np.float64)
        sums = [np.asarray(X.power(j).sum(axis=0)).ravel() for j in (1, 2, 3, 4)]
    else:
        X = np.asarray(X, dtype=np.float64)
        sums = [(X**j).sum(axis=0) for j in (1, 2, 3, 4)]
    return difference_kurtosis(X.shape[0], *sums, standardize=standardize)


def sample_features(d: int) -> np.ndarray:
    """The features of the kurtosis sample: all of them up to :data:`SAMPLE_FEATURES`, else that many
    evenly spaced, first and last included."""
    if d <= SAMPLE_FEATURES:
        return np.arange(d)
    return np.unique(np.round(np.linspace(0, d - 1, SAMPLE_FEATURES)).astype(np.int64))


def sample_kurtosis_of(X: Any, standardize: bool = False) -> float | None:
    """:func:`kurtosis_of` of the sample that :func:`sqlrp.pipeline.moments.sample_kurtosis` reads from a
    table whose ids are the row numbers: the first :data:`SAMPLE_ROWS` rows, :func:`sample_features`."""
    rows = X[:SAMPLE_ROWS]
    return kurtosis_of(rows[:, sample_features(rows.shape[1])], standardize)


def data_sparsity(method: str, params: dict[str, Any], kurtosis: Callable[[], float | None]) -> dict[str, Any]:
    """``params`` plus ``kurtosis=kurtosis()`` when the method's default sparsity is ``sqrt(d)`` and ``s``
    was not given (achlioptas ``"auto"``, PK-RP and CBP of degree 2, CRAFTMaps up-projecting with PK-RP):
    the method then chooses ``s`` by :func:`choose_s`.  Other methods' defaults are not sparse (P-RP
    ``s = 3``, Maclaurin ``s = 1``, PK-RP degree >= 3 ``s = 3``) and get nothing, and ``kurtosis`` is not
    called (it runs a query)."""
    s = params.get("s")
    auto = s is None or (isinstance(s, str) and s.lower() in ("auto", "sqrt", "sqrt(d)"))
    if method == "achlioptas":
        wanted = auto
    elif method in ("pk-rp", "cbp"):
        wanted = auto and int(params.get("degree", 2)) <= 2 and params.get("distribution", "achlioptas") == "achlioptas"
    elif method == "craftmap":
        wanted = params.get("up") == "pk-rp" and auto and int(params.get("degree", 2)) <= 2
    else:
        wanted = False
    if not wanted or params.get("kurtosis") is not None:
        return params
    value = kurtosis()
    return params if value is None else {**params, "kurtosis": float(value)}


__all__ = [
    "SAMPLE_FEATURES",
    "SAMPLE_ROWS",
    "TOLERANCE",
    "choose_s",
    "data_sparsity",
    "difference_kurtosis",
    "kurtosis_of",
    "sample_features",
    "sample_kurtosis_of",
]
