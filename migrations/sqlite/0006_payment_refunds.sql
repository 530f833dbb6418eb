-- Gifts whose debit is refunded; mirrors migrations/mysql/0006_payment_refunds.sql (the
-- comments there say why the table exists).
CREATE TABLE IF NOT EXISTS room_payment_refund (
    command_id            TEXT    NOT NULL PRIMARY KEY,
    room_id               TEXT    NOT NULL,
    refunded_at_ms        INTEGER NOT NULL,
    wallet_refunded_at_ms INTEGER NULL
);
CREATE INDEX IF NOT EXISTS idx_room_payment_refund_unfinished
    ON room_payment_refund (wallet_refunded_at_ms, refunded_at_ms);
