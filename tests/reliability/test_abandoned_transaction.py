"""A transaction left open by a signal (issue 41's CI failure, stop 47): Python runs a Ctrl-C handler at
the first bytecode it can, and that may be inside ``contextlib``'s ``__exit__`` before it throws the error
into the transaction's generator -- the generator stays suspended, and is closed later by the garbage
collector, maybe after the command closed its connection.  Closing it then must roll back what it can
and never raise ("Exception ignored ... Connection already closed" on the CLI's stderr)."""

from __future__ import annotations

import pytest

import sqlrp

ENGINES = ["duckdb", "sqlite", "postgres", "mariadb"]


def _backend(engine: str, tmp_path, request):  # noqa: ANN001, ANN202 - a sqlrp backend from a fixture or a file
    if engine == "duckdb":
        return sqlrp.connect(f"duckdb:///{tmp_path / 'a.db'}")
    if engine == "sqlite":
        return sqlrp.connect(f"sqlite:///{tmp_path / 'a.db'}")
    return request.getfixturevalue("pg" if engine == "postgres" else "maria")


@pytest.mark.parametrize("engine", ENGINES)
def test_abandoned_then_closed_by_the_collector(engine, tmp_path, request):
    db = _backend(engine, tmp_path, request)
    db.execute("CREATE TABLE keep_me (x INTEGER)")
    tx = db.transaction()
    tx.__enter__()
    db.execute("CREATE TABLE gone (x INTEGER)")
    tx.gen.close()  # abandoned, the connection open: rolled back, and the backend works on
    names = {n.lower() for n in db.table_names()}
    if db.transactional:
        assert "gone" not in names
    assert "keep_me" in names
    with db.transaction():  # a new transaction begins: the old one is over
        db.execute("INSERT INTO keep_me VALUES (1)")
    assert db.fetchall("SELECT count(*) FROM keep_me")[0][0] == 1

    tx = db.transaction()
    tx.__enter__()
    db.execute("INSERT INTO keep_me VALUES (2)")
    db.close()  # the command's end closes the connection first ...
    tx.gen.close()  # ... then the collector closes the generator: nothing raised
