"""Random small tables through ``project``'s two routes on DuckDB (issue 44, :mod:`sqlrp.pipeline.arrow_route`):
``route="arrow"`` gives what ``route="sql"`` gives -- the same columns in the same order and types, the same
NULL / NaN / infinite cells, the values within the sums' rounding -- or the same one-line refusal, for any
table (hostile names, float32 / integer / decimal features, NULL, NaN and infinite cells, duplicate ids), method
with dense or sparse weights, layout, output form and type, NULL policy, check and destination."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from hypothesis import event, given
from hypothesis import strategies as st

import sqlrp
from sqlrp.core.errors import SqlrpError
from sqlrp.core.nodes import ident
from testkit.fuzz_tables import create, fuzz_settings, plain_frame, tables

METHODS = [
    {"method": "rff", "weights": "orthogonal", "gamma": 0.3},
    {"method": "rff", "weights": "gaussian", "kernel": "laplacian", "gamma": 0.5},
    {"method": "rff", "weights": "structured", "gamma": 0.2},
    {"method": "rff", "weights": "signs", "gamma": 1.0},
    {"method": "gaussian"},
    {"method": "achlioptas", "s": 3},
]


def _outcome(db, t, route: str, options: dict, into: str | None, folder) -> tuple[str, object]:
    """``("rows", frame)`` or ``("error", "<class>: <message>")`` of one route."""
    target = None
    if into == "file":
        target = str(folder / f"{route}.parquet")
    elif into == "table":
        target = f"out_{route}"
    try:
        result = sqlrp.project(db, t.name, t.id_name, "z", route=route, into=target, **options)
    except SqlrpError as exc:
        return "error", f"{type(exc).__name__}: {exc}".replace("out_arrow", "out_sql").replace("arrow.par", "sql.par")
    if into == "file":
        return "rows", pq.read_table(target).to_pandas()
    if into == "table":
        return "rows", db.query_df(f'SELECT * FROM "{target}"')
    return "rows", result


def _values(frame: pd.DataFrame, array: bool) -> np.ndarray:
    outputs = frame.iloc[:, 1:]
    if array:
        return (
            np.stack([np.asarray(v, dtype=np.float64) for v in outputs.iloc[:, 0]]) if len(frame) else np.zeros((0, 0))
        )
    return outputs.to_numpy(dtype=np.float64, na_value=np.nan)


@fuzz_settings(10)
@given(
    t=tables(max_rows=8, max_d=5),
    method=st.sampled_from(METHODS),
    k=st.integers(1, 5),
    layout=st.sampled_from(["wide", "array"]),
    output=st.sampled_from(["wide", "array"]),
    dtype=st.sampled_from([None, "float64", "float32"]),
    nulls=st.sampled_from(["error", "zero"]),
    check=st.booleans(),
    into=st.sampled_from([None, "table", "file"]),
)
def test_fuzz_arrow_route_gives_what_the_sql_route_gives(tmp_path_factory, t, method, k, layout, output, dtype,
                                                         nulls, check, into):  # fmt: skip
    folder = tmp_path_factory.mktemp("arrow")
    with sqlrp.connect() as db:
        create(db, "duckdb", t)
        name = t.name
        if layout == "array":  # the features as one DOUBLE[] column of a table of its own
            cols = ", ".join(f"CAST({_q(c)} AS DOUBLE)" for c in t.features)
            db.execute(f"CREATE TABLE arr AS SELECT {_q(t.id_name)}, [{cols}] AS feats FROM {_q(name)}")
            t.name = "arr"
        options = {"layout": layout, "output": output, "dtype": dtype, "nulls": nulls, "check": check}
        if layout == "array":
            options["array_column"] = "feats"
        else:
            options["columns"] = list(t.features)
        try:
            proj = sqlrp.create_projection(db, "z", d=t.d, k=k, seed=1, **method)
        except SqlrpError:
            return
        sql = _outcome(db, t, "sql", options, into, folder)
        arrow = _outcome(db, t, "arrow", options, into, folder)
        t.name = name
    event(f"sql route: {sql[0] if sql[0] == 'rows' else str(sql[1]).split(':')[0]}")
    assert sql[0] == arrow[0], (sql, arrow)
    if sql[0] == "error":
        assert sql[1] == arrow[1]
        return
    want, got = sql[1], arrow[1]
    assert list(got.columns) == list(want.columns)
    assert [str(x) for x in got.dtypes] == [str(x) for x in want.dtypes]
    keys = list(want.columns[:1])
    if output == "wide":  # duplicate ids: rows in one order
        want, got = (f.sort_values([*keys, *f.columns[1:]], kind="stable") for f in (want, got))
    else:
        want, got = (f.sort_values(keys, kind="stable") for f in (want, got))
    np.testing.assert_array_equal(got.iloc[:, 0].to_numpy(), want.iloc[:, 0].to_numpy())
    a, b = _values(got, output == "array"), _values(want, output == "array")
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a), np.isinf(b))
    # the sums' rounding: each output is within d ulps of its argument's magnitude (cos is 1-Lipschitz)
    X = np.nan_to_num(plain_frame(t).iloc[:, 1:].to_numpy(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    size = np.abs(X) @ np.abs(_dense(proj)) + np.abs(proj.linear.bias if proj.linear.bias is not None else 0.0)
    bound = abs(proj.scale) * float(proj.function_scale) * (t.d + 2) * 4e-16 * float(np.max(size, initial=0.0))
    tolerance = 1e-9 * float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)) + bound
    if dtype == "float32" or (dtype is None and "float32" in t.kinds):
        tolerance += float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)) * 2.0**-23
    finite = np.isfinite(b)
    assert float(np.max(np.abs(a[finite] - b[finite]), initial=0.0)) <= tolerance


def _q(name: str) -> str:
    return ident(name).sql("duckdb")


def _dense(proj) -> np.ndarray:
    """The linear stage as a dense ``d x p`` matrix."""
    stage = proj.linear
    W = np.zeros((stage.d, stage.p))
    np.add.at(W, (stage.feature, stage.vector), stage.weight)
    return W
