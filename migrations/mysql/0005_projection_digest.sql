-- sqlrp registry, version 5 (mysql): a digest of each stored projection (SHA-256 of its canonical
-- matrix, scale, combiner and parameters: sqlrp/registry/validate.py), written with it and compared
-- on every load, so that a matrix changed outside sqlrp is refused. The upgrade computes it for the
-- projections already stored (in Python, after these statements).
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

ALTER TABLE sqlrp_projection ADD COLUMN digest TEXT;
