"""Fuzzer of DataFrames where a table goes (issue 41): every dtype a user has, in pandas, pyarrow and
polars -- decimals, float16, unsigned integers (some above 2**63 - 1), nullable ``Int64`` / ``Float64``
with NA, dictionary and categorical columns, sparse columns, structs, lists, datetimes, complex numbers,
booleans, text, numbers mixed with text; names that differ only in case; NULL, NaN, missing and
infinite cells; ids of every kind, NaN and NULL ones among them -- through ``sqlrp.project`` on DuckDB,
SQLite, PostgreSQL, chdb and DataFusion, ``transform_frame``, and ``tune`` on DuckDB.

The oracle does not ask sqlrp which columns are features: it decides from what it generated (every
column of numbers but the id; text, booleans, dates, structs and lists left out; complex numbers and
numbers mixed with text refused), builds ``X`` from the generated values (each the double nearest it,
as NumPy reads it) and expects, on every engine, the NumPy reference of a new projection of that d to
1e-9 of the terms' size -- or, where the frame has to be refused (a missing or NaN id, a struct id, a
NaN cell, a missing cell without ``nulls='zero'``, an infinite cell, no number column), one of sqlrp's
own errors in one line, never a traceback.  Budget: :func:`testkit.fuzz_tables.fuzz_settings`.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
import os
import uuid
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.core.errors import EngineLimit
from sqlrp.methods import make_projection
from testkit.fuzz_oracle import absolute, one_line_error
from testkit.fuzz_tables import fuzz_settings

pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")

#: column kinds the oracle reads as features (numbers), leaves out, or must see refused
NUMBERS = ("float64", "float32", "float16", "int64", "int8", "uint32", "uint64", "Int64", "Float64", "decimal",
           "category_num", "sparse")  # fmt: skip
LEFT_OUT = ("datetime", "bool", "text", "category_str", "struct", "list")
REFUSED = ("complex", "mixed")
#: the kinds each library has
KINDS = {
    "pandas": NUMBERS + LEFT_OUT + REFUSED,
    "pyarrow": tuple(k for k in NUMBERS + LEFT_OUT if k not in ("Int64", "Float64", "sparse")),
    "polars": tuple(k for k in NUMBERS + LEFT_OUT if k not in ("float16", "Int64", "Float64", "sparse")),
}
#: kinds whose cells may be missing (pandas' NumPy ints, bools and dates have no missing value here)
NULLABLE = {
    "pandas": ("float64", "float32", "Int64", "Float64", "decimal", "category_num", "sparse"),
    "pyarrow": NUMBERS,
    "polars": NUMBERS,
}
#: kinds that hold a NaN which is no missing value (pandas' NaN is its missing value)
NAN_KINDS = {"pandas": (), "pyarrow": ("float64", "float32", "float16"), "polars": ("float64", "float32")}
NAN = "NaN"  # a generated NaN cell (not a missing one)
ID_KINDS = ("int", "str", "float", "decimal", "uint64", "struct")
NAMES = ["a", "A", "b", "B", "x", "ID", "p0", "_sqlrp_row", "value", "sp ace", 'q"t']


@dataclasses.dataclass
class Column:
    name: str
    kind: str
    cells: list  # per row: a value, None (missing) or NAN


@dataclasses.dataclass
class Case:
    library: str
    n: int
    id_kind: str
    ids: list
    columns: list[Column]
    nulls: str
    named: list[str] | None  # columns= given
    exclude: list[str] | None = None  # exclude= given
    into: bool = False  # into= a table: the ids go to the engine

    def describe(self) -> str:
        cols = ", ".join(f"{c.name}:{c.kind}" for c in self.columns)
        given = f"named={self.named} exclude={self.exclude} into={self.into}"
        return f"{self.library} n={self.n} id={self.id_kind} nulls={self.nulls} {given} [{cols}]"

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"nulls": self.nulls}
        if self.named is not None:
            options["columns"] = self.named
        if self.exclude is not None:
            options["exclude"] = self.exclude
        return options

    def engine_ids(self) -> bool:
        """Ids no engine holds exactly (above 2**63 - 1, fractional decimals, several types): refused where
        they are sent to the engine (``into=``, ``tune``), given back as they are otherwise."""
        fractional = self.id_kind == "decimal" and any(v != int(v) for v in self.ids)
        return self.id_kind == "uint64" or fractional


def _number(draw: st.DrawFn, kind: str) -> Any:
    """A value of a number column, as its dtype holds it exactly."""
    if kind in ("int64", "Int64"):
        return draw(st.integers(-(2**62), 2**62) | st.integers(-1000, 1000))
    if kind == "int8":
        return draw(st.integers(-128, 127))
    if kind == "uint32":
        return draw(st.integers(0, 2**32 - 1))
    if kind == "uint64":
        return draw(st.integers(0, 2**64 - 1) | st.integers(2**63, 2**64 - 1))
    if kind == "decimal":
        return decimal.Decimal(draw(st.integers(-(10**12), 10**12))) / decimal.Decimal(10**4)
    value = draw(st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.1, -2.5, 1e-300, 3e38]))
    if kind == "float16":
        value = float(np.float16(np.clip(value, -6e4, 6e4)))
    elif kind == "float32":
        value = float(np.float32(np.clip(value, -3e38, 3e38)))
    return value


@st.composite
def cases(draw: st.DrawFn) -> Case:
    library = draw(st.sampled_from(["pandas", "pyarrow", "polars"]))
    n = draw(st.integers(1, 6))
    id_kind = ID_KINDS[max(0, draw(st.integers(-4, len(ID_KINDS) - 1)))]  # mostly integers
    ids: list[Any] = list(range(n))
    if id_kind == "str":
        ids = [f"r{i}" for i in range(n)]
    elif id_kind == "float":
        ids = [i + 0.5 for i in range(n)]
    elif id_kind == "decimal":
        ids = [decimal.Decimal(i) / (4 if draw(st.booleans()) else 1) for i in range(n)]
    elif id_kind == "uint64":
        ids = [2**63 + i for i in range(n)]
    elif id_kind == "struct":
        ids = [{"k": i} for i in range(n)]
    if draw(st.integers(0, 7)) == 0 and id_kind in ("int", "str", "float"):  # a missing (or NaN) id
        ids[draw(st.integers(0, n - 1))] = NAN if id_kind == "float" and library != "pandas" else None
    kinds = KINDS[library]
    count = draw(st.integers(1, 4))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=count, max_size=count, unique=True))
    columns = []
    for name in names:
        kind = draw(st.sampled_from(NUMBERS) if draw(st.integers(0, 2)) else st.sampled_from(kinds))
        if kind not in kinds:
            kind = "float64"
        cells = []
        list_length = draw(st.integers(1, 3))
        for i in range(n):
            special = draw(st.integers(0, 14))
            if special == 14 and kind in NULLABLE[library]:
                cells.append(None)
            elif special == 13 and kind in NAN_KINDS[library]:
                cells.append(NAN)
            elif special == 12 and kind == "float64":
                cells.append(draw(st.sampled_from([math.inf, -math.inf])))
            elif kind in NUMBERS:
                cells.append(_number(draw, kind))
            elif kind == "datetime":
                cells.append(datetime.datetime(2020, 1, 1) + datetime.timedelta(days=i))
            elif kind == "bool":
                cells.append(i % 2 == 0)
            elif kind in ("text", "category_str"):
                cells.append(f"t{i % 2}")
            elif kind == "struct":
                cells.append({"f": float(i)})
            elif kind == "list":
                cells.append([float(i + j) for j in range(list_length)])
            elif kind == "complex":
                cells.append(complex(i, 1))
            else:  # mixed
                cells.append(i if i % 2 else f"t{i}")
        if kind == "mixed" and n == 1:
            kind = "text"  # one row: its one cell is text
        columns.append(Column(name, kind, cells))
    nulls = draw(st.sampled_from(["error", "zero"]))
    named = exclude = None
    choice = draw(st.integers(0, 5))
    if choice == 0:
        named = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    elif choice == 1:
        exclude = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    return Case(library, n, id_kind, ids, columns, nulls, named, exclude, draw(st.integers(0, 3)) == 0)


# ---- building the frame ----


def _py(cell: Any, kind: str) -> Any:
    if cell is NAN:
        return float("nan")
    return cell


def _pandas_column(c: Column) -> Any:
    cells = [_py(v, c.kind) for v in c.cells]
    floats = [np.nan if v is None else float(v) for v in cells] if c.kind in NUMBERS else None
    if c.kind in ("float64", "float32", "float16"):
        return pd.Series(floats, dtype=c.kind)
    if c.kind in ("int64", "int8", "uint32", "uint64"):
        return pd.Series(np.array(cells, dtype=object).astype(c.kind))
    if c.kind in ("Int64", "Float64"):
        return pd.Series(pd.array(cells, dtype=c.kind))
    if c.kind == "decimal":
        return pd.Series(cells, dtype=object)
    if c.kind == "category_num":
        return pd.Series(pd.Categorical(floats))
    if c.kind == "category_str":
        return pd.Series(pd.Categorical(cells))
    if c.kind == "sparse":
        return pd.Series(pd.arrays.SparseArray(floats, fill_value=0.0))
    if c.kind == "datetime":
        return pd.Series(pd.to_datetime(cells))
    if c.kind == "bool":
        return pd.Series(cells, dtype=bool)
    if c.kind == "complex":
        return pd.Series(cells, dtype=complex)
    return pd.Series(cells, dtype=object)  # text, struct, list, mixed


ARROW_TYPES = {
    "float64": "float64", "float32": "float32", "float16": "float16", "int64": "int64", "int8": "int8",
    "uint32": "uint32", "uint64": "uint64",
}  # fmt: skip


def _arrow_column(c: Column) -> Any:
    cells = [_py(v, c.kind) for v in c.cells]
    if c.kind == "float16":
        values = np.array([0.0 if v is None else v for v in cells], dtype=np.float16)
        return pa.array(values, pa.float16(), mask=np.array([v is None for v in cells]))
    if c.kind in ARROW_TYPES:
        return pa.array(cells, getattr(pa, ARROW_TYPES[c.kind])())
    if c.kind == "decimal":
        return pa.array(cells, pa.decimal128(20, 4))
    if c.kind == "category_num":
        return pa.array([None if v is None else float(v) for v in cells], pa.float64()).dictionary_encode()
    if c.kind == "category_str":
        return pa.array(cells, pa.string()).dictionary_encode()
    if c.kind == "datetime":
        return pa.array(cells, pa.timestamp("us"))
    if c.kind == "list":
        return pa.array(cells, pa.list_(pa.float64()))
    return pa.array(cells)  # bool, text, struct


POLARS_TYPES = {
    "float64": "Float64", "float32": "Float32", "int64": "Int64", "int8": "Int8", "uint32": "UInt32",
    "uint64": "UInt64",
}  # fmt: skip


def _polars_column(c: Column) -> Any:
    cells = [_py(v, c.kind) for v in c.cells]
    if c.kind in POLARS_TYPES:
        return pl.Series(c.name, cells, dtype=getattr(pl, POLARS_TYPES[c.kind]), strict=False)
    if c.kind == "decimal":
        return pl.Series(c.name, cells, dtype=pl.Decimal(24, 4))
    if c.kind == "category_num":
        return pl.Series(c.name, [None if v is None else float(v) for v in cells], dtype=pl.Float64)
    if c.kind == "category_str":
        return pl.Series(c.name, cells, dtype=pl.Categorical)
    return pl.Series(c.name, cells)  # datetime, bool, text, struct, list


def build(case: Case) -> Any:
    ids = [float("nan") if v is NAN else v for v in case.ids]
    if case.library == "pandas":
        data = {"id": pd.Series(ids, dtype=object if case.id_kind in ("decimal", "struct", "uint64") else None)}
        if case.id_kind == "uint64":
            data["id"] = pd.Series(np.array(ids, dtype=np.uint64))
        return pd.DataFrame({**data, **{c.name: _pandas_column(c) for c in case.columns}})
    if case.library == "pyarrow":
        arrays = {"id": pa.array(ids, pa.uint64()) if case.id_kind == "uint64" else pa.array(ids)}
        if case.id_kind == "decimal":
            arrays["id"] = pa.array(ids, pa.decimal128(20, 2))
        return pa.table({**arrays, **{c.name: _arrow_column(c) for c in case.columns}})
    first = pl.Series("id", ids, dtype=pl.UInt64) if case.id_kind == "uint64" else pl.Series("id", ids)
    if case.id_kind == "decimal":
        first = pl.Series("id", ids, dtype=pl.Decimal(24, 2))
    return pl.DataFrame([first, *[_polars_column(c) for c in case.columns]])


# ---- the oracle ----


@dataclasses.dataclass
class Want:
    refuse: str | None  # why the frame must be refused (project)
    features: list[str]
    X: np.ndarray | None  # missing cells as NaN
    missing: bool
    dirty: bool = False  # a NaN, missing or infinite feature cell: transform_frame refuses it
    array: bool = False  # no number column but one of lists: the array layout (SQLite has no arrays)


def want(case: Case) -> Want:
    """What a correct sqlrp does with ``case``, decided from what was generated."""
    kinds = {c.name: c.kind for c in case.columns}
    by_name = {c.name: c for c in case.columns}
    if case.named is not None:
        features = list(case.named)
        bad = [f for f in features if kinds[f] not in NUMBERS]
    else:
        left = set(case.exclude or ())
        features = [c.name for c in case.columns if c.kind in NUMBERS and c.name not in left]
        bad = [c.name for c in case.columns if c.kind in REFUSED and c.name not in left]
    refuse = None
    if any(v is None or v is NAN for v in case.ids):
        refuse = "missing id"
    elif case.id_kind == "struct":
        refuse = "struct id"
    elif case.into and case.engine_ids():
        refuse = "ids no engine holds exactly"
    if bad:
        return Want(refuse or f"column {bad[0]!r} is {kinds[bad[0]]}", features, None, False)
    if not features:
        lists = [c for c in case.columns if c.kind == "list" and c.name not in set(case.exclude or ())]
        if case.named is None and len(lists) == 1:  # the array layout: each row's list
            X = np.array(lists[0].cells, dtype=float).reshape(case.n, len(lists[0].cells[0]))
            return Want(refuse, [], X, False, array=True)
        return Want(refuse or "no number columns", features, None, False)
    X = np.array(
        [[np.nan if v is None or v is NAN else float(v) for v in by_name[f].cells] for f in features], dtype=float
    ).T.reshape(case.n, len(features))
    nan = any(by_name[f].cells[i] is NAN for f in features for i in range(case.n))
    missing = any(by_name[f].cells[i] is None for f in features for i in range(case.n))
    dirty = nan or missing or not np.isfinite(np.where(np.isnan(X), 0.0, X)).all()
    if nan:
        refuse = refuse or "NaN cell"
    elif missing and case.nulls == "error":
        refuse = refuse or "missing cell"
    elif not np.isfinite(np.where(np.isnan(X), 0.0, X)).all():
        refuse = refuse or "infinite cell"
    return Want(refuse, features, X, missing, dirty)


def key(v: Any) -> Any:
    """An id as a comparable key: a number by its value, text as text."""
    return v if isinstance(v, str) else float(v)


def check(got: np.ndarray, X: np.ndarray, projection: Any, what: str) -> None:
    """``got`` is the NumPy reference of ``projection`` on ``X`` to 1e-9 of the size of its terms."""
    with np.errstate(all="ignore"):
        ref = sqlrp.transform(projection, X)
        bound = sqlrp.transform(absolute(projection), np.abs(X))
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    err = np.abs(got - ref)
    assert (err <= 1e-9 * bound + 1e-300).all(), (what, got, ref)


# ---- the engines ----


@pytest.fixture(scope="module")
def engines(pg_url, tmp_path_factory):
    import psycopg

    schema = f"fz_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_url else "?"
    urls = {
        "duckdb": "duckdb://",
        "sqlite": f"sqlite:///{tmp_path_factory.mktemp('frames') / 'f.db'}",
        "postgres": f"{pg_url}{sep}options=-csearch_path%3D{schema}",
        "chdb": "chdb://",
        "datafusion": "datafusion://",
    }
    dbs = {}
    for engine, url in urls.items():
        if engine in ("chdb", "datafusion") and not os.environ.get("CI"):
            pytest.importorskip(engine)
        dbs[engine] = sqlrp.connect(url)
    yield dbs
    for db in dbs.values():
        db.close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


SEEN: dict[str, int] = {}


def run_case(case: Case, dbs: dict) -> None:
    w = want(case)
    frame = build(case)
    d = w.X.shape[1] if w.array else len(w.features)
    k, seed = 2, 3
    options = case.options()
    for engine, db in dbs.items():
        what = f"{engine}: {case.describe()}"
        before = set(db.table_names())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = sqlrp.project(
                    db, frame, "id", k=k, s=3, seed=seed, **options, into="fzout" if case.into else None
                )
            if case.into:
                try:
                    out = db.query_df('SELECT * FROM "fzout"')
                finally:
                    db.execute('DROP TABLE IF EXISTS "fzout"')
                order = {key(v): i for i, v in enumerate(case.ids)}
                assert sorted(order) == sorted(key(v) for v in out["id"]), (what, out["id"].tolist())
                out = out.iloc[np.argsort([order[key(v)] for v in out["id"]])].reset_index(drop=True)
        except Exception as exc:  # noqa: BLE001 - the oracle judges every outcome
            one_line_error(exc, what)
            assert "_sqlrp_frame" not in str(exc), (what, str(exc))
            if w.array and engine == "sqlite" and isinstance(exc, EngineLimit):
                continue  # SQLite has no array type
            assert w.refuse is not None, f"{what}: refused although it is valid: {type(exc).__name__}: {exc}"
            SEEN["refused"] = SEEN.get("refused", 0) + 1
            SEEN[f"refused: {w.refuse}"] = SEEN.get(f"refused: {w.refuse}", 0) + 1
        else:
            assert w.refuse is None, f"{what}: ran although it had to be refused ({w.refuse})"
            X = np.where(np.isnan(w.X), 0.0, w.X)  # nulls="zero"
            check(out[["p0", "p1"]].to_numpy(dtype=float), X, make_projection("achlioptas", d, k, seed=seed, s=3), what)
            if not case.into:  # the frame's own ids, as it has them
                assert out["id"].tolist() == case.ids, (what, out["id"].tolist())
            SEEN["ok"] = SEEN.get("ok", 0) + 1
        assert set(db.table_names()) == before, (what, "a table was left behind")
    # the NumPy path reads the same features the same way
    if w.X is None or not w.features:
        return  # (transform_frame reads columns of numbers, not lists)
    P = make_projection("achlioptas", d, k, seed=seed, s=3)
    feature_refused = w.dirty
    try:
        got = sqlrp.transform_frame(P, frame, columns=w.features)
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, f"transform_frame: {case.describe()}")
        assert feature_refused, f"transform_frame refused a valid frame: {exc}: {case.describe()}"
    else:
        assert not feature_refused, f"transform_frame ran although it had to be refused: {case.describe()}"
        Y = got.to_numpy() if hasattr(got, "to_numpy") else np.column_stack([got.column(j) for j in range(k)])
        check(np.asarray(Y, dtype=float), w.X, P, f"transform_frame: {case.describe()}")


def run_tune(case: Case, db: Any) -> None:
    """``tune`` on DuckDB reads the frame's features as ``project`` does: the same d, or the same refusal
    of the id (a NaN id was ``KeyError: nan``)."""
    w = want(case)
    frame = build(case)
    options = case.options()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tuned = sqlrp.tune(db, frame, "id", k=2, name="tuned", replace=True, iterations=3, sample=50, **options)
    except Exception as exc:  # noqa: BLE001
        one_line_error(exc, f"tune: {case.describe()}")
        assert "_sqlrp_frame" not in str(exc), str(exc)
        if (
            w.refuse is None and not case.engine_ids()
        ):  # tune's own refusals (identical rows...) may stand, not the frame's
            assert "id column" not in str(exc) and " holds " not in str(exc), f"tune: {exc}: {case.describe()}"
    else:
        assert w.refuse not in ("missing id", "struct id", "NaN cell"), f"tune ran: {case.describe()}"
        assert tuned.d == len(w.features), (tuned.d, w.features, case.describe())


def test_fuzz_frames(engines) -> None:
    @fuzz_settings(20)
    @given(case=cases())
    def run(case: Case) -> None:
        run_case(case, engines)
        run_tune(case, engines["duckdb"])

    run()
    print(SEEN)
    assert SEEN.get("ok", 0) >= 5 and SEEN.get("refused", 0) >= 5, SEEN
