"""Differential fuzzer of projections (issue 31): a generated table (:mod:`testkit.fuzz_tables`), a
generated operation (:mod:`testkit.fuzz_ops`: method, parameters valid or not, entry point) and an
engine; the oracle (:mod:`testkit.fuzz_oracle`): the NumPy reference on the stored matrix to ~1e-9, or
one of sqlrp's own errors in one line (the CLI: exit status != 0, one ``error:`` line, no
traceback).  Afterwards the source table or file is unchanged and no stray table or file is left.

Entry points: the Python API (returned rows, chunks, ``into=`` a table), the CLI in-process
(``sqlrp.cli.main``), files in and out (Parquet or CSV to Parquet or CSV, by the API or the CLI), the
scikit-learn transformer, ``transform_frame``, and ``compile`` with the printed text run on the engine.
Budget: :func:`testkit.fuzz_tables.fuzz_settings` (CI: fixed examples; ``SQLRP_FUZZ_EXAMPLES=N`` for more).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sqlrp
from sqlrp import cli
from sqlrp.core.errors import EXIT_ENGINE, exit_status
from sqlrp.dialects import get_dialect
from sqlrp.registry.store import REGISTRY_TABLES
from testkit.fuzz_ops import Op, operations
from testkit.fuzz_oracle import KNOWN_SEEN, Expected, Refused, cli_error, compare, expected, one_line_error, triaged
from testkit.fuzz_tables import Table, create, fuzz_settings, snapshot, stored, tables

TALLY: dict[str, dict[str, int]] = {}
VALID_REFUSED: dict[str, int] = {}


def tally(engine: str, outcome: str) -> None:
    TALLY.setdefault(engine, {})
    TALLY[engine][outcome] = TALLY[engine].get(outcome, 0) + 1


def frame_values(out: pd.DataFrame, op: Op) -> tuple[list, np.ndarray]:
    ids = list(out.iloc[:, 0])
    if op.output == "array":
        cells = [json.loads(v) if isinstance(v, str) else v for v in out.iloc[:, 1]]
        Y = np.array([np.asarray(v, dtype=float) for v in cells]) if len(cells) else np.zeros((0, 0))
    else:
        Y = out.iloc[:, 1:].to_numpy(dtype=float)
    return ids, Y


def check_names(out: pd.DataFrame, t: Table, op: Op, k: int) -> None:
    want = [t.id_name, op.prefix] if op.output == "array" else [t.id_name, *(f"{op.prefix}{j}" for j in range(k))]
    assert [str(c) for c in out.columns] == want, (list(out.columns), want)


def user_tables(db) -> set[str]:
    return {n for n in db.table_names() if n.casefold() not in REGISTRY_TABLES}


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


def source_args(t: Table, op: Op) -> list[str]:
    args = ["--table", t.name, "--id-column", t.id_name]
    if op.explicit_columns:
        for c in t.features:
            args += ["--column", c]
    return args


def want_for(db, engine: str, t: Table, op: Op, name: str, invalid: str | None) -> Expected:
    if invalid is not None:
        return Expected([], np.zeros(0), np.zeros(0), invalid)
    projection = sqlrp.load_projection(db, name)
    return expected(projection, stored(db, engine, t), op.nulls, op.standardize, op.dtype)


@triaged
def run_table_op(db, engine: str, url: str | None, t: Table, op: Op) -> str:
    """One operation on the table ``t`` in ``db``; returns the outcome for the tally."""
    dialect = get_dialect(engine)
    name = f"fz_{uuid.uuid4().hex[:8]}"
    into = t.name if op.into == "SOURCE" else op.into
    invalid = op.invalid
    if op.entry == "api_into" and dialect.same_identifier(into, t.name):
        invalid = (invalid + "; " if invalid else "") + "into the source table"
    before, tables_before = snapshot(db, engine, t), user_tables(db)
    columns = list(t.features) if op.explicit_columns else None
    what = f"{engine} {op.entry} {op}"
    try:
        if op.entry in ("api", "api_into", "api_frame"):
            kwargs = op.api_options()
            if op.entry == "api_into":
                result = sqlrp.project(
                    db, t.name, t.id_name, name, columns=columns, into=into, replace=op.replace, **kwargs
                )
                assert result is None
                out = db.query_df(f"SELECT * FROM {sqlrp.compiler.ident(into).sql(dialect.sqlglot)}")
            elif op.entry == "api_frame":  # the table read back as a DataFrame, projected from memory
                frame = db.query_df(f"SELECT * FROM {sqlrp.compiler.ident(t.name).sql(dialect.sqlglot)}")
                for column, kind in zip(t.features, t.kinds, strict=True):  # a REAL read as its shortest text
                    if kind == "float32" and column in frame.columns:
                        frame[column] = pd.to_numeric(frame[column]).astype(np.float32)
                frame = frame.sample(frac=1, random_state=op.seed)  # an order and an index of the caller's
                out = sqlrp.project(db, frame, t.id_name, name, columns=columns, chunk_rows=op.chunk_rows, **kwargs)
                if op.chunk_rows:
                    out = pd.concat(list(out))
                if out is not None and len(out.columns) and str(out.columns[0]) == t.id_name:
                    assert list(out.index) == list(frame.index), f"{what}: the frame's order and index were lost"
                    assert out.iloc[:, 0].tolist() == frame[t.id_name].tolist(), f"{what}: the frame's ids changed"
            else:
                out = sqlrp.project(db, t.name, t.id_name, name, columns=columns, chunk_rows=op.chunk_rows, **kwargs)
                if op.chunk_rows:
                    chunks = list(out)
                    out = pd.concat(chunks, ignore_index=True) if chunks else None
        elif op.entry == "cli":
            status, text, err = run_cli(
                ["project", "--db", url, *source_args(t, op), "--projection", name, *op.cli_options()]
            )
            if status != 0:
                cli_error(status, err, what)
                raise _CliRefused(err)
            out = pd.read_csv(io.StringIO(text), dtype={t.id_name: str} if t.id_kind == "str" else None)
        elif op.entry == "compile":
            if url is not None and op.seed % 2:
                status, text, err = run_cli(
                    ["compile", "--db", url, *source_args(t, op), "--projection", name, *op.cli_options()]
                )
                if status != 0:
                    cli_error(status, err, what)
                    raise _CliRefused(err)
            else:
                plan = sqlrp.plan(
                    db,
                    t.name,
                    t.id_name,
                    name,
                    columns=columns,
                    **{k: v for k, v in op.api_options().items() if k not in ("strategy", "block")},
                )
                text = sqlrp.compile_projection(db, plan, strategy=op.strategy, block=op.block)
            statements = [s for s in text.strip().rstrip(";").split(";\n") if s.strip()]
            if invalid is not None:
                raise Refused(f"{what}: compiled although it had to be refused ({invalid})")
            text_checks_nothing = not t.clean() or bool(want_for(db, engine, t, op, name, None).must_refuse)
            if len(statements) != 1 or text_checks_nothing:  # compiled text checks nothing: valid cases only
                tally(engine, "compiled")
                return "compiled"
            out = db.query_df(statements[0])
    except Exception as exc:  # noqa: BLE001 - classified here
        if engine_error(exc):  # the database's own error: only for a case that had to be refused
            if _case_ok(db, engine, t, op, name, invalid):
                raise AssertionError(f"{what}: a valid case failed in the engine: {type(exc).__name__}: {exc}") from exc
        elif not isinstance(exc, _CliRefused):
            one_line_error(exc, what)
        assert snapshot(db, engine, t) == before, f"{what}: the source changed"
        assert user_tables(db) == tables_before, f"{what}: stray tables {user_tables(db) - tables_before}"
        if invalid is None and engine == "duckdb" and t.clean() and _modest(t) and op.entry != "cli":
            _must_run(exc, op, t)
        kind = "valid, clean" if invalid is None and t.clean() else "invalid or dirty"
        reason = f"{kind}: {engine}: {' '.join(str(exc).split())[:80]}"  # what requests are refused for (printed)
        VALID_REFUSED[reason] = VALID_REFUSED.get(reason, 0) + 1
        tally(engine, "refused")
        return "refused"
    want = want_for(db, engine, t, op, name, invalid)
    if out is None:
        out = pd.DataFrame(columns=[t.id_name])
    if not want.must_refuse:
        check_names(out, t, op, want.Y.shape[1])
    ids, Y = frame_values(out, op)
    if want.must_refuse:
        raise Refused(f"{what}: ran although it had to be refused ({want.must_refuse}); got {len(ids)} rows")
    compare(want, ids, Y, what)
    assert snapshot(db, engine, t) == before, f"{what}: the source changed"
    made = {into} if op.entry == "api_into" else set()
    assert {n.casefold() for n in user_tables(db) - tables_before} <= {m.casefold() for m in made}, "stray tables"
    tally(engine, "ok")
    return "ok"


class _CliRefused(Exception):
    pass


def engine_error(exc: BaseException) -> bool:
    """A database driver's error (the CLI's exit status 4), not sqlrp's own."""
    return not isinstance(exc, sqlrp.SqlrpError) and exit_status(exc) == EXIT_ENGINE


def _case_ok(db, engine: str, t: Table, op: Op, name: str, invalid: str | None) -> bool:
    """Whether the case was valid: parameters, data and outputs (``False`` if it had to be refused)."""
    if invalid is not None:
        return False
    try:
        return not want_for(db, engine, t, op, name, None).must_refuse
    except sqlrp.SqlrpError:  # no projection was stored: it failed before that
        return False


def _modest(t: Table) -> bool:
    return all(abs(float(v)) < 1e100 and (v == 0 or abs(float(v)) > 1e-100) for row in t.cells for v in row)


def _must_run(exc: BaseException, op: Op, t: Table) -> None:
    """A valid request on clean, modest data, on DuckDB: it must not be refused for its data or its
    names (a strategy, output or type the engine cannot do is a documented refusal)."""
    text = "\n".join(line for line in str(exc).splitlines() if not line.startswith("warning:"))  # the error only
    about_data = ("NULL", "NaN", "infinite", "overflow", "no column", "not found", "does not exist", "numeric")
    if any(a in text for a in about_data):
        raise AssertionError(f"duckdb refused a valid request {op} on clean data: {type(exc).__name__}: {text}")


# ---- entry points without a table ----


@triaged
def run_memory_op(t: Table, op: Op) -> str:
    """The transformer and ``transform_frame`` on the stored matrix (the generated cells as float64)."""
    X = np.array([[np.nan if v is None else float(v) for v in row] for row in t.cells], dtype=np.float64)
    what = f"memory {op.entry} {op}"
    try:
        if op.entry == "transformer" and op.method == "rff":  # RBFSampler's names (issue 44)
            est = sqlrp.SQLRandomProjection(n_components=op.k, method="rff", random_state=op.seed, **op.params)
            Y = est.fit(X).transform(X)
            projection = est.projection_
        elif op.entry == "transformer":
            method = op.method if op.method in ("achlioptas", "gaussian") else "achlioptas"
            s = op.params.get("s", "auto") if method == "achlioptas" else "auto"
            est = sqlrp.SQLRandomProjection(n_components=op.k, method=method, s=s, random_state=op.seed)
            Y = est.fit(X).transform(X)
            projection = est.projection_
        else:
            projection = sqlrp.create_projection(None, None, op.method, d=t.d, k=op.k, seed=op.seed, **op.params)
            Y = sqlrp.transform_frame(projection, X)
    except sqlrp.SqlrpError as exc:
        one_line_error(exc, what)
        tally("memory", "refused")
        return "refused"
    except ValueError as exc:  # scikit-learn's own contract (check_estimator): ValueError for NaN / inf input
        if op.entry != "transformer" or "Input X contains" not in str(exc):
            raise AssertionError(f"{what}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc
        assert not np.isfinite(X).all(), f"{what}: finite input refused: {exc}"
        tally("memory", "refused")
        return "refused"
    except Exception as exc:  # noqa: BLE001 - anything but sqlrp's own error is a finding
        raise AssertionError(f"{what}: {type(exc).__module__}.{type(exc).__name__}: {exc}") from exc
    from testkit.fuzz_tables import Stored

    data = Stored(list(range(len(X))), X, np.isnan(X) & False)
    invalid = op.invalid
    if invalid:  # each refuses only what it takes: the transformer k and s, transform_frame the method's
        if op.entry == "transformer":  # parameters (no SQL: no strategy, block or chunk_rows)
            keep: tuple[str, ...] = ("k =", "s =") if op.method == "achlioptas" else ("k =",)
            keep = ("k =", "gamma =", "weights =") if op.method == "rff" else keep
        else:
            keep = ("k =", *(f"{name} =" for name in op.params))
        invalid = "; ".join(r for r in invalid.split("; ") if r.startswith(keep)) or None
    want = expected(projection, data, invalid=invalid)
    compare(want, list(range(len(X))), np.asarray(Y), what)
    tally("memory", "ok")
    return "ok"


# ---- files in and out ----


@triaged
def run_file_op(t: Table, op: Op, folder: Path) -> str:
    """Parquet or CSV in, Parquet or CSV out, through the API or the CLI, on DuckDB."""
    import duckdb
    import pyarrow.parquet as pq

    from testkit.fuzz_tables import _arrow_frame

    ending = ".csv" if op.seed % 2 else ".parquet"
    source = folder / f"in {t.name}{ending}"
    if ending == ".parquet":
        pq.write_table(__import__("pyarrow").Table.from_pandas(_arrow_frame(t), preserve_index=False), source)
    else:
        _arrow_frame(t).to_csv(source, index=False)
    target_name = {"SOURCE": source.name, "p0": f"link{ending}"}.get(
        op.into, f"out {op.into}{'.csv' if op.k == 2 else '.parquet'}"
    )
    target = folder / target_name
    invalid = op.invalid
    if op.into == "p0":  # a symlink to the source: writing it would overwrite the input
        os.symlink(source, target)
    if op.into in ("SOURCE", "p0"):
        invalid = (invalid + "; " if invalid else "") + "the output is the input file"
    data_before = source.read_bytes()
    listing = sorted(os.listdir(folder))
    what = f"file {source.name} -> {target.name} {op}"
    columns = list(t.features) if op.explicit_columns else None
    name = None
    try:
        if op.k == 3 or isinstance(op.k, str):  # the CLI
            args = [
                "project",
                "--table",
                str(source),
                *source_args(t, op)[2:],
                *op.cli_options(),
                "--into",
                str(target),
            ]
            args = [a for a in args if a != "--standardize"]  # --standardize needs --db
            if op.replace:
                args.append("--replace")
            status, _, err = run_cli(args)
            if status != 0:
                cli_error(status, err, what)
                raise _CliRefused(err)
        else:
            opts = {k: v for k, v in op.api_options().items() if k != "standardize"}
            sqlrp.project(sqlrp.connect(), str(source), t.id_name, name, columns=columns, into=str(target),
                          replace=op.replace, **opts)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - classified here
        if engine_error(exc):  # DuckDB's own error: an output out of a type's range (float32), or an invalid case
            if not (invalid or "out of range" in str(exc)):
                raise AssertionError(f"{what}: a valid case failed in the engine: {type(exc).__name__}: {exc}") from exc
        elif not isinstance(exc, _CliRefused):
            one_line_error(exc, what)
        assert source.read_bytes() == data_before, f"{what}: the input file changed"
        assert sorted(os.listdir(folder)) == listing, f"{what}: stray files {set(os.listdir(folder)) ^ set(listing)}"
        kind = "valid, clean" if invalid is None and t.clean() else "invalid or dirty"
        reason = f"{kind}: files: {' '.join(str(exc).split())[:80]}"
        VALID_REFUSED[reason] = VALID_REFUSED.get(reason, 0) + 1
        tally("files", "refused")
        return "refused"
    assert source.read_bytes() == data_before, f"{what}: the input file changed"
    if invalid:
        raise Refused(f"{what}: ran although it had to be refused ({invalid})")
    sidecar = Path(f"{target}.sqlrp.json")
    new = set(os.listdir(folder)) - set(listing)
    assert new <= {target.name, sidecar.name}, f"{what}: stray files {new}"
    projection = _read_sidecar(sidecar)
    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM '{str(source).replace(chr(39), chr(39) * 2)}'")
    rows = rel.fetchall()
    # the file's columns by position, as written (id, then the features): DuckDB's CSV reader trims a
    # header's spaces ('p0 ' is read as 'p0'), so names are not compared
    assert len(rel.columns) == 1 + t.d, f"{what}: the file reads back as {rel.columns}"
    text = [t.features[j] for j, ty in enumerate(rel.types[1:]) if not _is_number(str(ty))]
    if text:  # a column the file's reader took as text
        raise AssertionError(f"{what}: ran although columns {text} are not numbers")
    from testkit.fuzz_tables import Stored

    at = list(range(1, 1 + t.d))
    X = np.array([[np.nan if r[j] is None else float(r[j]) for j in at] for r in rows], dtype=np.float64)
    null = np.array([[r[j] is None for j in at] for r in rows], dtype=bool)
    ids = [r[0] for r in rows]
    want = expected(projection, Stored(ids, X.reshape(len(rows), t.d), null.reshape(len(rows), t.d)), op.nulls,
                    False, op.dtype, invalid)  # fmt: skip
    out = con.sql(f"SELECT * FROM '{str(target).replace(chr(39), chr(39) * 2)}'").df()
    got_ids, Y = frame_values(out, op)
    compare(want, got_ids, Y, what)
    tally("files", "ok")
    return "ok"


def _read_sidecar(path: Path):
    from sqlrp.registry.transfer import read_projection

    return read_projection(str(path))


def _is_number(type_name: str) -> bool:
    return any(w in type_name.upper() for w in ("DOUBLE", "FLOAT", "INT", "DECIMAL", "REAL", "NUMERIC"))


# ---- the engines ----


def _example(data: st.DataObject, engine: str, entries: tuple[str, ...], kinds=None) -> tuple[Table, Op]:
    t = data.draw(tables() if kinds is None else tables(kinds=kinds), label="table")
    op = data.draw(operations(t.d, entries=entries), label="operation")
    return t, op


DUCK_ENTRIES = ("api", "api", "api_into", "api_frame", "cli", "compile", "files", "transformer", "transform_frame")


@fuzz_settings(120)
@given(data=st.data())
def test_fuzz_duckdb(data: st.DataObject) -> None:
    t, op = _example(data, "duckdb", DUCK_ENTRIES)
    with tempfile.TemporaryDirectory() as folder:
        if op.entry == "files":
            run_file_op(t, op, Path(folder))
            return
        if op.entry in ("transformer", "transform_frame"):
            run_memory_op(t, op)
            return
        url = f"duckdb:///{folder}/fuzz.duckdb"
        db = sqlrp.connect(url)
        try:
            create(db, "duckdb", t)
            if op.entry == "cli":
                db.close()
                db = None
                with _reopened(url) as view:
                    before = snapshot(view, "duckdb", t)
                run_cli_case(url, t, op, before)
                return
            run_table_op(db, "duckdb", url, t, op)
        finally:
            if db is not None:
                db.close()


@contextlib.contextmanager
def _reopened(url: str):
    db = sqlrp.connect(url)
    try:
        yield db
    finally:
        db.close()


@triaged
def run_cli_case(url: str, t: Table, op: Op, before: list) -> None:
    """The CLI on a database file nobody else holds open, then the file reopened to check."""
    name = f"fz_{uuid.uuid4().hex[:8]}"
    engine = "duckdb" if url.startswith("duckdb") else "sqlite"
    what = f"{engine} cli {op}"
    status, text, err = run_cli(["project", "--db", url, *source_args(t, op), "--projection", name, *op.cli_options()])
    with _reopened(url) as db:
        assert snapshot(db, engine, t) == before, f"{what}: the source changed"
        if status != 0:
            cli_error(status, err, what)
            tally(engine, "refused")
            return
        want = want_for(db, engine, t, op, name, op.invalid)
    out = pd.read_csv(io.StringIO(text), dtype={t.id_name: str} if t.id_kind == "str" else None)
    if not want.must_refuse:
        check_names(out, t, op, want.Y.shape[1])
    ids, Y = frame_values(out, op)
    compare(want, ids, Y, what)
    tally(engine, "ok")


def test_fuzz_sqlite(tmp_path_factory) -> None:
    @fuzz_settings(40)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        t, op = _example(data, "sqlite", ("api", "api_into", "api_frame", "cli", "compile"))
        folder = tmp_path_factory.mktemp("sqlite")
        url = f"sqlite:///{folder}/fuzz.sqlite"
        db = sqlrp.connect(url)
        try:
            create(db, "sqlite", t)
            before = snapshot(db, "sqlite", t)
            if op.entry == "cli":
                db.close()
                db = None
                run_cli_case(url, t, op, before)
                return
            run_table_op(db, "sqlite", url, t, op)
        finally:
            if db is not None:
                db.close()

    run()


def test_fuzz_postgres(pg_url) -> None:
    import psycopg

    @fuzz_settings(40)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        t, op = _example(data, "postgres", ("api", "api_into", "api_frame", "cli", "compile"))
        schema = f"fz_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in pg_url else "?"
        url = f"{pg_url}{sep}options=-csearch_path%3D{schema}"
        db = sqlrp.connect(url)
        try:
            create(db, "postgres", t)
            run_table_op(db, "postgres", url, t, op)
        finally:
            db.close()
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute(f'DROP SCHEMA "{schema}" CASCADE')

    run()


def test_fuzz_datafusion() -> None:
    pytest.importorskip("datafusion") if not os.environ.get("CI") else None

    @fuzz_settings(30)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        t, op = _example(data, "datafusion", ("api", "api_into", "compile"))
        db = sqlrp.connect("datafusion://")
        try:
            create(db, "datafusion", t)
            run_table_op(db, "datafusion", None, t, op)
        finally:
            db.close()

    run()


def test_fuzz_clickhouse() -> None:
    pytest.importorskip("chdb") if not os.environ.get("CI") else None
    from sqlrp.backends.clickhouse import ChdbBackend

    engine = ChdbBackend(":memory:")

    @fuzz_settings(30)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        t, op = _example(data, "clickhouse", ("api", "api_into", "compile"))
        db = ChdbBackend(":memory:")
        database = f"fz_{uuid.uuid4().hex[:10]}"
        db.execute(f"CREATE DATABASE {database}")
        db.execute(f"USE {database}")
        try:
            create(db, "clickhouse", t)
            run_table_op(db, "clickhouse", None, t, op)
        finally:
            engine.execute(f"DROP DATABASE IF EXISTS {database}")
            db.close()

    try:
        run()
    finally:
        engine.close()


def run_spark_examples(db) -> None:
    """The fuzzer on Spark (:func:`test_fuzz_spark`, on the run's one session), with a smaller
    budget; tables get a name Spark's catalog takes (the generated columns stay)."""

    @fuzz_settings(4, share=0.05)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        t, op = _example(data, "spark", ("api", "api_into", "compile"))
        t.name = f"fz_{uuid.uuid4().hex[:10]}"
        if op.into not in ("SOURCE", "sqlrp_projection"):
            op.into = f"{t.name}_out"
        create(db, "spark", t)
        try:
            run_table_op(db, "spark", None, t, op)
        finally:
            for name in (t.name, f"{t.name}_out"):
                db.execute(f"DROP TABLE IF EXISTS {name}")

    run()


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_fuzz_spark(spark_db) -> None:
    """The differential fuzzer on Spark local[2] (``spark_db``: tests/conftest.py), its smaller budget."""
    run_spark_examples(spark_db)


def test_fuzz_saw_both_outcomes() -> None:
    """The fuzzer is only worth something if both branches ran on each engine it ran on."""
    print(TALLY, "known classes seen:", KNOWN_SEEN)
    for reason, count in sorted(VALID_REFUSED.items(), key=lambda kv: -kv[1])[:40]:
        print(f"refused {count}x: {reason}")
    for engine, counts in TALLY.items():
        if sum(counts.values()) >= 15:
            assert counts.get("ok", 0) >= 2, (engine, counts)
            assert counts.get("refused", 0) >= 1, (engine, counts)
