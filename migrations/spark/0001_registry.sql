-- sqlrp registry, version 1 (spark): a projection is stored as relational rows: its non-zero matrix
-- entries (linear stage) and the terms of its combiner stage.
-- Rendered for spark from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_projection: one row per stored projection; params is JSON, seed NULL for none.
CREATE TABLE sqlrp_projection (
  name STRING,
  method STRING,
  params STRING,
  d INT,
  k INT,
  p INT,
  seed BIGINT,
  scale DOUBLE,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP()
)
USING PARQUET;

-- sqlrp_linear_entry: linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1
-- for sign matrices.
CREATE TABLE sqlrp_linear_entry (
  projection STRING,
  `vector` INT,
  feature INT,
  weight DOUBLE
)
USING PARQUET;

-- sqlrp_linear_vector: per-vector options of the linear stage, only where they differ from bias 0 /
-- power 1.
CREATE TABLE sqlrp_linear_vector (
  projection STRING,
  `vector` INT,
  bias DOUBLE DEFAULT 0,
  power INT DEFAULT 1
)
USING PARQUET;

-- sqlrp_combiner_term: combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors}
-- K_vector.
CREATE TABLE sqlrp_combiner_term (
  projection STRING,
  term INT,
  component INT,
  weight DOUBLE
)
USING PARQUET;

-- sqlrp_combiner_factor: the factors K_vector of each combiner term, by position.
CREATE TABLE sqlrp_combiner_factor (
  projection STRING,
  term INT,
  position INT,
  `vector` INT
)
USING PARQUET;
