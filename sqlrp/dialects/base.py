"""What every sqlrp dialect shares: sqlglot's own dialect plus the ``SignedSum`` renderer.

A dialect file holds only its differences from this base (array access, detoasting, types).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ..compiler.nodes import SignedSum, gc_paused, signed_sum_sql

if TYPE_CHECKING:
    from ..compiler.layout import Source


def extend(base: type[Dialect]) -> type[Dialect]:
    """A subclass of the sqlglot dialect ``base`` that can render :class:`SignedSum`."""

    class Generator(base.Generator):  # type: ignore[name-defined,misc]
        TRANSFORMS = {**base.Generator.TRANSFORMS, SignedSum: signed_sum_sql}

    return type(f"Sqlrp{base.__name__}", (base,), {"Generator": Generator})


class SqlrpDialect:
    """Rendering rules for one SQL engine."""

    name = "generic"
    sqlglot: type[Dialect]
    max_columns: int | None = None  # most columns one select may produce (None: no practical limit)
    star_exclude = False  # ``SELECT * EXCLUDE (...)`` exists: nested selects pass columns on by ``*``
    parallel_insert = True  # ``INSERT INTO ... SELECT`` gets the parallel plan ``CREATE TABLE AS`` gets
    nan_propagating_sums = False  # DOUBLE sums overflow to infinity rather than raise (PostgreSQL raises)

    def array_source(self, column: exp.Expression) -> exp.Expression:
        """An expression of the array column that is cheap to subscript ``d`` times per row."""
        return column

    def needs_materialised_array(self) -> bool:
        """True if the array must be computed in a sub-query the planner may not flatten."""
        return False

    def fence(self, select: exp.Select) -> exp.Select:
        """``select`` as a sub-query the planner computes once per row instead of inlining its
        expressions into the outer query (PostgreSQL pulls sub-queries up; an OFFSET stops it, see
        ``dialects/postgres.py``).  A fence must not change the rows, nor forbid a parallel plan."""
        return select

    def local_settings(self, source: Source) -> list[str]:
        """Statements that tune the planner for one projection of ``source``, run inside the
        projection's transaction (``SET LOCAL``: they end with it).  None by default."""
        return []

    @gc_paused
    def render(self, expression: exp.Expression, pretty: bool = False) -> str:
        return expression.sql(dialect=self.sqlglot, pretty=pretty, copy=False)
