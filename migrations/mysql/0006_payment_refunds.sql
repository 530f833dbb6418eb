-- Gifts whose debit is refunded because nothing committed (SPEC §11.4). The wallet answers a
-- repeated idempotency key with its first answer even after a refund, so a retry of such a gift
-- under the same command_id would commit unpaid: the command path refuses it (409
-- payment_refunded) when its command_id is here. Kept like room_command_log, for good: both
-- are the memory of what a command_id did, and it must survive restarts and rooms moving
-- between nodes.
CREATE TABLE IF NOT EXISTS room_payment_refund (
    command_id            VARCHAR(128) NOT NULL PRIMARY KEY,
    room_id               VARCHAR(64)  NOT NULL,
    -- Database clock, ms: when the refund was decided (recorded before the wallet is called).
    refunded_at_ms        BIGINT       NOT NULL,
    -- When the wallet confirmed the refund; NULL until then (the owner of the room sends it
    -- again until it does: a refund is idempotent by key).
    wallet_refunded_at_ms BIGINT       NULL,
    KEY idx_room_payment_refund_unfinished (wallet_refunded_at_ms, refunded_at_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
