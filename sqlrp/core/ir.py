"""The intermediate representation (IR) every projection method compiles from.

All methods in sqlrp share one two-stage shape (``../shared/DESIGN.md`` section 3):

1. **Linear stage** -- a sparse ``d x p`` matrix, stored as entries ``(vector, feature, weight)``.
   For Achlioptas matrices the weights are the signs ``+1 / -1`` of the non-zero entries, so the
   stage is aggregate-only: ``K_v(x) = sum_{i: w_iv=+1} x_i**power_v - sum_{i: w_iv=-1} x_i**power_v
   + bias_v``.  ``power`` (default 1) and ``bias`` (default 0) exist for the kernel methods: the
   modified kernel needs sums of squares and inhomogeneous kernels a constant feature.
2. **Combiner stage** -- terms of products of linear outputs:
   ``y_c = scale * sum_{t in terms(c)} weight_t * prod_{f in factors(t)} K_{vector_f}``.
   A linear projection is one term of one factor per component (the identity combiner).

The single constant ``scale`` is applied once per output, at the very end, after one elementwise
**output function** (:data:`FUNCTIONS`): ``y_c = scale * f(inner * combined_c)`` with ``f`` the identity
(every linear and polynomial method), ``cos`` (random Fourier features, :mod:`sqlrp.methods.rff`:
``sqrt(2/k) cos(w.x + b)``, the bias ``b`` inside the linear stage, so inside the ``cos``) or ``sign``
(sign codes, 004 Section 5.2).  ``inner`` multiplies the combined sum inside ``f``: it lets the linear
stage keep unit (or sign) weights while the kernel's bandwidth stays a single constant.  Both are
stored in the projection's ``params`` (``function``, ``function_scale``), so the registry, the files
and the digest carry them as they carry every parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the elementwise output functions, applied after the combiner and before ``scale``
FUNCTIONS = ("identity", "cos", "sign")


def _int_array(values: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.int64))


def _float_array(values: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(values, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class LinearStage:
    """Sparse ``d x p`` matrix of weights, one row per non-zero entry.

    :param d: the input dimension (number of features); features are numbered ``0 .. d-1``.
    :param p: the number of linear outputs (vectors) ``K_0 .. K_{p-1}``: ``k`` for a linear projection,
        more for the kernel methods, whose combiner multiplies them together.
    :param vector: per non-zero entry, the vector (column of the matrix) it belongs to, in ``[0, p)``.
    :param feature: per non-zero entry, the feature (row of the matrix) it weighs, in ``[0, d)``.
    :param weight: per non-zero entry, its weight (``+1`` / ``-1`` for sign matrices; the magnitude is
        left to :attr:`Projection.scale`).
    :param bias: per vector, a constant added to its sum (length ``p``; ``None``: 0).
    :param power: per vector, the power each feature is raised to before it is summed (length ``p``,
        each ``>= 1``; ``None``: 1).
    """

    d: int
    p: int
    vector: np.ndarray
    feature: np.ndarray
    weight: np.ndarray
    bias: np.ndarray | None = None
    power: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector", _int_array(self.vector))
        object.__setattr__(self, "feature", _int_array(self.feature))
        object.__setattr__(self, "weight", _float_array(self.weight))
        if not (len(self.vector) == len(self.feature) == len(self.weight)):
            raise ValueError("vector, feature and weight must have the same length")
        if len(self.vector) and (self.vector.min() < 0 or self.vector.max() >= self.p):
            raise ValueError("vector index out of range [0, p)")
        if len(self.feature) and (self.feature.min() < 0 or self.feature.max() >= self.d):
            raise ValueError("feature index out of range [0, d)")
        if self.bias is not None:
            object.__setattr__(self, "bias", _float_array(self.bias))
            if self.bias.shape != (self.p,):
                raise ValueError("bias must have length p")
        if self.power is not None:
            object.__setattr__(self, "power", _int_array(self.power))
            if self.power.shape != (self.p,) or self.power.min() < 1:
                raise ValueError("power must have length p and be >= 1")

    @property
    def nnz(self) -> int:
        return int(len(self.weight))

    @property
    def is_signs(self) -> bool:
        """True when every weight is +1 or -1: the stage is then additions and subtractions only."""
        return bool(np.all(np.abs(self.weight) == 1.0))

    def vector_power(self, v: int) -> int:
        return 1 if self.power is None else int(self.power[v])

    def vector_bias(self, v: int) -> float:
        return 0.0 if self.bias is None else float(self.bias[v])

    def columns(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per vector ``v``: (feature indices, weights), features sorted ascending."""
        order = np.lexsort((self.feature, self.vector))
        vec, feat, w = self.vector[order], self.feature[order], self.weight[order]
        bounds = np.searchsorted(vec, np.arange(self.p + 1))
        return [(feat[bounds[v] : bounds[v + 1]], w[bounds[v] : bounds[v + 1]]) for v in range(self.p)]

    def dense(self) -> np.ndarray:
        """The ``d x p`` weight matrix as a dense array (small sizes, tests)."""
        out = np.zeros((self.d, self.p))
        np.add.at(out, (self.feature, self.vector), self.weight)
        return out


@dataclass(frozen=True, eq=False)
class Combiner:
    """Products of linear outputs: ``y_c = sum_t weight_t * prod_f K[vector_f]`` (before ``scale``).

    ``term_component[t]`` and ``term_weight[t]`` describe term ``t``; factor ``f`` multiplies
    ``K[factor_vector[f]]`` into term ``factor_term[f]``.

    :param k: the output dimension (number of components ``y_0 .. y_{k-1}``).
    :param term_component: per term, the component ``c`` it is added to, in ``[0, k)``.
    :param term_weight: per term, its weight.
    :param factor_term: per factor, the term it multiplies into.
    :param factor_vector: per factor, the linear output ``K[v]`` (a vector of the :class:`LinearStage`)
        it multiplies in; a term without factors is the constant 1.
    """

    k: int
    term_component: np.ndarray
    term_weight: np.ndarray
    factor_term: np.ndarray
    factor_vector: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "term_component", _int_array(self.term_component))
        object.__setattr__(self, "term_weight", _float_array(self.term_weight))
        object.__setattr__(self, "factor_term", _int_array(self.factor_term))
        object.__setattr__(self, "factor_vector", _int_array(self.factor_vector))
        if len(self.term_component) != len(self.term_weight):
            raise ValueError("term_component and term_weight must have the same length")
        if len(self.factor_term) != len(self.factor_vector):
            raise ValueError("factor_term and factor_vector must have the same length")
        if len(self.term_component) and (self.term_component.min() < 0 or self.term_component.max() >= self.k):
            raise ValueError("term component out of range [0, k)")

    @classmethod
    def identity(cls, k: int) -> Combiner:
        """Component ``c`` is linear output ``c``: the combiner of every linear projection."""
        idx = np.arange(k)
        return cls(k=k, term_component=idx, term_weight=np.ones(k), factor_term=idx, factor_vector=idx)

    @property
    def n_terms(self) -> int:
        return int(len(self.term_weight))

    @property
    def is_identity(self) -> bool:
        idx = np.arange(self.k)
        return (
            self.n_terms == self.k
            and np.array_equal(self.term_component, idx)
            and np.array_equal(self.factor_term, idx)
            and np.array_equal(self.factor_vector, idx)
            and bool(np.all(self.term_weight == 1.0))
        )

    def terms(self) -> list[tuple[int, float, list[int]]]:
        """``(component, weight, [vectors...])`` per term, factors in stored order."""
        factors: list[list[int]] = [[] for _ in range(self.n_terms)]
        for t, v in zip(self.factor_term.tolist(), self.factor_vector.tolist(), strict=True):
            factors[t].append(v)
        return [
            (c, w, f) for c, w, f in zip(self.term_component.tolist(), self.term_weight.tolist(), factors, strict=True)
        ]


def _summary_head(item: Projection | Composed) -> dict[str, Any]:
    """What ``describe()`` says first of a projection and of a composition alike: name, method, shape."""
    return {"name": item.name, "method": item.method, "d": item.d, "k": item.k}


@dataclass(eq=False)
class Projection:
    """A complete projection: linear stage, combiner, one delayed scale factor and its provenance.

    :param method: the method that made it (a name of :data:`sqlrp.methods.METHODS`, or ``dt-rp`` /
        ``best-of-n`` for a tuned one).
    :param linear: the linear stage (the sparse matrix).
    :param combiner: the combiner stage (:meth:`Combiner.identity` for a linear projection).
    :param scale: the constant every output is multiplied by once, at the end (Achlioptas:
        ``sqrt(s) / sqrt(k)``).
    :param params: the method's parameters as drawn (e.g. the ``s`` resolved from ``"auto"``), stored
        with the projection.
    :param seed: the seed the matrix was drawn with (``None``: drawn from fresh entropy, not reproducible).
    :param name: the name it is stored under in the registry (``None``: not stored).
    """

    method: str
    linear: LinearStage
    combiner: Combiner
    scale: float
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise ValueError(f"output function must be one of {', '.join(FUNCTIONS)}, not {self.function!r}")
        inner = self.function_scale
        if isinstance(inner, bool) or not isinstance(inner, (int, float, np.integer, np.floating)):
            raise ValueError(f"function_scale must be a number, not {inner!r}")
        if not (np.isfinite(inner) and inner > 0):
            raise ValueError(f"function_scale must be a finite number > 0, not {inner!r}")

    @property
    def function(self) -> str:
        """The elementwise output function (:data:`FUNCTIONS`), ``params["function"]`` (default identity)."""
        return self.params.get("function", "identity")

    @property
    def function_scale(self) -> float:
        """The factor inside the output function, ``params["function_scale"]`` (default 1)."""
        return self.params.get("function_scale", 1.0)

    @property
    def d(self) -> int:
        """Input dimension."""
        return self.linear.d

    @property
    def k(self) -> int:
        """Output dimension."""
        return self.combiner.k

    @property
    def is_linear(self) -> bool:
        return (
            self.combiner.is_identity
            and self.linear.bias is None
            and self.linear.power is None
            and self.function == "identity"
        )

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary (what ``sqlrp projections show`` prints)."""
        return {
            **_summary_head(self),
            "p": self.linear.p,
            "nnz": self.linear.nnz,
            "terms": self.combiner.n_terms,
            "scale": self.scale,
            "seed": self.seed,
            "params": self.params,
        }


@dataclass(eq=False)
class Composed:
    """Projection ``second`` applied to the output of ``first`` (composition; CRAFTMaps, 001 Algorithm 2).

    ``first`` maps ``d -> D`` and ``second`` maps ``D -> k``; either may itself be a ``Composed``.  The
    compiler (:mod:`sqlrp.compiler.compose`) nests the select of ``first`` as the wide source of
    ``second``; the registry stores both stages under derived names (``<name>__stage1``,
    ``<name>__stage2``) and links them from the composed entry (``sqlrp.registry.store``).
    """

    first: Projection | Composed
    second: Projection | Composed
    method: str = "compose"
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.first.k != self.second.d:
            raise ValueError(
                f"cannot compose: the first stage outputs {self.first.k} values, the second expects {self.second.d}"
            )

    @property
    def d(self) -> int:
        return self.first.d

    @property
    def k(self) -> int:
        return self.second.k

    @property
    def stages(self) -> tuple[Projection | Composed, Projection | Composed]:
        return (self.first, self.second)

    @property
    def is_linear(self) -> bool:
        return self.first.is_linear and self.second.is_linear

    def describe(self) -> dict[str, Any]:
        return {
            **_summary_head(self),
            "seed": self.seed,
            "params": self.params,
            "stages": [self.first.describe(), self.second.describe()],
        }
