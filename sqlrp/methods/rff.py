"""Random Fourier features (Rahimi & Recht 2007; the survey ``004_501365892903997c.txt`` Section 6.1, Eq. 64 on).

For a shift-invariant kernel ``k(x - y)``, Bochner's theorem gives ``k(x - y) = E_w[cos(w.(x - y))]`` with
``w`` drawn from the kernel's Fourier transform; with ``b_c ~ U[0, 2 pi)``,

    z_c(x) = sqrt(2 / k) cos(w_c . x + b_c),        E[z(x) . z(y)] = k(x - y).

- ``kernel="rbf"``: ``exp(-gamma |x - y|^2)``, ``w ~ N(0, 2 gamma I)`` (scikit-learn's ``RBFSampler``);
- ``kernel="laplacian"``: ``exp(-gamma |x - y|_1)``, ``w_i ~ Cauchy(0, gamma)`` i.i.d.

``gamma="scale"`` is scikit-learn SVC's ``1 / (d Var(X))``, ``Var`` over every entry of the table: ``project``
computes it in SQL (:func:`sqlrp.pipeline.moments.table_variance`) and passes it in as ``variance``.

The directions ``w_c`` (``weights``), all with the same marginal law ``N(0, 2 gamma I)`` per row:

- ``gaussian``: i.i.d. draws (the paper's; for the Laplacian kernel, i.i.d. Cauchy draws);
- ``orthogonal``: orthogonal random features (Yu, Suresh, Choromanski, Holtmann-Rice & Kumar, NeurIPS 2016,
  "Orthogonal Random Features"): rows orthogonalised in blocks of ``d`` (a Haar-random ``Q`` each) and
  rescaled by chi-distributed norms (``|g|`` of fresh ``N(0, I_d)`` vectors) -- same expectation, lower variance;
- ``structured``: the same paper's SORF, ``W = (sqrt(D) / sigma) H D1 H D2 H D3`` with ``H`` the normalised
  Walsh-Hadamard matrix of size ``D`` (``d`` padded to a power of two), ``D_i`` random sign diagonals and
  ``1 / sigma = sqrt(2 gamma)``; blocks of ``D`` rows stacked for ``k > D``.  Stored expanded (the
  integer matrix ``H D1 H D2 H D3`` restricted to the ``d`` real columns);
- ``signs``: Achlioptas' sparse ``+-1 / 0`` entries (``s = 3``) scaled to the same variance: the inner sums
  are additions and subtractions only, the features only approximately unbiased (a sum of signs is
  Gaussian only in the limit).

In the IR (:mod:`sqlrp.core.ir`) the linear stage holds the unit directions (N(0, 1), Cauchy(0, 1), the
integer SORF matrix or signs) and the bias ``b_c / inner``; the output function is ``cos`` with
``function_scale = inner`` (``sqrt(2 gamma)``, ``gamma`` for the Laplacian, ``sqrt(2 gamma) / D`` for SORF,
``sqrt(2 gamma s)`` for signs), and ``scale = sqrt(2 / k)``: ``z_c = sqrt(2/k) cos(inner (u_c . x + b_c / inner))``.

Which weights are the default, measured (``PYTHONPATH=. python bench/rff.py``; figures in
``docs/guide/methods.md``, "Random Fourier features"): :data:`DEFAULT_WEIGHTS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import InputError, InvalidParameter
from ..core.ir import Combiner, LinearStage, Projection
from .linear import check_dims, sign_matrix

KERNELS = ("rbf", "laplacian")
WEIGHTS = ("gaussian", "orthogonal", "structured", "signs")
#: the default directions: the lowest kernel error measured at every k (bench/rff.py)
DEFAULT_WEIGHTS = "orthogonal"
#: the sparsity of ``weights="signs"`` (Achlioptas: two thirds zeros)
SIGNS_S = 3.0


def scale_gamma(d: int, variance: float | None) -> float:
    """scikit-learn SVC's ``gamma="scale"``: ``1 / (d Var(X))``, or 1 where the data has no variance."""
    if variance is None:
        raise InvalidParameter(
            "gamma='scale' needs the data's variance: project a table (it is computed in SQL) or give a number"
        )
    variance = float(variance)
    if not math.isfinite(variance) or variance < 0:
        raise InvalidParameter(f"variance must be a finite number >= 0, got {variance!r}")
    return 1.0 / (d * variance) if variance > 0 else 1.0


def resolve_gamma(gamma: float | str, d: int, variance: float | None = None) -> float:
    """``gamma`` as a positive number; ``"scale"``: :func:`scale_gamma`."""
    if isinstance(gamma, str):
        if gamma.strip().lower() == "scale":
            return scale_gamma(d, variance)
        try:
            gamma = float(gamma)
        except ValueError:
            raise InvalidParameter(f"gamma must be a number > 0 or 'scale', got {gamma!r}") from None
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.integer, np.floating)):
        raise InvalidParameter(f"gamma must be a number > 0 or 'scale', got {gamma!r}")
    gamma = float(gamma)
    if not math.isfinite(gamma) or gamma <= 0:
        raise InvalidParameter(f"gamma must be a finite number > 0 or 'scale', got {gamma!r}")
    return gamma


def hadamard(size: int) -> np.ndarray:
    """The unnormalised Walsh-Hadamard matrix of order ``size`` (a power of two), Sylvester's construction."""
    H = np.ones((1, 1))
    while H.shape[0] < size:
        H = np.block([[H, H], [H, -H]])
    return H


def orthogonal_directions(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k x d`` ORF directions: blocks of ``d`` orthonormal rows (``Q`` of a Gaussian matrix, signs fixed by
    ``R``'s diagonal so that ``Q`` is Haar-distributed), each row rescaled by a chi_d norm."""
    blocks = []
    for _ in range(-(-k // d)):
        Q, R = np.linalg.qr(rng.standard_normal((d, d)))
        Q = Q * np.where(np.diag(R) < 0, -1.0, 1.0)
        norms = np.linalg.norm(rng.standard_normal((d, d)), axis=1)
        blocks.append(Q.T * norms[:, None])
    return np.vstack(blocks)[:k]


def structured_directions(d: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """``k x d`` SORF directions ``H D1 H D2 H D3`` (unnormalised ``H``: integers) restricted to the ``d``
    real columns, and ``D`` (the padded size; the normalisation ``1 / D`` goes to the function's scale)."""
    size = 1 << max(d - 1, 0).bit_length()
    H = hadamard(size)
    blocks = []
    for _ in range(-(-k // size)):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(3, size))
        M = H * signs[0]  # H D1
        M = (M @ H) * signs[1]  # H D1 H D2
        M = (M @ H) * signs[2]  # H D1 H D2 H D3
        blocks.append(M[:, :d])
    return np.vstack(blocks)[:k], size


def _directions(d: int, k: int, kernel: str, weights: str, rng: np.random.Generator) -> tuple[LinearStage, float]:
    """The unit directions as a linear stage (without bias) and the factor ``inner`` they are multiplied by
    inside the ``cos`` (the bandwidth ``sqrt(2 gamma)`` or ``gamma`` is applied by the caller)."""
    if weights == "signs":
        return sign_matrix(d, k, SIGNS_S, rng), math.sqrt(SIGNS_S)
    inner = 1.0
    if weights == "gaussian":
        W = rng.standard_cauchy((k, d)) if kernel == "laplacian" else rng.standard_normal((k, d))
    elif weights == "orthogonal":
        W = orthogonal_directions(d, k, rng)
    else:
        W, size = structured_directions(d, k, rng)
        inner = 1.0 / size
    vector, feature = np.nonzero(W)
    return LinearStage(d=d, p=k, vector=vector, feature=feature, weight=W[vector, feature]), inner


def rff(
    d: int,
    k: int,
    kernel: str = "rbf",
    gamma: float | str = "scale",
    weights: str | None = None,
    seed: int | None = 0,
    variance: float | None = None,
) -> Projection:
    """Random Fourier features ``z_c(x) = sqrt(2/k) cos(w_c . x + b_c)`` (module docstring).

    :param d: input dimension.
    :param k: number of features (scikit-learn's ``n_components``).
    :param kernel: ``rbf`` (Gaussian, ``exp(-gamma |x - y|^2)``) or ``laplacian`` (``exp(-gamma |x - y|_1)``).
    :param gamma: the kernel's bandwidth, a number > 0 or ``"scale"`` (``1 / (d Var(X))``, needs ``variance``).
    :param weights: ``gaussian``, ``orthogonal``, ``structured`` or ``signs`` (default
        :data:`DEFAULT_WEIGHTS`; the Laplacian kernel: ``gaussian``, i.e. i.i.d. Cauchy, only).
    :param seed: the generator's seed: directions first, then the phases ``b``.
    :param variance: the data's variance over all entries, for ``gamma="scale"``.
    """
    check_dims(d, k)
    if kernel not in KERNELS:
        raise InvalidParameter(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    weights = (DEFAULT_WEIGHTS if kernel == "rbf" else "gaussian") if weights is None else weights
    if weights not in WEIGHTS:
        raise InvalidParameter(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    if kernel == "laplacian" and weights != "gaussian":
        raise InvalidParameter(
            f"weights={weights!r} needs a rotation-invariant spectrum: the laplacian kernel takes weights='gaussian' "
            "(i.i.d. Cauchy directions)"
        )
    gamma_value = resolve_gamma(gamma, d, variance)
    rng = np.random.default_rng(seed)
    unit, inner = _directions(d, k, kernel, weights, rng)
    inner *= gamma_value if kernel == "laplacian" else math.sqrt(2.0 * gamma_value)
    phase = rng.uniform(0.0, 2.0 * math.pi, size=k)
    linear = LinearStage(d=d, p=k, vector=unit.vector, feature=unit.feature, weight=unit.weight, bias=phase / inner)
    params: dict[str, Any] = {
        "kernel": kernel,
        "gamma": gamma_value,
        "gamma_requested": gamma if isinstance(gamma, str) else gamma_value,
        "weights": weights,
        "function": "cos",
        "function_scale": inner,
    }
    if variance is not None:
        params["variance"] = float(variance)
    return Projection(
        method="rff", linear=linear, combiner=Combiner.identity(k), scale=math.sqrt(2.0 / k), params=params, seed=seed
    )


def data_gamma(method: str, params: dict[str, Any], variance: Any) -> dict[str, Any]:
    """``params`` with the data's ``variance`` (the callable ``variance()``, run only when needed) where
    ``rff``'s ``gamma`` is ``"scale"`` (the default) and no variance was given."""
    if method != "rff" or "variance" in params:
        return params
    gamma = params.get("gamma", "scale")
    if not (isinstance(gamma, str) and gamma.strip().lower() == "scale"):
        return params
    value = variance()
    if value is None or not math.isfinite(value):
        raise InputError(
            "gamma='scale' needs the data's variance, and the table's is not a finite number (no rows, or NULL, "
            "NaN or infinite values); give gamma as a number"
        )
    return {**params, "variance": value}


@dataclass(frozen=True)
class ShiftKernel:
    """The shift-invariant kernel an ``rff`` projection approximates, as ``evaluate`` measures it: the Gram
    matrix (:func:`kernel_matrix`) and feature-space distances ``|phi(x) - phi(y)|^2 = 2 - 2 k(x - y)``."""

    kind: str = "rbf"
    gamma: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KERNELS:
            raise InvalidParameter(f"kernel must be one of {', '.join(KERNELS)}, got {self.kind!r}")
        resolve_gamma(self.gamma, 1)

    def gram(self, X: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
        return kernel_matrix(X, X if Y is None else Y, self.kind, self.gamma)

    def sq_distances(self, X: np.ndarray) -> np.ndarray:
        """``2 - 2 k(x_i - x_j)`` for the pairs ``i < j`` (condensed order, as ``scipy.pdist``)."""
        i, j = np.triu_indices(len(X), k=1)
        return np.maximum(2.0 - 2.0 * self.gram(X)[i, j], 0.0)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "gamma": self.gamma}

    @classmethod
    def of(cls, projection: Any) -> ShiftKernel | None:
        """The kernel of an ``rff`` projection (from its stored parameters); ``None`` for any other."""
        params = getattr(projection, "params", None) or {}
        if getattr(projection, "method", None) != "rff" or params.get("kernel") not in KERNELS:
            return None
        return cls(params["kernel"], float(params["gamma"]))


def kernel_matrix(X: np.ndarray, Y: np.ndarray, kernel: str, gamma: float) -> np.ndarray:
    """The exact kernel ``k(x_i, y_j)`` the features approximate (``rbf`` or ``laplacian``)."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if kernel == "laplacian":
        dist = np.abs(X[:, None, :] - Y[None, :, :]).sum(axis=2)
    else:
        dist = np.maximum((X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * X @ Y.T, 0.0)
    return np.exp(-gamma * dist)


__all__ = [
    "DEFAULT_WEIGHTS",
    "KERNELS",
    "ShiftKernel",
    "WEIGHTS",
    "data_gamma",
    "hadamard",
    "kernel_matrix",
    "resolve_gamma",
    "rff",
    "scale_gamma",
]
