-- sqlrp registry, version 3 (mysql): similarity-search indexes (sqlrp/search/index.py). An index's
-- rows live in tables named after it, in its source's schema; this row says how they were made.
-- Engines where search is refused keep the table empty.
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_index: how an index was made: the stored projection, the source table and its features
-- (JSON), the band width, the feature means whose projections are the bits' thresholds (NULL: not
-- centred), and (version 4) its structure as JSON.
CREATE TABLE `sqlrp_index` (
  `name` VARCHAR(255) NOT NULL,
  `projection` TEXT NOT NULL,
  `source` TEXT NOT NULL,
  `bits` INT NOT NULL,
  `band_bits` INT NOT NULL,
  `means` TEXT,
  `vectors` BOOLEAN NOT NULL,
  `created_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
