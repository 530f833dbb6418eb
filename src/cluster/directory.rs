//! Where each shard is served: the Redis directory (shard → owner, published by the owners) in
//! front of the lease table. Redis is only a cache: a miss, an error or a stale entry falls
//! back to the table, which is the truth.

use redis::AsyncCommands;

use super::shard::{Shard, shard_of};
use crate::redis_conn::RedisConn;
use crate::store::{ShardLease, SharedRepository, StoreError};

/// The node serving a shard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Owner {
    /// Its `node_id`.
    pub node_id: String,
    /// Its public API origin.
    pub url: String,
    /// The epoch of its lease.
    pub epoch: u64,
}

impl Owner {
    /// The owner a live lease row names (`None` for an expired or free lease).
    pub fn of_lease(lease: &ShardLease) -> Option<Owner> {
        lease.is_live().then(|| Owner {
            node_id: lease.owner_node.clone(),
            url: lease.owner_url.clone(),
            epoch: lease.epoch,
        })
    }

    /// `epoch node_id url` (node ids and URLs hold no spaces).
    fn encode(&self) -> String {
        format!("{} {} {}", self.epoch, self.node_id, self.url)
    }

    fn decode(text: &str) -> Option<Owner> {
        let mut parts = text.splitn(3, ' ');
        let epoch = parts.next()?.parse().ok()?;
        let node_id = parts.next()?.to_owned();
        let url = parts.next()?.to_owned();
        Some(Owner { node_id, url, epoch })
    }
}

/// Where a room is served, as far as this node can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Here.
    Here,
    /// At another node.
    There(Owner),
    /// Nowhere right now (the shard is between owners).
    Nobody,
}

/// The shard directory.
#[derive(Debug, Clone)]
pub struct Directory {
    redis: Option<RedisConn>,
    /// The Redis hash of this cluster (named by the database's cluster id).
    key: String,
    repo: SharedRepository,
}

impl Directory {
    /// A directory over the lease table of `repo`, cached in `redis` when there is one.
    pub async fn new(repo: SharedRepository, redis: Option<RedisConn>) -> Result<Self, StoreError> {
        let key = format!("room-service:{}:shard-owners", repo.cluster_id().await?);
        Ok(Self { redis, key, repo })
    }

    /// Publishes owners (best effort: a failure leaves readers on the lease table).
    pub async fn publish(&self, owners: &[(Shard, Owner)]) {
        let Some(redis) = &self.redis else { return };
        if owners.is_empty() {
            return;
        }
        let fields: Vec<(Shard, String)> = owners.iter().map(|(s, o)| (*s, o.encode())).collect();
        let mut conn = redis.connection();
        if let Err(error) = conn.hset_multiple::<_, _, _, ()>(&self.key, &fields).await {
            tracing::debug!(error = ?error.kind(), "Shard directory not updated (Redis)");
        }
    }

    /// Removes shards this node no longer serves (best effort).
    pub async fn withdraw(&self, shards: &[Shard]) {
        let Some(redis) = &self.redis else { return };
        if shards.is_empty() {
            return;
        }
        let mut conn = redis.connection();
        if let Err(error) = conn.hdel::<_, _, ()>(&self.key, shards).await {
            tracing::debug!(error = ?error.kind(), "Shard directory not updated (Redis)");
        }
    }

    /// The owner Redis names for `room_id`'s shard; `None` on a miss, without Redis, or when
    /// Redis fails.
    pub async fn cached(&self, room_id: &str) -> Option<Owner> {
        let redis = self.redis.as_ref()?;
        let mut conn = redis.connection();
        match conn.hget::<_, _, Option<String>>(&self.key, shard_of(room_id)).await {
            Ok(entry) => entry.as_deref().and_then(Owner::decode),
            Err(error) => {
                tracing::debug!(error = ?error.kind(), "Shard directory unreadable; using the lease table");
                None
            }
        }
    }

    /// The owner the lease table names for `room_id`'s shard (`None`: no live lease).
    pub async fn authoritative(&self, room_id: &str) -> Result<Option<Owner>, StoreError> {
        Ok(self.repo.shard_lease(shard_of(room_id)).await?.as_ref().and_then(Owner::of_lease))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_and_garbage_is_a_miss() {
        let owner = Owner { node_id: "node-a".into(), url: "http://10.0.0.5:8080".into(), epoch: 7 };
        assert_eq!(Owner::decode(&owner.encode()), Some(owner));
        assert_eq!(Owner::decode("x node url"), None);
        assert_eq!(Owner::decode("3 node"), None);
    }
}
