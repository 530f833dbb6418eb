-- Many nodes (SPEC §11.4). Rooms map to 1024 shards (hash(room_id) % 1024, never changed); a
-- node owns a shard through its lease row, timed by the database clock. Each acquisition bumps
-- the shard's epoch, and every command commit is fenced on it: the commit reads the lease row
-- in share mode (an acquisition waits for commits in flight, later commits see the new epoch)
-- and fails if the epoch is not the one its node holds.
CREATE TABLE IF NOT EXISTS room_shard_lease (
    shard          INT          NOT NULL PRIMARY KEY,
    owner_node     VARCHAR(64)  NOT NULL DEFAULT '',
    -- The owner's public API origin, where the other nodes forward the shard's commands.
    owner_url      VARCHAR(255) NOT NULL DEFAULT '',
    epoch          BIGINT       NOT NULL DEFAULT 0,
    -- Database clock, ms. 0: free (never owned, or released).
    lease_until_ms BIGINT       NOT NULL DEFAULT 0,
    KEY idx_room_shard_lease_owner (owner_node, lease_until_ms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- 32 x 32 rows: both engines cap recursion depth near 1000.
INSERT IGNORE INTO room_shard_lease (shard)
WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < 31)
SELECT hi.n * 32 + lo.n FROM seq AS hi CROSS JOIN seq AS lo;

-- The live nodes: each renews its row with its leases; shards are spread over these.
CREATE TABLE IF NOT EXISTS room_cluster_node (
    node_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
    url            VARCHAR(255) NOT NULL,
    alive_until_ms BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The epoch the snapshot was last written under: a write under an older epoch is refused.
ALTER TABLE room_snapshot ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;

-- The room's shard, so an owner relays its own shards' rows first (-1: written before this
-- migration; such rows are left to the safety-net claim).
ALTER TABLE room_outbox ADD COLUMN shard INT NOT NULL DEFAULT -1;

-- One id per database: it names the cluster's keys in Redis, so clusters sharing a Redis never
-- read each other's shard directory.
CREATE TABLE IF NOT EXISTS room_cluster (
    id         INT         NOT NULL PRIMARY KEY,
    cluster_id VARCHAR(64) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT IGNORE INTO room_cluster (id, cluster_id) VALUES (1, UUID());
