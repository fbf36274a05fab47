-- sqlrp registry: the version table (ClickHouse).  Every CREATE TABLE needs an ENGINE; MergeTree has
-- no uniqueness, so the migrations runner reads max(version) before it inserts one.
CREATE TABLE IF NOT EXISTS sqlrp_schema_version (
    version     Int32,
    name        String,
    applied_at  DateTime DEFAULT now()
) ENGINE = MergeTree ORDER BY version
