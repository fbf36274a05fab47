-- sqlrp registry: the version table (spark), the registry's version: one row per version applied
-- (the runner reads max(version) before it adds one).
-- Rendered for spark from sqlrp/registry/schema.py by `python -m migrations`: do not edit.
CREATE TABLE IF NOT EXISTS sqlrp_schema_version (
  version INT,
  name STRING,
  applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP()
)
USING PARQUET;
