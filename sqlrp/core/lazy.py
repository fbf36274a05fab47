"""pandas, imported the first time it is used rather than when sqlrp is.

``sqlrp project --into`` on DuckDB never builds a DataFrame: the matrix is read as tuples and the
projection runs as one ``CREATE TABLE AS``.  Importing pandas anyway cost 40 MB of resident memory
on a core install (``python bench/install_weight.py``: ``import sqlrp`` 80 MB with pandas, 40 MB
without; that command's peak 158 MB before, 123 MB after, against issue 14's target of 150 MB on a
small device), so the modules on that path say ``from .lazy import pd``
and pandas is imported by the first attribute read (``pd.DataFrame``), once.  Annotations need no
import: every module uses ``from __future__ import annotations``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """A stand-in for a module that imports it on the first attribute read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


pd: Any = LazyModule("pandas")
