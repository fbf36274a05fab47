"""Methods, layouts and ids on MariaDB (issue 45): a drawn method and its parameters, the wide or long
layout, a stored projection or an object with ``store=False``, rows or ``--into``, and text ids drawn from
look-alikes the server's default collation takes for one value (case, accents, trailing spaces) --
every output equals NumPy (1e-9 relative), one row per id exactly as NumPy keys them, or the call is
refused in one line naming the engine.  The class found: keys compared under the collation (a GROUP BY,
a PARTITION BY, a join, an order) merged or reordered look-alike ids.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.methods import reference
from testkit.fuzz_tables import fuzz_settings

RTOL = 1e-9

#: a method and parameters it takes (kernel methods' degrees kept small: the budget is CI's)
METHODS = [
    ("achlioptas", {"s": 1}),
    ("achlioptas", {"s": 3}),
    ("gaussian", {}),
    ("p-rp", {"m": 2, "s": 3}),
    ("pk-rp", {"degree": 2, "t": 2}),
    ("cbp", {"t": 2}),
    ("maclaurin", {"degree": 2, "c": 1.0}),
    ("craftmap", {"degree": 2}),
]

#: characters whose strings the default collation (utf8mb4_general_ci) confuses: case, accents, padding
LOOK_ALIKES = "aAáÁ eé"


def test_fuzz_mariadb_methods(maria) -> None:
    @fuzz_settings(8)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        method, params = data.draw(st.sampled_from(METHODS), label="method")
        layout = data.draw(st.sampled_from(["wide", "long"]), label="layout")
        stored, into = data.draw(st.booleans(), label="stored"), data.draw(st.booleans(), label="into")
        text = data.draw(st.text(LOOK_ALIKES, max_size=3), label="text ids")
        n, d, k = data.draw(st.integers(1, 7), label="n"), data.draw(st.integers(1, 5), label="d"), 3
        if text:
            ids = data.draw(st.lists(st.text(LOOK_ALIKES, max_size=3), min_size=n, max_size=n, unique=True))
        else:
            ids = list(range(n))
        X = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, -2.5, 3.25]), min_size=n * d, max_size=n * d)))
        X = X.reshape(n, d)
        for name in maria.table_names():
            maria.execute(f"DROP TABLE `{name}`")
        if layout == "wide":
            frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(d)])
            frame.insert(0, "id", ids)
        else:
            r, c = np.nonzero(X)
            frame = pd.DataFrame({"id": [ids[i] for i in r], "feature": c.astype(np.int64), "value": X[r, c]})
        if layout == "long" and frame.empty:
            return
        maria.write_dataframe("t", frame)
        p = sqlrp.make_projection(method, d=d, k=k, seed=5, **params)
        if stored:
            sqlrp.create_projection(maria, "rp", method, d=d, k=k, seed=5, **params)
        given_p = "rp" if stored else p
        options = dict(layout=layout, d=d, store=stored, into="out" if into else None)
        out = sqlrp.project(maria, "t", "id", given_p, **options)
        if into:
            out = maria.query_df("SELECT * FROM `out`")
        present = [i for i in range(n) if layout == "wide" or X[i].any()]
        assert sorted(out["id"].tolist(), key=repr) == sorted([ids[i] for i in present], key=repr)
        got = out.set_index("id").loc[[ids[i] for i in present]].to_numpy(dtype=float)
        want = reference.transform(p, X)[present]
        scale = max(float(np.abs(want).max(initial=0.0)), 1e-300)
        assert float(np.abs(got - want).max(initial=0.0)) <= RTOL * scale

    run()
