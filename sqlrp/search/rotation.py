"""A random rotation made only of additions and subtractions: the randomized Hadamard transform.

RaBitQ (Gao & Long, SIGMOD 2024) quantises a vector to one sign bit per dimension *after a random
rotation*, so that its distance estimator is unbiased with an error bound for any data.  A dense
random orthogonal matrix costs ``D^2`` multiply-adds per row; the randomized Hadamard transform

    H(x) = (1 / sqrt(D))^rounds * W S_rounds ... W S_1 [x, 0 ... 0]

(``x`` padded with zeros to ``D``, a power of two; ``S_r`` a diagonal of random signs; ``W`` the
Walsh-Hadamard matrix) is orthogonal too, so ``|H(x) - H(y)| = |x - y|`` exactly, and it factors into
``log2(D)`` butterfly stages of ``D`` additions or subtractions each (``a + b``, ``a - b``): the same
aggregate-only arithmetic as every sqlrp projection, with one delayed scale factor.  It is what FAISS
and RaBitQ's own code use in place of a dense rotation (the "fast Johnson-Lindenstrauss transform",
Ailon & Chazelle 2006; paper 004 (``docs/reference/papers.md``) on structured random projections).
Two rounds are the default: one round left the estimates visibly worse on embedding-like data
(in NumPy, 200,000 embedding-like rows, 32 of 448 lists probed: Recall@10 0.794 against 0.887 at
C = 100 in a first probe; ``PYTHONPATH=. python -m bench.probes rabitq`` measures both again).

:func:`rotate` is the NumPy reference; :func:`rotate_select` writes the same butterflies as nested
``SELECT`` s (one stage per level), so that SQL and NumPy perform the same IEEE operations in the same
order and agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sqlglot import exp

from ..compiler import col, number
from ..core.errors import InvalidParameter
from ..core.nodes import bare_paren as _p
from ..core.nodes import bare_select as _select

#: rounds of (random signs, Walsh-Hadamard): two match a dense random rotation's estimates
ROUNDS = 2


def rotation_size(d: int, bits: int | None = None) -> int:
    """``D``: the rotation's (and the code's) dimension, a power of two of at least ``d``.  Default:
    twice the next power of two up to 128 features, then the next power of two (RaBitQ pads small
    ``d``: its error shrinks as ``1/sqrt(D)``; 256 bits for d = 128)."""
    if isinstance(d, bool) or int(d) != d or d <= 0:
        raise InvalidParameter(f"d must be a positive integer, got {d!r}")
    if bits is None:
        size = 1 << max(int(d) - 1, 1).bit_length()
        return max(size * 2 if size <= 128 else size, 64)
    if isinstance(bits, bool) or int(bits) != bits or bits < 64 or bits & (bits - 1) or bits < d:
        raise InvalidParameter(
            f"bits must be a power of two, at least 64 and at least d = {d} (a rotation keeps every "
            f"feature), got {bits!r}"
        )
    return int(bits)


def rotation_signs(size: int, seed: int, rounds: int = ROUNDS) -> np.ndarray:
    """The ``rounds x size`` random signs (int8, +-1) of the diagonals ``S_r``, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-1, 1], dtype=np.int8), size=(rounds, size))


def rotate(X: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """NumPy reference of :func:`rotate_select`: ``H(x)`` for every row of ``X`` (n x d), n x D."""
    rounds, size = signs.shape
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] > size:
        raise InvalidParameter(f"cannot rotate {X.shape} rows with a {size}-dimensional rotation")
    out = np.zeros((X.shape[0], size))
    out[:, : X.shape[1]] = X
    for r in range(rounds):
        out = np.where(signs[r] < 0, -out, out)
        h = 1
        while h < size:  # stage h: out[j] = a[j] + a[j + h], out[j + h] = a[j] - a[j + h], for j with bit h clear
            view = out.reshape(out.shape[0], -1, 2, h)
            out = np.stack((view[:, :, 0] + view[:, :, 1], view[:, :, 0] - view[:, :, 1]), axis=2).reshape(out.shape)
            h *= 2
    return out * rotation_scale(size, rounds)


def rotation_scale(size: int, rounds: int) -> float:
    """``(1 / sqrt(size))^rounds``; a power of two, exactly, for an even number of rounds."""
    if rounds % 2 == 0:
        return 1.0 / float(size) ** (rounds // 2)
    return 1.0 / float(size) ** (rounds // 2) / float(np.sqrt(size))


def rotate_select(
    select: exp.Select,
    inputs: Sequence[str],
    signs: np.ndarray,
    prefix: str,
    keep: Sequence[str],
    fence: Callable[[exp.Select], exp.Select] | None = None,
) -> exp.Select:
    """``SELECT keep.., prefix0 .. prefix{D-1}``: the rotation of the columns ``inputs`` (the features,
    in order) of the sub-query ``select``, one nested ``SELECT`` per butterfly stage.  A sign flip is
    folded into the stage after it (``-a + b`` is written ``b - a``), and the scale is one
    multiplication in the last stage.  ``fence`` (the dialect's) keeps each stage a sub-query the
    planner computes once: PostgreSQL would otherwise inline every stage into the next, and each
    column is read twice per stage (2^16 copies of the input for 16 stages: the server ran out of
    memory planning it)."""
    rounds, size = signs.shape
    if len(inputs) > size:
        raise InvalidParameter(f"{len(inputs)} features do not fit a {size}-dimensional rotation")
    names: list[str | None] = list(inputs) + [None] * (size - len(inputs))  # None: a padded zero
    current: exp.Select = select
    negate = np.zeros(size, dtype=bool)
    level = 0
    stages = rounds * (size.bit_length() - 1)
    for r in range(rounds):
        negate ^= signs[r] < 0
        h = 1
        while h < size:
            level += 1
            out = f"_h{level}_"
            columns: list[exp.Expression] = [col(k) for k in keep]
            new_names: list[str | None] = []
            new_negate = np.zeros(size, dtype=bool)
            for j in range(size):
                a, b = (j, j + h) if j & h == 0 else (j - h, j)
                term = _butterfly(names[a], negate[a], names[b], negate[b], subtract=bool(j & h))
                if term is None:
                    new_names.append(None)
                    continue
                expr, negative = term
                if level == stages:
                    expr = exp.Mul(this=_p(expr), expression=number(rotation_scale(size, rounds)))
                    if negative:
                        expr = exp.Neg(this=_p(expr))
                        negative = False
                name = f"{prefix}{j}" if level == stages else f"{out}{j}"
                columns.append(exp.alias_(expr, name, quoted=True, copy=False))
                new_names.append(name)
                new_negate[j] = negative
            stage = _select(*columns).from_(current.subquery(f"_rot{level}", copy=False))
            current = fence(stage) if fence is not None else stage
            names, negate = new_names, new_negate
            h *= 2
    if stages == 0 or any(n is None for n in names):  # size 1, or a column that stayed zero (never: D >= d >= 1)
        raise InvalidParameter("a rotation needs at least two dimensions")
    return current


def _butterfly(
    a: str | None, neg_a: bool, b: str | None, neg_b: bool, subtract: bool
) -> tuple[exp.Expression, bool] | None:
    """``(+-a) + (+-b)`` or ``(+-a) - (+-b)`` as an expression and a pending sign (True: the expression
    is the negated value), with no literal zero and no unary minus but where both inputs are negated
    away; None if both inputs are zero.  IEEE addition is exact under these rewrites: ``-a + b`` is
    ``b - a`` and ``-(a + b)`` is ``-a - b``, bit for bit."""
    sign_b = neg_b ^ subtract  # the sign b enters with
    if a is None and b is None:
        return None
    if b is None:
        return col(a), neg_a
    if a is None:
        return col(b), sign_b
    if not neg_a and not sign_b:
        return exp.Add(this=col(a), expression=col(b)), False
    if not neg_a and sign_b:
        return exp.Sub(this=col(a), expression=col(b)), False
    if neg_a and not sign_b:
        return exp.Sub(this=col(b), expression=col(a)), False
    return exp.Add(this=col(a), expression=col(b)), True


__all__ = ["ROUNDS", "rotate", "rotate_select", "rotation_signs", "rotation_size"]
