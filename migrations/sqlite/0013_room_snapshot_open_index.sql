-- Bounded costs: the idle scan's index of open rooms and the owner's column and index the
-- open-room cap counts on; mirrors migrations/mysql/0013_room_snapshot_open_index.sql (see
-- there for the why).

ALTER TABLE room_snapshot ADD COLUMN owner_id TEXT NOT NULL DEFAULT '';

UPDATE room_snapshot
SET owner_id = json_extract(state, '$.owner_id')
WHERE json_valid(state) AND json_type(state, '$.owner_id') = 'text';

CREATE INDEX IF NOT EXISTS idx_room_snapshot_open ON room_snapshot (status, room_id);

CREATE INDEX IF NOT EXISTS idx_room_snapshot_owner ON room_snapshot (owner_id, status);
