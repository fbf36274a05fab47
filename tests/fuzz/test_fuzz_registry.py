"""Fuzzer of registry tampering (issue 41, item 3: "registry tampering"): a projection of a random method
is stored, one random edit is made to its rows with SQL, as a user (or another tool) could, then it is
projected -- by name, or as the object in hand joined from the registry (``matrix="registry"``, the long
layout).

The edits: the scale set to 0, negative, NaN, infinite or another positive value; ``k`` or ``d``
raised or lowered; a matrix weight changed (to another value, 0, NaN, infinity); an entry deleted or
added (inside or outside ``[0, d)``); a combiner factor pointed at a vector that does not exist; a
combiner term deleted, moved to another output or re-weighted; a vector given a bias or a power
(0 included); the params JSON changed or made invalid; the digest emptied; the version table dropped.

The oracle: the projection is refused with one line of a sqlrp error naming it -- never numbers
other than the stored projection's as NumPy computes them (``sqlrp.methods.reference``), never a raw
traceback.  Only an edit that changes nothing it computes or describes (the version table dropped) may
project, and then to the NumPy reference.  On DuckDB and SQLite (each example a new in-memory database)
and PostgreSQL (one schema, its registry dropped between examples).
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp.methods import reference
from testkit.frames import long_frame, wide_frame
from testkit.fuzz_tables import fuzz_settings

METHODS = {
    "achlioptas": dict(s=3),
    "gaussian": {},
    "p-rp": dict(m=2),
    "pk-rp": dict(degree=2, t=2),
    "maclaurin": dict(degree=2),
    "rff": dict(gamma=0.5),  # the output function cos and its scale, in params (issue 44)
}
EDITS = (
    "scale",
    "k",
    "d",
    "weight",
    "delete entry",
    "add entry",
    "factor vector",
    "delete term",
    "term component",
    "term weight",
    "vector bias",
    "vector power",
    "params",
    "params invalid",
    "function",
    "digest",
    "version table",
)
NAME = "fz"
REGISTRY = (
    "sqlrp_schema_version",
    "sqlrp_projection",
    "sqlrp_linear_entry",
    "sqlrp_linear_vector",
    "sqlrp_combiner_term",
    "sqlrp_combiner_factor",
    "sqlrp_pairs_entry",
    "sqlrp_index",
)


@st.composite
def cases(draw: st.DrawFn) -> dict:
    """A method, its shape and seed, an edit with its values, and how the projection is asked for."""
    return {
        "method": draw(st.sampled_from(sorted(METHODS))),
        "d": draw(st.integers(2, 7)),
        "k": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**16)),
        "edit": draw(st.sampled_from(EDITS)),
        "pick": draw(st.integers(0, 10**6)),
        "value": draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf"), 2.0, 0.5, -0.25, 1e300, 3.0])),
        "shift": draw(st.sampled_from([-1, 1, 2, 5])),
        "via": draw(st.sampled_from(["name", "name-long", "object-long"])),
    }


def _edit(db, proj, case: dict) -> str | None:  # noqa: ANN001 - a sqlrp backend
    """Run the edit ``case`` names on the stored ``proj``; returns the SQL run (``None``: the engine
    refused the edit itself, or it has nothing to act on)."""
    lin, comb, pick, value, shift = proj.linear, proj.combiner, case["pick"], case["value"], case["shift"]
    where = f"WHERE projection = '{NAME}'"
    edit = case["edit"]
    if edit == "scale":
        value = value if value != proj.scale else 2 * value
        statements = [("UPDATE sqlrp_projection SET scale = ? WHERE name = ?", [value, NAME])]
    elif edit in ("k", "d"):
        new = max(0, getattr(proj, edit) + shift)
        statements = [(f"UPDATE sqlrp_projection SET {edit} = ? WHERE name = ?", [new, NAME])]
    elif edit in ("weight", "delete entry"):
        if not lin.nnz:
            return None
        v, f, w = (int(lin.vector[pick % lin.nnz]), int(lin.feature[pick % lin.nnz]), float(lin.weight[pick % lin.nnz]))
        key = f"{where} AND vector = {v} AND feature = {f}"
        if edit == "delete entry":
            statements = [(f"DELETE FROM sqlrp_linear_entry {key}", None)]
        else:
            new = value if value != w else -w
            statements = [(f"UPDATE sqlrp_linear_entry SET weight = ? {key}", [new])]
    elif edit == "add entry":
        taken = set(zip(lin.vector.tolist(), lin.feature.tolist(), strict=True))
        free = [(v, f) for v in range(lin.p) for f in range(lin.d + (2 if shift > 1 else 0)) if (v, f) not in taken]
        if not free:
            return None
        v, f = free[pick % len(free)]
        statements = [
            (
                "INSERT INTO sqlrp_linear_entry (projection, vector, feature, weight) VALUES (?, ?, ?, ?)",
                [NAME, v, f, 1.0],
            )
        ]
    elif edit == "factor vector":
        if not len(comb.factor_term):
            return None
        term = int(comb.factor_term[pick % len(comb.factor_term)])
        statements = [(f"UPDATE sqlrp_combiner_factor SET vector = ? {where} AND term = ?", [lin.p + abs(shift), term])]
    elif edit in ("delete term", "term component", "term weight"):
        if not comb.n_terms:
            return None
        term = pick % comb.n_terms
        if edit == "delete term":
            statements = [
                (f"DELETE FROM sqlrp_combiner_factor {where} AND term = ?", [term]),
                (f"DELETE FROM sqlrp_combiner_term {where} AND term = ?", [term]),
            ]
        elif edit == "term component":
            new = (int(comb.term_component[term]) + shift) % (proj.k + 1)
            if new == int(comb.term_component[term]):
                new = proj.k
            statements = [(f"UPDATE sqlrp_combiner_term SET component = ? {where} AND term = ?", [new, term])]
        else:
            old = float(comb.term_weight[term])
            statements = [
                (
                    f"UPDATE sqlrp_combiner_term SET weight = ? {where} AND term = ?",
                    [value if value != old else -old, term],
                )
            ]
    elif edit in ("vector bias", "vector power"):
        if not lin.p:
            return None
        v = pick % lin.p
        bias, power = (value, 1) if edit == "vector bias" else (0.0, max(0, 2 + shift) if shift != -1 else 0)
        if bias == 0.0 and power == 1:
            bias = 0.5
        statements = [
            (f"DELETE FROM sqlrp_linear_vector {where} AND vector = ?", [v]),
            (
                "INSERT INTO sqlrp_linear_vector (projection, vector, bias, power) VALUES (?, ?, ?, ?)",
                [NAME, v, bias, power],
            ),
        ]
    elif edit == "params":
        statements = [
            ("UPDATE sqlrp_projection SET params = ? WHERE name = ?", [json.dumps({"s": shift, "edited": True}), NAME])
        ]
    elif edit == "function":  # the output function or its inner scale changed in params (rff: cos)
        changed = {**proj.params, "function": "sign"} if shift < 0 else {**proj.params, "function_scale": value}
        statements = [("UPDATE sqlrp_projection SET params = ? WHERE name = ?", [json.dumps(changed), NAME])]
    elif edit == "params invalid":
        statements = [("UPDATE sqlrp_projection SET params = ? WHERE name = ?", ["{not json", NAME])]
    elif edit == "digest":
        statements = [("UPDATE sqlrp_projection SET digest = NULL WHERE name = ?", [NAME])]
    else:
        statements = [("DROP TABLE sqlrp_schema_version", None)]
    try:
        with db.transaction():
            for sql, params in statements:
                db.execute(sql, params)
    except Exception:  # noqa: BLE001 - the engine refused the edit (a key, a NOT NULL, a JSON type): nothing to test
        return None
    return "; ".join(sql for sql, _ in statements)


def _check(db, case: dict) -> None:  # noqa: ANN001 - a sqlrp backend
    rng = np.random.default_rng(case["seed"])
    proj = sqlrp.create_projection(
        db, NAME, case["method"], d=case["d"], k=case["k"], seed=case["seed"], **METHODS[case["method"]]
    )
    X = rng.integers(-8, 9, size=(6, case["d"])) / 4
    X[np.all(X == 0, axis=1), 0] = 1.0  # no all-zero row: the long layout would have no row for it
    db.write_dataframe("t", wide_frame(X), replace=True)
    db.write_dataframe("tl", long_frame(X), replace=True)
    edited = _edit(db, proj, case)
    if edited is None:
        return
    changes = case["edit"] != "version table"
    try:
        if case["via"] == "name":
            out = sqlrp.project(db, "t", "id", NAME)
        elif case["via"] == "name-long":
            out = sqlrp.project(db, "tl", "id", NAME, layout="long", matrix="registry")
        else:
            out = sqlrp.project(db, "tl", "id", proj, layout="long", matrix="registry")
    except sqlrp.SqlrpError as exc:
        message = str(exc)
        assert "\n" not in message, f"{edited}: a message of more than one line: {message!r}"
        assert repr(NAME) in message or "sqlrp_" in message, f"{edited}: the message names no projection: {message}"
        return
    assert not changes, f"{edited} ({case}): projected without a word"
    out = out.sort_values("id")
    got = out.drop(columns="id").to_numpy(dtype=float)
    want = reference.transform(proj, X)[out["id"].to_numpy(dtype=int)]  # long: a row no entry reads is not there
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12 * max(1.0, float(np.abs(want).max()))), edited


@fuzz_settings(20)
@given(case=cases())
def test_fuzz_registry_tampering_duckdb(case):
    with sqlrp.connect("duckdb://") as db:
        _check(db, case)


@fuzz_settings(20)
@given(case=cases())
def test_fuzz_registry_tampering_sqlite(case):
    with sqlrp.connect("sqlite://") as db:
        _check(db, case)


@fuzz_settings(10)
@given(case=cases())
def test_fuzz_registry_tampering_postgres(pg, case):
    for table in REGISTRY:
        pg.execute(f"DROP TABLE IF EXISTS {table}")
    pg.__dict__.pop("_sqlrp_registry", None)
    _check(pg, case)
