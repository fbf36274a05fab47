"""``sqlrp compile --check``: one statement that proves a rendering on the engine that runs it.

The statement runs the compiled projection -- the same SQL, strategy and matrix source as the
printed one -- on a small built-in fixture instead of the user's table, and compares the outputs
with NumPy's (:func:`sqlrp.methods.reference.transform`), embedded as literals.  It returns one row,
``sqlrp_check`` ('ok' or 'wrong') and ``largest_error`` (the largest ``|got - want| / (1 + |want|)``),
so a user runs it once on a warehouse before trusting the SQL there.

The fixture's four rows are chosen to expose what varies between engines:

- **array base** and **unnest pairing**: every feature differs from its neighbours and from the
  other rows, so reading ``x[i + 1]`` for ``x[i]`` (0-based lists read as 1-based: Daft), or
  pairing every feature with every value (Hyper's UNNESTs) changes the sums -- or makes them NULL;
- **integer division** and **integer types**: feature 0 is an integer column (plain integer
  literals), the ids include 3,000,000,000 (beyond a 32-bit integer) and a negative one;
- **literal parsing**: values with 16 significant digits, large (1,234.5625) and small (0.0000125)
  magnitudes, written as plain decimals;
- **NULL handling**: under ``nulls="zero"`` the last row holds NULLs that must read as 0; in the long
  layout its zeros are absent rows.

A missing, extra or NULL output row or cell makes the check 'wrong', as does any error above the
tolerance (1e-9; 1e-6 for float32 outputs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sqlglot import exp

from ..core.ir import Composed, Projection
from ..core.layout import Formulation, Output, Source
from ..core.nodes import as_double, col, ident
from ..dialects import SqlrpDialect, get_dialect
from ..dialects.portable import plain_decimal
from ..methods.reference import transform
from .select import compile_select

FIXTURE = "_sqlrp_fixture"
IDS = (1, 2, 3_000_000_000, -4)
GROUPS = (7, 7, 9, 9)
TOLERANCE = {"float64": 1e-9, "float32": 1e-6}


def fixture(d: int) -> np.ndarray:
    """The fixture's 4 x ``d`` values (module docstring); zeros of the last row are NULL under
    ``nulls="zero"``.  Every value is exact in a short decimal literal."""
    i = np.arange(d)
    rows = np.empty((4, d))
    rows[0] = (i * 5) % 11 - 5.0
    rows[1] = np.round((i + 1) / 7.0 + 0.1, 15)
    rows[2] = np.where(i % 2 == 0, 1234.5625 + i, -0.0000125 * (i + 1))
    rows[3] = np.where(i % 3 == 0, 2.5 - 0.75 * i, 0.0)
    rows[:, 0] = (3.0, -2.0, 5.0, 1.0)  # feature 0: an integer column (every row keeps a non-zero)
    return rows


def _value(x: float, column: int, null: bool) -> exp.Expression:
    """A fixture value: a plain integer in feature 0, else ``CAST(<decimal> AS DOUBLE)``; NULL if ``null``."""
    if null:
        return exp.Cast(this=exp.Null(), to=exp.DataType(this=exp.DataType.Type.DOUBLE))
    if column == 0:
        return exp.Literal.number(str(int(x)))
    return as_double(exp.Literal.number(_decimal(x)))


def _decimal(x: float) -> str:
    """``x`` as a plain decimal literal (the shortest repr, without an exponent)."""
    return plain_decimal(repr(float(x)))


def _union(rows: list[list[exp.Expression]], names: list[str]) -> exp.Expression:
    """``SELECT a AS n1, ... UNION ALL SELECT ...``: every branch names its columns (Daft takes the
    names from each)."""
    selects = [
        exp.select(*[exp.alias_(v, n, quoted=True, copy=False) for v, n in zip(r, names, strict=True)]) for r in rows
    ]
    query: exp.Expression = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=False, copy=False)
    return query


def _fixture_relation(source: Source, X: np.ndarray, nulls: np.ndarray) -> exp.Expression:
    keys = [source.id_column] + ([source.group_column] if source.group_column else [])

    def key_values(r: int) -> list[exp.Expression]:
        values = [exp.Literal.number(IDS[r])]
        return values + ([exp.Literal.number(GROUPS[r])] if source.group_column else [])

    if source.layout == "wide":
        rows = [key_values(r) + [_value(X[r, c], c, nulls[r, c]) for c in range(X.shape[1])] for r in range(4)]
        return _union(rows, keys + list(source.columns))
    if source.layout == "array":
        assert source.array_column is not None
        rows = [
            key_values(r) + [exp.Array(expressions=[_value(X[r, c], -1, nulls[r, c]) for c in range(X.shape[1])])]
            for r in range(4)
        ]
        return _union(rows, keys + [source.array_column])
    rows = [
        key_values(r) + [exp.Literal.number(c), _value(X[r, c], -1, nulls[r, c])]
        for r in range(4)
        for c in range(X.shape[1])
        if X[r, c] != 0 or nulls[r, c]
    ]
    return _union(rows, keys + [source.feature_column, source.value_column])


def expected(projection: Projection | Composed, source: Source, X: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The keys and NumPy's outputs for the fixture ``X`` (NULLs already 0), standardised as the SQL is."""
    if source.standardize is not None:
        means, stds = (np.asarray(v, dtype=np.float64) for v in source.standardize)
        X = np.where(stds == 0, 0.0, (X - means) / np.where(stds > 0, stds, 1.0))  # a constant feature: 0
    if source.group_column:
        return sorted(set(GROUPS)), transform(projection, X, np.asarray(GROUPS))
    return list(IDS), transform(projection, X)


def check_select(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect,
    output: Output,
    how: Formulation,
) -> exp.Select:
    """The self-check statement (module docstring) for the projection of ``source`` as compiled with
    the formulation ``how`` (``how.guard``: with the in-query checks, :mod:`.guard`, as ``compile``
    prints it for the engine of ``--db``)."""
    dialect = get_dialect(dialect)
    X = fixture(projection.d)
    nulls = np.zeros_like(X, dtype=bool)
    if source.nulls == "zero":
        nulls[3] = X[3] == 0
    fixture_source = dataclasses.replace(source, table=FIXTURE, schema=None, catalog=None, row_filter=None)
    got = compile_select(projection, fixture_source, dialect, output, how)
    keys, want = expected(projection, source, X)
    n, k = want.shape
    key = source.group_column or source.id_column
    names = output.names(k)
    want_rows = [
        [exp.Literal.number(keys[r])] + [as_double(exp.Literal.number(_decimal(_round(w)))) for w in want[r]]
        for r in range(n)
    ]
    want_relation = _union(want_rows, ["_key"] + [f"_w{j}" for j in range(k)])
    zero, one = exp.Literal.number(0), exp.Literal.number(1)
    tolerance = as_double(exp.Literal.number(_decimal(TOLERANCE[output.dtype])))
    # one row per output row (_r = 1), and per expected cell: its error (1 where the cell is missing or
    # NULL) and _bad = 0 only where the error is within the tolerance (a NULL or NaN error is bad)
    cells: exp.Expression = exp.select(
        exp.alias_(as_double(zero.copy()), "_e", quoted=True),
        exp.alias_(zero.copy(), "_bad", quoted=True),
        exp.alias_(one.copy(), "_r", quoted=True),
    ).from_(exp.Table(this=ident("_sqlrp_got")))
    for j in range(k):
        cells = exp.union(cells, _cells(output, names, j, key, tolerance), distinct=False, copy=False)
    passed = exp.and_(
        exp.EQ(this=exp.Sum(this=col("_r")), expression=exp.Literal.number(n)),
        exp.EQ(this=exp.Sum(this=col("_bad")), expression=zero.copy()),
        exp.EQ(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(n * k + n)),
    )
    verdict = exp.Case(ifs=[exp.If(this=passed, true=exp.Literal.string("ok"))], default=exp.Literal.string("wrong"))
    select = exp.select(
        exp.alias_(verdict, "sqlrp_check", quoted=True),
        exp.alias_(exp.Max(this=col("_e")), "largest_error", quoted=True),
    ).from_(exp.Table(this=ident("_sqlrp_cells")))
    ctes = [
        (FIXTURE, _fixture_relation(source, X, nulls)),
        ("_sqlrp_got", got),
        ("_sqlrp_want", want_relation),
        ("_sqlrp_cells", cells),
    ]
    for name, query in ctes:
        select = select.with_(ident(name), as_=query, copy=False)
    return select


def _cells(output: Output, names: list[str], j: int, key: str, tolerance: exp.Expression) -> exp.Select:
    """Output ``j``'s cells (column ``names[j]``, or element ``j`` of the array), one per expected row: the
    relative error ``_e`` (1 where the cell is missing or NULL) and ``_bad`` = 0 only where the error
    is within ``tolerance``."""
    zero, one = exp.Literal.number(0), exp.Literal.number(1)
    if output.form == "wide":
        value: exp.Expression = col(names[j], "g")
    else:
        value = exp.Bracket(this=col(output.array_name, "g"), expressions=[exp.Literal.number(j)], offset=0)
    want_j = col(f"_w{j}", "w")
    error = exp.Div(
        this=exp.Abs(this=exp.Sub(this=value, expression=want_j)),
        expression=exp.paren(exp.Add(this=as_double(one.copy()), expression=exp.Abs(this=want_j.copy()))),
    )
    within = exp.LTE(this=error.copy(), expression=tolerance.copy())
    bad = exp.Case(ifs=[exp.If(this=within, true=zero.copy())], default=one.copy())
    return (
        exp.select(
            exp.alias_(exp.Coalesce(this=error, expressions=[as_double(one.copy())]), "_e", quoted=True),
            exp.alias_(bad, "_bad", quoted=True),
            exp.alias_(zero.copy(), "_r", quoted=True),
        )
        .from_(exp.Table(this=ident("_sqlrp_want"), alias=exp.TableAlias(this=ident("w"))))
        .join(
            exp.Table(this=ident("_sqlrp_got"), alias=exp.TableAlias(this=ident("g"))),
            on=col(key, "g").eq(col("_key", "w")),
            join_type="LEFT",
        )
    )


def _round(w: float) -> float:
    """An expected value as written: 0 below 1e-12 (within the tolerance; a short literal)."""
    return 0.0 if abs(w) < 1e-12 else float(w)


def check_sql(
    projection: Projection | Composed,
    source: Source,
    dialect: str | SqlrpDialect,
    output: Output | None = None,
    how: Formulation | None = None,
) -> str:
    """The self-check statement's text for ``dialect`` (``how``: default, the matrix inlined)."""
    dialect = get_dialect(dialect)
    select = check_select(projection, source, dialect, output or Output(), how or Formulation("values"))
    return dialect.render(select, pretty=True)
