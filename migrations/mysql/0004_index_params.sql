-- sqlrp registry, version 4 (mysql): an index's structure (issue 23: inverted lists and RaBitQ
-- codes in place of LSH bands) as JSON: kind, d, lists, code bits, rotation rounds and seed,
-- metric, default probes. An index of version 3 (bands) has none, and is refused with a note to
-- rebuild it.
-- Rendered for mysql from sqlrp/registry/schema.py by `python -m migrations`: do not edit.

ALTER TABLE sqlrp_index ADD COLUMN params TEXT;
