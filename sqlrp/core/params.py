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

Every whole number has an upper bound too (:data:`LIMITS`, issue 41): ``--d 99999999999999999999`` was a
NumPy traceback, ``tune --iterations`` of 10^20 never ended, ``tune --k 200000`` ran although k's cap is
100,000.  Each bound is where the work or the memory stops being feasible (or a type stops holding the
number); the CLI's argparse types (:func:`arg_count`) and the API (:func:`count`) read the same table.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


# ---- the bounds of every whole number a user passes (issue 41) ----

# k and d: every output is one expression and one column, and no engine sqlrp renders for holds more than
# 10,000 columns (BigQuery; PostgreSQL 1,600) or a statement of 10^5 sums within its size limit; d bounds
# the matrix held in memory while it is drawn (d * k / s entries of 16 bytes).
MAX_K = 100_000
MAX_D = 10_000_000
MAX_SEED = 2**63 - 1  # stored as BIGINT
#: rows of a sample whose pairs are held in memory (tune's DT-RP, evaluate's distortion and co-ranking):
#: n (n - 1) / 2 distances of 8 bytes, 400 MB at 10,000 rows
MAX_PAIR_SAMPLE = 10_000
#: a polynomial kernel's degree: a product of that many sums per output, and (x.y + c)^degree is past a
#: double's range for |x.y + c| above 10^(308 / degree)
MAX_DEGREE = 64
#: rows a query fetches or writes at once, and every other count of rows or lists (a BIGINT holds them all;
#: a count above it is surely a slip)
MAX_ROWS = 2**31 - 1


@dataclass(frozen=True)
class Limit:
    """The range of one whole-number parameter: ``minimum .. upper``, and why the upper bound is there."""

    minimum: int
    upper: int
    why: str


#: every whole-number parameter's range, by the API's keyword (the CLI's option, without ``--``, with ``_``)
LIMITS: dict[str, Limit] = {
    "k": Limit(1, MAX_K, "one SQL expression and column per output"),
    "d": Limit(1, MAX_D, "the matrix is held in memory while it is drawn"),
    "seed": Limit(0, MAX_SEED, "a seed is stored as BIGINT"),
    "sample": Limit(1, MAX_PAIR_SAMPLE, "the sample's pairs are held in memory"),
    "queries": Limit(1, MAX_PAIR_SAMPLE, "queries are rows of the sample"),
    "recall_k": Limit(1, MAX_PAIR_SAMPLE, "the neighbours are rows of the sample"),
    "iterations": Limit(0, 1_000_000, "each tuning step recomputes the sample's pair distances"),
    "oversample": Limit(0, 10_000, "the sketch's l x d sums leave the database"),
    "power_iterations": Limit(0, 100, "each iteration is one more pass over the table"),
    "draws": Limit(1, 10_000, "each draw is a whole matrix and a pass over the sample's pairs"),
    "degree": Limit(0, MAX_DEGREE, "a product of degree sums per output"),
    "kernel_degree": Limit(1, MAX_DEGREE, "(x.y + c)^degree leaves a double's range early"),
    "m": Limit(1, 1_000, "m * k sign vectors are drawn and summed"),
    "t": Limit(1, 1_000, "t products are summed per output"),
    "p": Limit(1, MAX_D, "p random vectors are held in memory"),
    "up_k": Limit(1, 4 * MAX_K, "the up-projection's outputs; 4k by default"),
    "block": Limit(1, MAX_D, "a block holds at most d features"),
    "threads": Limit(1, 4096, "DuckDB threads"),
    "batches": Limit(1, 100_000, "one query per batch"),
    "chunk_rows": Limit(1, MAX_ROWS, "rows fetched at once"),
    "lists": Limit(1, 1_000_000, "k-means centroids held in memory"),
    "probes": Limit(1, 1_000_000, "at most the index's lists"),
    "bits": Limit(1, 65_536, "a code of bits per row; a power of two >= d"),
    "index_sample": Limit(1, MAX_ROWS, "rows k-means trains on, held in memory"),
    "calibration_queries": Limit(0, 100_000, "each is a search of the table"),
    "top": Limit(1, MAX_ROWS, "neighbours per query"),
    "candidates": Limit(1, MAX_ROWS, "rows re-ranked per query"),
}


def count(name: str, value: Any, label: str | None = None, limit: str | None = None) -> int:
    """``value`` if it is a whole number in the range :data:`LIMITS` gives ``limit`` (default ``name``),
    else :class:`InvalidParameter` naming ``label`` (default ``name``) and the bound's reason."""
    bound = LIMITS[limit or name]
    return whole(label or name, value, bound.minimum, bound.upper, bound.why)


def optional_count(name: str, value: Any, label: str | None = None, limit: str | None = None) -> int | None:
    """``None``, or :func:`count`."""
    return None if value is None else count(name, value, label, limit)


def counts(name: str, values: Iterable[Any] | None, limit: str | None = None) -> list[int] | None:
    """``None``, or a non-empty list of whole numbers each in :data:`LIMITS`' range for ``limit``
    (default ``name``; ``ks``: ``k``)."""
    if values is None:
        return None
    bound = LIMITS[limit or name]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidParameter(f"{name} must be a list of whole numbers >= {bound.minimum}, got {values!r}")
    out = [count(f"each of {name}", v, limit=limit or name) for v in values]
    if not out:
        raise InvalidParameter(f"{name} must list at least one whole number >= {bound.minimum}, got an empty list")
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


def fraction(name: str, value: Any) -> float:
    """``value`` strictly between 0 and 1 (a target explained-variance ratio), else :class:`InvalidParameter`."""
    number = finite(name, value)
    if not 0.0 < number < 1.0:
        raise InvalidParameter(f"{name} must be a fraction strictly between 0 and 1, got {value!r}")
    return number


def k_or_variance(k: Any, variance: Any) -> tuple[int | None, float | None]:
    """``fit``'s size: a number of components ``k`` (:data:`LIMITS`) or a target explained-variance ratio
    ``variance`` (:func:`fraction`), exactly one of the two."""
    if (k is None) == (variance is None):
        raise InvalidParameter("fit: give either --k (components) or --variance (a target explained-variance ratio)")
    if variance is not None:
        return None, fraction("--variance", variance)
    return count("k", k), None


def block_size(block: Any, d: int | None) -> int | None:
    """Mailman's ``block`` (features per block): ``None``, or a whole number from 1 to ``d``.  A
    negative one had made blocks of no feature (the SQL wrote ``0.0 * scale``, all zeros), one above d
    a misleading "needs a sign matrix"."""
    if d is None:
        return optional_count("block", block)
    return optional_positive("block", block, upper=d, bound=f"d = {d}: a block holds at most d features")


def batches(value: bool | int) -> bool | int:
    """``progress``: ``False``, ``True`` or a number of batches (a whole number >= 1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    return count("the number of batches (--batches)", value, limit="batches")


# ---- the same checks as argparse types: a bad option is a one-line usage error (exit status 2) ----


#: a whole number as the command line takes it: ASCII digits, a sign at most
_DIGITS = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _argtype(check: Callable[[int], Any], what: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if not _DIGITS.fullmatch(text.strip()):  # int() would take "1_000" and other scripts' digits too
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        value = int(text.strip())
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


def _range(name: str) -> str:
    bound = LIMITS[name]
    return f"a whole number from {bound.minimum} to {bound.upper:,} ({bound.why})"


def arg_count(name: str) -> Callable[[str], int]:
    """argparse type of the option whose range is ``LIMITS[name]`` (:func:`count`): out of range, a
    one-line usage error (exit status 2) that gives the range and its reason.  The function carries the
    name as ``limit`` (the CLI's fuzzer finds every whole-number option by it)."""
    parse = _argtype(lambda v: count(name, v), _range(name))
    parse.limit = name  # type: ignore[attr-defined]
    return parse


def arg_count_list(name: str) -> Callable[[str], list[int]]:
    """argparse type: ``10,20,50``, each in ``LIMITS[name]``'s range."""
    one = arg_count(name)

    def parse(text: str) -> list[int]:
        try:
            return [one(part) for part in text.split(",")]
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated whole numbers, each from {LIMITS[name].minimum} to "
                f"{LIMITS[name].upper:,} ({LIMITS[name].why}), got {text!r}"
            ) from None

    parse.__name__ = f"comma-separated {_range(name)}"
    parse.limit = name  # type: ignore[attr-defined]
    parse.is_list = True  # type: ignore[attr-defined]
    return parse


def arg_finite(text: str) -> float:
    """argparse type: a finite number (``nan`` and ``inf`` refused)."""
    try:
        return finite("value", text)
    except InvalidParameter:
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}") from None


def arg_fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    try:
        return fraction("value", text)
    except InvalidParameter:
        raise argparse.ArgumentTypeError(f"expected a fraction strictly between 0 and 1, got {text!r}") from None


def arg_positive_list(text: str) -> list[int]:
    """argparse type: ``10,20,50`` as positive whole numbers."""
    parts = [p for p in text.split(",")]
    try:
        return [arg_positive(p) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive whole numbers, got {text!r}") from None


__all__ = [
    "LIMITS",
    "MAX_D",
    "MAX_K",
    "MAX_SEED",
    "Limit",
    "arg_count",
    "arg_count_list",
    "arg_finite",
    "arg_fraction",
    "arg_nonnegative",
    "arg_positive",
    "arg_positive_list",
    "batches",
    "block_size",
    "count",
    "counts",
    "finite",
    "fraction",
    "is_whole",
    "k_or_variance",
    "optional_count",
    "optional_positive",
    "positive_int",
    "positive_ints",
    "whole",
]
