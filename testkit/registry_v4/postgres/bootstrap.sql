-- the version table as sqlrp/store.py created it on postgres up to registry version 4 (its _BOOTSTRAP)
CREATE TABLE IF NOT EXISTS sqlrp_schema_version ( version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)
