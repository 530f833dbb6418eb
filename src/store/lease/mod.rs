//! Shard leases and cluster membership (SPEC §11.4): `room_shard_lease` holds one row per
//! shard (owner node, its URL, the epoch, `lease_until_ms` on the database clock) and
//! `room_cluster_node` one row per live node. [`LeaseRepository`] is a supertrait of
//! [`Repository`](super::Repository); the SQL is written once in `lease_sql.rs` for both
//! backends. Every acquisition bumps the shard's epoch; every command commit is fenced on it
//! ([`RoomCommit::fence`](super::RoomCommit::fence)).

use std::time::Duration;

use async_trait::async_trait;

use super::types::StoreError;

/// A shard's lease row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    /// The shard.
    pub shard: u16,
    /// The node holding (or that last held) it; empty when never owned.
    pub owner_node: String,
    /// That node's public API origin.
    pub owner_url: String,
    /// Bumped by every acquisition.
    pub epoch: u64,
    /// The lease runs this much longer on the database clock (zero or less: free).
    pub remaining: Option<Duration>,
}

impl ShardLease {
    /// True while the lease runs (its owner may be serving the shard).
    pub fn is_live(&self) -> bool {
        self.remaining.is_some()
    }
}

/// A node that renewed its membership row in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its `node_id`.
    pub node_id: String,
    /// Its public API origin.
    pub url: String,
}

/// Shard leases and membership; times are the database's.
#[async_trait]
pub trait LeaseRepository: Send + Sync {
    /// Writes (or refreshes) `node_id`'s membership row, alive for `ttl` from now.
    async fn join_cluster(&self, node_id: &str, url: &str, ttl: Duration) -> Result<(), StoreError>;

    /// Removes `node_id`'s membership row and frees every shard it holds (its epochs stay, so
    /// the next owner's are newer).
    async fn leave_cluster(&self, node_id: &str) -> Result<(), StoreError>;

    /// The nodes whose membership has not expired, by `node_id`.
    async fn live_nodes(&self) -> Result<Vec<ClusterNode>, StoreError>;

    /// Extends every unexpired lease `node_id` holds to `ttl` from now, and returns the leases
    /// it holds afterwards (an expired one is not revived: it is lost).
    async fn renew_shards(&self, node_id: &str, ttl: Duration) -> Result<Vec<ShardLease>, StoreError>;

    /// Takes those of `shards` whose lease has expired (or was released) for `node_id`,
    /// bumping each one's epoch, and returns the leases it won.
    async fn acquire_shards(
        &self,
        node_id: &str,
        url: &str,
        shards: &[u16],
        ttl: Duration,
    ) -> Result<Vec<ShardLease>, StoreError>;

    /// Frees those of `shards` that `node_id` holds (a handoff to their preferred node).
    async fn release_shards(&self, node_id: &str, shards: &[u16]) -> Result<u64, StoreError>;

    /// Every shard's lease row, by shard.
    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError>;

    /// One shard's lease row.
    async fn shard_lease(&self, shard: u16) -> Result<Option<ShardLease>, StoreError>;

    /// The id this database gives its cluster (names its keys in Redis).
    async fn cluster_id(&self) -> Result<String, StoreError>;
}
