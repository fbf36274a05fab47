"""Parameters written as Spark literals (issue 45, Sail): a Spark Connect server that refuses commands with
parameters gets each value rendered in place of its ``?`` (:func:`sqlrp.backends.spark_connect.bind`).
The class of defect: a value that reads back different -- a double turned DECIMAL and rounded, text whose
quotes, backslashes, ``?``, ``--`` or unicode change the statement -- or user text pasted as SQL.
Each example writes a row of random values through an ``INSERT ... VALUES (?, ?, ?, ?)`` on a real Sail
server and reads it back: equal, bit for bit.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from testkit.fuzz_tables import fuzz_settings

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["'", "\\", "\\'", "''", "?", "-- x", "/* ? */", '"', "`", "\\n", "\n", "x'); DROP TABLE lit; --"]
)
doubles = st.floats(allow_nan=True, allow_infinity=True, width=64)
integers = st.integers(-(2**63), 2**63 - 1)


def test_fuzz_spark_literals(sail) -> None:
    sail.execute("CREATE TABLE lit (t STRING, d DOUBLE, i BIGINT, b BOOLEAN) USING parquet")

    @fuzz_settings(12)
    @given(t=st.none() | texts, d=st.none() | doubles, i=st.none() | integers, b=st.none() | st.booleans())
    def run(t: str | None, d: float | None, i: int | None, b: bool | None) -> None:
        sail.execute("INSERT INTO lit VALUES (?, ?, ?, ?)", [t, d, i, b])
        rows = sail.fetchall("SELECT t, d, i, b FROM lit")
        sail.execute("DELETE FROM lit")
        assert len(rows) == 1, rows
        got = rows[0]
        assert got[0] == t and got[2] == i and got[3] == b, (got, (t, i, b))
        if d is None:
            assert got[1] is None
        elif math.isnan(d):
            assert math.isnan(got[1])
        else:
            assert got[1] == d and math.copysign(1, got[1]) == math.copysign(1, d), (got[1], d)

    run()
    assert sail._literal_params  # the server refused the bound INSERT: every row went in as literals
