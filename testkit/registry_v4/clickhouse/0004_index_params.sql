-- sqlrp registry, version 4 (ClickHouse): the index's structure as JSON (see the DuckDB file); kept so
-- that every engine's registry has the same versions (search is refused on ClickHouse).
ALTER TABLE sqlrp_index ADD COLUMN params Nullable(String)
