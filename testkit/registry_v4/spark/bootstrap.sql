-- sqlrp schema version table (Spark SQL).  Spark's file-source tables refuse PRIMARY KEY
-- ("[UNSUPPORTED_FEATURE.TABLE_OPERATION] ... does not support CONSTRAINT") and drop NOT NULL
-- silently, so neither is written; DEFAULT current_timestamp works (Spark 3.4+, parquet).
CREATE TABLE IF NOT EXISTS sqlrp_schema_version (
    version     INT,
    name        STRING,
    applied_at  TIMESTAMP DEFAULT current_timestamp()
) USING parquet
