"""The keyword options of the API's functions, typed: each a ``TypedDict`` that a function takes as
``**options: Unpack[...]`` (PEP 692), so that editors and type checkers know every name and type while
the parameters a call always needs stay in the signature.

Each group is the keyword form of one spec, and the functions build the spec from it once:
:class:`~sqlrp.core.layout.SourceOptions` (beside :class:`~sqlrp.core.layout.Source`: where the rows
come from), :class:`MethodOptions` (a new projection's method parameters, as the methods' own
signatures declare them: ``tests/interface`` checks the two agree), :class:`OutputOptions`
(:class:`~sqlrp.core.layout.Output`), :class:`FormulationOptions` (:class:`~sqlrp.core.layout.Formulation`),
:class:`TargetOptions` (:class:`~sqlrp.core.layout.Target`).  :func:`refuse_unknown` gives a misspelt
name the error Python gives a misspelt keyword argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from .layout import SourceOptions


class MethodOptions(TypedDict, total=False):
    """A new projection's method parameters (:mod:`sqlrp.methods`; each method takes its own)."""

    s: float | str
    """Achlioptas sparsity: ``auto`` (from the data's kurtosis), ``sqrt`` or a number >= 1"""
    m: int
    """p-rp: sign matrices summed; its modified kernel ``(x.y)^2 - (x^2).(y^2)``"""
    modified: bool
    degree: int
    """pk-rp, maclaurin, craftmap: the polynomial degree"""
    t: int
    """pk-rp, cbp: products summed per output; random vectors (default ``g * t * k``); their distribution"""
    p: int | None
    distribution: str
    index: str
    """pk-rp: the index scheme, ``distinct`` or ``balanced``"""
    c: float
    """the constant of the inhomogeneous kernel ``(x.y + c)^degree``"""
    base: float
    """maclaurin: the degree distribution's base, truncation and sampling"""
    truncate: bool
    sampling: str
    up: str
    """craftmap: the up-projection method, its dimension, the down-projection's sparsity (the up method's own
    options are passed on to it)"""
    up_k: int | None
    down_s: float | str
    kurtosis: float | None
    """the features' kurtosis, when known (``s = auto`` reads it)"""
    kernel: str
    """rff: the shift-invariant kernel, ``rbf`` or ``laplacian``; its bandwidth (a number or ``scale``); the
    directions ``gaussian``, ``orthogonal``, ``structured`` or ``signs``"""
    gamma: float | str
    weights: str | None
    variance: float | None
    """rff: the data's variance, when known (``gamma = scale`` reads it)"""


class OutputOptions(TypedDict, total=False):
    """The output's form (:class:`~sqlrp.core.layout.Output`)."""

    output: str
    """``wide`` (columns ``{prefix}0 ..``) or ``array`` (one column named ``prefix``)"""
    prefix: str
    dtype: str | None
    """``float64`` or ``float32`` (default: as the input)"""


class PlanOptions(SourceOptions, MethodOptions, OutputOptions, total=False):
    """:func:`sqlrp.plan`'s options: the input, a new projection's parameters, the output."""

    d: int | None
    """a new projection's input dimension (default: the table's)"""
    save_as: str | None
    """store a new projection under this name"""
    standardize: bool
    """centre and scale every feature in SQL before projecting"""
    store: bool
    """``False``: a new, unnamed projection is kept in the plan only"""


class FormulationOptions(TypedDict, total=False):
    """How the projection is written as SQL (:class:`~sqlrp.core.layout.Formulation`)."""

    matrix: str
    """where the matrix comes from: ``auto``, ``registry``, ``values`` or a table holding it"""
    strategy: str
    """``auto`` (the compiler's measured choice), ``inline`` / ``pairs`` / ``mailman`` / ``list_transform`` (wide,
    array) or ``join`` / ``lookup`` (long)"""
    block: int | None
    """mailman's block size (default: chosen)"""
    check: bool
    """refuse NULL, NaN or infinite features and overflowing outputs"""


class TargetOptions(TypedDict, total=False):
    """Where the rows go, besides ``into`` (:class:`~sqlrp.core.layout.Target`)."""

    view: bool
    """with ``into``: a view instead of a table; replace an existing one; add only the ids not there yet"""
    replace: bool
    incremental: bool
    chunk_rows: int | None
    """rows back: in chunks of at most this many; ``ORDER BY`` the key; ``pandas``, ``arrow``, ``polars``, ``numpy``"""
    ordered: bool
    output_format: str
    progress: bool | int
    """with ``into``: a progress bar (``True``) or that many id-range batches (an integer)"""
    route: str
    """``auto``, ``sql`` (every output computed in SQL) or ``arrow`` (in-process DuckDB: the features streamed
    as Arrow record batches into NumPy's BLAS for the linear sums); ``auto``: arrow for dense weights there"""


class ProjectOptions(PlanOptions, FormulationOptions, TargetOptions, total=False):
    """:func:`sqlrp.project`'s options: the plan's, the formulation's and the target's."""


class TuneOptions(SourceOptions, total=False):
    """:func:`sqlrp.tune`'s options besides ``k`` and ``name`` (defaults: :data:`TUNE_DEFAULTS`)."""

    sample: int
    """rows of the seeded training sample"""
    s: float | str
    """the tuned matrix's sparsity: ``auto``, ``sqrt`` or a number >= 1"""
    iterations: int
    """DT-RP's iterations; the seed of the sample and of the search"""
    seed: int | None
    replace: bool
    """replace a stored projection of that name"""
    baseline: str
    """``dt-rp`` (002 Section 3) or ``best-of-n`` (the best of ``draws`` Achlioptas matrices, 002 Section 4.2)"""
    draws: int


TUNE_DEFAULTS: TuneOptions = {
    "sample": 500, "s": "auto", "iterations": 4000, "seed": 0, "replace": False, "baseline": "dt-rp", "draws": 20,
}  # fmt: skip


class EvaluateOptions(SourceOptions, total=False):
    """:func:`sqlrp.evaluate`'s options besides the table and ``out`` (defaults: :data:`EVALUATE_DEFAULTS`)."""

    sample: int
    """rows of the seeded sample; the first ``queries`` of them are Recall@``recall_k`` queries"""
    queries: int
    recall_k: int
    seed: int
    ks: list[int] | None
    """the k of the distortion-versus-k curve"""
    kernel: Any
    """the distortion's feature space: ``projection`` (the kernel the projection approximates), ``None`` (the input
    space), a kernel's name or a :class:`sqlrp.evaluation.metrics.Kernel`"""
    label_column: str | None
    """a label column: nearest-neighbour accuracies too"""
    in_sql: bool
    """the same metrics computed in SQL as well"""


EVALUATE_DEFAULTS: EvaluateOptions = {
    "sample": 300, "queries": 100, "recall_k": 5, "seed": 0, "ks": None, "kernel": "projection",
    "label_column": None, "in_sql": True,
}  # fmt: skip


class FitOptions(SourceOptions, total=False):
    """:func:`sqlrp.fit`'s options besides ``method``, ``k`` and ``name`` (defaults: :data:`FIT_DEFAULTS`)."""

    variance: float | None
    """instead of ``k``: keep the fewest components whose explained-variance ratio exceeds this fraction"""
    oversample: int
    """extra sketch columns ``p`` (``l = k + p``, HMT's oversampling)"""
    power_iterations: int | str
    """passes of subspace iteration after the first (``auto``: chosen from the spectrum after each pass)"""
    seed: int | None
    """the seed of the sketch's sign matrix"""
    whiten: bool
    """divide each score by the square root of its component's variance"""
    replace: bool
    route: str
    """``auto``, ``sql`` (aggregate statements) or ``arrow`` (record batches into NumPy, in-process engines)"""
    gram: str
    """``auto``, ``always`` or ``never``: the exact route, one pass summing the ``d x d`` Gram matrix"""
    progress: bool
    """a progress bar over the passes on stderr"""


FIT_DEFAULTS: FitOptions = {
    "variance": None, "oversample": 10, "power_iterations": "auto", "seed": 0, "whiten": False, "replace": False,
    "route": "auto", "gram": "auto", "progress": False,
}  # fmt: skip


def names(*kinds: type) -> tuple[str, ...]:
    """The option names of the ``TypedDict`` classes ``kinds``, in order."""
    return tuple(dict.fromkeys(name for kind in kinds for name in kind.__annotations__))


def refuse_unknown(where: str, options: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """``TypeError`` for a name not ``allowed``, worded as Python words a misspelt keyword argument."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")


def take(options: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    """Pop ``keys`` from ``options`` (filled with defaults first), in order; the rest stays."""
    return tuple(options.pop(key) for key in keys)
