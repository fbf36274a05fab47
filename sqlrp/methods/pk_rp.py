"""PK-RP and CBP-KRP: random projections from the feature space of the polynomial kernel ``(x.y + c)^g``.

- :func:`pk_rp` -- PK-RP of any degree ``g`` (``003_ff2487e5c9ebcf47.txt`` Algorithm 2, Eq. 4.10-4.11,
  4.15, 4.17, 4.21 and Appendix A Pseudocode 1).
- :func:`cbp` -- CBP-KRP, compact bilinear pooling (003 Ch. 5, Appendix A Pseudocode 2, Eq. B.1): the
  degree-2 PK-RP with the balanced index; the pooling itself is ``GROUP BY`` at query time
  (``Source.group_column`` / ``project(..., group_column=...)``).

Both in the shared two-stage IR (:mod:`sqlrp.core.ir`); :mod:`sqlrp.methods.kernel` gathers the kernel
methods and explains the choice of sparsity.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, TypedDict, Unpack

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Combiner, LinearStage, Projection
from ..core.options import refuse_unknown, take
from .kernel_params import _nonnegative, _positive_int
from .linear import _kurtosis, check_dims, resolve_s, sign_matrix

INDEX_SCHEMES = ("distinct", "balanced")
DISTRIBUTIONS = ("achlioptas", "gaussian")


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


def _indexed_products(
    vectors: LinearStage, k: int, g: int, t: int, index: str, rng: np.random.Generator
) -> tuple[LinearStage, Combiner]:
    """PK-RP's index matrix ``I`` (:func:`index_matrix`, ``k x g*t``) drawn over ``vectors`` and its
    combiner: component ``c`` sums ``t`` terms, term ``i`` the product of vectors ``I[c, g*i .. g*i + g-1]``;
    the vectors no term uses are dropped (:func:`_compact`)."""
    index_ = index_matrix(k, g * t, vectors.p, index, rng)
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
    return linear, combiner


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


class VectorOptions(TypedDict, total=False):
    """PK-RP's and CBP's random vectors (defaults: :data:`VECTORS`): ``p`` of them (default ``g*t*k``),
    drawn from ``distribution`` (``achlioptas`` with sparsity ``s``, default :func:`default_s`, or
    ``gaussian``), and the data's ``kurtosis`` that ``s = "auto"`` reads; PK-RP's ``index`` scheme."""

    p: int | None
    s: float | str | None
    distribution: str
    index: str
    kurtosis: float | None


VECTORS: VectorOptions = {"p": None, "s": None, "distribution": "achlioptas", "index": "balanced", "kurtosis": None}


def pk_rp(
    d: int,
    k: int,
    degree: int = 2,
    t: int = 10,
    c: float = 0.0,
    seed: int | None = 0,
    **vectors: Unpack[VectorOptions],
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
    refuse_unknown("pk_rp", vectors, VECTORS)
    given: dict[str, Any] = {**VECTORS, **vectors}
    p, s, distribution, index, kurtosis = take(given, "p", "s", "distribution", "index", "kurtosis")
    check_dims(d, k)
    g = _positive_int("degree", degree)
    s = default_s(g, d) if s is None else s
    t = _positive_int("t", t)
    c = _nonnegative("c", c)
    p = _positive_int("p", g * t * k if p is None else p)  # the default too: p vectors are held in memory
    s_val = resolve_s(s, d + (1 if c > 0 else 0), kurtosis) if distribution == "achlioptas" else 1.0
    rng = np.random.default_rng(seed)
    vectors, magnitude = _random_vectors(d, p, distribution, s_val, c, rng)
    linear, combiner = _indexed_products(vectors, k, g, t, index, rng)
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
        method="pk-rp",
        linear=linear,
        combiner=combiner,
        scale=magnitude**g / math.sqrt(t * k),
        params=params,
        seed=seed,
    )


def cbp(
    d: int, k: int, t: int = 10, c: float = 0.0, seed: int | None = 0, **vectors: Unpack[VectorOptions]
) -> Projection:
    """CBP-KRP: compact bilinear pooling via kernelised random projection (003 Ch. 5, Pseudocode 2).

    The degree-2 PK-RP with the balanced index (every vector used about ``2tk/p`` times), applied to each
    row of a group and summed over the group (003 Eq. B.1):

        y_c = 1/sqrt(t*k) * sum_{rows l in group} sum_{i<t} K[l, I[c, 2i]] * K[l, I[c, 2i+1]]

    which is a random projection of the pooled bilinear feature ``sum_l x_l x_l^T``.  The sum over the
    group is not part of the IR: project with ``group_column=...`` (SQL ``GROUP BY``, scale applied last).
    """
    if "index" in vectors:
        raise TypeError("cbp() got an unexpected keyword argument 'index' (its index is always balanced)")
    projection = pk_rp(d, k, degree=2, t=t, c=c, seed=seed, **{**vectors, "index": "balanced"})
    return dataclasses.replace(projection, method="cbp")


__all__ = ["DENSE_SIGNS_MAX_D", "DISTRIBUTIONS", "INDEX_SCHEMES", "cbp", "default_s", "index_matrix", "pk_rp"]
