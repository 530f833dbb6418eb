-- Delivery policy v2; mirrors migrations/mysql/0003_outbox_park_reason.sql.
ALTER TABLE room_outbox ADD COLUMN park_reason TEXT NULL;

CREATE INDEX IF NOT EXISTS idx_room_outbox_room_undelivered ON room_outbox (room_id, lock_until_ms);
