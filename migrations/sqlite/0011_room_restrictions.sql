-- Roles and moderation; mirrors migrations/mysql/0011_room_restrictions.sql.

CREATE TABLE IF NOT EXISTS room_restriction (
    room_id  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    user_id  TEXT    NOT NULL,
    until_ms INTEGER NOT NULL,
    reason   TEXT    NOT NULL DEFAULT '',
    by_actor TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (room_id, kind, user_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS room_restriction_until ON room_restriction (until_ms);
