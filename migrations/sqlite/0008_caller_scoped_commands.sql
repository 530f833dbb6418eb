-- Mirrors migrations/mysql/0008_caller_scoped_commands.sql (the comments there say why). The
-- column's UNIQUE constraint cannot be dropped in SQLite: the table is rebuilt.
CREATE TABLE room_command_log_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    command_id    TEXT    NOT NULL,
    caller        TEXT    NOT NULL DEFAULT '',
    room_id       TEXT    NOT NULL,
    command_type  TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    request_id    TEXT    NOT NULL,
    applied       INTEGER NOT NULL,
    room_version  INTEGER NOT NULL,
    outcome       TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    UNIQUE (command_id, caller)
);
INSERT INTO room_command_log_new
    (id, command_id, caller, room_id, command_type, fingerprint, request_id, applied, room_version, outcome, created_at_ms)
    SELECT id, command_id, '', room_id, command_type, fingerprint, request_id, applied, room_version, outcome, created_at_ms
    FROM room_command_log;
DROP TABLE room_command_log;
ALTER TABLE room_command_log_new RENAME TO room_command_log;
CREATE INDEX IF NOT EXISTS idx_room_command_log_room ON room_command_log (room_id, id);

ALTER TABLE room_payment_refund RENAME COLUMN command_id TO wallet_key;
