-- sqlrp registry, version 3 (SQLite): the similarity-search index table (sqlrp/index.py), kept so that
-- every engine's registry has the same versions.  SQLite has no bit count of an XOR that sqlrp knows,
-- so no index is built here (build_index refuses, naming the engine); the table stays empty.
CREATE TABLE sqlrp_index (
    name        TEXT PRIMARY KEY,
    projection  TEXT NOT NULL,
    source      TEXT NOT NULL,
    bits        INTEGER NOT NULL,
    band_bits   INTEGER NOT NULL,
    means       TEXT,
    vectors     INTEGER NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);
