-- The rooms' event history; mirrors migrations/mysql/0009_outbox_history.sql (the comments
-- there say what the column and the index are for).
ALTER TABLE room_outbox ADD COLUMN room_version INTEGER NULL;
CREATE INDEX IF NOT EXISTS idx_room_outbox_history ON room_outbox (room_id, room_version);
