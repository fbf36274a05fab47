"""The keyword options of the API (``sqlrp/core/options.py``) agree with the specs and functions they
stand for, and no public function takes more than eight parameters besides its ``**options`` (issue 35)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

import sqlrp
from sqlrp.core.layout import SOURCE_OPTIONS, Formulation, Source, Target
from sqlrp.core.options import FormulationOptions, MethodOptions, ProjectOptions, TargetOptions, names
from sqlrp.methods import METHODS

PACKAGE = Path(sqlrp.__file__).parent


def _keywords(function) -> set[str]:
    """The keyword names ``function`` takes: its parameters, and the keys of an ``Unpack[TypedDict]`` (a
    plain ``**options`` passes its options on to another function: none of its own)."""
    hints = typing.get_type_hints(function, include_extras=True)
    found = set()
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            unpacked = typing.get_args(hints.get(name, typing.Any))
            found |= set(unpacked[0].__annotations__) if unpacked else set()
        else:
            found.add(name)
    return found


def test_method_options_are_what_the_methods_declare():
    declared = set().union(*(_keywords(factory) for factory in METHODS.values())) - {"d", "k", "seed"}
    assert declared == set(MethodOptions.__annotations__)


def test_the_option_groups_are_the_specs_fields():
    derived = {"table", "id_column", "row_filter", "standardize", "rows"}  # named, or filled by sqlrp
    assert set(SOURCE_OPTIONS) == {f.name for f in dataclasses.fields(Source)} - derived
    how = {f.name for f in dataclasses.fields(Formulation)} - {"pairs", "guard", "bind"}  # decided, not asked
    assert set(FormulationOptions.__annotations__) == how
    where = {f.name for f in dataclasses.fields(Target)} - {"into", "insert", "temporary"}
    assert set(TargetOptions.__annotations__) == where | {"progress"}
    assert set(names(ProjectOptions)) >= set(SOURCE_OPTIONS) | how | where


@pytest.mark.parametrize("unknown", [{"colums": ["a"]}, {"stratgy": "inline"}])
def test_a_misspelt_option_is_refused_as_python_refuses_a_keyword(duck, unknown):
    with pytest.raises(TypeError, match=f"project\\(\\) got an unexpected keyword argument '{next(iter(unknown))}'"):
        sqlrp.project(duck, "t", "id", k=4, **unknown)


def test_no_public_function_takes_more_than_eight_parameters():
    """Besides ``**options`` at the API boundary; a method's ``self`` does not count."""
    over = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                a = node.args
                count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (1 if a.vararg else 0)
                count -= 1 if a.args and a.args[0].arg in ("self", "cls") else 0
                if count > 8:
                    over.append(f"{path.relative_to(PACKAGE)}::{node.name} ({count})")
    assert over == []


def test_no_file_over_450_lines_and_no_function_over_80():
    long_files = [p.name for p in PACKAGE.rglob("*.py") if len(p.read_text().splitlines()) > 450]
    long_functions = [
        f"{path.relative_to(PACKAGE)}::{node.name}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert (long_files, long_functions) == ([], [])
