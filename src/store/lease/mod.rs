//! Shard leases and cluster membership (SPEC §11.4): `room_shard_lease` holds one row per
//! shard (owner node, its URL, the epoch, `lease_until_ms` on the database clock) and
//! `room_cluster_node` one row per live node. [`LeaseRepository`] is a supertrait of
//! [`Repository`](crate::store::Repository); its one implementation, for [`SqlRepository`] over
//! any [`Backend`], runs the statements of `sql.rs`. Every acquisition bumps the shard's epoch;
//! every command commit is fenced on it ([`RoomCommit::fence`](crate::store::RoomCommit::fence),
//! read by the command path's own statement).

mod sql;

use std::time::Duration;

use async_trait::async_trait;

use crate::store::backend::run::Run;
use crate::store::backend::{Backend, SqlRepository};
use crate::store::error::StoreError;

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

/// `room_shard_lease` as read, with the time left on the database clock.
#[derive(sqlx::FromRow)]
struct LeaseRow {
    shard: i32,
    owner_node: String,
    owner_url: String,
    epoch: i64,
    remaining_ms: i64,
}

impl From<LeaseRow> for ShardLease {
    fn from(r: LeaseRow) -> Self {
        ShardLease {
            shard: u16::try_from(r.shard).unwrap_or(u16::MAX),
            owner_node: r.owner_node,
            owner_url: r.owner_url,
            epoch: r.epoch.max(0) as u64,
            remaining: (r.remaining_ms > 0).then(|| Duration::from_millis(r.remaining_ms as u64)),
        }
    }
}

/// `room_cluster_node` as read.
#[derive(sqlx::FromRow)]
struct NodeRow {
    node_id: String,
    url: String,
}

impl From<NodeRow> for ClusterNode {
    fn from(r: NodeRow) -> Self {
        ClusterNode { node_id: r.node_id, url: r.url }
    }
}

#[async_trait]
impl<DB: Backend> LeaseRepository for SqlRepository<DB> {
    async fn join_cluster(&self, node_id: &str, url: &str, ttl: Duration) -> Result<(), StoreError> {
        sql::join::<DB>(node_id, url, ttl).execute(&self.pool).await?;
        Ok(())
    }

    async fn leave_cluster(&self, node_id: &str) -> Result<(), StoreError> {
        sql::release::<DB>(node_id, None).execute(&self.pool).await?;
        sql::leave::<DB>(node_id).execute(&self.pool).await?;
        Ok(())
    }

    async fn live_nodes(&self) -> Result<Vec<ClusterNode>, StoreError> {
        let rows = sql::live_nodes::<DB>().fetch_all::<NodeRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn renew_shards(&self, node_id: &str, ttl: Duration) -> Result<Vec<ShardLease>, StoreError> {
        sql::renew::<DB>(node_id, ttl).execute(&self.pool).await?;
        let rows = sql::held::<DB>(node_id, None).fetch_all::<LeaseRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn acquire_shards(
        &self,
        node_id: &str,
        url: &str,
        shards: &[u16],
        ttl: Duration,
    ) -> Result<Vec<ShardLease>, StoreError> {
        if shards.is_empty() {
            return Ok(Vec::new());
        }
        if sql::acquire::<DB>(node_id, url, shards, ttl).execute(&self.pool).await? == 0 {
            return Ok(Vec::new());
        }
        let rows = sql::held::<DB>(node_id, Some(shards)).fetch_all::<LeaseRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn release_shards(&self, node_id: &str, shards: &[u16]) -> Result<u64, StoreError> {
        if shards.is_empty() {
            return Ok(0);
        }
        Ok(sql::release::<DB>(node_id, Some(shards)).execute(&self.pool).await?)
    }

    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError> {
        let rows = sql::all::<DB>().fetch_all::<LeaseRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn shard_lease(&self, shard: u16) -> Result<Option<ShardLease>, StoreError> {
        Ok(sql::one::<DB>(shard).fetch_optional::<LeaseRow>(&self.pool).await?.map(Into::into))
    }

    async fn cluster_id(&self) -> Result<String, StoreError> {
        let (id,) = sql::cluster_id::<DB>().fetch_one(&self.pool).await?;
        Ok(id)
    }
}
