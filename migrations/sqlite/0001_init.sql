-- room-service schema for SQLite; mirrors migrations/mysql (see the comments there).

CREATE TABLE IF NOT EXISTS room_command_log (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id    TEXT    NOT NULL UNIQUE,
    room_id       TEXT    NOT NULL,
    command_type  TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    request_id    TEXT    NOT NULL,
    applied       INTEGER NOT NULL,
    room_version  INTEGER NOT NULL,
    outcome       TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_room_command_log_room ON room_command_log (room_id, id);

CREATE TABLE IF NOT EXISTS room_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL UNIQUE,
    room_id         TEXT    NOT NULL,
    event_type      TEXT    NOT NULL,
    envelope        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    retry_count     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NULL,
    worker_id       TEXT    NULL,
    lock_until_ms   INTEGER NULL,
    created_at_ms   INTEGER NOT NULL,
    updated_at_ms   INTEGER NOT NULL,
    delivered_at_ms INTEGER NULL
);
CREATE INDEX IF NOT EXISTS idx_room_outbox_claim ON room_outbox (lock_until_ms, id);
CREATE INDEX IF NOT EXISTS idx_room_outbox_status ON room_outbox (status, id);

CREATE TABLE IF NOT EXISTS room_snapshot (
    room_id       TEXT    NOT NULL PRIMARY KEY,
    version       INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
