-- Hot rooms: a command writes what it changed, never the whole room. Members and senders'
-- gift totals get their own rows; room_snapshot.state keeps the small state (owner, title,
-- status, heat, top-10 gift rank, version, member_count) and stays the version fence.

CREATE TABLE IF NOT EXISTS room_member (
    room_id      VARCHAR(64) NOT NULL,
    user_id      VARCHAR(64) NOT NULL,
    joined_at_ms BIGINT      NOT NULL,
    PRIMARY KEY (room_id, user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS room_gift_total (
    room_id       VARCHAR(64) NOT NULL,
    user_id       VARCHAR(64) NOT NULL,
    -- Sum of the sender's gifts (never above the room's heat, a BIGINT).
    total_value   BIGINT      NOT NULL,
    -- Room version of the sender's first gift: rank ties go to the earliest.
    first_version BIGINT      NOT NULL,
    PRIMARY KEY (room_id, user_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Move the members and senders out of the snapshots written by 0001 (a JSON object each,
-- keyed by user id; ids are [A-Za-z0-9_.-], so quoting them in a JSON path is safe).
INSERT INTO room_member (room_id, user_id, joined_at_ms)
SELECT s.room_id, k.user_id,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(s.state, CONCAT('$.members."', k.user_id, '".joined_at_ms'))) AS SIGNED)
FROM room_snapshot s,
     JSON_TABLE(JSON_KEYS(s.state, '$.members'), '$[*]' COLUMNS (user_id VARCHAR(64) PATH '$')) AS k;

INSERT INTO room_gift_total (room_id, user_id, total_value, first_version)
SELECT s.room_id, k.user_id,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(s.state, CONCAT('$.senders."', k.user_id, '".total_value'))) AS SIGNED),
       CAST(JSON_UNQUOTE(JSON_EXTRACT(s.state, CONCAT('$.senders."', k.user_id, '".first_version'))) AS SIGNED)
FROM room_snapshot s,
     JSON_TABLE(JSON_KEYS(s.state, '$.senders'), '$[*]' COLUMNS (user_id VARCHAR(64) PATH '$')) AS k;

UPDATE room_snapshot
SET state = JSON_SET(JSON_REMOVE(state, '$.members', '$.senders'), '$.member_count', JSON_LENGTH(state, '$.members'))
WHERE JSON_CONTAINS_PATH(state, 'one', '$.members');
