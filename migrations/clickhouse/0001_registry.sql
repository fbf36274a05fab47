-- sqlrp registry, version 1 (clickhouse): a projection is stored as relational rows: its non-zero
-- matrix entries (linear stage) and the terms of its combiner stage.
-- Rendered for clickhouse from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_projection: one row per stored projection; params is JSON, seed NULL for none.
CREATE TABLE sqlrp_projection (
  name String,
  method String,
  params String,
  d Int32,
  k Int32,
  p Int32,
  seed Nullable(Int64),
  scale Float64,
  created_at DateTime DEFAULT CURRENT_TIMESTAMP()
)
ENGINE=MergeTree
ORDER BY name;

-- sqlrp_linear_entry: linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1
-- for sign matrices.
CREATE TABLE sqlrp_linear_entry (
  "projection" String,
  "vector" Int32,
  feature Int32,
  weight Float64
)
ENGINE=MergeTree
ORDER BY ("projection", "vector", feature);

-- sqlrp_linear_vector: per-vector options of the linear stage, only where they differ from bias 0 /
-- power 1.
CREATE TABLE sqlrp_linear_vector (
  "projection" String,
  "vector" Int32,
  bias Float64 DEFAULT 0,
  power Int32 DEFAULT 1
)
ENGINE=MergeTree
ORDER BY ("projection", "vector");

-- sqlrp_combiner_term: combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors}
-- K_vector.
CREATE TABLE sqlrp_combiner_term (
  "projection" String,
  term Int32,
  component Int32,
  weight Float64
)
ENGINE=MergeTree
ORDER BY ("projection", term);

-- sqlrp_combiner_factor: the factors K_vector of each combiner term, by position.
CREATE TABLE sqlrp_combiner_factor (
  "projection" String,
  term Int32,
  position Int32,
  "vector" Int32
)
ENGINE=MergeTree
ORDER BY ("projection", term, position);
