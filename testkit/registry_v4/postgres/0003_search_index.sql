-- sqlrp registry, version 3 (PostgreSQL): similarity-search indexes (sqlrp/index.py).  An index's rows
-- live in two tables named after it, in its source's schema: `<name>` (id, signature words w0.., and
-- optionally the projected vectors v0..) and `<name>__bands` (band, key, id).  This row says how
-- they were made: the stored projection, the source table and its features (JSON), the band width,
-- and the feature means whose projections are the bits' thresholds (NULL: not centred).
CREATE TABLE sqlrp_index (
    name        TEXT PRIMARY KEY,
    projection  TEXT NOT NULL,
    source      TEXT NOT NULL,
    bits        INTEGER NOT NULL,
    band_bits   INTEGER NOT NULL,
    means       TEXT,
    vectors     BOOLEAN NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);
