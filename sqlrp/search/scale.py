"""Distances that neither overflow nor underflow (issue 41): every search computes squared distances,
``sum_i (x_i - q_i)^2``, which overflow a double once the features pass about ``1e154`` (every
distance ``inf``: neighbours in id order) and underflow to 0 below about ``1e-154`` (every distance 0:
the same).  An index therefore reads its table scaled by a power of two, ``s = 2^e``, chosen at build
time from the largest ``|feature|`` ``M`` of the table (:func:`scale_exponent`):

- ``e = 0`` when ``2^-64 <= M < 2^64`` (:data:`BAND`: the SQL is the same as without scaling);
- else ``e = -E`` for ``M = m 2^E``, ``m`` in ``[1/2, 1)``: the scaled table's largest ``|feature|``
  is in ``[1/2, 1)`` (``e`` kept in ``[-1000, 1000]``, so that ``2^e`` and ``2^-e`` are normal doubles).

Multiplying by a power of two is exact (no rounding) unless the product leaves the normal range, and
so are a square root of ``s^2`` and the division of a distance by ``s``: on the scaled rows the
lists, codes, estimates and ranks are those of the table, and the reported distance
(:func:`sqlrp.search.sql.pair_distance`: ``sqrt(sum) * 2^-e``) is the table's, to the last bit
wherever nothing under- or overflowed.  What remains:

- a sum of ``d`` squares of scaled values up to ``2^H`` stays below the doubles' limit when
  ``H = (960 - ceil(log2 d)) / 2`` (:func:`high`; ``2^40`` to spare for the estimator's products):
  queries (and the table, if it changed since the build) whose largest ``|feature|`` exceeds
  ``2^(H - e)`` are refused in one line naming the index and the limit (:func:`check_range`), before
  any SQL runs;
- squares of scaled differences below ``2^-511`` underflow: a distance below ``2^-400`` is therefore
  computed again on the differences times ``2^500`` (:func:`sqlrp.search.sql.pair_distance`), whose
  squares underflow only below ``2^-1037`` -- where rows can differ that little at all, a nonzero
  scaled feature below ``2^-340`` in the table or the queries (:func:`needs_fine`; the second distance
  costs as much as the first); distances are exact to ``1e-9`` relative plus
  :func:`resolution` (about ``sqrt(d) 2^(-1036 - e)`` and the subnormals' ``2^-1074``: rows that
  differ by less are at distance 0 from each other, ties broken by id).  PostgreSQL raises where a
  product underflows, so there the first distance fails instead (:func:`engine_range`: one line);
- ``angular`` divides each row by its norm, which underflows for a row whose largest ``|feature|`` is
  below ``2^-480`` after scaling: such rows (a table or queries spanning more than about ``2^480`` in
  magnitude from row to row) are refused at build and search time.

NumPy's reference (:func:`sqlrp.search.reference.reference_search`, ``scale=e``) scales the same way."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import NamedTuple

from sqlglot import exp

from ..backends import Backend
from ..compiler import Source, col
from ..core.errors import DRIVER_MODULES, InputError
from ..core.nodes import bare_select as _select
from .sql import feature_rows, scaled  # noqa: F401 - scaled: sqlrp.search.scale.scaled, as it was

#: ``e = 0`` while the table's largest ``|feature|`` is in ``[2^-BAND, 2^BAND)``
BAND = 64
#: the scaled exponent ``e`` is kept in ``[-LIMIT, LIMIT]`` (``2^e`` a normal double, exactly written)
LIMIT = 1000
#: a table whose largest scaled ``|feature|`` fell below ``2^-LOW`` (a refresh) would lose its distances'
#: precision to underflow: rebuild
LOW = 256
#: an ``angular`` row's largest scaled ``|feature|`` must be at least ``2^-ANGULAR_LOW`` (its norm squared)
ANGULAR_LOW = 480


def scale_exponent(peak: float) -> int:
    """``e`` (module docstring) for a table whose largest ``|feature|`` is ``peak``."""
    if peak == 0 or not math.isfinite(peak):
        return 0
    E = math.frexp(peak)[1]
    if -BAND < E <= BAND:
        return 0
    return max(-LIMIT, min(LIMIT, -E))


def high(d: int) -> int:
    """``H``: scaled features up to ``2^H`` in magnitude give sums of ``d`` squares far from overflow."""
    return (960 - math.ceil(math.log2(max(int(d), 1)))) // 2


def limit(d: int, e: int) -> float:
    """The largest ``|feature|`` a search of an index of scale ``2^e`` reads (``2^(H - e)``)."""
    exponent = high(d) - e
    return math.ldexp(1.0, exponent) if exponent < 1024 else math.inf


def resolution(d: int, e: int, fine: bool = True) -> float:
    """Distances are exact to ``1e-9`` relative plus this absolute error (module docstring): squares
    of scaled differences below ``2^-1037`` lost and the subnormal grid (``fine``), or, on an engine
    without the fine distance (PostgreSQL), squares below ``2^-1022``."""
    if not fine:
        return math.sqrt(d) * math.ldexp(1.0, -511 - e)
    return math.sqrt(d) * (math.ldexp(1.0, -1036 - e) + math.ldexp(1.0, -1074 - e)) + math.ldexp(1.0, -1073)


class Magnitudes(NamedTuple):
    """What one pass over a table says of its features' magnitudes (:func:`magnitude`)."""

    peak: float  #: the largest ``|feature|`` (``nan`` or ``inf`` if one is not finite; 0 for no rows)
    row_min: float | None  #: the smallest row's largest ``|feature|``, rows not all zero (``rows=True``)
    least: float  #: the smallest nonzero ``|feature|`` (``inf`` if none)


def magnitude(db: Backend, source: Source, d: int, rows: bool = False) -> Magnitudes:
    """:class:`Magnitudes` of ``source``'s features, in one pass over it (``rows``: ``row_min`` too)."""
    dialect = db.sql_dialect
    xs = [exp.Abs(this=col(f"_x{i}")) for i in range(d)]
    aggregates: list[exp.Expression] = [exp.Max(this=x) for x in xs]
    aggregates += [exp.Min(this=exp.Case(ifs=[exp.If(this=x.copy() > 0, true=x.copy())])) for x in xs]
    if rows:
        peak = xs[0].copy() if d == 1 else exp.Greatest(this=xs[0].copy(), expressions=[x.copy() for x in xs[1:]])
        nonzero = exp.Case(ifs=[exp.If(this=exp.paren(peak) > 0, true=peak.copy())])
        aggregates.append(exp.Min(this=nonzero))
    select = _select(*aggregates).from_(feature_rows(source, d, dialect).subquery("_m", copy=False), copy=False)
    got = db.fetchall(dialect.render(select))[0]
    values = [float(v) for v in got[:d] if v is not None]
    M = math.nan if any(math.isnan(v) for v in values) else max(values, default=0.0)
    least = min((float(v) for v in got[d : 2 * d] if v is not None), default=math.inf)
    smallest = None if not rows or got[2 * d] is None else float(got[2 * d])
    return Magnitudes(M, smallest, least)


def needs_fine(least: float, e: int) -> bool:
    """Whether rows of features down to ``least`` (nonzero) may differ by less than ``2^-400`` once
    scaled by ``2^e`` -- the fine distance's domain (:func:`sqlrp.search.sql.pair_distance`).  Two
    distinct doubles of magnitude at least ``2^k`` differ by at least ``2^(k-52)``: with every nonzero
    scaled feature at least ``2^-340``, no nonzero difference is below ``2^-400`` (nor its square
    below the normal range), and a distance below ``2^-400`` is exactly 0."""
    return math.isfinite(least) and least * math.ldexp(1.0, e) < math.ldexp(1.0, -340)


def _shown(value: float) -> str:
    return f"{value:.3g}"


def check_range(
    what: str, peak: float, smallest: float | None, d: int, e: int, index: str, low: int | None = None
) -> None:
    """Refuse ``what`` (``"query table 'q'"``, ``"table 't'"``) whose largest ``|feature|`` ``peak``
    (and, for ``angular``, smallest row peak ``smallest``) an index of scale ``2^e`` cannot compare:
    squared distances would overflow (or, with ``low``, lose their precision to underflow)."""
    if not math.isfinite(peak):
        raise InputError(f"{what} has NaN or infinite features: index {index!r} cannot search it; clean the data first")
    top = limit(d, e)
    if peak >= top:
        raise InputError(
            f"{what} has features up to {_shown(peak)} in magnitude, beyond what index {index!r} can compare "
            f"without overflow (at most {_shown(top)}, from the magnitudes of its table): scale them, or rebuild "
            f"the index on a table of their magnitude"
        )
    if low is not None and peak > 0 and peak < math.ldexp(1.0, -low - e):
        raise InputError(
            f"{what} has features of at most {_shown(peak)} in magnitude, far below the {_shown(math.ldexp(1.0, -e))} "
            f"index {index!r} was built for (its distances would underflow to 0): rebuild the index (--replace)"
        )
    if smallest is not None and smallest < math.ldexp(1.0, -ANGULAR_LOW - e):
        raise InputError(
            f"{what} has a row whose features are all below {_shown(smallest * 2)} in magnitude, too small beside "
            f"the largest ({_shown(peak)}) for index {index!r}'s angular distances (its norm would underflow): "
            "scale the rows to comparable norms first"
        )


@contextlib.contextmanager
def engine_range(what: str) -> Iterator[None]:
    """Turn the engine's refusal of a double out of range -- PostgreSQL raises where a product
    overflows or underflows (``value out of range: underflow`` for the square of a difference below
    about ``1e-162`` after scaling, which NumPy rounds to 0) -- into one line naming ``what`` (the
    index, the search) and the fix.  Inside a transaction: nothing was written."""
    try:
        yield
    except Exception as exc:
        module = type(exc).__module__.split(".")[0]
        text = str(exc).lower()
        if module not in DRIVER_MODULES or "out of range" not in text or "flow" not in text:
            raise
        first = " ".join(str(exc).split())[:120]
        if "underflow" in text:
            why = (
                "a double underflowed in the engine ({first}): its features (or the queries') span magnitudes beyond "
                "what its distances resolve -- values below about 1e-150 times the largest; round those to 0 or "
                "scale the rows first"
            )
        else:
            why = (
                "a double overflowed in the engine ({first}): its features (or the queries') are too close to the "
                "doubles' limit (1.8e308); scale the rows first"
            )
        raise InputError(f"{what}: {why.format(first=first)}; nothing was written") from None


__all__ = [
    "Magnitudes",
    "check_range",
    "engine_range",
    "limit",
    "magnitude",
    "needs_fine",
    "resolution",
    "scale_exponent",
    "scaled",
]
