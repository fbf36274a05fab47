"""Linear random projections: Achlioptas sign matrices and Gaussian RP.

Reference: López-Sánchez et al. (2018), paper 000 (``docs/reference/papers.md``) Eq. 2-3
(Achlioptas' database-friendly distribution) and Li et al.'s "very sparse" choice ``s = sqrt(d)``
(``004_501365892903997c.txt``, sparse RP).  Same conventions as scikit-learn's
``sklearn/random_projection.py``; ``density = 1 / s`` there.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Combiner, LinearStage, Projection
from ..core.params import count
from .sparsity import choose_s


def johnson_lindenstrauss_min_dim(n_samples: int | np.ndarray, eps: float | np.ndarray = 0.1) -> int | np.ndarray:
    """Smallest ``k`` that keeps every pairwise distance of ``n_samples`` points within ``1 +- eps``.

    ``k >= 4 log(n) / (eps^2 / 2 - eps^3 / 3)`` (Dasgupta & Gupta; the formula of scikit-learn's
    ``johnson_lindenstrauss_min_dim``; ``004_501365892903997c.txt``, JL lemma).

    :param n_samples: the number of points (> 0), or an array of them.
    :param eps: the distortion allowed, ``0 < eps < 1``, or an array of them.
    :returns: ``k``, an int (an int64 array when either argument is an array).
    """
    eps_a = np.asarray(eps, dtype=float)
    n_a = np.asarray(n_samples)
    if np.any(eps_a <= 0.0) or np.any(eps_a >= 1):
        raise InvalidParameter(f"eps must be in (0, 1), got {eps!r}")
    if np.any(n_a <= 0):
        raise InvalidParameter(f"n_samples must be > 0, got {n_samples!r}")
    denominator = (eps_a**2 / 2) - (eps_a**3 / 3)
    out = (4 * np.log(n_a) / denominator).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def expected_distortion(k: int) -> float:
    """The JL floor ``E|chi2_k / k - 1|``: mean distortion of squared distances of a valid RP to k dims.

    For ``X ~ chi2_k = Gamma(a = k/2, theta = 2)``, the mean absolute deviation of a Gamma variable,
    ``E|X - a theta| = 2 theta a^a e^{-a} / Gamma(a)``, gives ``E|X/k - 1| = 4 (k/2)^{k/2} e^{-k/2} /
    (k Gamma(k/2))`` (equal to ``2 (P(chi2_{k+2} > k) - P(chi2_k > k))``); computed in logarithms.
    0.178 at k = 40 and 0.089 at k = 160 (``../shared/DESIGN.md`` section 2).

    :param k: the output dimension (>= 1).
    :returns: the expected relative distortion ``E|chi2_k / k - 1|`` of a squared distance.
    """
    if k < 1:
        raise InvalidParameter(f"k must be >= 1, got {k}")
    half = k / 2
    return math.exp(math.log(4.0) + half * math.log(half) - half - math.lgamma(half)) / k


def resolve_s(s: float | str, d: int, kurtosis: float | None = None) -> float:
    """``s`` as a number: ``"auto"`` (or ``"sqrt"``) means ``sqrt(d)``, the very sparse choice, or with the
    data's ``kurtosis`` the rule of :func:`sqlrp.methods.sparsity.choose_s` (at most ``sqrt(d)``)."""
    if isinstance(s, str):
        if s.lower() in ("auto", "sqrt", "sqrt(d)"):
            return choose_s(d, kurtosis)
        try:
            s = float(s)
        except ValueError:
            raise InvalidParameter(f"s must be a number >= 1 or 'auto' (sqrt(d)), got {s!r}") from None
    s = float(s)
    if not math.isfinite(s) or s < 1:
        raise InvalidParameter(f"s must be >= 1 (s = 1 dense signs, s = 3 Achlioptas, 'auto' = sqrt(d)); got {s}")
    return s


def _kurtosis(kurtosis: float | None) -> dict[str, float]:
    """The data's kurtosis as stored in a projection's parameters (when the sparsity was chosen from it)."""
    return {} if kurtosis is None else {"kurtosis": float(kurtosis)}


def check_dims(d: int, k: int) -> None:
    if int(d) != d or d < 1:
        raise InvalidParameter(f"the input needs at least one feature column (d >= 1), got d = {d}")
    if int(k) != k or k < 1:
        raise InvalidParameter(f"k (the output dimension) must be a whole number >= 1, got {k}")
    count("d", int(d))  # the upper bounds (sqlrp.core.params.LIMITS)
    count("k", int(k))


def sign_matrix(d: int, p: int, s: float, rng: np.random.Generator) -> LinearStage:
    """Draw a ``d x p`` Achlioptas sign matrix; returns its non-zero entries as a linear stage.

    Entry ``(i, j)`` is non-zero with probability ``1/s``, then ``+1`` or ``-1`` with equal
    probability (the ``sqrt(s)`` magnitude is left to the projection's scale).  Per column, the
    number of non-zeros is drawn ``Binomial(d, 1/s)`` and their rows uniformly without replacement,
    as scikit-learn's ``_sparse_random_matrix`` does.
    """
    if s == 1.0:
        feature = np.tile(np.arange(d), p)
        vector = np.repeat(np.arange(p), d)
    else:
        counts = rng.binomial(d, 1.0 / s, size=p)
        feature = np.concatenate([np.sort(rng.choice(d, size=c, replace=False)) for c in counts]) if p else []
        vector = np.repeat(np.arange(p), counts)
    weight = rng.choice(np.array([-1.0, 1.0]), size=len(vector))
    return LinearStage(d=d, p=p, vector=vector, feature=feature, weight=weight)


def achlioptas(
    d: int, k: int, s: float | str = "auto", seed: int | None = 0, kurtosis: float | None = None
) -> Projection:
    """Sparse sign random projection ``f(x) = (1/sqrt(k)) x R``.

    Distribution (000 Eq. 2-3): ``R_ij = sqrt(s) * {+1 w.p. 1/(2s), 0 w.p. 1 - 1/s, -1 w.p. 1/(2s)}``.
    Stored as signs; the projection is
    ``f_j(x) = sqrt(s)/sqrt(k) * (sum_{i: sigma_ij=+1} x_i - sum_{i: sigma_ij=-1} x_i)``.
    ``s = 1`` dense signs, ``s = 3`` Achlioptas, ``s = "auto"`` = ``sqrt(d)`` (very sparse), or, given the
    data's ``kurtosis`` (:mod:`sqlrp.methods.sparsity`; ``project`` measures it in SQL), the sparsest ``s``
    in ``[3, sqrt(d)]`` that Li, Hastie & Church's variance puts within 2.5% of a Gaussian RP.
    """
    check_dims(d, k)
    s_val = resolve_s(s, d, kurtosis)
    rng = np.random.default_rng(seed)
    linear = sign_matrix(d, k, s_val, rng)
    return Projection(
        method="achlioptas",
        linear=linear,
        combiner=Combiner.identity(k),
        scale=math.sqrt(s_val) / math.sqrt(k),
        params={"s": s_val, "s_requested": s if isinstance(s, str) else float(s), **_kurtosis(kurtosis)},
        seed=seed,
    )


def gaussian(d: int, k: int, seed: int | None = 0) -> Projection:
    """Gaussian random projection ``f(x) = (1/sqrt(k)) x R`` with ``R_ij ~ N(0, 1)``, stored as floats.

    The reference a user compares sign matrices against (000 Section 2); its SQL multiplies each
    feature by a stored weight, so it is not aggregate-only.
    """
    check_dims(d, k)
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((k, d)).ravel()
    linear = LinearStage(d=d, p=k, vector=np.repeat(np.arange(k), d), feature=np.tile(np.arange(d), k), weight=weight)
    return Projection(
        method="gaussian",
        linear=linear,
        combiner=Combiner.identity(k),
        scale=1.0 / math.sqrt(k),
        params={},
        seed=seed,
    )
