"""The parameter checks the polynomial-kernel methods share (:mod:`sqlrp.methods.kernel`,
:mod:`sqlrp.methods.pk_rp`, :mod:`sqlrp.methods.maclaurin`)."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import InvalidParameter


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise InvalidParameter(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _nonnegative(name: str, value: Any) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise InvalidParameter(f"{name} must be a number >= 0, got {value!r}")
    return value
