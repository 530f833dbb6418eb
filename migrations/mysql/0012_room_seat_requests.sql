-- Mic seats (contract v5): the seats themselves are in the room's snapshot (at most 20); a
-- room's pending seat requests and invitations are rows, one per user, like its members, so
-- the snapshot every command rewrites never carries up to 100 of them. expires_at_ms is when
-- one runs out: every node looks for due rows of the rooms it owns and expires each with a
-- command of its own (RoomSeatRequestExpired, once).

CREATE TABLE IF NOT EXISTS room_seat_request (
    room_id       VARCHAR(64)  NOT NULL,
    user_id       VARCHAR(64)  NOT NULL,
    kind          VARCHAR(8)   NOT NULL,
    seat_index    BIGINT       NULL,
    expires_at_ms BIGINT       NOT NULL,
    by_actor      VARCHAR(160) NOT NULL DEFAULT '',
    PRIMARY KEY (room_id, user_id),
    KEY room_seat_request_expiry (expires_at_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
