-- Delivery policy v2. A row parked as `failed` records why (permanent, group_id_too_long,
-- max_attempts, ...), so `outbox stats` can count parked rows by reason.
ALTER TABLE room_outbox ADD COLUMN park_reason VARCHAR(32) NULL;

-- Per-room order: a room's undelivered rows (lock_until_ms is non-NULL exactly for pending,
-- retryable and delivering rows), so the worker finds the oldest one of a room without
-- walking its delivered rows, however many accumulate.
CREATE INDEX idx_room_outbox_room_undelivered ON room_outbox (room_id, lock_until_ms);
