//! The SQL of [`LeaseRepository`], once for both backends, and the one implementation running
//! it: for [`SqlRepository`] over any [`Backend`].

use std::time::Duration;

use async_trait::async_trait;
use sqlx::QueryBuilder;

use super::backend::{Backend, Run};
use super::lease::{ClusterNode, LeaseRepository, ShardLease};
use super::repository::SqlRepository;
use super::sql::{Dialect, millis};
use super::types::StoreError;

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

fn select_leases<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT shard, owner_node, owner_url, epoch, lease_until_ms - {} AS remaining_ms FROM room_shard_lease",
        DB::NOW_MS
    ))
}

fn push_shards<DB: Dialect>(q: &mut QueryBuilder<DB>, shards: &[u16]) {
    q.push(" AND shard IN (");
    for (i, shard) in shards.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        DB::bind_i64(q, i64::from(*shard));
    }
    q.push(")");
}

fn join<DB: Dialect>(node_id: &str, url: &str, ttl: Duration) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("INSERT INTO room_cluster_node (node_id, url, alive_until_ms) VALUES (");
    DB::bind_str(&mut q, node_id);
    q.push(", ");
    DB::bind_str(&mut q, url);
    q.push(format!(", {} + ", DB::NOW_MS));
    DB::bind_i64(&mut q, millis(ttl));
    q.push(")");
    q.push(DB::upsert("node_id", &["url", "alive_until_ms"]));
    q
}

fn leave<DB: Dialect>(node_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_cluster_node WHERE node_id = ");
    DB::bind_str(&mut q, node_id);
    q
}

fn live_nodes<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT node_id, url FROM room_cluster_node WHERE alive_until_ms > {} ORDER BY node_id",
        DB::NOW_MS
    ))
}

/// Extends `node_id`'s unexpired leases.
fn renew<DB: Dialect>(node_id: &str, ttl: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_shard_lease SET lease_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(ttl));
    q.push(" WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    q.push(format!(" AND lease_until_ms > {now}"));
    q
}

/// `node_id`'s unexpired leases, optionally only among `shards`.
fn held<DB: Dialect>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    q.push(format!(" AND lease_until_ms > {}", DB::NOW_MS));
    if let Some(shards) = shards {
        push_shards(&mut q, shards);
    }
    q.push(" ORDER BY shard");
    q
}

/// Takes the free ones of `shards`, bumping their epochs.
fn acquire<DB: Dialect>(node_id: &str, url: &str, shards: &[u16], ttl: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new("UPDATE room_shard_lease SET owner_node = ");
    DB::bind_str(&mut q, node_id);
    q.push(", owner_url = ");
    DB::bind_str(&mut q, url);
    q.push(format!(", epoch = epoch + 1, lease_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(ttl));
    q.push(format!(" WHERE lease_until_ms <= {now}"));
    push_shards(&mut q, shards);
    q
}

/// Frees `node_id`'s leases (all of them, or those among `shards`).
fn release<DB: Dialect>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_shard_lease SET lease_until_ms = 0 WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    if let Some(shards) = shards {
        push_shards(&mut q, shards);
    }
    q
}

fn all<DB: Dialect>() -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" ORDER BY shard");
    q
}

fn one<DB: Dialect>(shard: u16) -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" WHERE shard = ");
    DB::bind_i64(&mut q, i64::from(shard));
    q
}

/// The epoch of `shard`, read so that no acquisition can commit before this transaction ends
/// (the commit fence).
pub(super) fn fence_epoch<DB: Dialect>(shard: u16) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("SELECT epoch FROM room_shard_lease WHERE shard = ");
    DB::bind_i64(&mut q, i64::from(shard));
    q.push(DB::SHARED_READ);
    q
}

#[async_trait]
impl<DB: Backend> LeaseRepository for SqlRepository<DB> {
    async fn join_cluster(&self, node_id: &str, url: &str, ttl: Duration) -> Result<(), StoreError> {
        join::<DB>(node_id, url, ttl).execute(&self.pool).await?;
        Ok(())
    }

    async fn leave_cluster(&self, node_id: &str) -> Result<(), StoreError> {
        release::<DB>(node_id, None).execute(&self.pool).await?;
        leave::<DB>(node_id).execute(&self.pool).await?;
        Ok(())
    }

    async fn live_nodes(&self) -> Result<Vec<ClusterNode>, StoreError> {
        let rows = live_nodes::<DB>().fetch_all::<NodeRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn renew_shards(&self, node_id: &str, ttl: Duration) -> Result<Vec<ShardLease>, StoreError> {
        renew::<DB>(node_id, ttl).execute(&self.pool).await?;
        let rows = held::<DB>(node_id, None).fetch_all::<LeaseRow>(&self.pool).await?;
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
        if acquire::<DB>(node_id, url, shards, ttl).execute(&self.pool).await? == 0 {
            return Ok(Vec::new());
        }
        let rows = held::<DB>(node_id, Some(shards)).fetch_all::<LeaseRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn release_shards(&self, node_id: &str, shards: &[u16]) -> Result<u64, StoreError> {
        if shards.is_empty() {
            return Ok(0);
        }
        Ok(release::<DB>(node_id, Some(shards)).execute(&self.pool).await?)
    }

    async fn shard_leases(&self) -> Result<Vec<ShardLease>, StoreError> {
        let rows = all::<DB>().fetch_all::<LeaseRow>(&self.pool).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn shard_lease(&self, shard: u16) -> Result<Option<ShardLease>, StoreError> {
        Ok(one::<DB>(shard).fetch_optional::<LeaseRow>(&self.pool).await?.map(Into::into))
    }

    async fn cluster_id(&self) -> Result<String, StoreError> {
        let mut q = QueryBuilder::new("SELECT cluster_id FROM room_cluster WHERE id = 1");
        let (id,) = q.fetch_one(&self.pool).await?;
        Ok(id)
    }
}
