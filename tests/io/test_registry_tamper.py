"""Issue 41, items 1 and 2: one validator for a projection whatever its source, and a digest on every
stored projection.  One regression test per instance the issue lists (silently wrong #5 and the raw
errors of hand-edited registries), then the digest's contract: written with every projection, checked
on every load and before SQL joins the registry's rows, accepted on purpose, computed by the upgrade
for rows stored before it, the same on every engine."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import sqlrp
from sqlrp.cli import main
from sqlrp.methods import reference
from sqlrp.registry.store import Registry
from sqlrp.registry.transfer import export_projection, read_projection, sidecar
from sqlrp.registry.validate import StoredProjectionChanged, digest, validate
from testkit.engine_cases import build_by_hand
from testkit.frames import long_frame, wide_frame

X = np.random.default_rng(7).integers(-8, 9, size=(6, 6)) / 4


@pytest.fixture(params=["duckdb", "sqlite"])
def rdb(request):
    """A fresh in-memory DuckDB or SQLite database with a table ``t`` (wide) and ``tl`` (long) of X."""
    db = sqlrp.connect("duckdb://" if request.param == "duckdb" else "sqlite://")
    db.write_dataframe("t", wide_frame(X))
    db.write_dataframe("tl", long_frame(X))
    yield db
    db.close()


def _refused(db, name, match, cls=sqlrp.InputError, **options):  # noqa: ANN001
    with pytest.raises(cls, match=match) as info:
        sqlrp.project(db, "t", "id", name, **options)
    assert "\n" not in str(info.value) and repr(name) in str(info.value)
    return str(info.value)


# ---- silently wrong #5: an edited registry was used as it was ----


@pytest.mark.parametrize("scale", [0, -1.0, -0.5773502691896258])
def test_scale_zero_or_negative_is_refused(rdb, scale):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("UPDATE sqlrp_projection SET scale = ? WHERE name = 'rp'", [scale])
    _refused(rdb, "rp", r"stored projection 'rp': not a valid projection \(scale must be a finite positive")


def test_k_raised_is_refused_not_an_all_zero_column(rdb):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("UPDATE sqlrp_projection SET k = 4 WHERE name = 'rp'")
    _refused(rdb, "rp", r"output 3 has no combiner term, so it would be a column of zeros")


def test_a_factor_reading_a_missing_vector_is_refused(rdb):
    """p-rp: numbers on DuckDB where NumPy raised."""
    sqlrp.create_projection(rdb, "pr", "p-rp", d=6, k=3, seed=1)
    rdb.execute("UPDATE sqlrp_combiner_factor SET vector = 999 WHERE projection = 'pr' AND term = 0")
    _refused(rdb, "pr", r"a combiner factor's vector out of range \[0, p = \d+\): 999")


def test_a_sidecar_leaving_outputs_without_terms_is_refused(tmp_path):
    p = sqlrp.create_projection(None, "pk", "pk-rp", d=6, k=3, degree=2, t=2, seed=1)
    path = tmp_path / "pk.csv"
    export_projection(None, p, path)
    meta = json.loads(sidecar(path).read_text())
    comb = meta["combiner"]
    keep = [i for i, c in enumerate(comb["term_component"]) if c != 2]
    factors = [j for j, t in enumerate(comb["factor_term"]) if t in keep]
    renumber = {t: i for i, t in enumerate(keep)}
    meta["combiner"] = {
        "term_component": [comb["term_component"][i] for i in keep],
        "term_weight": [comb["term_weight"][i] for i in keep],
        "factor_term": [renumber[comb["factor_term"][j]] for j in factors],
        "factor_vector": [comb["factor_vector"][j] for j in factors],
    }
    del meta["digest"]  # the validator refuses it on its own
    sidecar(path).write_text(json.dumps(meta))
    with pytest.raises(sqlrp.InputError, match=r"output 2 has no combiner term.*column of zeros"):
        read_projection(path)


@pytest.mark.parametrize("edit", ["weight", "delete"])
def test_a_changed_weight_or_a_deleted_entry_is_refused(rdb, edit):
    p = sqlrp.create_projection(rdb, "rp", "gaussian", d=6, k=3, seed=1)
    v, f = int(p.linear.vector[0]), int(p.linear.feature[0])
    where = f"WHERE projection = 'rp' AND vector = {v} AND feature = {f}"
    rdb.execute(
        f"UPDATE sqlrp_linear_entry SET weight = weight * 2 {where}"
        if edit == "weight"
        else f"DELETE FROM sqlrp_linear_entry {where}"
    )
    message = _refused(rdb, "rp", r"was changed outside sqlrp", cls=StoredProjectionChanged)
    assert "replace=True" in message and "sqlrp projections accept 'rp'" in message
    with pytest.raises(StoredProjectionChanged):
        sqlrp.load_projection(rdb, "rp")


# ---- raw errors of hand-edited registries ----


def test_a_term_component_out_of_range_is_one_line_not_a_value_error(rdb):
    sqlrp.create_projection(rdb, "pr", "p-rp", d=6, k=3, seed=1)
    rdb.execute("UPDATE sqlrp_combiner_term SET component = 99 WHERE projection = 'pr' AND term = 0")
    _refused(rdb, "pr", r"a combiner term's component out of range \[0, k = 3\): 99")


def test_a_nan_weight_is_refused_not_pasted_into_sql(rdb):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("UPDATE sqlrp_linear_entry SET weight = 'nan' WHERE projection = 'rp'")
    _refused(rdb, "rp", r"the matrix's weights: a value that is not a finite number")
    with pytest.raises(sqlrp.InputError, match="not a finite number"):
        sqlrp.compile_projection(rdb, sqlrp.plan(rdb, "t", "id", "rp"))


def test_a_dropped_version_table_is_recorded_again(rdb):
    """ "sqlrp_projection already exists" was the answer: the versions whose tables are there are recorded
    again, and the stored projections keep working."""
    p = sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("DROP TABLE sqlrp_schema_version")
    out = sqlrp.project(rdb, "t", "id", "rp")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(p, X), rtol=1e-12)
    assert Registry(rdb, migrate=False).version() == 5
    sqlrp.create_projection(rdb, "rp2", "gaussian", d=6, k=2)
    rdb.execute("DELETE FROM sqlrp_schema_version")
    assert sqlrp.migrate(rdb) == [] and sorted(sqlrp.list_projections(rdb)["name"]) == ["rp", "rp2"]


def test_a_registry_there_only_in_part_without_its_version_table_is_refused(rdb):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("DROP TABLE sqlrp_schema_version")
    rdb.execute("DROP TABLE sqlrp_combiner_term")
    with pytest.raises(sqlrp.InputError, match=r"version table sqlrp_schema_version is gone .* only in part"):
        sqlrp.migrate(rdb)


def test_invalid_params_json_is_one_line(tmp_path):
    db = sqlrp.connect("sqlite://")
    db.write_dataframe("t", wide_frame(X))
    sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    db.execute("UPDATE sqlrp_projection SET params = '{not json' WHERE name = 'rp'")
    _refused(db, "rp", r"its params are not valid JSON")


def test_the_cli_says_it_in_one_line_and_exits_3(tmp_path, capsys):
    url = f"duckdb:///{tmp_path / 'w.db'}"
    with sqlrp.connect(url) as db:
        db.write_dataframe("t", wide_frame(X))
        sqlrp.create_projection(db, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
        db.execute("UPDATE sqlrp_linear_entry SET weight = -weight WHERE projection = 'rp' AND vector = 0")
    capsys.readouterr()
    args = ["project", "--db", url, "--table", "t", "--id-column", "id", "--projection", "rp", "--no-progress"]
    assert main(args) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was changed outside sqlrp" in err and "--replace" in err, err
    # accepted on purpose: the command line's mirror of accept_projection
    assert main(["projections", "accept", "rp", "--db", url]) == 0
    assert main(args) == 0
    assert main(["projections", "accept", "--db", url]) == 2


# ---- the digest ----


def test_accept_takes_the_rows_as_they_are_and_projects_them(rdb):
    p = sqlrp.create_projection(rdb, "rp", "gaussian", d=6, k=3, seed=1)
    rdb.execute("UPDATE sqlrp_linear_entry SET weight = 1.5 WHERE projection = 'rp' AND vector = 1")
    with pytest.raises(StoredProjectionChanged):
        sqlrp.project(rdb, "t", "id", "rp")
    accepted = sqlrp.accept_projection(rdb, "rp")
    assert np.all(accepted.linear.dense()[:, 1] == 1.5) and np.array_equal(
        accepted.linear.dense()[:, [0, 2]], p.linear.dense()[:, [0, 2]]
    )
    out = sqlrp.project(rdb, "t", "id", "rp")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(accepted, X), rtol=1e-12)
    # what no projection can be is never accepted
    rdb.execute("UPDATE sqlrp_projection SET scale = 0 WHERE name = 'rp'")
    with pytest.raises(sqlrp.InputError, match="scale must be a finite positive"):
        sqlrp.accept_projection(rdb, "rp")


def test_a_missing_digest_is_refused_until_accepted(rdb):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("UPDATE sqlrp_projection SET digest = NULL WHERE name = 'rp'")
    _refused(rdb, "rp", r"has no digest .* accept it", cls=StoredProjectionChanged)
    sqlrp.accept_projection(rdb, "rp")
    sqlrp.project(rdb, "t", "id", "rp")


def test_params_edited_are_refused(rdb):
    sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    rdb.execute("""UPDATE sqlrp_projection SET params = '{"s": 9.0, "s_requested": 9.0}' WHERE name = 'rp'""")
    _refused(rdb, "rp", "was changed outside sqlrp", cls=StoredProjectionChanged)


def test_the_registry_matrix_is_checked_before_the_sql_that_joins_it(rdb):
    """The long layout with ``matrix="registry"`` joins ``sqlrp_linear_entry`` when the SQL runs: a
    projection in hand whose stored rows were edited since is refused (by name, and as the object);
    ``auto`` inlines the object's own matrix instead, to NumPy's numbers."""
    p = sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    want = reference.transform(p, X)
    rdb.execute("UPDATE sqlrp_linear_entry SET weight = -weight WHERE projection = 'rp' AND vector = 2")
    for given in ("rp", p):
        with pytest.raises(StoredProjectionChanged, match="'rp'"):
            sqlrp.project(rdb, "tl", "id", given, layout="long", matrix="registry")
        with pytest.raises(StoredProjectionChanged):
            sqlrp.compile_projection(rdb, sqlrp.plan(rdb, "tl", "id", p, layout="long"), matrix="registry")
    out = sqlrp.project(rdb, "tl", "id", p, layout="long").sort_values("id")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), want[out["id"].to_numpy()], rtol=1e-12)
    # another projection stored under the name of the one in hand: not joined either
    other = sqlrp.create_projection(None, "rp", "achlioptas", d=6, k=3, s=3, seed=2)
    sqlrp.accept_projection(rdb, "rp")
    with pytest.raises(StoredProjectionChanged, match="not the projection given under that name"):
        sqlrp.project(rdb, "tl", "id", other, layout="long", matrix="registry")


def test_a_matrix_table_in_the_database_is_checked_against_the_projection(rdb):
    """``--matrix TABLE`` (the warehouse recipe) run where the table is: its rows must be the projection's
    matrix, else the table's weights would be used with the projection's scale and combiner."""
    p = sqlrp.create_projection(rdb, "rp", "achlioptas", d=6, k=3, s=3, seed=1)
    lin = p.linear
    frame = pd.DataFrame({"vector": lin.vector, "feature": lin.feature, "weight": lin.weight})
    rdb.write_dataframe("m", frame)
    out = sqlrp.project(rdb, "tl", "id", "rp", layout="long", matrix="m").sort_values("id")
    np.testing.assert_allclose(
        out.drop(columns="id").to_numpy(), reference.transform(p, X)[out["id"].to_numpy()], rtol=1e-12
    )
    frame.loc[0, "weight"] = 3.0
    rdb.write_dataframe("m", frame, replace=True)
    with pytest.raises(sqlrp.InputError, match=r"matrix table 'm' does not hold the matrix of projection 'rp'"):
        sqlrp.project(rdb, "tl", "id", "rp", layout="long", matrix="m")
    rdb.write_dataframe("m2", frame.rename(columns={"weight": "w"}))
    with pytest.raises(sqlrp.InputError, match=r"matrix table 'm2' (lacks the column weight|has no column 'weight')"):
        sqlrp.project(rdb, "tl", "id", "rp", layout="long", matrix="m2")


def test_an_edited_file_is_refused_by_its_digest(tmp_path):
    p = sqlrp.create_projection(None, "rp", "gaussian", d=6, k=3, seed=1)
    path = tmp_path / "rp.csv"
    export_projection(None, p, path)
    matrix = pd.read_csv(path)
    matrix.loc[0, "weight"] = 0.125
    matrix.to_csv(path, index=False)
    with pytest.raises(sqlrp.InputError, match=r"changed since sqlrp wrote it.*delete the \"digest\""):
        read_projection(path)
    meta = json.loads(sidecar(path).read_text())
    del meta["digest"]
    sidecar(path).write_text(json.dumps(meta))
    assert read_projection(path).linear.weight[0] == 0.125


def test_objects_are_validated_before_sql_and_before_storing(rdb):
    from sqlrp.core.ir import Combiner, LinearStage, Projection

    linear = LinearStage(d=6, p=2, vector=[0, 1], feature=[0, 1], weight=[1.0, np.nan])
    bad = Projection("custom", linear, Combiner.identity(2), scale=1.0, name="bad")
    with pytest.raises(sqlrp.InputError, match=r"projection 'bad': not a valid projection \(the matrix's weights"):
        sqlrp.project(rdb, "t", "id", bad)
    with pytest.raises(sqlrp.InputError, match=r"projection 'b2': not a valid projection"):
        Registry.of(rdb).save(bad, "b2")
    assert "b2" not in set(sqlrp.list_projections(rdb)["name"])
    zero = Projection("custom", LinearStage(d=6, p=2, vector=[0], feature=[0], weight=[1.0]), Combiner.identity(2), 0.0)
    with pytest.raises(sqlrp.InputError, match="scale must be a finite positive number, got 0.0"):
        validate(zero)


@pytest.mark.parametrize("method", ["achlioptas", "gaussian", "p-rp", "pk-rp", "cbp", "maclaurin", "craftmap"])
def test_every_method_round_trips_with_its_digest(rdb, method):
    p = sqlrp.create_projection(rdb, "m", method, d=6, k=4, seed=3)
    back = sqlrp.load_projection(rdb, "m")
    np.testing.assert_allclose(sqlrp.transform(back, X), sqlrp.transform(p, X), rtol=1e-12)
    out = sqlrp.project(rdb, "t", "id", "m")
    np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(p, X), rtol=1e-9, atol=1e-12)


def test_a_maclaurin_map_with_outputs_of_weight_zero_is_stored(rdb):
    """``sampling="paper"`` gives an output of degree N > r no term on purpose (001 Algorithm 1): allowed."""
    for seed in range(40):
        p = sqlrp.create_projection(None, "mc", "maclaurin", d=6, k=6, degree=2, sampling="paper", seed=seed)
        if len(set(p.combiner.term_component.tolist())) < p.k:
            break
    else:
        pytest.skip("no draw left an output without a term")
    Registry.of(rdb).save(p, "mc")
    np.testing.assert_allclose(sqlrp.transform(sqlrp.load_projection(rdb, "mc"), X), sqlrp.transform(p, X))


def test_composed_stages_are_checked_and_accepted_with_it(rdb):
    p = sqlrp.create_projection(rdb, "cm", "craftmap", d=6, k=3, seed=1)
    rdb.execute("UPDATE sqlrp_linear_entry SET weight = -weight WHERE projection = 'cm__stage2' AND vector = 0")
    _refused(rdb, "cm", r"composition 'cm': stored projection 'cm__stage2' was changed", cls=StoredProjectionChanged)
    rdb.execute(
        """UPDATE sqlrp_projection SET params = '{"_stages": ["cm__stage2", "cm__stage1"]}' WHERE name = 'cm'"""
    )
    with pytest.raises(sqlrp.InputError):
        sqlrp.load_projection(rdb, "cm")
    assert p.k == 3


def test_the_upgrade_computes_the_digest_of_projections_stored_before_it(duck):
    """A registry of version 4 (made by the hand-written SQL of earlier releases) holding projections:
    the upgrade to version 5 computes each one's digest from its rows, the same a fresh store writes,
    and they load and project as before."""
    fresh = sqlrp.connect("duckdb://")
    projections = {
        "rp": sqlrp.create_projection(fresh, "rp", "achlioptas", d=6, k=3, s=3, seed=1),
        "pk": sqlrp.create_projection(fresh, "pk", "pk-rp", d=6, k=3, degree=2, t=2, seed=2),
        "cm": sqlrp.create_projection(fresh, "cm", "craftmap", d=6, k=3, seed=3),
    }
    build_by_hand(duck, 4)
    for table in (
        "sqlrp_projection",
        "sqlrp_linear_entry",
        "sqlrp_linear_vector",
        "sqlrp_combiner_term",
        "sqlrp_combiner_factor",
    ):
        frame = fresh.query_df(f"SELECT * FROM {table}").drop(columns=["digest"], errors="ignore")
        if len(frame):
            duck.insert_frame(table, frame)
    digests = dict(fresh.fetchall("SELECT name, digest FROM sqlrp_projection"))
    assert Registry(duck, migrate=False).migrate() == ["0005_projection_digest.sql"]
    assert dict(duck.fetchall("SELECT name, digest FROM sqlrp_projection")) == digests
    duck.write_dataframe("t", wide_frame(X))
    for name, p in projections.items():
        out = sqlrp.project(duck, "t", "id", name)
        np.testing.assert_allclose(out.drop(columns="id").to_numpy(), reference.transform(p, X), rtol=1e-9)


def test_the_digest_is_the_same_on_postgres_with_jsonb_params(pg):
    """PostgreSQL's JSONB reorders keys and writes 1e300 as 301 digits: the digest reads every number as
    its double, so what PostgreSQL hands back hashes as what was stored."""
    from sqlrp.core.ir import Combiner, LinearStage, Projection

    linear = LinearStage(d=3, p=2, vector=[0, 1, 1], feature=[2, 0, 1], weight=[0.1, -1 / 3, 5e-324])
    params = {"zeta": 1e300, "alpha": 1.5e-7, "n": 3, "flag": True, "nested": {"b": [1.0, 2], "a": None}}
    p = Projection("custom", linear, Combiner.identity(2), scale=1 / 7, params=params, seed=2**62)
    Registry.of(pg).save(p, "j")
    back = sqlrp.load_projection(pg, "j")
    assert digest(back) == digest(p) and float(back.params["zeta"]) == 1e300
    np.testing.assert_array_equal(back.linear.weight, p.linear.weight)


@pytest.mark.parametrize("engine", ["duckdb://", "sqlite://", "datafusion://", "hyper://", "chdb"])
def test_every_engine_stores_the_same_digest(engine):
    """The digest is computed in Python from the rows as read back: the same projection has the same
    digest on every engine (doubles round-trip exactly), and an accepted edit is stored on each."""
    if engine == "chdb":
        pytest.importorskip("chdb")
        from sqlrp.backends.clickhouse import ChdbBackend

        db = ChdbBackend(":memory:")
        db.execute("CREATE DATABASE IF NOT EXISTS tamper_digest")
        db.execute("USE tamper_digest")
        db.execute("DROP TABLE IF EXISTS sqlrp_schema_version")
    else:
        pytest.importorskip({"datafusion://": "datafusion", "hyper://": "tableauhyperapi"}.get(engine, "duckdb"))
        db = sqlrp.connect(engine)
    try:
        p = sqlrp.create_projection(db, "pk", "pk-rp", d=6, k=3, degree=2, t=2, seed=5)
        assert db.fetchall("SELECT digest FROM sqlrp_projection WHERE name = 'pk'") == [(digest(p),)]
        db.execute("DELETE FROM sqlrp_linear_entry WHERE projection = 'pk' AND vector = 0")
        with pytest.raises(StoredProjectionChanged, match="'pk' was changed outside sqlrp"):
            sqlrp.load_projection(db, "pk")
        accepted = sqlrp.accept_projection(db, "pk")
        assert sqlrp.load_projection(db, "pk").linear.nnz == accepted.linear.nnz < p.linear.nnz
    finally:
        if engine == "chdb":
            db.execute("DROP DATABASE IF EXISTS tamper_digest")
        db.close()


def test_a_matrix_table_with_a_new_matrix_drawn_is_refused_on_the_command_line(tmp_path, capsys):
    """Silently wrong #1 where the table is in --db: ``project --layout long --matrix TABLE --d --k``
    without --projection drew a new matrix and used the table's weights with its scale; refused."""
    url = f"duckdb:///{tmp_path / 'w.db'}"
    p = sqlrp.create_projection(None, "x", "achlioptas", d=6, k=3, s=3, seed=9)
    with sqlrp.connect(url) as db:
        db.write_dataframe("tl", long_frame(X))
        db.write_dataframe(
            "m", pd.DataFrame({"vector": p.linear.vector, "feature": p.linear.feature, "weight": p.linear.weight})
        )
    export_projection(None, p, tmp_path / "x.csv")
    capsys.readouterr()
    base = ["project", "--db", url, "--table", "tl", "--id-column", "id", "--layout", "long", "--matrix", "m"]
    assert main([*base, "--d", "6", "--k", "3", "--no-progress"]) == 2  # refused where --matrix enters
    err = capsys.readouterr().err
    assert "--matrix=m" in err and "--projection" in err, err
    out = tmp_path / "o.csv"
    assert main([*base, "--projection", str(tmp_path / "x.csv"), "--into", str(out), "--no-progress"]) == 0
    got = pd.read_csv(out).sort_values("id")
    np.testing.assert_allclose(
        got.drop(columns="id").to_numpy(), reference.transform(p, X)[got["id"].to_numpy()], rtol=1e-12
    )
