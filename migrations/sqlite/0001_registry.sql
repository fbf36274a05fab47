-- sqlrp registry, version 1 (sqlite): a projection is stored as relational rows: its non-zero
-- matrix entries (linear stage) and the terms of its combiner stage.
-- Rendered for sqlite from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_projection: one row per stored projection; params is JSON, seed NULL for none.
CREATE TABLE sqlrp_projection (
  name TEXT NOT NULL PRIMARY KEY,
  method TEXT NOT NULL,
  params TEXT NOT NULL,
  d INTEGER NOT NULL,
  k INTEGER NOT NULL,
  p INTEGER NOT NULL,
  seed INTEGER,
  scale REAL NOT NULL,
  created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- sqlrp_linear_entry: linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1
-- for sign matrices.
CREATE TABLE sqlrp_linear_entry (
  projection TEXT NOT NULL,
  "vector" INTEGER NOT NULL,
  feature INTEGER NOT NULL,
  weight REAL NOT NULL,
  PRIMARY KEY (projection, "vector", feature)
) WITHOUT ROWID;

-- sqlrp_linear_vector: per-vector options of the linear stage, only where they differ from bias 0 /
-- power 1.
CREATE TABLE sqlrp_linear_vector (
  projection TEXT NOT NULL,
  "vector" INTEGER NOT NULL,
  bias REAL NOT NULL DEFAULT 0,
  power INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (projection, "vector")
) WITHOUT ROWID;

-- sqlrp_combiner_term: combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors}
-- K_vector.
CREATE TABLE sqlrp_combiner_term (
  projection TEXT NOT NULL,
  term INTEGER NOT NULL,
  component INTEGER NOT NULL,
  weight REAL NOT NULL,
  PRIMARY KEY (projection, term)
) WITHOUT ROWID;

-- sqlrp_combiner_factor: the factors K_vector of each combiner term, by position.
CREATE TABLE sqlrp_combiner_factor (
  projection TEXT NOT NULL,
  term INTEGER NOT NULL,
  position INTEGER NOT NULL,
  "vector" INTEGER NOT NULL,
  PRIMARY KEY (projection, term, position)
) WITHOUT ROWID;
