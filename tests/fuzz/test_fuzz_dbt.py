"""The dbt models :func:`sqlrp.dbt_model` writes, rendered as dbt renders them (Jinja, with ``ref``,
``source``, ``this``, ``is_incremental`` and ``config`` as dbt defines them) and run on DuckDB, for
generated inputs: every layout, wide and array outputs, linear and kernel methods, incremental or not,
with and without ``--db``, and column names holding Jinja's and SQL's delimiters (``{{``, ``{%``, ``{#``,
``}}``, quotes).

The property: the rendered model returns NumPy's projection of the rows it should (all of them, or
under ``is_incremental()`` those not in ``{{ this }}`` yet) to 1e-9, its ``unique_key`` is the output's
key column, the input check returns exactly the rows holding a NaN, and the self-check returns no row.
dbt itself runs these files in tests/io/test_dbt.py; here Jinja2 (which dbt renders with) stands in
for it, so that hundreds of names can be tried in seconds.
"""

from __future__ import annotations

import json

import duckdb
import jinja2
import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.dbt import dbt_model
from testkit.fuzz_tables import fuzz_settings

ALPHABET = list("abQZ09_ {}%#'\"-.") + ["é", "表"]
name = st.text(alphabet=st.sampled_from(ALPHABET), min_size=1, max_size=10).filter(lambda s: s.strip() == s)


def project(root) -> None:  # noqa: ANN001
    root.mkdir(exist_ok=True)
    (root / "dbt_project.yml").write_text("name: p\nprofile: p\n")
    (root / "profiles.yml").write_text("p:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n")


def quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def render(path, incremental: bool, seen: dict) -> str:  # noqa: ANN001
    """The file as dbt renders it: ``source``/``ref`` to the tables ``src``/``m``, ``this`` to ``out``."""

    def config(**kwargs: object) -> str:
        seen.update(kwargs)
        return ""

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    template = env.from_string(path.read_text())
    return template.render(
        config=config,
        source=lambda s, t: '"src"',
        ref=lambda m: '"m"',
        this='"out"',
        is_incremental=lambda: incremental,
    )


@st.composite
def cases(draw: st.DrawFn) -> dict:
    layout = draw(st.sampled_from(["wide", "long", "array"]))
    d = draw(st.integers(1, 5))
    id_column = draw(name)
    others = name.filter(lambda c: c.lower() != id_column.lower())
    columns = draw(st.lists(others, min_size=max(d, 2), max_size=max(d, 2), unique_by=str.lower))
    method = draw(st.sampled_from(["achlioptas", "gaussian", "pk-rp"]))
    return {
        "layout": layout,
        "d": d,
        "id": id_column,
        "columns": columns,
        "method": method,
        "k": draw(st.integers(1, 4)),
        "seed": draw(st.integers(0, 50)),
        "with_db": draw(st.booleans()),
        "incremental": draw(st.booleans()),
        "nan_row": draw(st.sampled_from([None, 0, 3])),
        "strategy": draw(st.sampled_from(["auto", "auto", "join", "inline"])) if layout != "long" else "auto",
        "output": draw(st.sampled_from(["wide", "array"])),
        "extra_d": draw(st.sampled_from([None, None, d, d + 1])),  # --d beside --columns: only d itself is taken
        "prefix": draw(st.sampled_from(["p", "_x", "p_"]) | name),
    }  # fmt: skip


def source_table(case: dict, X: np.ndarray, ids: np.ndarray) -> tuple[str, list]:
    """The CREATE statement of ``src`` in the case's layout (feature and value column names drawn)."""
    idq = quoted(case["id"])
    if case["layout"] == "wide":
        cols = ", ".join(f"{quoted(c)} DOUBLE" for c in case["columns"][: case["d"]])
        rows = [[int(i), *map(float, x)] for i, x in zip(ids, X, strict=True)]
        return f"CREATE TABLE src ({idq} BIGINT, {cols})", rows
    if case["layout"] == "array":
        return f"CREATE TABLE src ({idq} BIGINT, {quoted(case['columns'][0])} DOUBLE[])", [
            [int(i), [float(v) for v in x]] for i, x in zip(ids, X, strict=True)
        ]
    feature, value = quoted(case["columns"][0]), quoted(case["columns"][1])
    rows = [[int(i), j, float(v)] for i, x in zip(ids, X, strict=True) for j, v in enumerate(x) if v != 0]
    return f"CREATE TABLE src ({idq} BIGINT, {feature} BIGINT, {value} DOUBLE)", rows


@fuzz_settings(25)
@given(case=cases())
def test_dbt_models_render_and_match_numpy(case, tmp_path_factory):
    root = tmp_path_factory.mktemp("dbt")
    project(root)
    rng = np.random.default_rng(case["seed"])
    n = 8
    X = rng.normal(size=(n, case["d"])) * 10.0 ** rng.integers(-3, 4, size=case["d"])
    ids = np.arange(n) * 7 - 20
    if case["nan_row"] is not None:
        X[case["nan_row"], 0] = np.nan
    create, rows = source_table(case, X, ids)
    con = duckdb.connect()
    con.execute(create)
    con.executemany(f"INSERT INTO src VALUES ({', '.join('?' * len(rows[0]))})", rows)
    layout = case["layout"]
    params = {"degree": 2, "t": 2} if case["method"] == "pk-rp" else {"s": 1} if case["method"] == "achlioptas" else {}
    projection = sqlrp.make_projection(case["method"], case["d"], case["k"], seed=case["seed"], **params)
    options: dict = {"layout": layout, "incremental": case["incremental"], "strategy": case["strategy"]}
    options |= {"output": case["output"], "prefix": case["prefix"]}
    if layout == "wide":
        options["columns"] = case["columns"][: case["d"]]
        if case["extra_d"] is not None and not case["with_db"]:
            options["d"] = case["extra_d"]
    elif layout == "array":
        options |= {"array_column": case["columns"][0], "d": case["d"]}
    else:
        options |= {"feature_column": case["columns"][0], "value_column": case["columns"][1], "d": case["d"]}
    db = sqlrp.connect(con) if case["with_db"] else None
    given_projection = projection if case["with_db"] else None  # else drawn by dbt_model from the same options
    if not case["with_db"]:
        options |= {"method": case["method"], "k": case["k"], "seed": case["seed"], **params}
    try:
        dbt_model(root, "m_rp", case["id"], given_projection, db=db, source="raw.src", **options)
    except sqlrp.SqlrpError as exc:  # refused in one line, nothing written
        assert "\n" not in str(exc)
        assert not (root / "models" / "m_rp.sql").exists()
        return
    assert options.get("d") in (None, case["d"]), "a --d other than the columns' number was taken"
    if (root / "seeds" / "m_rp_matrix.csv").exists():
        path = str(root / "seeds" / "m_rp_matrix.csv")
        types = {"vector": "BIGINT", "feature": "BIGINT", "weight": "DOUBLE"}
        con.execute(f"CREATE TABLE m AS SELECT * FROM read_csv('{path}', header=true, columns={json.dumps(types)})")

    bad = [int(ids[case["nan_row"]])] if case["nan_row"] is not None else []
    checked = con.execute(render(root / "tests" / "m_rp_input_check.sql", False, {})).fetchall()
    assert sorted(r[0] for r in checked) == bad
    assert con.execute(render(root / "tests" / "m_rp_self_check.sql", False, {})).fetchall() == []

    clean = [r for r in range(n) if r != case["nan_row"]]
    if bad and layout != "long":  # a wide or array model refuses the NaN itself (its in-query check)
        try:
            con.execute(render(root / "models" / "m_rp.sql", False, {})).fetchall()
            raise AssertionError("a NaN feature was projected")
        except duckdb.Error as exc:
            assert "sqlrp input check" in str(exc)
    if bad:  # the long layout leaves it to the input check (dbt build runs that before the model)
        con.execute(f"DELETE FROM src WHERE {quoted(case['id'])} = {bad[0]}")
    seen = {}
    model = render(root / "models" / "m_rp.sql", False, seen)
    con.execute(f"CREATE TABLE out AS {model}")
    got = con.execute(f"SELECT * FROM out ORDER BY {quoted(case['id'])}").df()
    expect(got, projection, X[clean], ids[clean], case["output"] == "array")
    if case["incremental"]:
        assert seen["materialized"] == "incremental"
        key = seen["unique_key"]
        assert key == case["id"] or key == quoted(case["id"])
        con.execute(f"DELETE FROM out WHERE {quoted(case['id'])} > 0")
        added = con.execute(render(root / "models" / "m_rp.sql", True, {})).df()
        keep = [r for r in clean if ids[r] > 0]
        expect(added, projection, X[keep], ids[keep], case["output"] == "array")
    else:
        assert seen == {"materialized": "table"}


def expect(got: pd.DataFrame, projection, X: np.ndarray, ids: np.ndarray, array: bool) -> None:  # noqa: ANN001
    got = got.sort_values(got.columns[0])
    assert got.iloc[:, 0].tolist() == sorted(ids.tolist())
    want = sqlrp.transform(projection, X)[np.argsort(ids)]
    Y = np.array(got.iloc[:, 1].tolist(), dtype=float) if array else got.iloc[:, 1:].to_numpy(dtype=float)
    np.testing.assert_allclose(Y, want, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(want).max(initial=0))))
