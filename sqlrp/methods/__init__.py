"""Projection methods: each turns parameters and a seed into the shared IR (:mod:`sqlrp.core.ir`).

``METHODS`` maps the names users type (``--method``) to generator functions
``f(d, k, seed=..., **params) -> Projection``.  A new method registers itself here and needs
nothing else from the compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import InvalidParameter
from ..core.ir import Composed, Projection
from ..core.params import LIMITS, MAX_D, MAX_K, MAX_SEED
from .kernel import cbp, craftmap, maclaurin, p_rp, pk_rp
from .linear import achlioptas, expected_distortion, gaussian, johnson_lindenstrauss_min_dim, resolve_s
from .rff import rff

METHODS: dict[str, Callable[..., Projection | Composed]] = {
    "achlioptas": achlioptas,
    "gaussian": gaussian,
    "p-rp": p_rp,
    "pk-rp": pk_rp,
    "cbp": cbp,
    "maclaurin": maclaurin,
    "craftmap": craftmap,
    "rff": rff,
}


# Bounds checked before anything is generated (a k of 10^6 would otherwise run until killed): the one
# table of every whole number's range, sqlrp.core.params.LIMITS (the reasons are there).


def check_dimensions(d: int, k: int, seed: int | None) -> None:
    """Refuse ``d``, ``k`` or ``seed`` outside what sqlrp can generate, store and compile."""
    for name, value, top in (("k", k, MAX_K), ("d", d, MAX_D)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise InvalidParameter(f"{name} must be a whole number, not {value!r}")
        if value > top:  # below 1: each method's own message
            raise InvalidParameter(f"{name} = {value} is above {top:,}: {LIMITS[name].why}")
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED
    ):
        raise InvalidParameter(f"seed must be a whole number in 0..2^63-1 (it is stored as BIGINT), not {seed!r}")


def make_projection(method: str, d: int, k: int, seed: int | None = 0, **params: Any) -> Projection | Composed:
    """Generate a projection of ``d`` inputs to ``k`` outputs with the named method, deterministically.

    :param method: a name of :data:`METHODS`.
    :param d: the input dimension, the number of features (``1 .. 10,000,000``).
    :param k: the output dimension (``1 .. 100,000``).
    :param seed: the generator's seed, ``0 .. 2^63-1`` (``None``: fresh entropy, not reproducible).
    :param params: the method's own parameters (``s``, ``degree``, ...); ``None`` values are dropped (the
        method's defaults).
    :returns: the projection; ``craftmap``'s is a :class:`~sqlrp.core.ir.Composed` of two stages.
    """
    check_dimensions(d, k, seed)
    try:
        factory = METHODS[method]
    except KeyError:
        known = ", ".join(sorted(METHODS))
        raise InvalidParameter(f"unknown method {method!r}; choose one of: {known}") from None
    params = {key: value for key, value in params.items() if value is not None}
    try:
        return factory(d, k, seed=seed, **params)
    except TypeError as exc:  # an option the method does not take
        raise InvalidParameter(f"method {method!r}: {exc}") from None


__all__ = [
    "METHODS",
    "achlioptas",
    "cbp",
    "craftmap",
    "expected_distortion",
    "gaussian",
    "johnson_lindenstrauss_min_dim",
    "maclaurin",
    "make_projection",
    "p_rp",
    "pk_rp",
    "resolve_s",
    "rff",
]
