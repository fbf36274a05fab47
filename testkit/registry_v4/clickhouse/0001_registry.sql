-- sqlrp registry, version 1 (ClickHouse).  A projection is stored as relational rows:
-- its non-zero matrix entries (linear stage) and the terms of its combiner stage.
-- ClickHouse has no PRIMARY KEY uniqueness and no transactions: sqlrp.store checks names before it
-- writes and deletes what a failed save wrote.  The ORDER BY keys are the other engines' primary keys.
-- "projection" is a keyword in a CREATE TABLE column list (PROJECTION definitions): always quoted here.
-- params holds JSON text (String).  seed is Nullable: a projection may have no seed.
CREATE TABLE sqlrp_projection (
    name        String,
    method      String,
    params      String,
    d           Int32,
    k           Int32,
    p           Int32,
    seed        Nullable(Int64),
    scale       Float64,
    created_at  DateTime DEFAULT now()
) ENGINE = MergeTree ORDER BY name;

-- linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1 for sign matrices
CREATE TABLE sqlrp_linear_entry (
    "projection"  String,
    vector        Int32,
    feature       Int32,
    weight        Float64
) ENGINE = MergeTree ORDER BY ("projection", vector, feature);

-- per-vector options of the linear stage, only where they differ from bias 0 / power 1
CREATE TABLE sqlrp_linear_vector (
    "projection"  String,
    vector        Int32,
    bias          Float64 DEFAULT 0,
    power         Int32 DEFAULT 1
) ENGINE = MergeTree ORDER BY ("projection", vector);

-- combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors} K_vector
CREATE TABLE sqlrp_combiner_term (
    "projection"  String,
    term          Int32,
    component     Int32,
    weight        Float64
) ENGINE = MergeTree ORDER BY ("projection", term);

CREATE TABLE sqlrp_combiner_factor (
    "projection"  String,
    term          Int32,
    position      Int32,
    vector        Int32
) ENGINE = MergeTree ORDER BY ("projection", term, position)
