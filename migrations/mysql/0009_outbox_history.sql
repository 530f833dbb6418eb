-- The rooms' event history (SPEC §13.2; docs/DESIGN.md, "The events API"). The outbox rows
-- already hold every envelope IM receives, in commit order; an IM event's row now carries its
-- room_version too (NULL for the events that never reach IM, and for rows written before this
-- migration), and a catch-up reads a room's events after a version with one range scan of
-- this index: `WHERE room_id = ? AND room_version > ? ORDER BY room_version LIMIT n`.
-- MariaDB adds the column in place (instant: appended last) and builds the index online.
ALTER TABLE room_outbox ADD COLUMN room_version BIGINT NULL;
CREATE INDEX idx_room_outbox_history ON room_outbox (room_id, room_version);
