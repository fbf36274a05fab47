"""sqlrp: random projections compiled to SQL and run inside the database.

The package is grouped by layer, each importing only the layers below it (``tests/interface/test_layers.py``):

- :mod:`sqlrp.core` -- the projection format (IR), errors, SQL-expression helpers, the input spec;
- :mod:`sqlrp.dialects` -- what differs per engine when rendering;
- :mod:`sqlrp.methods` -- the projections (linear, kernel, DT-RP's tuner) and their NumPy reference;
- :mod:`sqlrp.compiler` -- a projection and an input to SQL, for a dialect object;
- :mod:`sqlrp.backends` -- a live connection per engine;
- :mod:`sqlrp.registry` -- stored projections, pairs plans and indexes;
- :mod:`sqlrp.pipeline` -- planning (what a plan needs from the database, gathered once), sources,
  materialising, outputs;
- :mod:`sqlrp.search` -- inverted lists, RaBitQ codes, the search SQL;
- :mod:`sqlrp.evaluation` -- metrics and reports;

then :mod:`sqlrp.api` (the functions below), :mod:`sqlrp.relation` (a lazy projection whose destinations
are methods), :mod:`sqlrp.cli` and :mod:`sqlrp.transformer`.
"""

from .api import (
    accept_projection,
    compile_projection,
    copy_projection,
    create_projection,
    drop_projection,
    evaluate,
    fit,
    list_projections,
    load_projection,
    migrate,
    plan,
    project,
    transform_frame,
    tune,
)
from .backends import connect
from .compiler import Output, Source, compile_select, compile_sql
from .core.errors import InputError, InvalidParameter, ProjectionExists, ProjectionNotFound, SqlrpError, need
from .core.ir import Combiner, LinearStage, Projection
from .dbt import dbt_model
from .demo import run_demo as demo
from .methods import expected_distortion, johnson_lindenstrauss_min_dim, make_projection
from .methods.reference import transform
from .registry.transfer import export_projection, import_projection
from .relation import Relation, projected
from .search.build import build_index
from .search.evaluate import evaluate_search
from .search.index import drop_index, list_indexes, load_index
from .search.lookup import search

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
    "Relation",
    "SQLRandomProjection",
    "Source",
    "SqlrpError",
    "accept_projection",
    "build_index",
    "compile_projection",
    "compile_select",
    "compile_sql",
    "connect",
    "copy_projection",
    "create_projection",
    "dbt_model",
    "demo",
    "drop_index",
    "drop_projection",
    "evaluate",
    "evaluate_search",
    "expected_distortion",
    "fit",
    "export_projection",
    "import_projection",
    "johnson_lindenstrauss_min_dim",
    "list_indexes",
    "list_projections",
    "load_index",
    "load_projection",
    "make_projection",
    "migrate",
    "plan",
    "project",
    "projected",
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
