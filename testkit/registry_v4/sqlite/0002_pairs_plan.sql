-- sqlrp registry, version 2 (SQLite): the `pairs` strategy's plan (sqlrp/compiler/pairs.py), stored
-- with its projection so that it is planned once per matrix rather than once per process (planning
-- d = 784, k = 200 takes 2-4 s).  One plan per column budget: -1 means no cap, engines with a
-- column limit (SQLite: 2,000 per select) cap the partials.  Node q >= 0 is partial q, node -1 - v
-- is output vector v, each row is one signed column it reads: feature c < d, or partial d + q.
-- `level` is the partial's nested select (0 for outputs).
CREATE TABLE sqlrp_pairs_entry (
    projection  TEXT NOT NULL,
    budget      INTEGER NOT NULL,
    node        INTEGER NOT NULL,
    level       INTEGER NOT NULL,
    reads       INTEGER NOT NULL,
    sign        INTEGER NOT NULL,
    PRIMARY KEY (projection, budget, node, reads)
) WITHOUT ROWID;
