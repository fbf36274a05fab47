"""The parameter checks the polynomial-kernel methods share (:mod:`sqlrp.methods.kernel`,
:mod:`sqlrp.methods.pk_rp`, :mod:`sqlrp.methods.maclaurin`)."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import InvalidParameter
from ..core.params import LIMITS, whole


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """A whole number ``>= minimum`` and within ``name``'s upper bound (:data:`sqlrp.core.params.LIMITS`);
    a float holding a whole number (``2.0``) is taken, as it always was here."""
    try:
        whole_value = int(value) == value
    except (TypeError, ValueError, OverflowError):
        whole_value = False
    if isinstance(value, bool) or not whole_value or value < minimum:
        raise InvalidParameter(f"{name} must be a whole number >= {minimum}, got {value!r}")
    limit = LIMITS.get(name)
    return whole(name, int(value), minimum, limit.upper if limit else None, limit.why if limit else None)


def _nonnegative(name: str, value: Any) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InvalidParameter(f"{name} must be a number >= 0, got {value!r}")
    return value
