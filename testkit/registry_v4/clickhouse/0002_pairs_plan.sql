-- sqlrp registry, version 2 (ClickHouse): the `pairs` strategy's plan (sqlrp/compiler/pairs.py), stored
-- with its projection so that it is planned once per matrix rather than once per process.  One plan per
-- column budget: -1 means no cap.  Node q >= 0 is partial q, node -1 - v is output vector v.  Each
-- row is one signed column it reads: feature c < d, or partial d + q.  `level` is the partial's
-- nested select (0 for outputs).  The ORDER BY key is the other engines' primary key.
CREATE TABLE sqlrp_pairs_entry (
    "projection"  String,
    budget        Int32,
    node          Int32,
    level         Int32,
    reads         Int32,
    sign          Int16
) ENGINE = MergeTree ORDER BY ("projection", budget, node, reads)
