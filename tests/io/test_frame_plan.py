"""A DataFrame projected directly is planned as the same rows written to a table first: the same row
estimate (DuckDB registers the frame as a view, which keeps none), hence the same strategy.  Before,
the frame's unknown row count sent ``auto`` to ``inline`` where the table took ``list_transform``: 32 s
against 5 s at 50,000 x 300, k = 256 (``PYTHONPATH=. python bench/probes/frame_plan.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sqlrp
from sqlrp.backends import Backend
from sqlrp.core.ir import Projection
from sqlrp.core.layout import Formulation
from sqlrp.methods import make_projection, reference
from sqlrp.pipeline.plan import decide, plan


def _frame(n: int, d: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.standard_normal((n, d)), columns=[f"x{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    return frame


def _strategy(db: Backend, table: str, projection: Projection) -> str:
    return decide(db, plan(db, table, "id", projection, store=False), Formulation()).how.strategy


@pytest.mark.parametrize("n", [60, 2_000])
@pytest.mark.parametrize(("method", "params"), [("gaussian", {}), ("achlioptas", {"s": 3}), ("rff", {"gamma": 0.05})])
def test_a_frame_is_planned_as_the_same_rows_in_a_table(method, params, n):
    frame = _frame(n, 40)
    projection = make_projection(method, 40, 32, seed=1, **params)
    db = sqlrp.connect("duckdb:///:memory:")
    db.write_dataframe("t", frame)
    with db.frame_table(frame) as name:
        assert db.estimate_rows(name) == db.estimate_rows("t") == n
        assert _strategy(db, name, projection) == _strategy(db, "t", projection)
    assert db.estimate_rows(name) is None  # unregistered: no estimate left behind
    got = sqlrp.project(db, frame, "id", projection)
    want = reference.transform(projection, frame.drop(columns="id").to_numpy())
    np.testing.assert_allclose(got.drop(columns="id").to_numpy(), want, rtol=1e-9, atol=1e-12)


def test_the_frame_that_sent_auto_to_inline_now_takes_the_tables_strategy():
    """The instance found: dense weights at 2,000 rows, a table ``list_transform``, the frame ``inline``."""
    frame = _frame(2_000, 40)
    projection = make_projection("gaussian", 40, 32, seed=1)
    db = sqlrp.connect("duckdb:///:memory:")
    db.write_dataframe("t", frame)
    for given in (frame, pa.Table.from_pandas(frame, preserve_index=False)):
        with db.frame_table(given) as name:
            assert _strategy(db, name, projection) == _strategy(db, "t", projection) != "inline"
