"""One registration per engine.  An engine defined entirely in this file -- a dialect and a backend,
with SQLite underneath -- is reached by :func:`sqlrp.connect` (by URL, by file ending, by its
connection class), found by name and alias, and keeps a registry rendered by its dialect: no table in
sqlrp was edited for it.  And the modules that walk the engines name none of them."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.backends import backend_of, engines_table, registered
from sqlrp.backends.base import REGISTERED, Registration, url_path
from sqlrp.backends.catalog import BUILT_IN
from sqlrp.backends.sqlite import SQLiteBackend
from sqlrp.core import errors
from sqlrp.dialects import dialect_names, get_dialect
from sqlrp.dialects.base import ALIASES
from sqlrp.dialects.sqlite import SQLiteDialect

ROOT = Path(__file__).resolve().parents[2]


class ToyDialect(SQLiteDialect):
    """A dialect of its own name and aliases; SQLite's rendering, limits and registry hooks."""

    name = "toysql"
    aliases = ("toy", "toy-sql")


class ToyConnection:
    """A connection class of this module: ``connect()`` knows it by its module's name alone."""

    def __init__(self, path: str) -> None:
        self.con = sqlite3.connect(path, isolation_level=None)


class ToyBackend(SQLiteBackend):
    """The backend: its dialect, its registration, and how to wrap its connection class."""

    dialect = "toysql"
    registration = Registration(
        name="Toy",
        schemes=("toy",),
        url_drivers=("toydriver",),
        files=(".toy",),
        patterns=(r"toy:memory$",),
        connections=(f"{__name__}.ToyConnection",),
        drivers=("sqlite3",),
        example="toy:///path.toy",
    )

    @classmethod
    def open(cls, target: str, **options: object) -> ToyBackend:
        return cls(":memory:" if target == "toy:memory" else url_path(target))  # type: ignore[return-value]

    @classmethod
    def wrap(cls, connection: ToyConnection, **options: object) -> ToyBackend:
        return super().wrap(connection.con)  # type: ignore[return-value]


def test_connect_reaches_the_new_engine(tmp_path):
    for target in (
        f"toy:///{tmp_path}/a.toy",
        f"toy+toydriver:///{tmp_path}/b.toy",
        str(tmp_path / "c.toy"),
        "toy:memory",
    ):
        db = sqlrp.connect(target)
        assert type(db) is ToyBackend and db.dialect == "toysql", target
        db.close()
    wrapped = sqlrp.connect(ToyConnection(str(tmp_path / "d.toy")))
    assert type(wrapped) is ToyBackend and not wrapped.owns_connection
    with pytest.raises(sqlrp.InvalidParameter, match=r"runs toy through its own driver \(toydriver\).*toy:///path.toy"):
        sqlrp.connect("toy+other:///x.toy")
    assert type(sqlrp.connect(str(tmp_path / "e.sqlite"))) is SQLiteBackend  # the built-in one is untouched
    assert any(row["engine"] == "Toy" and row["files"] == ".toy" for row in engines_table())
    assert ToyBackend in [backend for _, backend in registered()]


def test_the_dialect_is_found_by_name_and_alias():
    assert isinstance(get_dialect("toysql"), ToyDialect)
    assert get_dialect("TOY") is get_dialect("toy-sql") is get_dialect("toysql")
    assert "toysql" in dialect_names() and ALIASES["toy"] == "toysql"
    assert get_dialect("sqlite").name == "sqlite"  # the dialect it extends keeps its own name


def test_the_new_engine_keeps_a_registry_and_projects(tmp_path):
    """The registry's tables come from the definition, rendered by the new dialect's (inherited)
    hooks; a stored projection runs in SQL and matches the NumPy reference."""
    with sqlrp.connect(str(tmp_path / "p.toy")) as db:
        X = np.random.default_rng(0).uniform(0, 4, (20, 6))
        frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)]).assign(id=np.arange(20))
        db.write_dataframe("t", frame)
        sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=3, s=3, seed=2)
        out = sqlrp.project(db, "t", "id", "rp")
        want = sqlrp.transform(sqlrp.load_projection(db, "rp"), X)
        np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want, rtol=1e-9)
        assert {"sqlrp_projection", "sqlrp_schema_version", "sqlrp_index"} <= set(db.table_names())
        assert db.fetchall("SELECT max(version) FROM sqlrp_schema_version")[0][0] == 5


def test_each_built_in_registration_names_the_class_that_declares_it():
    """The catalog's ``module:Class`` strings (what ``connect()`` imports) and the classes agree: each
    names a class whose ``registration`` is that very entry; a string naming another class is refused."""
    for reg in BUILT_IN:
        backend = backend_of(reg)
        assert backend.registration is reg and f"{backend.__module__}:{backend.__qualname__}" == reg.backend
    assert [reg for reg, _ in registered()][-len(BUILT_IN) :] == list(reversed(BUILT_IN))
    for module in pkgutil.iter_modules(sqlrp.backends.__path__):  # and no backend of sqlrp is left out of it
        importlib.import_module(f"sqlrp.backends.{module.name}")
    made = [cls for reg, cls in REGISTERED if cls.__module__.startswith("sqlrp.backends.")]
    assert made and all(any(cls.registration is reg for reg in BUILT_IN) for cls in made), made
    stray = Registration(name="Stray", schemes=("stray",), backend="sqlrp.backends.sqlite:SQLiteBackend")
    with pytest.raises(TypeError, match="does not declare the registration of Stray"):
        backend_of(stray)


def test_driver_errors_come_from_the_registrations():
    engines = registered()
    assert errors.DRIVER_MODULES == {m for reg, _ in engines for m in reg.drivers}
    assert errors.exit_status(sqlite3.OperationalError("x")) == errors.EXIT_ENGINE


def _engine_words() -> set[str]:
    """Every name an engine goes by: URL schemes, driver modules, connection modules, dialect names
    and aliases (the registrations and the dialect files say them; nothing else should)."""
    words = set(dialect_names()) | set(ALIASES)
    for reg, _ in registered():
        words |= set(reg.schemes) | set(reg.drivers) | {c.split(".")[0] for c in reg.connections}
        words |= {w.lower() for w in re.findall(r"[A-Za-z]+", reg.name) if len(w) > 3 and w[0].isupper()}
    return {w.lower() for w in words} - {""}


def _code(path: Path) -> str:
    """The module's code without docstrings or comments."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            if isinstance(body[0].value.value, str):
                body[0] = ast.Pass()
    return ast.unparse(tree)


@pytest.mark.parametrize(
    "module",
    ["sqlrp/backends/__init__.py", "sqlrp/dialects/__init__.py", "sqlrp/registry/schema.py", "sqlrp/registry/store.py"],
)
def test_no_engine_is_named_where_engines_are_walked(module):
    words = set(re.findall(r"[a-z0-9_]+", _code(ROOT / module).lower()))
    assert not words & _engine_words(), f"{module} names {sorted(words & _engine_words())}"
