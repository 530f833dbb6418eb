//! The SQL of [`LeaseRepository`](super::LeaseRepository), once for both backends; each
//! repository runs it on its pool through [`impl_lease_repository`].

use std::time::Duration;

use sqlx::QueryBuilder;

use super::lease::{ClusterNode, ShardLease};
use super::sql::{Dialect, millis};

/// `room_shard_lease` as read, with the time left on the database clock.
#[derive(sqlx::FromRow)]
pub(super) struct LeaseRow {
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
pub(super) struct NodeRow {
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

pub(super) fn join<DB: Dialect>(node_id: &str, url: &str, ttl: Duration) -> QueryBuilder<DB> {
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

pub(super) fn leave<DB: Dialect>(node_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_cluster_node WHERE node_id = ");
    DB::bind_str(&mut q, node_id);
    q
}

pub(super) fn live_nodes<DB: Dialect>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT node_id, url FROM room_cluster_node WHERE alive_until_ms > {} ORDER BY node_id",
        DB::NOW_MS
    ))
}

/// Extends `node_id`'s unexpired leases.
pub(super) fn renew<DB: Dialect>(node_id: &str, ttl: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_shard_lease SET lease_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(ttl));
    q.push(" WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    q.push(format!(" AND lease_until_ms > {now}"));
    q
}

/// `node_id`'s unexpired leases, optionally only among `shards`.
pub(super) fn held<DB: Dialect>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
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
pub(super) fn acquire<DB: Dialect>(
    node_id: &str,
    url: &str,
    shards: &[u16],
    ttl: Duration,
) -> QueryBuilder<DB> {
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
pub(super) fn release<DB: Dialect>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_shard_lease SET lease_until_ms = 0 WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    if let Some(shards) = shards {
        push_shards(&mut q, shards);
    }
    q
}

pub(super) fn all<DB: Dialect>() -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" ORDER BY shard");
    q
}

pub(super) fn one<DB: Dialect>(shard: u16) -> QueryBuilder<DB> {
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

/// [`LeaseRepository`](super::LeaseRepository) for a repository with a `pool` of `$db`.
macro_rules! impl_lease_repository {
    ($repo:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::LeaseRepository for $repo {
            async fn join_cluster(
                &self,
                node_id: &str,
                url: &str,
                ttl: std::time::Duration,
            ) -> Result<(), StoreError> {
                lease_sql::join::<$db>(node_id, url, ttl).build().execute(&self.pool).await?;
                Ok(())
            }

            async fn leave_cluster(&self, node_id: &str) -> Result<(), StoreError> {
                lease_sql::release::<$db>(node_id, None).build().execute(&self.pool).await?;
                lease_sql::leave::<$db>(node_id).build().execute(&self.pool).await?;
                Ok(())
            }

            async fn live_nodes(&self) -> Result<Vec<$crate::store::ClusterNode>, StoreError> {
                let mut q = lease_sql::live_nodes::<$db>();
                let rows = q.build_query_as::<lease_sql::NodeRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn renew_shards(
                &self,
                node_id: &str,
                ttl: std::time::Duration,
            ) -> Result<Vec<$crate::store::ShardLease>, StoreError> {
                lease_sql::renew::<$db>(node_id, ttl).build().execute(&self.pool).await?;
                let mut q = lease_sql::held::<$db>(node_id, None);
                let rows = q.build_query_as::<lease_sql::LeaseRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn acquire_shards(
                &self,
                node_id: &str,
                url: &str,
                shards: &[u16],
                ttl: std::time::Duration,
            ) -> Result<Vec<$crate::store::ShardLease>, StoreError> {
                if shards.is_empty() {
                    return Ok(Vec::new());
                }
                let mut take = lease_sql::acquire::<$db>(node_id, url, shards, ttl);
                if take.build().execute(&self.pool).await?.rows_affected() == 0 {
                    return Ok(Vec::new());
                }
                let mut q = lease_sql::held::<$db>(node_id, Some(shards));
                let rows = q.build_query_as::<lease_sql::LeaseRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn release_shards(&self, node_id: &str, shards: &[u16]) -> Result<u64, StoreError> {
                if shards.is_empty() {
                    return Ok(0);
                }
                let mut q = lease_sql::release::<$db>(node_id, Some(shards));
                Ok(q.build().execute(&self.pool).await?.rows_affected())
            }

            async fn shard_leases(&self) -> Result<Vec<$crate::store::ShardLease>, StoreError> {
                let mut q = lease_sql::all::<$db>();
                let rows = q.build_query_as::<lease_sql::LeaseRow>().fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn shard_lease(&self, shard: u16) -> Result<Option<$crate::store::ShardLease>, StoreError> {
                let mut q = lease_sql::one::<$db>(shard);
                Ok(q.build_query_as::<lease_sql::LeaseRow>()
                    .fetch_optional(&self.pool)
                    .await?
                    .map(Into::into))
            }

            async fn cluster_id(&self) -> Result<String, StoreError> {
                let q = sqlx::query_scalar("SELECT cluster_id FROM room_cluster WHERE id = 1");
                Ok(q.fetch_one(&self.pool).await?)
            }
        }
    };
}

pub(super) use impl_lease_repository;
