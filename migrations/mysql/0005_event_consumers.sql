-- Event consumers other than IM (SPEC §11.6): the activity webhook, the audit log. Each reads
-- room_outbox by id from its own position, so IM delivery (the status columns of room_outbox)
-- and every other consumer progress independently: one slow or failing receiver never holds
-- back the others, and retention keeps a row until every enabled consumer has passed it.
CREATE TABLE IF NOT EXISTS room_event_consumer (
    name           VARCHAR(64)  NOT NULL PRIMARY KEY,
    -- Every room_outbox id up to this one has been passed (0: none yet).
    position       BIGINT       NOT NULL DEFAULT 0,
    -- The instance holding the lease (one at a time consumes, so events go out in id order);
    -- NULL once released or reset.
    owner          VARCHAR(128) NULL,
    -- Database clock, ms: the node's clock never decides who owns a consumer. 0: free.
    lease_until_ms BIGINT       NOT NULL DEFAULT 0,
    updated_at_ms  BIGINT       NOT NULL,
    -- The last failed delivery, for operators; cleared by the next success.
    last_error     VARCHAR(512) NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The audit consumer's log: append-only, one row per event, kept after room_outbox's rows are
-- purged. The unique event_id makes a redelivered event (a consumer resuming from a position
-- it had not yet recorded) a no-op instead of a duplicate.
CREATE TABLE IF NOT EXISTS room_audit_log (
    id              BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id        VARCHAR(64) NOT NULL,
    event_type      VARCHAR(64) NOT NULL,
    room_id         VARCHAR(64) NOT NULL,
    envelope        LONGTEXT    NOT NULL,
    -- When the command was applied (the envelope's occurred_at_ms), and when the audit
    -- consumer recorded it (database clock), ms.
    occurred_at_ms  BIGINT      NOT NULL,
    recorded_at_ms  BIGINT      NOT NULL,
    UNIQUE KEY uk_room_audit_log_event_id (event_id),
    -- A room's history, in the order it was recorded.
    KEY idx_room_audit_log_room (room_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
