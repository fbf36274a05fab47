"""Polynomial-kernel random projections, expressed in the shared two-stage IR (:mod:`sqlrp.core.ir`).

Every method here is "aggregate-only linear stage + products in the combiner + one delayed scale":

- :func:`p_rp` -- P-RP / D2PK-RP, degree 2 with ``m`` sign matrices (López-Sánchez et al. 2018,
  paper 000 (``docs/reference/papers.md``) Eq. 8, 12, 13, 17 and footnote 1).
- :func:`pk_rp` -- PK-RP of any degree ``g`` (``003_ff2487e5c9ebcf47.txt`` Algorithm 2, Eq. 4.10-4.11,
  4.15, 4.17, 4.21 and Appendix A Pseudocode 1).
- :func:`cbp` -- CBP-KRP, compact bilinear pooling (003 Ch. 5, Appendix A Pseudocode 2, Eq. B.1): the
  degree-2 PK-RP with the balanced index; the pooling itself is ``GROUP BY`` at query time
  (``Source.group_column`` / ``project(..., group_column=...)``).
- :func:`maclaurin` -- random Maclaurin feature maps for ``(x.y + q)^r`` (Kar & Karnick;
  ``001_b19d9de78d5ade5f.txt`` Algorithm 1).
- :func:`craftmap` -- CRAFTMaps (001 Algorithm 2): an up-projection with a random feature map
  followed by a linear Achlioptas down-projection, returned as a :class:`sqlrp.core.ir.Composed`.

Which sparsity to use for P-RP (the pitfall of issue 5): the diagonal features ``x_i^2`` of the
degree-2 feature space get, in the implicit projection vector ``sum_l sigma_l phi(r_l)``, the weight
``sum_l sigma_l r_il^2``.  With ``s = 1`` every ``r_il^2`` is the same constant, so for even ``m`` those
weights are exactly zero: P-RP then projects the *modified* kernel ``(x.y)^2 - (x^2).(y^2)`` (000 Eq. 12),
not the full one.  For general ``s`` and even ``m`` the diagonal weight has mean 0 and variance
``(s - 1) / 2``; ``s = 3`` (the default here) gives the variance 1 a valid RP needs.  On raw data with
large-magnitude features most of the kernel distance sits in the diagonal features, so standardise
(``project(..., standardize=True)``) or use ``modified=True`` and evaluate against the modified kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Combiner, Composed, LinearStage, Projection
from .linear import _kurtosis, achlioptas, check_dims, resolve_s, sign_matrix

INDEX_SCHEMES = ("distinct", "balanced")
DISTRIBUTIONS = ("achlioptas", "gaussian")


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InvalidParameter(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _nonnegative(name: str, value: Any) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InvalidParameter(f"{name} must be a number >= 0, got {value!r}")
    return value


# ----------------------------------------------------------------------------------------------
# P-RP / D2PK-RP


def p_rp(d: int, k: int, m: int = 10, s: float | str = 3.0, modified: bool = False, seed: int | None = 0) -> Projection:
    """P-RP (D2PK-RP): random projection from the degree-2 polynomial kernel's feature space.

    000 Eq. 13 with the matrices of Eq. 17: ``x'_j = 1/sqrt(k) * sum_{l=1..m} sigma_l * (x . r_jl)^2``,
    ``r_jl`` the j-th column of the l-th ``d x k`` matrix with entries ``sqrt(s)/(2m)^(1/4) * {+1, 0, -1}``
    (probabilities ``1/(2s), 1 - 1/s, 1/(2s)``) and ``sigma_l = (-1)^l`` (footnote 1: half of the
    ``l`` subtracted so the always-positive diagonal features get zero mean).  Stored as signs:

        x'_j = s / (sqrt(2m) * sqrt(k)) * sum_l sigma_l * (sum_i sign_ijl * x_i)^2

    IR: ``p = m*k`` sign vectors (vector ``l*k + j``), one term per ``(j, l)`` with two factors of the same
    vector and weight ``sigma_l``; ``scale = s / (sqrt(2m) sqrt(k))``.  ``m = 1`` is 000 Section 3 (Eq. 8).

    ``m`` defaults to 10 (issue 24): with ``m = 1`` the mean distortion in the degree-2 kernel's feature
    space at k = 160 is about twice the JL floor (000 Table 1: 0.239), and an odd ``m`` leaves the
    diagonal features a non-zero mean weight (footnote 1).  ``python bench/defaults.py --prp`` measures
    the even ``m`` against ``m = 10`` on four kinds of table (figures in its docstring).

    ``modified=True`` projects the modified kernel ``K(x, y) = (x.y)^2 - (x^2).(y^2)`` (000 Eq. 12) instead:
    per vector it subtracts ``sum_i r_i^2 x_i^2 = c^2 * sum_{i in supp(r)} x_i^2``, i.e. ``m*k`` more vectors
    with ``power = 2`` (sums of squares over the same support) entering as terms of weight ``-sigma_l``.
    With ``s = 1`` and even ``m`` the two variants give identical outputs (module docstring).
    """
    check_dims(d, k)
    m = _positive_int("m", m)
    s_val = resolve_s(s, d)
    rng = np.random.default_rng(seed)
    signs = sign_matrix(d, m * k, s_val, rng)
    mk = m * k
    vec = np.arange(mk)
    sigma = np.where((vec // k) % 2 == 0, 1.0, -1.0)
    component = vec % k
    term_component, term_weight = [component], [sigma]
    factor_term, factor_vector = [np.repeat(vec, 2)], [np.repeat(vec, 2)]
    linear = signs
    if modified:
        linear = LinearStage(
            d=d,
            p=2 * mk,
            vector=np.concatenate([signs.vector, signs.vector + mk]),
            feature=np.concatenate([signs.feature, signs.feature]),
            weight=np.concatenate([signs.weight, np.ones(signs.nnz)]),
            power=np.concatenate([np.ones(mk, dtype=np.int64), np.full(mk, 2)]),
        )
        term_component.append(component)
        term_weight.append(-sigma)
        factor_term.append(vec + mk)
        factor_vector.append(vec + mk)
    combiner = Combiner(
        k=k,
        term_component=np.concatenate(term_component),
        term_weight=np.concatenate(term_weight),
        factor_term=np.concatenate(factor_term),
        factor_vector=np.concatenate(factor_vector),
    )
    return Projection(
        method="p-rp",
        linear=linear,
        combiner=combiner,
        scale=s_val / (math.sqrt(2 * m) * math.sqrt(k)),
        params={"m": m, "s": s_val, "modified": bool(modified), "degree": 2, "c": 0.0},
        seed=seed,
    )


# ----------------------------------------------------------------------------------------------
# PK-RP (any degree), CBP-KRP


def index_matrix(k: int, width: int, p: int, scheme: str, rng: np.random.Generator) -> np.ndarray:
    """The ``k x width`` matrix ``I`` of vector indices (``width = g*t``), 003 Appendix A.

    ``distinct``: each row holds ``width`` distinct indices drawn from ``[0, p)`` (Pseudocode 1 step 2).
    ``balanced`` ("repetition minimisation", 003 Eq. 4.21 and Pseudocode 2 steps 2-3): the multiset
    ``P = range(p) repeated floor(k*width/p) times + range(k*width mod p)`` is shuffled and reshaped, so
    every vector is used about ``k*width/p`` times and ``p = k*width`` means no vector is used twice.
    """
    if scheme == "distinct":
        if width > p:
            raise InvalidParameter(f"the distinct index scheme needs p >= g*t = {width}, got p = {p}")
        return np.stack([rng.choice(p, size=width, replace=False) for _ in range(k)]) if k else np.zeros((0, width))
    if scheme == "balanced":
        total = k * width
        pool = np.concatenate([np.tile(np.arange(p), total // p), np.arange(total % p)])
        rng.shuffle(pool)
        return pool.reshape(k, width)
    raise InvalidParameter(f"index must be one of {', '.join(INDEX_SCHEMES)}, got {scheme!r}")


def _random_vectors(
    d: int, p: int, distribution: str, s: float, c: float, rng: np.random.Generator
) -> tuple[LinearStage, float]:
    """``p`` random vectors over ``d`` features (plus the constant feature ``sqrt(c)`` when ``c > 0``).

    Returns the linear stage and the magnitude of one entry (``sqrt(s)`` for signs, 1 for Gaussian).
    The appended constant feature (003 Eq. 4.17) becomes the per-vector ``bias = sqrt(c) * r_{d+1}``.
    """
    d_eff = d + 1 if c > 0 else d
    if distribution == "achlioptas":
        full = sign_matrix(d_eff, p, s, rng)
        magnitude = math.sqrt(s)
    elif distribution == "gaussian":
        full = LinearStage(
            d=d_eff,
            p=p,
            vector=np.repeat(np.arange(p), d_eff),
            feature=np.tile(np.arange(d_eff), p),
            weight=rng.standard_normal(p * d_eff),
        )
        magnitude = 1.0
    else:
        raise InvalidParameter(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
    if c == 0:
        return full, magnitude
    const = full.feature == d
    bias = np.zeros(p)
    bias[full.vector[const]] = math.sqrt(c) * full.weight[const]
    keep = ~const
    linear = LinearStage(
        d=d, p=p, vector=full.vector[keep], feature=full.feature[keep], weight=full.weight[keep], bias=bias
    )
    return linear, magnitude


def _compact(linear: LinearStage, used: np.ndarray) -> tuple[LinearStage, np.ndarray]:
    """Keep only the vectors in ``used`` (sorted unique), renumbered ``0..len(used)-1``.

    Vectors no output uses would cost a linear sum each in SQL for nothing.  Returns the new stage and
    the map old index -> new index."""
    remap = np.full(linear.p, -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    keep = remap[linear.vector] >= 0
    bias = linear.bias[used] if linear.bias is not None else None
    power = linear.power[used] if linear.power is not None else None
    stage = LinearStage(
        d=linear.d,
        p=len(used),
        vector=remap[linear.vector[keep]],
        feature=linear.feature[keep],
        weight=linear.weight[keep],
        bias=bias,
        power=power,
    )
    return stage, remap


#: above this d, degree >= 3 keeps s = 3 (dense signs would cost 3x the additions of s = 3)
DENSE_SIGNS_MAX_D = 1024


def default_s(degree: int, d: int | None = None) -> float | str:
    """PK-RP's default sparsity: ``"auto"`` for degree 2 (``sqrt(d)``, or from the data's kurtosis,
    :mod:`sqlrp.methods.sparsity`); for higher degrees dense signs (``s = 1``) up to
    :data:`DENSE_SIGNS_MAX_D` features, 3 above.

    Degree 2, measured with ``python examples/kernel_frontier.py OUT --grid sparsity --seeds 30`` (k = 160,
    t = 10, p = g*t*k, standardised digits, breast cancer, wine and 28 x 28 photo patches; mean
    distortion over 30 seeds as a ratio to the author's default configuration -- Gaussian, t = 10,
    p = 3000, 003 Pseudocode 1 -- on the same rows; worst dataset): ``s = sqrt(d)`` 1.012 (digits),
    ``s = 3`` 0.964.  Degree 3: ``s = sqrt(d)`` 1.055 (digits: over the 5% bar), ``s = 3`` 0.929 there,
    but on standardised breast cancer (150 rows, ``bench/defaults.py``) ``s = 3`` gave 1.074x the author's
    over seeds 0-9 (0.979-0.991x over 30 seeds) and ``s = 1`` 1.016x (0.936-0.945x over 30): a product of
    ``g`` factors multiplies their fourth moments (``s`` per entry; Gaussian 3), and dense signs have the
    smallest, 1.  Issue 24.
    """
    if degree <= 2:
        return "auto"
    return 1.0 if d is None or d <= DENSE_SIGNS_MAX_D else 3.0


def pk_rp(
    d: int,
    k: int,
    degree: int = 2,
    t: int = 10,
    p: int | None = None,
    s: float | str | None = None,
    distribution: str = "achlioptas",
    index: str = "balanced",
    c: float = 0.0,
    seed: int | None = 0,
    kurtosis: float | None = None,
    _method: str = "pk-rp",
) -> Projection:
    """PK-RP: random projection from the feature space of the polynomial kernel ``(x.y + c)^g``.

    003 Eq. 4.10-4.11 / Pseudocode 1: ``S`` (d x p) holds ``p`` random vectors, N(0, 1)
    (``distribution="gaussian"``) or Achlioptas with sparsity ``s`` (Eq. 4.15); ``I`` (k x g*t) indexes
    them (:func:`index_matrix`, ``index="distinct"`` or ``"balanced"``); with ``K = X S``

        y_c = 1/sqrt(t*k) * sum_{i<t} prod_{j<g} K[I[c, g*i + j]]

    With sign-stored ``S`` the entry magnitude ``sqrt(s)`` of each of the ``g`` factors moves into the
    delayed scale: ``scale = sqrt(s)^g / sqrt(t*k)``.  IR: ``t`` terms of ``g`` factors per component.
    ``index`` defaults to ``"balanced"`` (repetition minimisation, 003 Section 4.4.5): measured here on
    standardised digits / breast_cancer / wine it is as good as or slightly better than ``"distinct"``
    (Pseudocode 1's scheme), as 003 Fig. 4.6 reports; unlike ``"distinct"`` it may, rarely, use one vector
    twice within a term.
    ``c > 0`` gives the inhomogeneous kernel through the appended constant feature ``sqrt(c)``
    (003 Eq. 4.17): each random vector gets one more entry, stored as its ``bias``.  ``p`` defaults to
    ``g*t*k`` (no vector repetition with ``index="balanced"``); vectors no output uses are dropped.

    ``s`` defaults to :func:`default_s`: ``sqrt(d)`` for degree 2 (9x fewer additions than ``s = 3`` at
    d = 784), dense signs (d <= 1,024) or 3 above; degree 2 set by the accuracy/cost frontier of
    ``examples/kernel_frontier.py``.  Given the data's ``kurtosis`` (``project`` measures it in SQL),
    degree 2's ``sqrt(d)`` becomes the rule of
    :mod:`sqlrp.methods.sparsity` (at most ``sqrt(d)``, denser on heavy-tailed inputs: on 200 x 6,000
    standardised sparse bits ``sqrt(d)`` gave 1.16x the author's distortion, s = 6 and 12 0.95-0.96x).
    """
    check_dims(d, k)
    g = _positive_int("degree", degree)
    s = default_s(g, d) if s is None else s
    t = _positive_int("t", t)
    c = _nonnegative("c", c)
    p = g * t * k if p is None else _positive_int("p", p)
    s_val = resolve_s(s, d + (1 if c > 0 else 0), kurtosis) if distribution == "achlioptas" else 1.0
    rng = np.random.default_rng(seed)
    vectors, magnitude = _random_vectors(d, p, distribution, s_val, c, rng)
    index_ = index_matrix(k, g * t, p, index, rng)
    linear, remap = _compact(vectors, np.unique(index_))
    idx = remap[index_]  # k x g*t, renumbered
    terms = np.arange(k * t)
    combiner = Combiner(
        k=k,
        term_component=np.repeat(np.arange(k), t),
        term_weight=np.ones(k * t),
        factor_term=np.repeat(terms, g),
        factor_vector=idx.reshape(-1),
    )
    params: dict[str, Any] = {
        "degree": g,
        "t": t,
        "p": p,
        "distribution": distribution,
        "index": index,
        "c": c,
        "modified": False,
    }
    if distribution == "achlioptas":
        params["s"] = s_val
        if isinstance(s, str):
            params["s_requested"] = s
        params.update(_kurtosis(kurtosis))
    return Projection(
        method=_method,
        linear=linear,
        combiner=combiner,
        scale=magnitude**g / math.sqrt(t * k),
        params=params,
        seed=seed,
    )


def cbp(
    d: int,
    k: int,
    t: int = 10,
    p: int | None = None,
    s: float | str | None = None,
    distribution: str = "achlioptas",
    c: float = 0.0,
    seed: int | None = 0,
    kurtosis: float | None = None,
) -> Projection:
    """CBP-KRP: compact bilinear pooling via kernelised random projection (003 Ch. 5, Pseudocode 2).

    The degree-2 PK-RP with the balanced index (every vector used about ``2tk/p`` times), applied to each
    row of a group and summed over the group (003 Eq. B.1):

        y_c = 1/sqrt(t*k) * sum_{rows l in group} sum_{i<t} K[l, I[c, 2i]] * K[l, I[c, 2i+1]]

    which is a random projection of the pooled bilinear feature ``sum_l x_l x_l^T``.  The sum over the
    group is not part of the IR: project with ``group_column=...`` (SQL ``GROUP BY``, scale applied last).
    """
    return pk_rp(
        d,
        k,
        degree=2,
        t=t,
        p=p,
        s=s,
        distribution=distribution,
        index="balanced",
        c=c,
        seed=seed,
        kurtosis=kurtosis,
        _method="cbp",
    )


# ----------------------------------------------------------------------------------------------
# Random Maclaurin feature maps


SAMPLINGS = ("support", "geometric", "paper")


def degree_probabilities(a: np.ndarray, d: int, sampling: str, geometric) -> np.ndarray:
    """Unnormalised ``P(N = n)``, ``n = 0..r``, of the random Maclaurin degree (see :func:`maclaurin`)."""
    n = np.arange(len(a))
    if sampling == "support":
        return a * float(d) ** n
    return geometric(n)


def allocate_degrees(a: np.ndarray, d: int, k: int) -> np.ndarray:
    """How many of the ``k`` outputs get each degree ``n`` (``sampling="support"``): one for the constant
    ``n = 0`` when ``a_0 > 0`` (exact: it has no random factor), at least one for every other ``n`` with
    ``a_n > 0``, the rest in proportion to ``a_n d^n`` (largest remainders).  Needs ``k >= #{n: a_n > 0}``."""
    counts = np.zeros(len(a), dtype=np.int64)
    live = np.flatnonzero(a > 0)
    if a[0] > 0:
        counts[0] = 1
        live = live[live > 0]
    if len(live) == 0:
        return counts
    counts[live] = 1
    spare = k - counts.sum()
    share = (a * float(d) ** np.arange(len(a)))[live]
    want = spare * share / share.sum()
    extra = np.floor(want).astype(np.int64)
    order = np.argsort(-(want - extra), kind="stable")
    extra[order[: spare - extra.sum()]] += 1
    counts[live] += extra
    return counts


def maclaurin(
    d: int,
    k: int,
    degree: int = 2,
    c: float = 1.0,
    base: float = 2.0,
    s: float | str = 1.0,
    truncate: bool = False,
    sampling: str = "support",
    seed: int | None = 0,
) -> Projection:
    """Random Maclaurin feature map for the kernel ``(x.y + c)^degree`` (Kar & Karnick 2012; 001 Algorithm 1).

    Maclaurin coefficients ``a_n = C(r, n) c^(r - n)`` (``r = degree``; ``a_n = 0`` for ``n > r``).  For each
    of the ``k`` outputs draw a degree ``N`` and ``N`` Rademacher vectors ``w_j`` (``s > 1``: Achlioptas
    vectors, magnitude ``sqrt(s)``); the output is

        Z_i(x) = sqrt(a_N / P(N)) * prod_{j<N} (w_j . x),    Z(x) = 1/sqrt(k) * (Z_1, ..., Z_k)

    and ``E[Z_i(x) Z_i(y)] = sum_n P(n) * a_n / P(n) * (x.y)^n = K(x, y)`` for any law ``P`` that is
    positive wherever ``a_n`` is (001 Lemma 7's argument).  ``sampling`` chooses the law:

    - ``"support"`` (default, issue 24): only degrees with ``a_n > 0``, and stratified rather than drawn
      (:func:`allocate_degrees`): ``k_n`` outputs of degree ``n`` in proportion to ``a_n d^n`` -- the share of
      degree ``n`` in ``E||phi(x) - phi(y)||^2`` for standardised inputs (``E||x||^2 = d``) -- and
      ``P(N = n)`` replaced by ``k_n / k``, so ``E[Z(x).Z(y)] = sum_n (k_n/k) (a_n k/k_n) (x.y)^n = K(x, y)``
      still.  No output is wasted: at ``c = 0`` every output has degree ``r``; at ``c > 0`` a single
      output holds the constant ``sqrt(a_0 k)`` (exact, where a random count of constants would add
      variance and nothing to any distance).  With fewer outputs than such degrees, ``N`` is drawn
      from the same proportions.
    - ``"geometric"``: the paper's law ``P(N = n) ∝ base^-n`` conditioned on ``a_n > 0``.
    - ``"paper"``: 001 Algorithm 1 as written, ``P(N = n) = 1/base^(n+1)`` (``base = 2``: the paper's ``p``;
      other bases normalised, ``(1 - 1/base) base^-n``), so ``sqrt(a_N / P(N)) = sqrt(a_N p^(N+1))``.  Every
      output whose ``N > r`` (or ``a_N = 0``) is identically 0: at ``c = 0``, 7 in 8 of them for r = 2.
      ``truncate=True`` conditions ``N <= r`` (the waste at ``c = 0`` remains).

    Measured by ``python bench/defaults.py --maclaurin`` (k = 160, 5 seeds, mean distortion in the kernel's
    feature space, figures in its docstring): ``"paper"`` 0.36-0.80 with 86-139 of the 160 outputs
    constant, ``"support"`` 0.13-0.26 with none, scikit-learn's ``PolynomialCountSketch`` 0.11-0.22 on the
    same rows.  IR: one term per output with ``N`` factors and weight ``sqrt(a_N / P(N)) * sqrt(s)^N``;
    ``N = 0`` is a term with no factors (a constant); outputs with ``a_N = 0`` have no term.
    ``scale = 1/sqrt(k)``.
    """
    check_dims(d, k)
    r = _positive_int("degree", degree, minimum=0)
    c = _nonnegative("c", c)
    base = float(base)
    if not base > 1:
        raise InvalidParameter(f"base (the sampling parameter p of 001 Algorithm 1) must be > 1, got {base}")
    s_val = resolve_s(s, d)
    rng = np.random.default_rng(seed)
    a = np.array([math.comb(r, n) * c ** (r - n) for n in range(r + 1)])

    def prob(n: np.ndarray) -> np.ndarray:
        return (1 - 1 / base) * base ** (-n.astype(float))

    if sampling not in SAMPLINGS:
        raise InvalidParameter(f"sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
    if sampling == "support" and k >= np.count_nonzero(a):
        support = np.flatnonzero(a > 0)
        counts = allocate_degrees(a, d, k)
        N = np.repeat(support, counts[support])
        p_of_n = counts[N] / k  # the share of outputs of degree N: weight sqrt(a_N k / k_N)
    elif sampling != "paper" or truncate:
        support = np.flatnonzero(a > 0) if sampling != "paper" else np.arange(r + 1)
        pn = degree_probabilities(a, d, sampling, prob)[support]
        pn = pn / pn.sum()
        N = rng.choice(support, size=k, p=pn)
        p_of_n = pn[np.searchsorted(support, N)]
    else:
        N = rng.geometric(1 - 1 / base, size=k) - 1  # P(N = n) = (1 - 1/base) base^-n, n >= 0
        p_of_n = prob(N)
    a_n = np.where(N <= r, a[np.minimum(N, r)], 0.0)
    live = a_n > 0
    n_live = np.where(live, N, 0)
    p = int(n_live.sum())
    signs = sign_matrix(d, p, s_val, rng)
    comp = np.flatnonzero(live)
    terms = np.arange(len(comp))
    weight = np.sqrt(a_n[comp] / p_of_n[comp]) * math.sqrt(s_val) ** n_live[comp]
    combiner = Combiner(
        k=k,
        term_component=comp,
        term_weight=weight,
        factor_term=np.repeat(terms, n_live[comp]),
        factor_vector=np.arange(p),
    )
    return Projection(
        method="maclaurin",
        linear=signs,
        combiner=combiner,
        scale=1.0 / math.sqrt(k),
        params={
            "degree": r,
            "c": c,
            "base": base,
            "s": s_val,
            "truncate": bool(truncate),
            "sampling": sampling,
            "modified": False,
        },
        seed=seed,
    )


# ----------------------------------------------------------------------------------------------
# CRAFTMaps (composition)


def craftmap(
    d: int,
    k: int,
    up: str = "maclaurin",
    up_k: int | None = None,
    degree: int = 2,
    c: float = 1.0,
    down_s: float | str = 3.0,
    seed: int | None = 0,
    **up_params: Any,
) -> Composed:
    """CRAFTMaps (001 Algorithm 2): up-project to ``up_k = D`` dimensions with a random feature map,
    then down-project linearly to ``k = E < D`` with an Achlioptas RP (sparsity ``down_s``).

    ``up`` is ``"maclaurin"`` (001's choice, :func:`maclaurin`) or ``"pk-rp"`` (:func:`pk_rp`, any other
    keyword goes to it, e.g. ``t``, ``p``).  Both approximate ``(x.y + c)^degree``.  ``D`` defaults to
    ``4k``.  The result is a :class:`~sqlrp.core.ir.Composed`: its SQL nests the up-projection's select as the
    wide source of the down-projection.  Seeds: up ``seed``, down ``seed + 1``.
    """
    check_dims(d, k)
    up_k = 4 * k if up_k is None else _positive_int("up_k", up_k)
    if up_k <= k:
        raise InvalidParameter(f"CRAFTMaps up-project to D > k: got D = {up_k}, k = {k}")
    if up == "maclaurin":
        first = maclaurin(d, up_k, degree=degree, c=c, seed=seed, **up_params)
    elif up == "pk-rp":
        first = pk_rp(d, up_k, degree=degree, c=c, seed=seed, **up_params)
    else:
        raise InvalidParameter(f"up must be 'maclaurin' or 'pk-rp', got {up!r}")
    second = achlioptas(up_k, k, s=down_s, seed=None if seed is None else seed + 1)
    params = {"up": up, "up_k": up_k, "degree": first.params["degree"], "c": first.params["c"], "modified": False}
    params["down_s"] = second.params["s"]
    params.update({f"up_{key}": value for key, value in up_params.items()})
    return Composed(first=first, second=second, method="craftmap", params=params, seed=seed)


__all__ = ["cbp", "craftmap", "default_s", "index_matrix", "maclaurin", "p_rp", "pk_rp"]
