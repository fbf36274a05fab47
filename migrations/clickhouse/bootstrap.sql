-- sqlrp registry: the version table (clickhouse), the registry's version: one row per version
-- applied (the runner reads max(version) before it adds one).
-- Rendered for clickhouse from sqlrp/registry/schema.py by `python -m migrations`: do not edit.
CREATE TABLE IF NOT EXISTS sqlrp_schema_version (
  version Int32,
  name String,
  applied_at DateTime DEFAULT CURRENT_TIMESTAMP()
)
ENGINE=MergeTree
ORDER BY version;
