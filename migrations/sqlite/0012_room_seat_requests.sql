-- Mic seats (contract v5): a room's pending seat requests and invitations, one row per user
-- (the seats themselves are in the snapshot). See the MySQL migration for the why.

CREATE TABLE IF NOT EXISTS room_seat_request (
    room_id       TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    seat_index    INTEGER NULL,
    expires_at_ms INTEGER NOT NULL,
    by_actor      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (room_id, user_id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS room_seat_request_expiry ON room_seat_request (expires_at_ms);
