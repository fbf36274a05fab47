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


def test_exclude_reaches_every_entry_point(duck, tmp_path, capsys):
    """``exclude`` (a Source field, its resolution, one CLI option) leaves an integer label out of the
    default features wherever a table is read: ``project``, the CLI and an index."""
    import numpy as np
    import pandas as pd

    from sqlrp.cli import main
    from sqlrp.methods import reference

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    frame = pd.DataFrame({"id": range(40), **{f"f{i}": X[:, i] for i in range(5)}, "label": rng.integers(0, 3, 40)})
    url = f"duckdb:///{tmp_path / 'x.duckdb'}"
    db = sqlrp.connect(url)
    db.write_dataframe("t", frame)
    got = sqlrp.project(db, "t", "id", k=3, seed=1, exclude=["label"])
    proj = sqlrp.create_projection(None, None, "achlioptas", d=5, k=3, seed=1, s=np.sqrt(5))
    assert got.shape == (40, 4)
    np.testing.assert_allclose(got.drop(columns="id").to_numpy(), reference.transform(proj, X), rtol=1e-9)
    index = sqlrp.build_index(db, "t", "id", "ix", exclude=["label"], calibration_queries=0)
    assert index.source.columns == tuple(f"f{i}" for i in range(5))
    with pytest.raises(sqlrp.InvalidParameter, match="without"):
        sqlrp.project(db, "t", "id", k=3, exclude=["label"], columns=["f0"])
    db.close()
    out = tmp_path / "o.csv"
    argv = ["project", "--db", url, "--table", "t", "--id-column", "id", "--k", "3", "--seed", "1"]
    assert main([*argv, "--exclude", "label", "--into", str(out)]) == 0
    written = pd.read_csv(out).sort_values("id")
    np.testing.assert_allclose(written.drop(columns="id").to_numpy(), reference.transform(proj, X), rtol=1e-9)


def test_the_cli_offers_every_method_option():
    """The CLI's method options (``add_method_params``) are :class:`MethodOptions`, the methods' own
    parameters, but the kurtosis and the variance (rff's gamma="scale") sqlrp measures itself."""
    import argparse

    from sqlrp.cli.options import add_method_params

    parser = argparse.ArgumentParser()
    add_method_params(parser)
    assert set(parser.get_default("method_params")) == set(MethodOptions.__annotations__) - {"kurtosis", "variance"}
