-- Event consumers other than IM; mirrors migrations/mysql/0005_event_consumers.sql (the comments
-- there say why each column exists).
CREATE TABLE IF NOT EXISTS room_event_consumer (
    name           TEXT    NOT NULL PRIMARY KEY,
    position       INTEGER NOT NULL DEFAULT 0,
    owner          TEXT    NULL,
    lease_until_ms INTEGER NOT NULL DEFAULT 0,
    updated_at_ms  INTEGER NOT NULL,
    last_error     TEXT    NULL
);

-- AUTOINCREMENT: an id is never reused, even after the newest row is deleted, so "by
-- ascending id" stays the order rows were recorded in.
CREATE TABLE IF NOT EXISTS room_audit_log (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL UNIQUE,
    event_type      TEXT    NOT NULL,
    room_id         TEXT    NOT NULL,
    envelope        TEXT    NOT NULL,
    occurred_at_ms  INTEGER NOT NULL,
    recorded_at_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_room_audit_log_room ON room_audit_log (room_id, id);
