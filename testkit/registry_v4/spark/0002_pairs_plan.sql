-- sqlrp registry, version 2 (Spark SQL): the `pairs` strategy's plan (sqlrp/compiler/pairs.py), as
-- in migrations/duckdb/0002_pairs_plan.sql, without the primary key Spark refuses.  One plan per
-- column budget (-1: no cap).  Node q >= 0 is partial q, node -1 - v is output vector v; each row is
-- one signed column it reads: feature c < d, or partial d + q.  `level` is the partial's nested select.
CREATE TABLE sqlrp_pairs_entry (
    projection  STRING,
    budget      INT,
    node        INT,
    level       INT,
    reads       INT,
    sign        SMALLINT
) USING parquet;
