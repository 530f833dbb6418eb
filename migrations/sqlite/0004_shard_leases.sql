-- Many nodes; mirrors migrations/mysql/0004_shard_leases.sql (a cluster needs MySQL, but the
-- schema is the same everywhere).
CREATE TABLE IF NOT EXISTS room_shard_lease (
    shard          INTEGER NOT NULL PRIMARY KEY,
    owner_node     TEXT    NOT NULL DEFAULT '',
    owner_url      TEXT    NOT NULL DEFAULT '',
    epoch          INTEGER NOT NULL DEFAULT 0,
    lease_until_ms INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX IF NOT EXISTS idx_room_shard_lease_owner ON room_shard_lease (owner_node, lease_until_ms);

INSERT OR IGNORE INTO room_shard_lease (shard)
WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < 31)
SELECT hi.n * 32 + lo.n FROM seq AS hi CROSS JOIN seq AS lo;

CREATE TABLE IF NOT EXISTS room_cluster_node (
    node_id        TEXT    NOT NULL PRIMARY KEY,
    url            TEXT    NOT NULL,
    alive_until_ms INTEGER NOT NULL
);

ALTER TABLE room_snapshot ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;

ALTER TABLE room_outbox ADD COLUMN shard INTEGER NOT NULL DEFAULT -1;

CREATE TABLE IF NOT EXISTS room_cluster (
    id         INTEGER NOT NULL PRIMARY KEY,
    cluster_id TEXT    NOT NULL
);

INSERT OR IGNORE INTO room_cluster (id, cluster_id) VALUES (1, lower(hex(randomblob(16))));
