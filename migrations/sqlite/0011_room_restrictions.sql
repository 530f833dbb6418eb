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

CREATE TABLE IF NOT EXISTS room_attribute (
    room_id  TEXT    NOT NULL,
    attr_key TEXT    NOT NULL,
    value    TEXT    NOT NULL,
    version  INTEGER NOT NULL,
    PRIMARY KEY (room_id, attr_key)
) WITHOUT ROWID;
