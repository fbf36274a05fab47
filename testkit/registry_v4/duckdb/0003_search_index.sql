-- sqlrp registry, version 3 (DuckDB): similarity-search indexes (sqlrp/index.py).  An index's rows
-- live in two tables named after it, in its source's schema: `<name>` (id, signature words w0.., and
-- optionally the projected vectors v0..) and `<name>__bands` (band, key, id).  This row says how
-- they were made: the stored projection, the source table and its features (JSON), the band width,
-- and the feature means whose projections are the bits' thresholds (NULL: not centred).
CREATE TABLE sqlrp_index (
    name        VARCHAR PRIMARY KEY,
    projection  VARCHAR NOT NULL,
    source      VARCHAR NOT NULL,
    bits        INTEGER NOT NULL,
    band_bits   INTEGER NOT NULL,
    means       VARCHAR,
    vectors     BOOLEAN NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);
