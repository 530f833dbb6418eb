-- room-service schema for MySQL 8 / MariaDB >= 10.6.
-- Identifier columns use a binary collation: ids are case-sensitive.

CREATE TABLE IF NOT EXISTS room_command_log (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    command_id    VARCHAR(128) NOT NULL,
    room_id       VARCHAR(64)  NOT NULL,
    command_type  VARCHAR(32)  NOT NULL,
    -- SHA-256 of the canonical command body: same id + different body -> 409.
    fingerprint   CHAR(64)     NOT NULL,
    request_id    VARCHAR(128) NOT NULL,
    applied       TINYINT(1)   NOT NULL,
    room_version  BIGINT       NOT NULL,
    -- The original outcome (version, event ids) replayed for a repeated command_id.
    outcome       LONGTEXT     NOT NULL,
    created_at_ms BIGINT       NOT NULL,
    UNIQUE KEY uk_room_command_log_command_id (command_id),
    KEY idx_room_command_log_room (room_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS room_outbox (
    id              BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id        VARCHAR(64)  NOT NULL,
    room_id         VARCHAR(64)  NOT NULL,
    event_type      VARCHAR(64)  NOT NULL,
    envelope        LONGTEXT     NOT NULL,
    status          VARCHAR(16)  NOT NULL,
    retry_count     INT          NOT NULL DEFAULT 0,
    last_error      VARCHAR(512) NULL,
    worker_id       VARCHAR(128) NULL,
    -- pending/retryable: earliest time a worker may claim the row (database clock, ms);
    -- delivering: lease expiry; delivered/failed: NULL. So the claim index below holds
    -- claimable rows only in its non-NULL range, however many delivered rows accumulate.
    lock_until_ms   BIGINT       NULL,
    created_at_ms   BIGINT       NOT NULL,
    updated_at_ms   BIGINT       NOT NULL,
    delivered_at_ms BIGINT       NULL,
    UNIQUE KEY uk_room_outbox_event_id (event_id),
    KEY idx_room_outbox_claim (lock_until_ms, id),
    KEY idx_room_outbox_status (status, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS room_snapshot (
    room_id       VARCHAR(64) NOT NULL PRIMARY KEY,
    -- Fences writers: a write names the version it expects to replace.
    version       BIGINT      NOT NULL,
    status        VARCHAR(16) NOT NULL,
    state         LONGTEXT    NOT NULL,
    updated_at_ms BIGINT      NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
