-- sqlrp registry: the version table (sqlite), the registry's version: one row per version applied
-- (the runner reads max(version) before it adds one).
-- Rendered for sqlite from sqlrp/registry/schema.py by `python -m migrations`: do not edit.
CREATE TABLE IF NOT EXISTS sqlrp_schema_version (
  version INTEGER NOT NULL PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);
