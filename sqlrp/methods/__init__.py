"""Projection methods: each turns parameters and a seed into the shared IR (:mod:`sqlrp.ir`).

``METHODS`` maps the names users type (``--method``) to generator functions
``f(d, k, seed=..., **params) -> Projection``.  A new method registers itself here and needs
nothing else from the compiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidParameter
from ..ir import Composed, Projection
from .kernel import cbp, craftmap, maclaurin, p_rp, pk_rp
from .linear import achlioptas, expected_distortion, gaussian, johnson_lindenstrauss_min_dim, resolve_s

METHODS: dict[str, Callable[..., Projection | Composed]] = {
    "achlioptas": achlioptas,
    "gaussian": gaussian,
    "p-rp": p_rp,
    "pk-rp": pk_rp,
    "cbp": cbp,
    "maclaurin": maclaurin,
    "craftmap": craftmap,
}


def make_projection(method: str, d: int, k: int, seed: int | None = 0, **params: Any) -> Projection | Composed:
    """Generate a projection of ``d`` inputs to ``k`` outputs with the named method, deterministically."""
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
]
