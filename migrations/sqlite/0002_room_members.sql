-- Hot rooms; mirrors migrations/mysql/0002_room_members.sql (see the comments there).

CREATE TABLE IF NOT EXISTS room_member (
    room_id      TEXT    NOT NULL,
    user_id      TEXT    NOT NULL,
    joined_at_ms INTEGER NOT NULL,
    PRIMARY KEY (room_id, user_id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS room_gift_total (
    room_id       TEXT    NOT NULL,
    user_id       TEXT    NOT NULL,
    total_value   INTEGER NOT NULL,
    first_version INTEGER NOT NULL,
    PRIMARY KEY (room_id, user_id)
) WITHOUT ROWID;

INSERT INTO room_member (room_id, user_id, joined_at_ms)
SELECT s.room_id, m.key, json_extract(m.value, '$.joined_at_ms')
FROM room_snapshot s, json_each(s.state, '$.members') m;

INSERT INTO room_gift_total (room_id, user_id, total_value, first_version)
SELECT s.room_id, g.key, json_extract(g.value, '$.total_value'), json_extract(g.value, '$.first_version')
FROM room_snapshot s, json_each(s.state, '$.senders') g;

UPDATE room_snapshot
SET state = json_set(json_remove(state, '$.members', '$.senders'), '$.member_count',
                     (SELECT COUNT(*) FROM json_each(room_snapshot.state, '$.members')))
WHERE json_type(state, '$.members') IS NOT NULL;
