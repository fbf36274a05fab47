"""Compiler: IR + input layout + dialect -> one SQL statement.

The query is built once as a sqlglot expression tree and rendered per dialect.  Every relation in it
renames user identifiers to internal ones (``_id``, ``_x{i}``, ``_k{v}``), so a user's names appear
exactly once, quoted, in the innermost select and once in the outermost aliases.

Shape of the generated SQL::

    src:  SELECT <id> AS _id, CAST(<feature i> AS DOUBLE) AS _x{i} ... FROM <table>     (wide/array)
          SELECT <id> AS _id, <feature> AS _f, <value> AS _v FROM <table>                (long)
    lin:  linear stage, _k{v} = (_x3 + _x17 - _x40 ...)  -- additions and subtractions only
          (long: JOIN the stored matrix, SUM(+-_v) ... GROUP BY _id, vector)
    out:  combiner, p{c} = (sum_t w_t * prod _k{v}) * scale   -- scale applied once, at the end

For a linear projection on a wide or array table ``lin`` and ``out`` fuse into one select whose
expressions are ``(_x3 + _x17 - _x40 ...) * scale``.

Files, by role:

- :mod:`.statements` -- :func:`compile_sql` / :func:`compile_statements`: the statement (``CREATE``,
  ``INSERT`` or ``SELECT``) rendered for the engine, split into staged blocks where it is too large.
- :mod:`.select` -- :func:`compile_select`: the strategy's relation (table ``BODIES``), the combiner,
  pooling, the scale and the output columns.
- :mod:`.strategies` -- the strategies and the measured rule that picks one (:func:`choose`).
- :mod:`.dense` -- linear stages over wide and array tables: ``inline``, ``mailman``, ``pairs``
  (whose planner is :mod:`.pairs`).
- :mod:`.long` -- the long layout's join with the stored matrix (``join``, ``lookup``), and wide
  tables unnested into it.
- :mod:`.lists` -- ``list_transform``: linear sums and combiner in lists (DuckDB).
- :mod:`.inputs` -- the dense source relation (``_id, [_g,] _x0 ..``); :mod:`.guard` -- the input and
  output checks that ride along; :mod:`.limits` -- engine limits and output blocks;
  :mod:`.compose` -- composed projections; :mod:`.preprocess` -- standardising in SQL;
  :mod:`.selfcheck` -- one statement that checks the compiled SQL against NumPy.
"""

from __future__ import annotations

from sqlglot import exp  # noqa: F401 - ``sqlrp.compiler.exp``, as before

from ..core.layout import Output, Source
from ..core.nodes import (  # noqa: F401 - the SQL-expression helpers, re-exported as the compiler's
    DOUBLE,
    Inputs,
    SignedSum,
    as_double,
    col,
    feature_input,
    from_source,
    gc_paused,
    ident,
    number,
    table_ref,
)
from .inputs import dense_source  # noqa: F401 - re-exported: the callers' names are unchanged
from .limits import Statements
from .long import REGISTRY_ENTRY_TABLE  # noqa: F401
from .select import check_output_columns, compile_select  # noqa: F401
from .statements import compile_sql, compile_statements, fold_names, target_table  # noqa: F401
from .strategies import choose

__all__ = [
    "Output",
    "Source",
    "Statements",
    "as_double",
    "compile_select",
    "compile_sql",
    "compile_statements",
    "feature_input",
    "ident",
    "choose",
]
