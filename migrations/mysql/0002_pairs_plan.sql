-- sqlrp registry, version 2 (mysql): the `pairs` strategy's plan (sqlrp/compiler/pairs.py), stored
-- with its projection so that it is planned once per matrix rather than once per process (planning
-- a large matrix takes seconds).
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

-- sqlrp_pairs_entry: one plan per column budget (-1: no cap). Node q >= 0 is partial q, node -1 - v
-- is output vector v; each row is one signed column it reads: feature c < d, or partial d + q.
-- `level` is the partial's nested select (0 for outputs).
CREATE TABLE `sqlrp_pairs_entry` (
  `projection` VARCHAR(255) NOT NULL,
  `budget` INT NOT NULL,
  `node` INT NOT NULL,
  `level` INT NOT NULL,
  `reads` INT NOT NULL,
  `sign` SMALLINT NOT NULL,
  PRIMARY KEY (`projection`, `budget`, `node`, `reads`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
