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
