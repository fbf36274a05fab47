-- sqlrp registry, version 4 (Spark): the index's structure as JSON (see the DuckDB file); kept so that
-- every engine's registry has the same versions (search is refused on Spark).
ALTER TABLE sqlrp_index ADD COLUMNS (params STRING);
