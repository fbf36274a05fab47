-- sqlrp registry, version 3 (Spark): the similarity-search index table (sqlrp/index.py), kept so that
-- every engine's registry has the same versions; search is refused on Spark (no tested bit count),
-- so the table stays empty.
CREATE TABLE sqlrp_index (
    name        STRING,
    projection  STRING,
    source      STRING,
    bits        INT,
    band_bits   INT,
    means       STRING,
    vectors     BOOLEAN
) USING parquet;
