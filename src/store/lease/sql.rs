//! The statements of the shard leases and the cluster membership
//! ([`LeaseRepository`](super::LeaseRepository)), built once for both backends over a
//! [`Backend`].

use std::time::Duration;

use sqlx::QueryBuilder;

use crate::store::backend::Backend;
use crate::store::backend::bind::millis;

/// Every column of a lease row, with the time it has left on the database clock.
fn select_leases<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT shard, owner_node, owner_url, epoch, lease_until_ms - {} AS remaining_ms FROM room_shard_lease",
        DB::NOW_MS
    ))
}

/// Appends ` AND shard IN (...)`.
fn push_shards<DB: Backend>(q: &mut QueryBuilder<DB>, shards: &[u16]) {
    q.push(" AND shard IN (");
    for (i, shard) in shards.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        DB::bind_i64(q, i64::from(*shard));
    }
    q.push(")");
}

/// Writes (or refreshes) a node's membership row, alive for `ttl` from now.
pub(super) fn join<DB: Backend>(node_id: &str, url: &str, ttl: Duration) -> QueryBuilder<DB> {
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

/// Deletes a node's membership row.
pub(super) fn leave<DB: Backend>(node_id: &str) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("DELETE FROM room_cluster_node WHERE node_id = ");
    DB::bind_str(&mut q, node_id);
    q
}

/// The nodes whose membership has not expired, by `node_id`.
pub(super) fn live_nodes<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new(format!(
        "SELECT node_id, url FROM room_cluster_node WHERE alive_until_ms > {} ORDER BY node_id",
        DB::NOW_MS
    ))
}

/// Extends `node_id`'s unexpired leases.
pub(super) fn renew<DB: Backend>(node_id: &str, ttl: Duration) -> QueryBuilder<DB> {
    let now = DB::NOW_MS;
    let mut q = QueryBuilder::new(format!("UPDATE room_shard_lease SET lease_until_ms = {now} + "));
    DB::bind_i64(&mut q, millis(ttl));
    q.push(" WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    q.push(format!(" AND lease_until_ms > {now}"));
    q
}

/// `node_id`'s unexpired leases, optionally only among `shards`.
pub(super) fn held<DB: Backend>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
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
pub(super) fn acquire<DB: Backend>(
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
pub(super) fn release<DB: Backend>(node_id: &str, shards: Option<&[u16]>) -> QueryBuilder<DB> {
    let mut q = QueryBuilder::new("UPDATE room_shard_lease SET lease_until_ms = 0 WHERE owner_node = ");
    DB::bind_str(&mut q, node_id);
    if let Some(shards) = shards {
        push_shards(&mut q, shards);
    }
    q
}

/// Every shard's lease row, by shard.
pub(super) fn all<DB: Backend>() -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" ORDER BY shard");
    q
}

/// One shard's lease row.
pub(super) fn one<DB: Backend>(shard: u16) -> QueryBuilder<DB> {
    let mut q = select_leases::<DB>();
    q.push(" WHERE shard = ");
    DB::bind_i64(&mut q, i64::from(shard));
    q
}

/// The id this database gives its cluster.
pub(super) fn cluster_id<DB: Backend>() -> QueryBuilder<DB> {
    QueryBuilder::new("SELECT cluster_id FROM room_cluster WHERE id = 1")
}
