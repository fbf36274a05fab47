"""Values an engine without NaN must still answer right (issue 41, MariaDB): frames of zeros, negative
zeros, NULLs, NaN and infinities in float and object columns, projected on MariaDB with
``nulls="error"`` and ``"zero"``.  MariaDB reads ``CAST('NaN' AS DOUBLE)`` as 0 and cannot store NaN or
infinity, so the input check once refused every zero, and a NaN reached the driver as a traceback.
Now: a frame with infinity is refused in one line before anything is written; a missing value (NULL, or a
pandas NaN) is refused, or read as 0 on request; everything else equals NumPy to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.methods import make_projection, reference
from testkit.fuzz_tables import fuzz_settings

RTOL = 1e-9

cell = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf"), None]),
)


def test_fuzz_mariadb_values(maria) -> None:
    @fuzz_settings(10)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        n, d = data.draw(st.integers(1, 6), label="n"), data.draw(st.integers(1, 4), label="d")
        cells = data.draw(st.lists(st.lists(cell, min_size=d, max_size=d), min_size=n, max_size=n), label="cells")
        as_object = data.draw(st.lists(st.booleans(), min_size=d, max_size=d), label="object columns")
        nulls = data.draw(st.sampled_from(["error", "zero"]), label="nulls")
        frame = pd.DataFrame({"id": np.arange(n, dtype=np.int64)})
        for j in range(d):
            column = [row[j] for row in cells]
            frame[f"f{j}"] = pd.Series(column, dtype=object if as_object[j] else np.float64)
        values = np.array([[np.nan if v is None else v for v in row] for row in cells], dtype=float)
        # what each cell is to sqlrp: a pandas frame's NaN and None are missing values (NULL: refused, or 0
        # with nulls="zero"), in a float64 column and an object one alike (sqlrp/pipeline/frame_columns.py)
        null = np.isnan(values)
        not_finite = np.isinf(values)
        projection = make_projection("gaussian", d, 2, seed=1)
        try:
            out = sqlrp.project(maria, frame, "id", projection, nulls=nulls, store=False)
        except sqlrp.InputError as exc:
            message = str(exc)
            assert "\n" not in message
            assert not_finite.any() or (null.any() and nulls == "error"), message
            assert maria.table_names() == []  # nothing was left behind
            return
        assert not not_finite.any() and not (null.any() and nulls == "error"), "ran although it had to be refused"
        X = np.where(null, 0.0, values)
        want = reference.transform(projection, X)
        got = out.drop(columns="id").to_numpy(dtype=float)
        assert list(out["id"]) == list(range(n))
        assert np.max(np.abs(got - want), initial=0.0) <= RTOL * max(float(np.abs(want).max(initial=0.0)), 1e-300)
        assert maria.table_names() == []

    run()
