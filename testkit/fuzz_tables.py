"""The differential fuzzer's shared parts (issue 31): generated tables, how each engine stores them,
the stored matrix read back, and the budget.

A generated :class:`Table` has float64 / float32 / integer / decimal feature columns, NULL, NaN and
infinite cells, constant columns, magnitudes from 1e-300 to 1e300, ids of integer, float or string
type with duplicates and gaps, and column and table names that collide with the names sqlrp generates
(``p0``, ``_x0``, ``w0``, ``_v0``, ``id``, ``_id``, ``_h``...) or hold hostile characters.  The
oracle never trusts the generated values: it reads back what the engine stored (:func:`stored`) and
computes the NumPy reference on that.

Budget: each test asks :func:`fuzz_settings` for its CI number of examples; CI runs them
derandomized (the same examples every run).  ``SQLRP_FUZZ_EXAMPLES=N`` gives every fuzz test ``N``
examples (Spark a tenth) with fresh random draws -- the long local run.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import os
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

import sqlrp
from sqlrp.compiler import ident
from sqlrp.dialects import get_dialect

LONG_RUN = int(os.environ.get("SQLRP_FUZZ_EXAMPLES", "0") or 0)


def fuzz_settings(ci_examples: int, share: float = 1.0, stateful_steps: int | None = None) -> settings:
    """The settings of one fuzz test: ``ci_examples`` derandomized in CI, or ``SQLRP_FUZZ_EXAMPLES``
    (times ``share``) random examples in a long run."""
    examples = max(1, int(LONG_RUN * share)) if LONG_RUN else ci_examples
    extra: dict[str, Any] = {}
    if stateful_steps is not None:
        extra["stateful_step_count"] = stateful_steps
    if os.environ.get("SQLRP_FUZZ_NO_SHRINK"):  # triage: report the first failure as found, at once
        extra["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(
        settings.get_profile("sqlrp-fuzz-long" if LONG_RUN else "sqlrp-fuzz-ci"), max_examples=examples, **extra
    )


def register_profiles() -> None:
    """The two profiles (``tests/conftest.py`` calls this): CI's derandomized one and the long run's."""
    common = dict(
        deadline=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )
    settings.register_profile("sqlrp-fuzz-ci", derandomize=True, database=None, **common)
    settings.register_profile("sqlrp-fuzz-long", derandomize=False, **common)


# ---- names ----

#: names sqlrp generates itself (output columns, the compiler's and the index's internal columns)
GENERATED = ["x", "_x0", "p0", "p1", "P0", "_x1", "w0", "_v0", "_id", "_h", "_g", "_s0", "_ol", "_kw", "value"]
HOSTILE = ['a"b', "a'b", "x;--", "sp ace", "dot.ted", "é", "表", "Ab", "back\\slash", "pct%", "p0 "]
# plain names first: hypothesis starts (and shrinks) toward the first branch
column_name = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), st.sampled_from(GENERATED), st.sampled_from(HOSTILE)
)
id_name = st.sampled_from(["id", "ID", "p0", "_x0", "w0", "_v0", "_id", "row id", 'i"d', "p1"])
table_name = st.sampled_from(["src", "p0", "_x0", "w0", "_v0", "t.x", 'ta"ble', "Tab le", "sqlrp_x", "_sqlrp_q2"])

KINDS = ("float64", "float32", "int", "decimal")


@dataclasses.dataclass
class Table:
    """A generated table: ``cells[i][j]`` is the value of row i, feature j (``None`` = NULL)."""

    name: str
    id_name: str
    id_kind: str  # int, float, str
    ids: list
    features: list[str]
    kinds: list[str]
    cells: list[list[Any]]

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def d(self) -> int:
        return len(self.features)

    def clean(self) -> bool:
        """Every cell a finite number."""
        return all(v is not None and math.isfinite(float(v)) for row in self.cells for v in row)


def _value(draw: st.DrawFn, kind: str, exponent: int, dirty: bool = True) -> Any:
    special = draw(st.integers(0, 29)) if dirty else 0  # hypothesis favours 0: the plain value
    if special == 29:
        return None
    if special == 28 and kind in ("float64", "float32"):
        return draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    if kind == "int":
        return draw(st.integers(-(10**6), 10**6)) if exponent < 10 else draw(st.integers(-(2**53), 2**53))
    if kind == "decimal":
        return decimal.Decimal(draw(st.integers(-(10**9), 10**9))) / decimal.Decimal(10**6)
    mantissa = draw(st.floats(-10, 10, allow_nan=False))
    e = exponent + draw(st.integers(-2, 2)) if draw(st.integers(0, 9)) != 9 else draw(st.integers(-300, 300))
    value = mantissa * 10.0 ** max(-300, min(300, e))
    if kind == "float32":
        with np.errstate(over="ignore"):
            return float(np.float32(value))
    return value


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 10, max_d: int = 5, kinds: tuple[str, ...] = KINDS) -> Table:
    d = draw(st.integers(1, max_d))
    n = draw(st.integers(1, max_rows))
    idn = draw(id_name)
    names: list[str] = []
    for i in range(d):
        name = draw(column_name)
        taken = {x.casefold() for x in [*names, idn]}
        fallback = i
        while name.casefold() in taken:  # the fallback itself may be taken (a drawn "f3" before "f3")
            name, fallback = f"f{fallback}", fallback + len(taken) + 1
        names.append(name)
    kind_of = [draw(st.sampled_from(kinds)) for _ in range(d)]
    # one magnitude for most cells, so that the relative check means something row by row
    exponent = draw(st.sampled_from([0, 0, 0, -5, 3, 9, -300, 300, 150, -150, 100]))
    dirty = draw(st.integers(0, 2)) == 2  # one table in three has NULL, NaN or infinite cells
    cells = [[_value(draw, kind_of[j], exponent, dirty) for j in range(d)] for _ in range(n)]
    for j in range(d):  # a constant column now and then
        if draw(st.integers(0, 5)) == 5:
            value = _value(draw, kind_of[j], exponent, dirty)
            if draw(st.booleans()) and kind_of[j] in ("float64", "decimal"):
                value = 0.1 if kind_of[j] == "float64" else decimal.Decimal("0.1")
            for row in cells:
                row[j] = value
    id_kind = draw(st.sampled_from(["int", "int", "float", "str"]))
    raw = draw(st.lists(st.integers(-50, 10**6), min_size=n, max_size=n, unique=draw(st.integers(0, 4)) != 4))
    if id_kind == "int":
        ids: list = list(raw)
    elif id_kind == "float":
        ids = [v + 0.25 for v in raw]
    else:
        ids = [f"r{v}" for v in raw]
    return Table(draw(table_name), idn, id_kind, ids, names, kind_of, cells)


# ---- storing a table on an engine ----

SQL_TYPES = {
    "postgres": {"float64": "DOUBLE PRECISION", "float32": "REAL", "int": "BIGINT", "decimal": "NUMERIC(18, 6)"},
    "sqlite": {"float64": "REAL", "float32": "REAL", "int": "INTEGER", "decimal": "REAL"},
}
ID_TYPES = {
    "postgres": {"int": "BIGINT", "float": "DOUBLE PRECISION", "str": "TEXT"},
    "sqlite": {"int": "INTEGER", "float": "REAL", "str": "TEXT"},
}


def _arrow_frame(t: Table) -> pd.DataFrame:
    import pyarrow as pa

    types = {"float64": pa.float64(), "float32": pa.float32(), "int": pa.int64(), "decimal": pa.decimal128(18, 6)}
    data = {t.id_name: pd.array(pa.array(t.ids), dtype=pd.ArrowDtype(pa.array(t.ids).type))}
    for j, (name, kind) in enumerate(zip(t.features, t.kinds, strict=True)):
        values = [row[j] for row in t.cells]
        data[name] = pd.array(pa.array(values, type=types[kind], from_pandas=False), dtype=pd.ArrowDtype(types[kind]))
    return pd.DataFrame(data)


def plain_frame(t: Table) -> pd.DataFrame:
    """The table as NumPy columns (NULL as NaN, decimals as float64, float32 kept)."""
    data: dict[str, Any] = {t.id_name: np.asarray(t.ids)}
    for j, (name, kind) in enumerate(zip(t.features, t.kinds, strict=True)):
        values = [math.nan if row[j] is None else float(row[j]) for row in t.cells]
        data[name] = np.asarray(values, dtype=np.float32 if kind == "float32" else np.float64)
    return pd.DataFrame(data)


def create(db, engine: str, t: Table) -> None:
    """``t`` as ``engine`` stores it: typed columns where the engine's writer keeps them."""
    if engine == "duckdb":
        db.write_dataframe(t.name, _arrow_frame(t))
        return
    if engine in SQL_TYPES:
        render = get_dialect(engine).sqlglot
        defs = [f"{ident(t.id_name).sql(render)} {ID_TYPES[engine][t.id_kind]}"]
        defs += [f"{ident(c).sql(render)} {SQL_TYPES[engine][k]}" for c, k in zip(t.features, t.kinds, strict=True)]
        db.execute(f"CREATE TABLE {ident(t.name).sql(render)} ({', '.join(defs)})")
        marks = ", ".join("?" for _ in range(t.d + 1))
        for i, row in enumerate(t.cells):
            values = [None if v is None else float(v) for v in row]
            db.execute(f"INSERT INTO {ident(t.name).sql(render)} VALUES ({marks})", [t.ids[i], *values])
        return
    db.write_dataframe(t.name, plain_frame(t))


def select_all(engine: str, t: Table, table: str | None = None) -> str:
    render = get_dialect(engine).sqlglot
    cols = ", ".join(ident(c).sql(render) for c in [t.id_name, *t.features])
    return f"SELECT {cols} FROM {ident(table or t.name).sql(render)}"


def snapshot(db, engine: str, t: Table) -> list[tuple]:
    """The source's rows, sorted, as text: compared before and after every operation."""
    return sorted(repr(tuple(r)) for r in db.fetchall(select_all(engine, t)))


@dataclasses.dataclass
class Stored:
    """What the engine holds: ids, the matrix (NULL and NaN both NaN here) and where the NULLs are."""

    ids: list
    X: np.ndarray
    null: np.ndarray


def stored(db, engine: str, t: Table) -> Stored:
    rows = db.fetchall(select_all(engine, t))
    ids = [r[0] for r in rows]
    X = np.array([[math.nan if v is None else float(v) for v in r[1:]] for r in rows], dtype=np.float64)
    # a REAL reaches Python as its shortest text (psycopg: 873.3025, not 873.302490234375): back to float32
    f32 = [j for j, kind in enumerate(t.kinds) if kind == "float32"]
    with np.errstate(over="ignore"):
        X[:, f32] = X[:, f32].astype(np.float32).astype(np.float64)
    null = np.array([[v is None for v in r[1:]] for r in rows], dtype=bool)
    return Stored(ids, X.reshape(len(rows), t.d), null.reshape(len(rows), t.d))


def reference(projection, X: np.ndarray) -> np.ndarray:
    """The NumPy reference; NaN where it overflows (``sqlrp.transform`` refuses that itself)."""
    with np.errstate(all="ignore"):
        try:
            return sqlrp.transform(projection, X)
        except sqlrp.SqlrpError:
            return np.full((len(X), projection.k), np.nan)
