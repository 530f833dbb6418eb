//! Which rooms this node may serve right now: every room (no cluster), or the rooms of the
//! shards whose leases it holds and renewed recently enough. The self-fence lives here: a node
//! that could not renew for `self_fence_after` stops serving every shard by itself, before
//! the lease (on the database clock) expires and another node may take it.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::shard::{SHARDS, Shard, shard_of};

/// This node's right to run a room's commands.
#[derive(Debug, Clone, Default)]
pub enum Ownership {
    /// No cluster: this node owns every room, and commits are not fenced.
    #[default]
    Single,
    /// Shard leases: only the shards held, each under its epoch.
    Leased(Arc<ShardTable>),
}

/// The room is served by another node (or by none right now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotOwner {
    /// The room's shard.
    pub shard: Shard,
}

impl Ownership {
    /// The fence for a commit of `room_id`: `Ok(None)` without a cluster, `Ok(Some(epoch))`
    /// while this node holds the room's shard, `Err` otherwise.
    pub fn fence(&self, room_id: &str) -> Result<Option<u64>, NotOwner> {
        match self {
            Ownership::Single => Ok(None),
            Ownership::Leased(table) => {
                let shard = shard_of(room_id);
                table.epoch(shard).map(Some).ok_or(NotOwner { shard })
            }
        }
    }

    /// True when this node may serve `room_id` now.
    pub fn owns(&self, room_id: &str) -> bool {
        self.fence(room_id).is_ok()
    }

    /// The shards held now (`None`: all of them, no cluster).
    pub fn held_shards(&self) -> Option<Vec<Shard>> {
        match self {
            Ownership::Single => None,
            Ownership::Leased(table) => Some(table.held()),
        }
    }
}

/// The leases this node holds, and until when it may trust them.
#[derive(Debug)]
pub struct ShardTable {
    state: RwLock<TableState>,
}

#[derive(Debug)]
struct TableState {
    /// The epoch of each held shard.
    epochs: Vec<Option<u64>>,
    /// Serving stops at this instant unless a renewal moves it on.
    valid_until: Option<Instant>,
}

impl Default for ShardTable {
    fn default() -> Self {
        let state = TableState { epochs: vec![None; usize::from(SHARDS)], valid_until: None };
        Self { state: RwLock::new(state) }
    }
}

impl ShardTable {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, TableState> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, TableState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The epoch under which this node holds `shard`, if it does and its last renewal is
    /// recent enough.
    pub fn epoch(&self, shard: Shard) -> Option<u64> {
        let state = self.read();
        if state.valid_until.is_none_or(|until| Instant::now() >= until) {
            return None;
        }
        state.epochs.get(usize::from(shard)).copied().flatten()
    }

    /// The shards held (whether or not the self-fence has stopped serving them).
    pub fn held(&self) -> Vec<Shard> {
        let state = self.read();
        (0..SHARDS).filter(|s| state.epochs[usize::from(*s)].is_some()).collect()
    }

    /// The leases the database confirmed in a round that started at `started`: exactly these
    /// are held now, trusted for `self_fence_after` from the round's start. Returns the shards
    /// lost since the last round.
    pub fn confirm(
        &self,
        leases: &[(Shard, u64)],
        started: Instant,
        self_fence_after: Duration,
    ) -> Vec<Shard> {
        let mut state = self.write();
        let mut next = vec![None; usize::from(SHARDS)];
        for (shard, epoch) in leases {
            if let Some(slot) = next.get_mut(usize::from(*shard)) {
                *slot = Some(*epoch);
            }
        }
        let lost = (0..SHARDS)
            .filter(|s| {
                let i = usize::from(*s);
                state.epochs[i].is_some() && state.epochs[i] != next[i]
            })
            .collect();
        state.epochs = next;
        state.valid_until = Some(started + self_fence_after);
        lost
    }

    /// Adds leases won after the round's confirmation (same trust deadline).
    pub fn add(&self, leases: &[(Shard, u64)]) {
        let mut state = self.write();
        for (shard, epoch) in leases {
            if let Some(slot) = state.epochs.get_mut(usize::from(*shard)) {
                *slot = Some(*epoch);
            }
        }
    }

    /// Stops serving `shards` (handed off, or released at shutdown).
    pub fn remove(&self, shards: &[Shard]) {
        let mut state = self.write();
        for shard in shards {
            if let Some(slot) = state.epochs.get_mut(usize::from(*shard)) {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_node_that_cannot_renew_stops_serving_at_the_self_fence() {
        let table = Arc::new(ShardTable::default());
        let ownership = Ownership::Leased(table.clone());
        let shard = shard_of("r1");
        assert_eq!(ownership.fence("r1"), Err(NotOwner { shard }));
        table.confirm(&[(shard, 4)], Instant::now(), Duration::from_secs(7));
        assert_eq!(ownership.fence("r1"), Ok(Some(4)));
        tokio::time::advance(Duration::from_millis(6_900)).await;
        assert_eq!(ownership.fence("r1"), Ok(Some(4)));
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(ownership.fence("r1"), Err(NotOwner { shard }), "7 s without a renewal: fenced");
        // A renewal round restores it.
        table.confirm(&[(shard, 4)], Instant::now(), Duration::from_secs(7));
        assert!(ownership.owns("r1"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_reports_the_leases_lost_and_keeps_only_the_confirmed_ones() {
        let table = ShardTable::default();
        let now = Instant::now();
        table.confirm(&[(1, 1), (2, 1), (3, 1)], now, Duration::from_secs(7));
        table.add(&[(9, 2)]);
        let lost = table.confirm(&[(1, 1), (9, 2), (3, 2)], now, Duration::from_secs(7));
        assert_eq!(lost, vec![2, 3], "shard 2 is gone; shard 3 was re-acquired under a new epoch");
        assert_eq!(table.held(), vec![1, 3, 9]);
        table.remove(&[1]);
        assert_eq!(table.epoch(1), None);
        assert_eq!(table.epoch(3), Some(2));
        assert_eq!(Ownership::Single.fence("anything"), Ok(None));
        assert_eq!(Ownership::Single.held_shards(), None);
    }
}
