"""One validation of the numbers users pass, shared by the API, the CLI and the transformer.

Every count, size, block, k, chunk, batch, sample, ``queries``, ``recall_k``, ``top`` and list of them
is checked here -- type, sign, upper bound -- before any work, and a bad one raises
:class:`~sqlrp.core.errors.InvalidParameter` in one line that names the parameter.  The API names
it as the keyword (``chunk_rows``), the CLI as the option (``--chunk-rows``): the CLI's argparse
types (:func:`arg_positive`, :func:`arg_positive_list`, ...) wrap the same checks, so a bad value on
the command line is argparse's one-line usage error and exit status 2, never a traceback.

Why it matters (issue 31): a negative mailman block wrote all zeros, ``chunk_rows=-1`` never ended,
``chunk_rows=0`` was read as "no chunks" and broke the caller, ``recall_k=0`` gave NaN metrics with
exit 0, ``n_components=1.5`` was truncated to 1.  A whole number here is an ``int`` or a NumPy
integer, never a ``bool`` and never a float (scikit-learn's ``Interval(Integral, ...)`` refuses
``1.5`` and ``2.0`` alike).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import InvalidParameter


def is_whole(value: Any) -> bool:
    """True for an ``int`` or a NumPy integer (a ``bool`` is not a count)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def whole(name: str, value: Any, minimum: int = 1, upper: int | None = None, bound: str | None = None) -> int:
    """``value`` as an ``int`` if it is a whole number in ``[minimum, upper]``, else
    :class:`InvalidParameter` naming ``name`` (and ``bound``, what the upper limit is, e.g.
    ``"d, the number of features"``)."""
    if not is_whole(value):
        raise InvalidParameter(f"{name} must be a whole number >= {minimum}, got {value!r}")
    if value < minimum:
        raise InvalidParameter(f"{name} must be a whole number >= {minimum}, got {int(value)}")
    if upper is not None and value > upper:
        why = f" ({bound})" if bound else ""
        raise InvalidParameter(f"{name} = {int(value)} is above {upper}{why}")
    return int(value)


def positive_int(name: str, value: Any, upper: int | None = None, bound: str | None = None) -> int:
    """A whole number ``>= 1`` (and ``<= upper``); :func:`whole`."""
    return whole(name, value, 1, upper, bound)


def optional_positive(name: str, value: Any, upper: int | None = None, bound: str | None = None) -> int | None:
    """``None``, or :func:`positive_int`."""
    return None if value is None else positive_int(name, value, upper, bound)


def positive_ints(name: str, values: Iterable[Any] | None) -> list[int] | None:
    """``None``, or a non-empty list of positive whole numbers (``ks``, ``candidates``)."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidParameter(f"{name} must be a list of whole numbers >= 1, got {values!r}")
    out = [positive_int(f"each of {name}", v) for v in values]
    if not out:
        raise InvalidParameter(f"{name} must list at least one whole number >= 1, got an empty list")
    return out


def finite(name: str, value: Any, minimum: float | None = None) -> float:
    """``value`` as a finite float (``>= minimum``), else :class:`InvalidParameter` naming ``name``:
    a NaN constant makes every metric NaN."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or (minimum is not None and number < minimum):
        floor = f" >= {minimum:g}" if minimum is not None else ""
        raise InvalidParameter(f"{name} must be a finite number{floor}, got {value!r}")
    return number


def block_size(block: Any, d: int | None) -> int | None:
    """Mailman's ``block`` (features per block): ``None``, or a whole number from 1 to ``d``.  A
    negative one had made blocks of no feature (the SQL wrote ``0.0 * scale``, all zeros), one above d
    a misleading "needs a sign matrix"."""
    bound = None if d is None else f"d = {d}: a block holds at most d features"
    return optional_positive("block", block, upper=d, bound=bound)


def batches(value: bool | int) -> bool | int:
    """``progress``: ``False``, ``True`` or a number of batches (a whole number >= 1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return positive_int("the number of batches (--batches)", value)


# ---- the same checks as argparse types: a bad option is a one-line usage error (exit status 2) ----


def _argtype(check: Callable[[int], Any], what: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        try:
            return check(value)
        except InvalidParameter:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None

    parse.__name__ = what  # argparse names the type in some messages
    return parse


#: argparse type: a whole number >= 1
arg_positive = _argtype(lambda v: positive_int("value", v), "a positive whole number")
#: argparse type: a whole number >= 0
arg_nonnegative = _argtype(lambda v: whole("value", v, 0), "a whole number >= 0")


def arg_finite(text: str) -> float:
    """argparse type: a finite number (``nan`` and ``inf`` refused)."""
    try:
        return finite("value", text)
    except InvalidParameter:
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}") from None


def arg_positive_list(text: str) -> list[int]:
    """argparse type: ``10,20,50`` as positive whole numbers."""
    parts = [p for p in text.split(",")]
    try:
        return [arg_positive(p) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive whole numbers, got {text!r}") from None


__all__ = [
    "arg_finite",
    "arg_nonnegative",
    "arg_positive",
    "arg_positive_list",
    "batches",
    "block_size",
    "finite",
    "is_whole",
    "optional_positive",
    "positive_int",
    "positive_ints",
    "whole",
]
