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

P-RP and CRAFTMaps are here; PK-RP and CBP-KRP are in :mod:`sqlrp.methods.pk_rp`, the Maclaurin maps in
:mod:`sqlrp.methods.maclaurin`, and imported from here as before.

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
from .kernel_params import _nonnegative, _positive_int
from .linear import achlioptas, check_dims, resolve_s, sign_matrix
from .maclaurin import SAMPLINGS, allocate_degrees, degree_probabilities, maclaurin
from .pk_rp import (
    DENSE_SIGNS_MAX_D,
    DISTRIBUTIONS,
    INDEX_SCHEMES,
    _compact,
    _random_vectors,
    cbp,
    default_s,
    index_matrix,
    pk_rp,
)

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
    diagonal features a non-zero mean weight (footnote 1).  ``PYTHONPATH=. python bench/defaults.py --prp`` measures
    the even ``m`` against ``m = 10`` on four kinds of table (figures in its docstring).

    ``modified=True`` projects the modified kernel ``K(x, y) = (x.y)^2 - (x^2).(y^2)`` (000 Eq. 12) instead:
    per vector it subtracts ``sum_i r_i^2 x_i^2 = c^2 * sum_{i in supp(r)} x_i^2``, i.e. ``m*k`` more vectors
    with ``power = 2`` (sums of squares over the same support) entering as terms of weight ``-sigma_l``.
    With ``s = 1`` and even ``m`` the two variants give identical outputs (module docstring).
    """
    check_dims(d, k)
    m = _positive_int("m", m)
    _positive_int("p", m * k)  # the m * k sign vectors drawn (sqlrp.core.params.LIMITS)
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


__all__ = [
    "DENSE_SIGNS_MAX_D",
    "DISTRIBUTIONS",
    "INDEX_SCHEMES",
    "SAMPLINGS",
    "_compact",
    "_nonnegative",
    "_positive_int",
    "_random_vectors",
    "allocate_degrees",
    "cbp",
    "craftmap",
    "default_s",
    "degree_probabilities",
    "index_matrix",
    "maclaurin",
    "p_rp",
    "pk_rp",
]
