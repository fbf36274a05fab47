-- sqlrp registry, version 1 (Spark SQL).  The same tables as migrations/duckdb/0001_registry.sql,
-- without keys or NOT NULL: Spark's file-source (parquet) tables refuse PRIMARY KEY ("does not
-- support CONSTRAINT") and accept NOT NULL only to drop it.  params holds JSON text (STRING).
-- Column defaults work on parquet tables (Spark 3.4+).
CREATE TABLE sqlrp_projection (
    name        STRING,
    method      STRING,
    params      STRING,
    d           INT,
    k           INT,
    p           INT,
    seed        BIGINT,
    scale       DOUBLE,
    created_at  TIMESTAMP DEFAULT current_timestamp()
) USING parquet;

-- linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1 for sign matrices
CREATE TABLE sqlrp_linear_entry (
    projection  STRING,
    vector      INT,
    feature     INT,
    weight      DOUBLE
) USING parquet;

-- per-vector options of the linear stage, only where they differ from bias 0 / power 1
CREATE TABLE sqlrp_linear_vector (
    projection  STRING,
    vector      INT,
    bias        DOUBLE DEFAULT 0,
    power       INT DEFAULT 1
) USING parquet;

-- combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors} K_vector
CREATE TABLE sqlrp_combiner_term (
    projection  STRING,
    term        INT,
    component   INT,
    weight      DOUBLE
) USING parquet;

CREATE TABLE sqlrp_combiner_factor (
    projection  STRING,
    term        INT,
    position    INT,
    vector      INT
) USING parquet;
