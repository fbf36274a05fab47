"""Random Maclaurin feature maps for the kernel ``(x.y + c)^r`` (Kar & Karnick 2012;
``001_b19d9de78d5ade5f.txt`` Algorithm 1), in the shared two-stage IR (:mod:`sqlrp.core.ir`):
:func:`maclaurin`, the law of its degrees (:func:`draw_degrees`, :func:`allocate_degrees`).
:mod:`sqlrp.methods.kernel` gathers the kernel methods; CRAFTMaps (:func:`sqlrp.methods.kernel.craftmap`)
up-projects with this map.
"""

from __future__ import annotations

import math
from typing import TypedDict, Unpack

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Combiner, LinearStage, Projection
from ..core.options import refuse_unknown, take
from .kernel_params import _nonnegative, _positive_int
from .linear import check_dims, resolve_s, sign_matrix

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


class SamplingOptions(TypedDict, total=False):
    """How the random Maclaurin map draws its outputs (defaults: :data:`SAMPLING`): the degree law
    ``sampling`` (``support``, ``geometric`` or ``paper``) with its ``base`` and ``truncate``, and the
    sparsity ``s`` of the Rademacher vectors."""

    sampling: str
    base: float
    truncate: bool
    s: float | str


SAMPLING: SamplingOptions = {"sampling": "support", "base": 2.0, "truncate": False, "s": 1.0}


def maclaurin(
    d: int, k: int, degree: int = 2, c: float = 1.0, seed: int | None = 0, **options: Unpack[SamplingOptions]
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

    Measured by ``PYTHONPATH=. python bench/defaults.py --maclaurin`` (k = 160, 5 seeds, mean distortion in the kernel's
    feature space, figures in its docstring): ``"paper"`` 0.36-0.80 with 86-139 of the 160 outputs
    constant, ``"support"`` 0.13-0.26 with none, scikit-learn's ``PolynomialCountSketch`` 0.11-0.22 on the
    same rows.  IR: one term per output with ``N`` factors and weight ``sqrt(a_N / P(N)) * sqrt(s)^N``;
    ``N = 0`` is a term with no factors (a constant); outputs with ``a_N = 0`` have no term.
    ``scale = 1/sqrt(k)``.
    """
    refuse_unknown("maclaurin", options, SAMPLING)
    sampling, base, truncate, s = take({**SAMPLING, **options}, "sampling", "base", "truncate", "s")
    check_dims(d, k)
    r = _positive_int("degree", degree, minimum=0)
    c = _nonnegative("c", c)
    base = float(base)
    if not base > 1:
        raise InvalidParameter(f"base (the sampling parameter p of 001 Algorithm 1) must be > 1, got {base}")
    s_val = resolve_s(s, d)
    rng = np.random.default_rng(seed)
    a = np.array([math.comb(r, n) * c ** (r - n) for n in range(r + 1)])
    if sampling not in SAMPLINGS:
        raise InvalidParameter(f"sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
    N, p_of_n = draw_degrees(a, d, k, sampling, base, truncate, rng)
    signs, combiner = _products(a, d, k, N, p_of_n, s_val, rng)
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


def draw_degrees(
    a: np.ndarray, d: int, k: int, sampling: str, base: float, truncate: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The degree ``N`` of each of the ``k`` outputs of :func:`maclaurin` and the probability ``P(N)`` its
    weight ``sqrt(a_N / P(N))`` divides by, under the law ``sampling`` (``a``: the Maclaurin coefficients
    ``a_0 .. a_r``): ``"support"`` allocated (:func:`allocate_degrees`; ``P(N) = k_N / k``), else drawn
    from ``rng`` -- over the support of ``a`` (``"geometric"``, ``"paper"`` with ``truncate``) or as 001
    Algorithm 1 draws it, ``P(N = n) = (1 - 1/base) base^-n`` for every ``n >= 0`` (``"paper"``)."""
    r = len(a) - 1

    def prob(n: np.ndarray) -> np.ndarray:
        return (1 - 1 / base) * base ** (-n.astype(float))

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
    return N, p_of_n


def _products(
    a: np.ndarray, d: int, k: int, N: np.ndarray, p_of_n: np.ndarray, s: float, rng: np.random.Generator
) -> tuple[LinearStage, Combiner]:
    """:func:`maclaurin`'s sign vectors and combiner: output ``i`` of degree ``N_i`` with ``a_{N_i} > 0`` is
    one term of ``N_i`` factors, each its own vector, and weight ``sqrt(a_N / P(N)) * sqrt(s)^N``; the
    other outputs have no term."""
    r = len(a) - 1
    a_n = np.where(N <= r, a[np.minimum(N, r)], 0.0)
    live = a_n > 0
    n_live = np.where(live, N, 0)
    p = int(n_live.sum())
    signs = sign_matrix(d, p, s, rng)
    comp = np.flatnonzero(live)
    terms = np.arange(len(comp))
    weight = np.sqrt(a_n[comp] / p_of_n[comp]) * math.sqrt(s) ** n_live[comp]
    combiner = Combiner(
        k=k,
        term_component=comp,
        term_weight=weight,
        factor_term=np.repeat(terms, n_live[comp]),
        factor_vector=np.arange(p),
    )
    return signs, combiner


__all__ = ["SAMPLINGS", "allocate_degrees", "degree_probabilities", "draw_degrees", "maclaurin"]
