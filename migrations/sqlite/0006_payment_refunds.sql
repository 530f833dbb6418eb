-- Gifts whose debit was refunded; mirrors migrations/mysql/0006_payment_refunds.sql (the
-- comments there say why the table exists).
CREATE TABLE IF NOT EXISTS room_payment_refund (
    command_id     TEXT    NOT NULL PRIMARY KEY,
    room_id        TEXT    NOT NULL,
    refunded_at_ms INTEGER NOT NULL
);
