//! The lease keeper: every `lease_ttl / 10` it spreads the shards over the live nodes, and
//! every `renew_every` it renews this node's membership and leases (SPEC §11.4).
//!
//! Each shard's preferred owner is chosen by rendezvous hashing over the live nodes, so every
//! node computes the same spread from the same membership, and a node joining or leaving moves
//! only about 1/N of the shards. A node takes the free shards that prefer it and hands back
//! (stops serving, then releases) the ones that prefer another live node; a dead node's shards
//! are free once its leases expire on the database clock. [`Cluster`] answers where a room is
//! served for the HTTP layer.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::directory::{Directory, Located, Owner};
use super::ownership::{Ownership, ShardTable};
use super::shard::{Shard, preferred_node};
use crate::config::ClusterSettings;
use crate::store::{ShardLease, SharedRepository, StoreError};

/// Keeps this node's shard leases.
#[derive(Debug, Clone)]
pub struct LeaseKeeper {
    repo: SharedRepository,
    table: Arc<ShardTable>,
    directory: Directory,
    node_id: String,
    settings: ClusterSettings,
    nudge: Arc<Notify>,
}

/// What one round changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Round {
    /// Shards won.
    pub acquired: Vec<Shard>,
    /// Shards handed to their preferred node.
    pub released: Vec<Shard>,
    /// Shards whose lease was found gone at renewal.
    pub lost: Vec<Shard>,
}

impl LeaseKeeper {
    /// A keeper for `node_id`, advertised at `settings.advertise_url`.
    pub fn new(
        repo: SharedRepository,
        directory: Directory,
        node_id: String,
        settings: ClusterSettings,
    ) -> Self {
        Self {
            repo,
            table: Arc::new(ShardTable::default()),
            directory,
            node_id,
            settings,
            nudge: Arc::new(Notify::new()),
        }
    }

    /// The ownership the room service and the worker follow.
    pub fn ownership(&self) -> Ownership {
        Ownership::Leased(self.table.clone())
    }

    /// The handle the HTTP layer routes with.
    pub fn cluster(&self) -> Cluster {
        Cluster {
            node_id: self.node_id.clone(),
            ownership: self.ownership(),
            directory: self.directory.clone(),
            nudge: self.nudge.clone(),
            settle: self.settings.lease_ttl / 10,
        }
    }

    /// Renews membership and leases; the leases held afterwards are trusted for the self-fence
    /// time from the round's start.
    pub async fn renew(&self) -> Result<Vec<Shard>, StoreError> {
        let started = Instant::now();
        let ttl = self.settings.lease_ttl;
        self.repo.join_cluster(&self.node_id, &self.settings.advertise_url, ttl).await?;
        let held = self.repo.renew_shards(&self.node_id, ttl).await?;
        let lost = self.table.confirm(&epochs(&held), started, self.settings.self_fence_after());
        if !lost.is_empty() {
            let first: Vec<Shard> = lost.iter().take(8).copied().collect();
            tracing::warn!(count = lost.len(), ?first, "Shard leases lost: another node serves them now");
            self.directory.withdraw(&lost).await;
        }
        self.directory.publish(&self.owned(&held)).await;
        Ok(lost)
    }

    /// Spreads the shards over the live nodes: takes the free ones that prefer this node and
    /// hands back the ones that prefer another live node.
    pub async fn rebalance(&self) -> Result<Round, StoreError> {
        let nodes = self.repo.live_nodes().await?;
        let mut names: Vec<&str> = nodes.iter().map(|n| n.node_id.as_str()).collect();
        if !names.contains(&self.node_id.as_str()) {
            names.push(&self.node_id);
        }
        let leases = self.repo.shard_leases().await?;
        let held = self.table.held();
        let (mut want, mut give) = (Vec::new(), Vec::new());
        for lease in &leases {
            let preferred = preferred_node(lease.shard, &names);
            let mine = held.binary_search(&lease.shard).is_ok();
            if preferred == Some(self.node_id.as_str()) {
                if !lease.is_live() {
                    want.push(lease.shard);
                }
            } else if mine {
                give.push(lease.shard);
            }
        }
        let mut round = Round::default();
        if !give.is_empty() {
            // Stop serving first: a commit already fenced on the old epoch either lands before
            // the next owner's acquisition or fails on its new epoch.
            self.table.remove(&give);
            self.directory.withdraw(&give).await;
            self.repo.release_shards(&self.node_id, &give).await?;
            tracing::info!(count = give.len(), "Handed shards to their preferred nodes");
            round.released = give;
        }
        if !want.is_empty() {
            let won = self
                .repo
                .acquire_shards(&self.node_id, &self.settings.advertise_url, &want, self.settings.lease_ttl)
                .await?;
            self.table.add(&epochs(&won));
            self.directory.publish(&self.owned(&won)).await;
            if !won.is_empty() {
                tracing::info!(count = won.len(), nodes = names.len(), "Acquired shard leases");
            }
            round.acquired = won.iter().map(|l| l.shard).collect();
        }
        Ok(round)
    }

    /// Runs until `cancel`: rebalances every `lease_ttl / 10` (or at once when nudged) and
    /// renews every `renew_every`; a failed renewal is retried at the next tick, and after
    /// the self-fence time without one the node serves nothing.
    pub async fn run(self, cancel: CancellationToken) {
        let tick = self.settings.lease_ttl / 10;
        let mut last_renewal = Instant::now();
        let mut renewed = true;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(tick) => {}
                () = self.nudge.notified() => {}
            }
            if !renewed || last_renewal.elapsed() >= self.settings.renew_every() {
                let started = Instant::now();
                renewed = match self.renew().await {
                    Ok(_) => true,
                    Err(error) => {
                        tracing::warn!(%error, "Cannot renew shard leases; retrying");
                        false
                    }
                };
                if renewed {
                    last_renewal = started;
                }
            }
            if let Err(error) = self.rebalance().await {
                tracing::warn!(%error, "Cannot rebalance shards; retrying");
            }
        }
    }

    /// Joins: renews (nothing yet) and takes this node's share. Called before serving.
    /// Refuses a `node_id` a live node at another URL already uses: two nodes under one id
    /// would share leases.
    pub async fn join(&self) -> Result<(), StoreError> {
        let url = &self.settings.advertise_url;
        if let Some(other) =
            self.repo.live_nodes().await?.into_iter().find(|n| n.node_id == self.node_id && n.url != *url)
        {
            return Err(StoreError::Config(format!(
                "node_id {:?} is in use by a live node at {} (this node advertises {url}): give each node its own node_id",
                self.node_id, other.url
            )));
        }
        self.renew().await?;
        self.rebalance().await?;
        Ok(())
    }

    /// Leaves the cluster: stops serving every shard, frees its leases (their next owners
    /// take them at their next tick) and removes this node from the membership.
    pub async fn leave(&self) -> Result<(), StoreError> {
        let held = self.table.held();
        self.table.remove(&held);
        self.directory.withdraw(&held).await;
        self.repo.leave_cluster(&self.node_id).await?;
        tracing::info!(count = held.len(), "Released shard leases");
        Ok(())
    }

    fn owned(&self, leases: &[ShardLease]) -> Vec<(Shard, Owner)> {
        leases.iter().filter_map(|l| Owner::of_lease(l).map(|o| (l.shard, o))).collect()
    }
}

fn epochs(leases: &[ShardLease]) -> Vec<(Shard, u64)> {
    leases.iter().map(|l| (l.shard, l.epoch)).collect()
}

/// Where rooms are served, for the HTTP layer.
#[derive(Debug, Clone)]
pub struct Cluster {
    node_id: String,
    ownership: Ownership,
    directory: Directory,
    nudge: Arc<Notify>,
    /// How long to wait between looks while a shard is between owners.
    settle: Duration,
}

impl Cluster {
    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// True when this node serves `room_id` now.
    pub fn owns(&self, room_id: &str) -> bool {
        self.ownership.owns(room_id)
    }

    /// Where `room_id` is served: here, at the owner the directory names (Redis first, the
    /// lease table on a miss), or nowhere yet. `fresh` skips Redis (after its entry proved
    /// stale).
    pub async fn locate(&self, room_id: &str, fresh: bool) -> Result<Located, StoreError> {
        if self.owns(room_id) {
            return Ok(Located::Here);
        }
        if !fresh
            && let Some(owner) = self.directory.cached(room_id).await
            && owner.node_id != self.node_id
        {
            return Ok(Located::There(owner));
        }
        Ok(match self.directory.authoritative(room_id).await? {
            Some(owner) if owner.node_id == self.node_id => {
                // The table says here, but this node is not serving it (just handed off, or
                // self-fenced): nobody serves it right now.
                Located::Nobody
            }
            Some(owner) => Located::There(owner),
            None => Located::Nobody,
        })
    }

    /// [`Self::locate`], waiting up to `patience` while the shard is between owners (and
    /// nudging this node's keeper, which takes the shard if it prefers this node).
    pub async fn locate_settled(&self, room_id: &str, patience: Duration) -> Result<Located, StoreError> {
        let deadline = Instant::now() + patience;
        let mut fresh = false;
        loop {
            match self.locate(room_id, fresh).await? {
                Located::Nobody if Instant::now() < deadline => {
                    self.nudge.notify_one();
                    tokio::time::sleep(self.settle.min(Duration::from_millis(200))).await;
                    fresh = true;
                }
                located => return Ok(located),
            }
        }
    }

    /// The owner of `room_id` as the lease table says (for `GET /admin/rooms/{id}/owner`).
    pub async fn owner(&self, room_id: &str) -> Result<Option<Owner>, StoreError> {
        self.directory.authoritative(room_id).await
    }
}
