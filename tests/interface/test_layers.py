"""The package's layers, drawn from its imports: every import runs down (or within) a layer, none runs
up, none is hidden inside a function, and no two modules import each other (issue 25).

The layers, bottom to top (a module may import its own layer and those below it):

    core        the IR, errors, SQL-expression helpers, the input spec (imports nothing of sqlrp)
    dialects    rendering and limits per engine
    methods     the projections themselves (linear, kernels, DT-RP's tuning math), their NumPy reference
    compiler    projections to SQL for a dialect object
    backends    a live connection per engine
    registry    stored projections, pairs plans and indexes
    pipeline    planning, sources, materialising, files, outputs
    search      inverted lists, RaBitQ codes, the search SQL
    evaluation  metrics, reports
    top         api, cli, transformer, demo, datasets, the package itself

Imports of optional dependencies inside functions (pyspark, sklearn, matplotlib...) are allowed: only
sqlrp's own modules are checked.  One late import of an sqlrp module is allowed, and checked: a module
that needs an extra at its top (``sqlrp.transformer``: scikit-learn's base classes) is imported by the
package on first use, after ``need()`` has named the ``pip install`` line (:data:`OPTIONAL`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sqlrp"

LAYERS = ["core", "dialects", "methods", "compiler", "backends", "registry", "pipeline", "search", "evaluation"]
TOP = len(LAYERS)

#: module -> the sqlrp modules it may import late, each of which imports an extra at its top
OPTIONAL = {"sqlrp": {"sqlrp.transformer": "sklearn"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return TOP  # sqlrp itself, api, cli, transformer, demo, datasets, ...


def _target(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> tuple[set[str], set[str]]:
    """(module-level imports, imports inside functions or classes) of sqlrp modules by ``module``;
    ``if TYPE_CHECKING:`` blocks are not imports at run time and are left out."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    top, late = set(), set()

    def names(node: ast.AST) -> set[str]:
        found = set()
        if isinstance(node, ast.ImportFrom):
            target = _target(module, node, path.name == "__init__.py")
            if target.split(".")[0] == "sqlrp":
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "sqlrp"}
        return {n for n in found if n in MODULES and n != module}

    for statement in tree.body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            continue
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            top |= names(statement)
        else:
            for node in ast.walk(statement):
                late |= names(node)
    return top, late


GRAPH = {m: imports(m) for m in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module):
    top, late = GRAPH[module]
    upward = sorted(
        t for t in top | late if layer(t) > layer(module) and not (t != "sqlrp" and module.startswith(t + "."))
    )
    assert not upward, f"{module} (layer {layer(module)}) imports from above: {upward}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_late_imports_of_sqlrp(module):
    _, late = GRAPH[module]
    late = late - set(OPTIONAL.get(module, {}))
    assert not late, f"{module} imports {sorted(late)} inside a function: import them at the top"


def test_the_optional_modules_need_their_extra_at_the_top():
    """The one exception is kept honest: each module imported late for an extra imports it at its top."""
    for allowed in OPTIONAL.values():
        for module, extra in allowed.items():
            tree = ast.parse(MODULES[module].read_text())
            roots = {a.name.split(".")[0] for s in tree.body if isinstance(s, ast.Import) for a in s.names}
            roots |= {(s.module or "").split(".")[0] for s in tree.body if isinstance(s, ast.ImportFrom)}
            assert extra in roots, f"{module} no longer needs {extra} at its top: import it at the top of the package"


def test_no_import_circles():
    """Tarjan's strongly connected components of the module-level graph are all single modules.  A
    package's ``__init__`` importing its own submodules is not a circle unless they import it back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v][0]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in MODULES:
        if v not in index:
            strong(v)
    assert not circles, f"import circles: {circles}"


def test_the_core_imports_nothing_above_it():
    for module in MODULES:
        if layer(module) == 0:
            top, late = GRAPH[module]
            assert all(layer(t) == 0 for t in top | late), module


def test_every_package_of_sqlrp_is_installed():
    """``pyproject.toml`` lists the packages setuptools installs: a new sub-package missing there runs
    from the checkout and is absent from every install (``sqlrp.cli`` was, once: the ``sqlrp``
    command would not start)."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()
