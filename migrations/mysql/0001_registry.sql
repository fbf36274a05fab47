-- sqlrp registry, version 1 (mysql): a projection is stored as relational rows: its non-zero matrix
-- entries (linear stage) and the terms of its combiner stage.
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_projection: one row per stored projection; params is JSON, seed NULL for none.
CREATE TABLE `sqlrp_projection` (
  `name` VARCHAR(255) NOT NULL,
  `method` TEXT NOT NULL,
  `params` JSON NOT NULL,
  `d` INT NOT NULL,
  `k` INT NOT NULL,
  `p` INT NOT NULL,
  `seed` BIGINT,
  `scale` DOUBLE NOT NULL,
  `created_at` DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP(),
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- sqlrp_linear_entry: linear stage: K_v(x) = sum_i weight * x_feature (+ bias_v); weights are +-1
-- for sign matrices.
CREATE TABLE `sqlrp_linear_entry` (
  `projection` VARCHAR(255) NOT NULL,
  `vector` INT NOT NULL,
  `feature` INT NOT NULL,
  `weight` DOUBLE NOT NULL,
  PRIMARY KEY (`projection`, `vector`, `feature`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- sqlrp_linear_vector: per-vector options of the linear stage, only where they differ from bias 0 /
-- power 1.
CREATE TABLE `sqlrp_linear_vector` (
  `projection` VARCHAR(255) NOT NULL,
  `vector` INT NOT NULL,
  `bias` DOUBLE NOT NULL DEFAULT 0,
  `power` INT NOT NULL DEFAULT 1,
  PRIMARY KEY (`projection`, `vector`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- sqlrp_combiner_term: combiner stage: y_c = scale * sum_{terms of c} weight * prod_{factors}
-- K_vector.
CREATE TABLE `sqlrp_combiner_term` (
  `projection` VARCHAR(255) NOT NULL,
  `term` INT NOT NULL,
  `component` INT NOT NULL,
  `weight` DOUBLE NOT NULL,
  PRIMARY KEY (`projection`, `term`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- sqlrp_combiner_factor: the factors K_vector of each combiner term, by position.
CREATE TABLE `sqlrp_combiner_factor` (
  `projection` VARCHAR(255) NOT NULL,
  `term` INT NOT NULL,
  `position` INT NOT NULL,
  `vector` INT NOT NULL,
  PRIMARY KEY (`projection`, `term`, `position`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
