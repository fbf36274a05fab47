-- sqlrp registry: the version table (mysql), the registry's version: one row per version applied
-- (the runner reads max(version) before it adds one).
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.
CREATE TABLE IF NOT EXISTS `sqlrp_schema_version` (
  `version` INT NOT NULL,
  `name` TEXT NOT NULL,
  `applied_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  PRIMARY KEY (`version`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
