"""The differential fuzzer's oracle (issue 31): a result equals the NumPy reference on the stored
matrix, or the operation was refused with one of sqlrp's own errors in one line.

The tolerance is relative to what floating point can promise for each output: for the linear
methods ``1e-9 * (|X| @ |W|)`` row by row (``W`` the projection's weights, read off the reference as
the image of the identity), so that rows of 1e-300 are checked as strictly as rows of 1e300; for the
kernel methods ``1e-9`` of the same map with positive weights on ``|X|`` (:func:`absolute`: the size of
the terms, for outputs that cancel to about 0), or of the largest output.  Standardised input adds
what the means and standard deviations can differ by between SQL and NumPy (``1e-13 * max|x| / std``
per column).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import re

import numpy as np

import sqlrp
from testkit.fuzz_tables import Stored, reference

LINEAR = ("achlioptas", "gaussian", "dt-rp", "best-of-n")


class Refused(AssertionError):
    """The case had to be refused (invalid parameters, non-finite data or outputs) but ran."""


@dataclasses.dataclass
class Expected:
    """What a correct run gives: ``keys`` (ids as comparable keys) and ``Y``, with a per-element
    tolerance ``tol``; or ``must_refuse`` with the reason."""

    keys: list
    Y: np.ndarray
    tol: np.ndarray
    must_refuse: str | None = None


def key(v) -> str:
    """An id as a comparable key: numbers by their float value, text as text."""
    if isinstance(v, (bytes, str)):
        return v if isinstance(v, str) else v.decode()
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return str(v)


def standardized(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X - mean) / std_pop`` per column (a constant column, max = min, becomes 0), and the
    absolute error per column SQL's own statistics may add."""
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    constant = X.max(axis=0) == X.min(axis=0)
    safe = np.where(constant | (std == 0), 1.0, std)
    Xs = np.where(constant, 0.0, (X - mean) / safe)
    delta = np.where(constant, 0.0, 1e-13 * np.abs(X).max(axis=0) / safe)
    return Xs, delta


def absolute(projection):
    """``projection`` with its weights, biases, term weights and scale made positive: evaluated on
    ``|X|`` it bounds the size of the terms each output sums (cancellation leaves outputs near 0 whose
    rounding is relative to the terms, not to the outputs)."""
    if getattr(projection, "first", None) is not None:  # a composition
        return dataclasses.replace(projection, first=absolute(projection.first), second=absolute(projection.second))
    lin = projection.linear
    bias = None if lin.bias is None else np.abs(lin.bias)
    linear = dataclasses.replace(lin, weight=np.abs(lin.weight), bias=bias)
    combiner = projection.combiner
    if combiner is not None:
        combiner = dataclasses.replace(combiner, term_weight=np.abs(combiner.term_weight))
    return dataclasses.replace(projection, linear=linear, combiner=combiner, scale=abs(projection.scale))


def expected(projection, data: Stored, nulls: str = "error", standardize: bool = False, dtype: str = "float64",
             invalid: str | None = None) -> Expected:  # fmt: skip
    X = data.X.copy()
    keys = [key(v) for v in data.ids]
    empty = np.zeros((len(keys), projection.k))
    if invalid:
        return Expected(keys, empty, empty, invalid)
    if nulls == "zero":
        X[data.null] = 0.0
    if not np.isfinite(X).all():
        return Expected(keys, empty, empty, "NULL, NaN or infinite input")
    delta = np.zeros(X.shape[1])
    with np.errstate(all="ignore"):
        if standardize:
            X, delta = standardized(X)
        Y = reference(projection, X)
    if not np.isfinite(Y).all() or (dtype == "float32" and np.abs(Y).max(initial=0) > 3.4e38):
        return Expected(keys, Y, empty, "outputs overflow")
    if getattr(projection, "function", "identity") == "cos":  # rff: |cos'| <= 1, so the argument's rounding
        plain = dataclasses.replace(absolute(projection), params={**projection.params, "function": "identity"})
        with np.errstate(all="ignore"):  # the terms of the argument inner * (w.x + b / inner), their own size
            terms = reference(dataclasses.replace(plain, scale=1.0), np.abs(X) + delta) * projection.function_scale
        bound = abs(projection.scale) * np.where(np.isfinite(terms), np.maximum(terms, 1.0), np.inf)
    elif projection.method in LINEAR and not getattr(projection, "stages", None):
        W = np.abs(reference(projection, np.eye(projection.d)))  # d x k: the weights with their scale
        bound = np.abs(X) @ W + delta @ W
    else:  # the same map with every weight, bias and scale made positive, on |X|: the terms' own size
        scale = np.abs(Y).max(initial=0)
        bound = np.full(Y.shape, scale * (1 + 10 * delta.max(initial=0)))
        with np.errstate(all="ignore"):
            terms = reference(absolute(projection), np.abs(X) + delta)
        bound = np.where(np.isfinite(terms), np.maximum(bound, terms), bound)
    rel = 1e-6 if dtype == "float32" else 1e-9
    return Expected(keys, Y, rel * bound + (1e-44 if dtype == "float32" else 0.0))


def compare(want: Expected, got_ids: list, got: np.ndarray, what: str) -> None:
    """``got`` (rows in any order, ids ``got_ids``) equals ``want``; rows that share an id are
    matched to expected rows of that id by a perfect matching of the rows that fit each other (a
    greedy match took a row whose tolerance was wide and left a near-0 row without its partner)."""
    if want.must_refuse:
        raise Refused(f"{what}: ran although it had to be refused ({want.must_refuse})")
    got = np.asarray(got, dtype=np.float64).reshape(len(got_ids), -1)
    gk = [key(v) for v in got_ids]
    assert sorted(gk) == sorted(want.keys), f"{what}: ids differ: got {sorted(gk)[:8]}, want {sorted(want.keys)[:8]}"
    assert got.shape == want.Y.shape, f"{what}: shape {got.shape}, want {want.Y.shape}"
    rows: dict[str, list[int]] = {}
    for i, k in enumerate(want.keys):
        rows.setdefault(k, []).append(i)
    mine: dict[str, list[int]] = {}
    for g, k in enumerate(gk):
        mine.setdefault(k, []).append(g)

    def fits(g: int, i: int) -> bool:
        return bool(np.isfinite(got[g]).all() and (np.abs(got[g] - want.Y[i]) <= want.tol[i]).all())

    for k, gs in mine.items():
        partner = _matching({g: [i for i in rows[k] if fits(g, i)] for g in gs})
        for g in gs:
            if g in partner.values():
                continue
            free = [i for i in rows[k] if i not in partner]
            i = min(free, key=lambda i: float(np.max(np.abs(got[g] - want.Y[i]))))  # the nearest left
            excess = np.abs(got[g] - want.Y[i]) - want.tol[i]
            j = int(np.argmax(excess)) if np.isfinite(got[g]).all() else int(np.argmin(np.isfinite(got[g])))
            raise AssertionError(
                f"{what}: id {k}, output {j}: got {got[g][j]!r}, NumPy {want.Y[i][j]!r} "
                f"(tolerance {want.tol[i][j]:.3g})"
            )


def _matching(fits: dict[int, list[int]]) -> dict[int, int]:
    """A maximum matching of got rows to the expected rows each fits (Kuhn's augmenting paths; the
    rows of one id are few): ``{expected row: got row}``."""
    partner: dict[int, int] = {}

    def augment(g: int, seen: set[int]) -> bool:
        for i in fits[g]:
            if i not in seen:
                seen.add(i)
                if i not in partner or augment(partner[i], seen):
                    partner[i] = g
                    return True
        return False

    for g in fits:
        augment(g, set())
    return partner


def one_line_error(exc: BaseException, what: str) -> str:
    """``exc`` must be sqlrp's own error with a one-line message; returns its class name."""
    if not isinstance(exc, sqlrp.SqlrpError):
        raise AssertionError(f"{what}: not an sqlrp error: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc
    text = str(exc)
    assert text.strip(), f"{what}: an error without a message"
    return type(exc).__name__


def cli_error(status: int, stderr: str, what: str) -> str:
    """A refused command: status != 0, one line on stderr (``error: ...``), no traceback."""
    assert status != 0
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert "Traceback" not in stderr, f"{what}: traceback:\n{stderr[-3000:]}"
    errors = [x for x in lines if x.startswith("error:") or x.startswith("usage:") or ": error:" in x]
    assert errors, f"{what}: exit {status} without an error line: {stderr[-2000:]!r}"
    return f"exit {status}"


def finite_or_none(v) -> float:
    return math.nan if v is None else float(v)


#: failures of a known class that is a refusal by the engine rather than by sqlrp: a failure whose text
#: matches is counted (``KNOWN_SEEN``, printed with ``-s``) instead of failing the run.  The one class:
#: PostgreSQL raises ``value out of range: underflow`` for a double product that rounds to 0 (kernel
#: products of features of about 1e-160), where NumPy gives 0; sqlrp explains it in one line
#: (:data:`sqlrp.core.errors`), and no SQL expression avoids it without doubling the statement.  The
#: classes of issue 31 are fixed and fail the run.  ``SQLRP_FUZZ_STRICT=1`` fails on this one too.
KNOWN: list[tuple[str, str]] = [
    (
        r"^postgres .*a valid case failed in the engine: NumericValueOutOfRange: value out of range: underflow",
        "postgres: a product of doubles that underflows is refused by the engine (one line)",
    ),
]
KNOWN_SEEN: dict[str, int] = {}


@contextlib.contextmanager
def triage():
    """Run one example; a failure of a known class is counted, anything else raised."""
    try:
        yield
    except AssertionError as exc:
        text = str(exc)
        for pattern, name in KNOWN:
            found = re.search(pattern, text, re.S)
            if found and not os.environ.get("SQLRP_FUZZ_STRICT"):
                label = f"{name}: {found.group(1)}" if found.groups() else name
                KNOWN_SEEN[label] = KNOWN_SEEN.get(label, 0) + 1
                return
        raise


def triaged(fn):
    """``fn`` run under :func:`triage`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with triage():
            return fn(*args, **kwargs)
        return "known"

    return wrapper


def known(label: str) -> bool:
    """Count a failure of a known class (``True``), or ``False`` under ``SQLRP_FUZZ_STRICT=1``."""
    if os.environ.get("SQLRP_FUZZ_STRICT"):
        return False
    KNOWN_SEEN[label] = KNOWN_SEEN.get(label, 0) + 1
    return True
