-- sqlrp registry, version 3 (spark): similarity-search indexes (sqlrp/search/index.py). An index's
-- rows live in tables named after it, in its source's schema; this row says how they were made.
-- Engines where search is refused keep the table empty.
-- Rendered for spark from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_index: how an index was made: the stored projection, the source table and its features
-- (JSON), the band width, the feature means whose projections are the bits' thresholds (NULL: not
-- centred), and (version 4) its structure as JSON.
CREATE TABLE sqlrp_index (
  name STRING,
  projection STRING,
  source STRING,
  bits INT,
  band_bits INT,
  means STRING,
  vectors BOOLEAN,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP()
)
USING PARQUET;
