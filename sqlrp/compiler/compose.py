"""Composition: the output of one projection is the input of the next (CRAFTMaps, 001 Algorithm 2).

The select of the first stage (any input layout, wide output columns ``_z0 .. _z{D-1}``) becomes the
wide source of the second stage: the second stage is compiled against a placeholder table whose
reference is then replaced by the first stage's select as a sub-query.  No other part of the compiler
knows about composition.  Pooling (a group key) is not supported for composed projections.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..core.errors import InvalidParameter
from ..core.ir import Composed
from ..core.layout import Formulation, Output, Source

_PLACEHOLDER = "__sqlrp_stage_input"
_STAGE_PREFIX = "_z"


def replace_table(select: exp.Select, table: str, relation: exp.Select, alias: str) -> exp.Select:
    """Replace every reference to the (unqualified) ``table`` in ``select`` by ``(relation) AS alias``."""
    found = False
    for node in list(select.find_all(exp.Table)):
        if node.name == table and not node.args.get("db"):
            node.replace(relation.subquery(alias))
            found = True
    if not found:  # pragma: no cover - the compiler always reads its source table
        raise AssertionError(f"table {table!r} not found in the compiled select")
    return select


def compile_composed(
    composed: Composed, source: Source, dialect, output: Output | None, matrix: str, compile_select
) -> exp.Select:
    """``second(first(source))`` as one select; ``compile_select`` is the compiler's own entry point."""
    if source.group_column:
        raise InvalidParameter("pooling (--group-column) is not supported for composed projections")
    first, second = composed.first, composed.second
    key = source.id_column
    if key.startswith(_STAGE_PREFIX) and key[len(_STAGE_PREFIX) :].isdigit():
        raise InvalidParameter(f"the id column {key!r} clashes with sqlrp's internal stage column names")
    first_matrix = matrix
    if matrix == "registry" and not getattr(first, "name", None):
        first_matrix = "values"
    inner = compile_select(first, source, dialect, Output(form="wide", prefix=_STAGE_PREFIX), Formulation(first_matrix))
    stage_source = Source(
        _PLACEHOLDER,
        key,
        "wide",
        tuple(f"{_STAGE_PREFIX}{i}" for i in range(first.k)),
    )
    second_matrix = "values" if matrix == "registry" and not getattr(second, "name", None) else matrix
    outer = compile_select(second, replace(stage_source), dialect, output, Formulation(second_matrix))
    return replace_table(outer, _PLACEHOLDER, inner, "_stage")
