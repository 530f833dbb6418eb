-- The claim by room; mirrors migrations/mysql/0007_outbox_room_claim.sql (the comments there
-- say what each index is for).
CREATE INDEX IF NOT EXISTS idx_room_outbox_status_room ON room_outbox (status, room_id, id);
CREATE INDEX IF NOT EXISTS idx_room_outbox_room ON room_outbox (room_id, id);
