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

import importlib

__version__ = "0.1.0"

#: each public name and the module it comes from: imported on first use (PEP 562), so that ``sqlrp``'s
#: start-up (``python -m sqlrp``, the ``sqlrp`` command) can take the statement cache's fast path
#: (:mod:`sqlrp.start`) with ``import duckdb`` alone -- NumPy, sqlglot and the layers load on first use
_FROM = {
    **dict.fromkeys(
        (
            "accept_projection",
            "compile_projection",
            "copy_projection",
            "create_projection",
            "drop_projection",
            "evaluate",
            "fit",
            "list_projections",
            "load_projection",
            "migrate",
            "plan",
            "project",
            "transform_frame",
            "tune",
        ),
        "sqlrp.api",
    ),
    "connect": "sqlrp.backends",
    **dict.fromkeys(("Output", "Source", "compile_select", "compile_sql"), "sqlrp.compiler"),
    **dict.fromkeys(
        ("InputError", "InvalidParameter", "ProjectionExists", "ProjectionNotFound", "SqlrpError", "need"),
        "sqlrp.core.errors",
    ),
    **dict.fromkeys(("Combiner", "LinearStage", "Projection"), "sqlrp.core.ir"),
    "dbt_model": "sqlrp.dbt",
    "demo": ("sqlrp.demo", "run_demo"),
    **dict.fromkeys(("expected_distortion", "johnson_lindenstrauss_min_dim", "make_projection"), "sqlrp.methods"),
    "transform": "sqlrp.methods.reference",
    **dict.fromkeys(("export_projection", "import_projection"), "sqlrp.registry.transfer"),
    **dict.fromkeys(("Relation", "projected"), "sqlrp.relation"),
    "build_index": "sqlrp.search.build",
    "evaluate_search": "sqlrp.search.evaluate",
    **dict.fromkeys(("drop_index", "list_indexes", "load_index"), "sqlrp.search.index"),
    "search": "sqlrp.search.lookup",
}

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
    """A public name (:data:`_FROM`) or a sub-package (``sqlrp.pipeline``...), imported on first use; the
    whole API then loads at once, as ``import sqlrp`` did before (every sub-module an attribute again).
    ``SQLRandomProjection`` needs scikit-learn, which the CLI and the SQL paths do not (see README,
    "Small devices")."""
    if name == "SQLRandomProjection":
        importlib.import_module("sqlrp.core.errors").need(
            "sklearn", "sklearn", "SQLRandomProjection (a scikit-learn transformer)"
        )
        return importlib.import_module("sqlrp.transformer").SQLRandomProjection
    if name.startswith("__"):
        raise AttributeError(f"module 'sqlrp' has no attribute {name!r}")
    for module in dict.fromkeys(w if isinstance(w, str) else w[0] for w in _FROM.values()):
        importlib.import_module(module)  # in the order ``import sqlrp`` loaded them
    for public, where in _FROM.items():
        module, attribute = (where, public) if isinstance(where, str) else where
        globals()[public] = getattr(importlib.import_module(module), attribute)
    if name in globals():
        return globals()[name]
    try:
        return importlib.import_module(f"sqlrp.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"sqlrp.{name}":
            raise
    raise AttributeError(f"module 'sqlrp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
