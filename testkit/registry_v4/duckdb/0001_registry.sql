-- sqlrp registry, version 1 (DuckDB).  A projection is stored as relational rows:
-- its non-zero matrix entries (linear stage) and the terms of its combiner stage.
CREATE TABLE sqlrp_projection (
    name        VARCHAR PRIMARY KEY,
    method      VARCHAR NOT NULL,
    params      JSON NOT NULL,
    d           INTEGER NOT NULL,
    k           INTEGER NOT NULL,
    p           INTEGER NOT NULL,
    seed        BIGINT,
    scale       DOUBLE NOT NULL,
    created_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1 for sign matrices
CREATE TABLE sqlrp_linear_entry (
    projection  VARCHAR NOT NULL,
    vector      INTEGER NOT NULL,
    feature     INTEGER NOT NULL,
    weight      DOUBLE NOT NULL,
    PRIMARY KEY (projection, vector, feature)
);

-- per-vector options of the linear stage, only where they differ from bias 0 / power 1
CREATE TABLE sqlrp_linear_vector (
    projection  VARCHAR NOT NULL,
    vector      INTEGER NOT NULL,
    bias        DOUBLE NOT NULL DEFAULT 0,
    power       INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (projection, vector)
);

-- combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors} K_vector
CREATE TABLE sqlrp_combiner_term (
    projection  VARCHAR NOT NULL,
    term        INTEGER NOT NULL,
    component   INTEGER NOT NULL,
    weight      DOUBLE NOT NULL,
    PRIMARY KEY (projection, term)
);

CREATE TABLE sqlrp_combiner_factor (
    projection  VARCHAR NOT NULL,
    term        INTEGER NOT NULL,
    position    INTEGER NOT NULL,
    vector      INTEGER NOT NULL,
    PRIMARY KEY (projection, term, position)
);
