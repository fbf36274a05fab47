"""A projection bound to its input, its output and how it is written as SQL: what the compiler compiles.

Pure data.  :func:`sqlrp.pipeline.plan.plan` makes one from the database (the input's columns, the
stored or new projection), :func:`sqlrp.pipeline.plan.decide` fills its formulation once (the matrix's
home, the strategy, the pairs plan, the checks), and
:func:`sqlrp.compiler.statements.compile_statements` renders it for a :class:`~.layout.Target`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Composed, Projection
from .layout import Formulation, Output, Source


@dataclass(frozen=True)
class Plan:
    """A projection bound to an input table.

    ``source.standardize`` holds ``(means, stds)`` of the features when the input is standardised in
    SQL (``plan(..., standardize=True)``; :mod:`sqlrp.compiler.preprocess`); ``how`` is the
    formulation, ``auto`` until decided."""

    projection: Projection | Composed
    source: Source
    output: Output = field(default_factory=Output)
    how: Formulation = field(default_factory=Formulation)
