-- Roles and moderation (contract v5): a room's mutes and bans, one row each like its members,
-- never inside the snapshot, so a room with 100,000 bans commits like a room with none.
-- until_ms is when it ends (ms since the epoch); expired rows are pruned without a command.

CREATE TABLE IF NOT EXISTS room_restriction (
    room_id  VARCHAR(64)   NOT NULL,
    kind     VARCHAR(8)    NOT NULL,
    user_id  VARCHAR(64)   NOT NULL,
    until_ms BIGINT        NOT NULL,
    reason   VARCHAR(1024) NOT NULL DEFAULT '',
    by_actor VARCHAR(160)  NOT NULL DEFAULT '',
    PRIMARY KEY (room_id, kind, user_id),
    KEY room_restriction_until (until_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A room's attributes (key → value, version), one row each: a command writes only the keys it
-- changed, never the room's up to 16 KB of values with every snapshot.
CREATE TABLE IF NOT EXISTS room_attribute (
    room_id  VARCHAR(64)   NOT NULL,
    attr_key VARCHAR(64)   NOT NULL,
    value    VARCHAR(2048) NOT NULL,
    version  BIGINT        NOT NULL,
    PRIMARY KEY (room_id, attr_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
