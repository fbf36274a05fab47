"""Sign signatures of a projection: the first stage of similarity search in SQL (issue 15).

A row's projection ``y`` (k outputs) keeps only its signs -- random projection onto the hypercube
(``../shared/seeds/004_501365892903997c.txt`` Section 5.2; Charikar's SimHash for angular
distance) -- packed into ``k / 64`` BIGINT words:

    word_w = sum_{b < 64} [y_{64 w + b} > 0] * 2^b      (2^63 taken as -2^63: the two's-complement sign bit)

so the Hamming distance of two signatures is ``sum_w bit_count(a_w XOR b_w)``.  The SQL is the
projection's own (any linear or kernel method, any strategy) with one ``CASE`` per bit on top; the
words are summed as a balanced tree of BIGINTs (:func:`~sqlrp.core.nodes.balanced`), whose
partial sums never overflow: each joins a run of consecutive bits, below 2^63 without bit 63 and
negative with it.  :func:`signatures` is the NumPy reference.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..compiler import Output, Source, col, compile_select, number
from ..core.errors import InvalidParameter
from ..core.ir import Composed, Projection
from ..core.nodes import balanced
from ..dialects import get_dialect
from ..methods.reference import transform

WORD_BITS = 64
BIGINT = exp.DataType.build("BIGINT")


def check_bits(k: int) -> int:
    """The number of words for ``k`` bits; ``k`` must be a positive multiple of 64."""
    if isinstance(k, bool) or int(k) != k or k <= 0 or k % WORD_BITS:
        raise InvalidParameter(f"signatures need a multiple of {WORD_BITS} bits (k = 64, 128, ...), got k = {k!r}")
    return int(k) // WORD_BITS


def _bit(b: int) -> exp.Expression:
    """``2^b`` as a BIGINT; ``b = 63`` is the sign bit, ``-9223372036854775807 - 1``."""
    if b < WORD_BITS - 1:
        return exp.cast(exp.Literal.number(1 << b), BIGINT)
    return exp.cast(exp.Sub(this=exp.Literal.number(-(2**63 - 1)), expression=exp.Literal.number(1)), BIGINT)


def signature_select(
    projection: Projection | Composed,
    source: Source,
    dialect: str = "duckdb",
    prefix: str = "w",
    thresholds: Sequence[float] | None = None,
    keep: str | None = None,
    **compile_opts,
) -> exp.Select:
    """``SELECT id, w0 .. w{k/64 - 1}``: the signs of ``projection``'s outputs on ``source``, packed
    as above; bit ``j`` is ``y_j > thresholds[j]`` (default 0; :func:`centre_thresholds` centres the
    data).  ``keep`` also returns the outputs themselves as ``{keep}0 ..`` (re-ranking on projected
    vectors).  ``compile_opts`` go to :func:`~sqlrp.compiler.compile_select` (``matrix``, ``strategy``)."""
    words = check_bits(projection.k)
    if source.group_column:
        raise InvalidParameter("signatures are per row: pooling (a group column) does not apply")
    cuts = [0.0] * projection.k if thresholds is None else [float(t) for t in thresholds]
    if len(cuts) != projection.k:
        raise InvalidParameter(f"{len(cuts)} thresholds for k = {projection.k} bits")
    engine = get_dialect(dialect)
    base = compile_select(projection, source, engine, Output(prefix="_y"), **compile_opts)
    zero = exp.cast(exp.Literal.number(0), BIGINT)
    columns: list[exp.Expression] = [col(source.id_column)]
    for w in range(words):
        positive = [
            col(f"_y{j}") > (exp.Literal.number(0) if cuts[j] == 0 else number(cuts[j]))
            for j in range(w * WORD_BITS, (w + 1) * WORD_BITS)
        ]
        bits = [exp.Case(ifs=[exp.If(this=p, true=_bit(b))], default=zero) for b, p in enumerate(positive)]
        columns.append(exp.alias_(balanced(bits, exp.Add), f"{prefix}{w}", quoted=True, copy=False))
    if keep:
        columns += [exp.alias_(col(f"_y{j}"), f"{keep}{j}", quoted=True, copy=False) for j in range(projection.k)]
    return exp.select(*columns).from_(base.subquery("_sig", copy=False))


def signature_sql(
    projection: Projection | Composed,
    source: Source,
    dialect: str = "duckdb",
    prefix: str = "w",
    thresholds: Sequence[float] | None = None,
    **compile_opts,
) -> str:
    """:func:`signature_select` as SQL text for ``dialect`` (its own generator renders the sums)."""
    select = signature_select(projection, source, dialect, prefix, thresholds, **compile_opts)
    return get_dialect(dialect).render(select)


def centre_thresholds(projection: Projection | Composed, means: Sequence[float]) -> np.ndarray:
    """``y(mean)``: the outputs of the feature means.  For a linear projection ``y(x) > y(mean)``
    iff ``y(x - mean) > 0``, so these thresholds give the signatures of the centred data (hyperplanes
    through the data's centre rather than the origin) without touching the features."""
    return transform(projection, np.asarray(means, dtype=float)[None, :])[0]


def hamming_expression(
    words: int, left: str, right: str, dialect: str = "duckdb", prefix: str = "w"
) -> exp.Expression:
    """``sum_w popcount(left.w XOR right.w)``: the Hamming distance between the signatures of two
    relations aliased ``left`` and ``right``, in the engine's own spelling (``hamming_word``:
    DuckDB ``bit_count(xor(a, b))``, PostgreSQL ``bit_count((a # b)::bit(64))``)."""
    engine = get_dialect(dialect)
    counts = [engine.hamming_word(col(f"{prefix}{w}", left), col(f"{prefix}{w}", right)) for w in range(words)]
    return balanced(counts, exp.Add)


def signatures(
    projection: Projection | Composed, X: np.ndarray, thresholds: Sequence[float] | None = None
) -> np.ndarray:
    """NumPy reference: the ``n x k/64`` int64 words of the rows of ``X``."""
    words = check_bits(projection.k)
    positive = transform(projection, X) > (0.0 if thresholds is None else np.asarray(thresholds, dtype=float))
    packed = np.zeros((positive.shape[0], words), dtype=np.uint64)
    for b in range(WORD_BITS):
        packed |= positive[:, b::WORD_BITS].astype(np.uint64) << np.uint64(b)
    return packed.view(np.int64)


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamming distances between signature rows ``a`` (n x w) and ``b`` (w,) or (n x w)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)).view(np.uint64)
    return np.unpackbits(x.view(np.uint8), axis=-1).reshape(*x.shape[:-1], -1).sum(axis=-1)


__all__ = [
    "WORD_BITS",
    "centre_thresholds",
    "check_bits",
    "hamming",
    "hamming_expression",
    "signature_select",
    "signature_sql",
    "signatures",
]
