-- Bounded costs (docs/DESIGN.md): two indexes of room_snapshot, so neither the idle scan nor the
-- open-room cap ever reads the whole table.
--
-- The idle scan pages through the open rooms in room id order: on (status, room_id) a page is
-- one range of the open rooms, and a closed room is never read (before, every node's scan
-- walked the primary key over every room ever created).
--
-- rooms.max_open_per_owner counts an owner's open rooms on every node of a cluster: the owner
-- gets a column of its own (it never changes; it is in the snapshot's state too), filled here
-- for the rooms written before, and an index (owner_id, status) the count is one range of.

ALTER TABLE room_snapshot ADD COLUMN owner_id VARCHAR(64) NOT NULL DEFAULT '';

UPDATE room_snapshot
SET owner_id = COALESCE(JSON_UNQUOTE(JSON_EXTRACT(state, '$.owner_id')), '')
WHERE JSON_VALID(state) AND JSON_TYPE(JSON_EXTRACT(state, '$.owner_id')) = 'STRING';

CREATE INDEX idx_room_snapshot_open ON room_snapshot (status, room_id);

CREATE INDEX idx_room_snapshot_owner ON room_snapshot (owner_id, status);
