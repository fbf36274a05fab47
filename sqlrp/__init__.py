"""sqlrp: random projections compiled to SQL and run inside the database.

Linear (Achlioptas sign matrices, Gaussian) and polynomial-kernel projections share one IR
(:mod:`sqlrp.ir`), a NumPy oracle (:mod:`sqlrp.reference`), one SQL compiler rendered per dialect
(:mod:`sqlrp.compiler`, :mod:`sqlrp.dialects`), a registry of stored projections
(:mod:`sqlrp.store`) and backends for DuckDB and PostgreSQL (:mod:`sqlrp.backends`).
"""

from .api import (
    compile_projection,
    copy_projection,
    create_projection,
    drop_projection,
    evaluate,
    list_projections,
    load_projection,
    plan,
    project,
    transform_frame,
    tune,
)
from .backends import connect
from .compiler import Output, Source, compile_select, compile_sql
from .errors import InputError, InvalidParameter, ProjectionExists, ProjectionNotFound, SqlrpError, need
from .evaluation.search import evaluate_search
from .index import build_index, drop_index, list_indexes, load_index, search
from .ir import Combiner, LinearStage, Projection
from .methods import expected_distortion, johnson_lindenstrauss_min_dim, make_projection
from .reference import transform

__version__ = "0.1.0"

__all__ = [
    "Combiner",
    "InputError",
    "InvalidParameter",
    "LinearStage",
    "Output",
    "Projection",
    "ProjectionExists",
    "ProjectionNotFound",
    "SQLRandomProjection",
    "Source",
    "SqlrpError",
    "build_index",
    "compile_projection",
    "compile_select",
    "compile_sql",
    "connect",
    "copy_projection",
    "create_projection",
    "drop_index",
    "drop_projection",
    "evaluate",
    "evaluate_search",
    "expected_distortion",
    "johnson_lindenstrauss_min_dim",
    "list_indexes",
    "list_projections",
    "load_index",
    "load_projection",
    "make_projection",
    "plan",
    "project",
    "search",
    "transform",
    "transform_frame",
    "tune",
]


def __getattr__(name: str) -> object:
    """``SQLRandomProjection`` is imported on first use: it needs scikit-learn, which the CLI and
    the SQL paths do not (see README, "Small devices")."""
    if name == "SQLRandomProjection":
        need("sklearn", "sklearn", "SQLRandomProjection (a scikit-learn transformer)")
        from .transformer import SQLRandomProjection

        return SQLRandomProjection
    raise AttributeError(f"module 'sqlrp' has no attribute {name!r}")
