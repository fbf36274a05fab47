-- sqlrp registry, version 3 (ClickHouse): the similarity-search index table (sqlrp/index.py), kept so
-- that every engine's registry has the same versions; search is refused on ClickHouse (no transactions,
-- no tested bit count), so the table stays empty.
CREATE TABLE sqlrp_index (
    name        String,
    "projection"  String,
    source      String,
    bits        Int32,
    band_bits   Int32,
    means       Nullable(String),
    vectors     Bool
) ENGINE = MergeTree ORDER BY name
