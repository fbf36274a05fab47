"""A pairs plan as data: shared partial sums in levels, and the outputs over features and partials.

Made by the greedy planner (:mod:`sqlrp.compiler.pairs`, Paar's algorithm), stored beside its
projection by the registry (``sqlrp_pairs_entry``), carried to the compiler by the plan's
:class:`~sqlrp.core.layout.Formulation`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import LinearStage


@dataclass
class PairsPlan:
    """Partial sums in levels, and outputs over features and partials.

    Column ``c < d`` is feature ``c``; column ``d + q`` is partial ``q``,
    ``partials[q] = (columns, signs)`` over columns of lower levels (``level[q] >= 1``);
    output vector ``v`` is ``sum(signs * column)`` over ``terms[v] = (columns, signs)``.
    """

    d: int
    partials: list[tuple[np.ndarray, np.ndarray]]
    level: np.ndarray
    terms: list[tuple[np.ndarray, np.ndarray]]
    #: False if the planner's deadline stopped the greedy early: still exact, fewer shared sums
    complete: bool = True

    @property
    def depth(self) -> int:
        return int(self.level.max()) if len(self.level) else 0

    @property
    def partial_additions(self) -> int:
        return sum(len(c) - 1 for c, _ in self.partials)

    @property
    def output_terms(self) -> int:
        return sum(len(c) for c, _ in self.terms)

    @property
    def partial_terms(self) -> int:
        return sum(len(c) for c, _ in self.partials)

    @property
    def partial_reads(self) -> int:
        """How often partials are read back, by other partials and by the outputs."""
        return sum(int((c >= self.d).sum()) for c, _ in self.partials + self.terms)

    def expand(self) -> np.ndarray:
        """The ``p x d`` sign matrix this plan computes (each partial resolved to features)."""
        d = self.d
        E = np.zeros((d, d + len(self.partials)), dtype=np.int16)
        E[:, :d] = np.eye(d, dtype=np.int16)
        for q, (cols, signs) in enumerate(self.partials):  # children come before their readers
            E[:, d + q] = E[:, cols] @ signs.astype(np.int16)
        return np.stack([E[:, cols] @ signs.astype(np.int16) for cols, signs in self.terms])

    def computes(self, linear: LinearStage) -> bool:
        """True if this plan computes exactly the sign matrix of ``linear`` (a stored plan is
        checked with this before it is used)."""
        return len(self.terms) == linear.p and np.array_equal(self.expand(), signs_of(linear))

    @property
    def additions(self) -> int:
        """Additions per row: inside the partials plus inside the outputs."""
        return self.partial_additions + sum(max(len(c) - 1, 0) for c, _ in self.terms)


def signs_of(linear: LinearStage) -> np.ndarray:
    """The ``p x d`` matrix of the signs of ``linear``'s weights (int8)."""
    W = np.zeros((linear.p, linear.d), dtype=np.int8)
    W[linear.vector, linear.feature] = np.sign(linear.weight).astype(np.int8)
    return W
