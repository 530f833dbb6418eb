//! Values passed to and from the [`OutboxQueue`](super::OutboxQueue): a claim and what it
//! took, and what becomes of each claimed row.

use std::time::Duration;

use crate::store::outbox_row::OutboxRow;

/// A claim request: up to `limit` rows, taken room by room from each room's oldest
/// undelivered row (see [`OutboxQueue::claim_outbox`](super::OutboxQueue::claim_outbox)).
#[derive(Debug, Clone)]
pub struct Claim {
    /// Unique to this claim (node id + fresh token).
    pub worker_id: String,
    /// At most this many rows.
    pub limit: usize,
    /// Lease over the whole batch.
    pub lease: Duration,
    /// In a cluster: which rows this node relays (`None`: any row).
    pub scope: Option<ClaimScope>,
    /// The claims (`worker_id`s) of this worker still holding rows: their rows at a room's head
    /// are queued in its memory, so the claim takes the room's next rows behind them.
    pub own: Vec<String>,
    /// At most this many rows of one room held at once, by `own` and this claim together.
    pub per_room: usize,
    /// Round-robin cursor: the rooms after this one (room id order) are looked at first; `""`
    /// starts from the first room. Pass back [`ClaimedBatch::cursor`].
    pub after_room: String,
}

impl Claim {
    /// A claim of up to `limit` rows for `worker_id` under `lease`: any shard, no rows held
    /// yet, up to `limit` rows of one room, from the first room.
    pub fn new(worker_id: impl Into<String>, limit: usize, lease: Duration) -> Self {
        Self {
            worker_id: worker_id.into(),
            limit,
            lease,
            scope: None,
            own: Vec::new(),
            per_room: limit,
            after_room: String::new(),
        }
    }
}

/// What a claim took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimedBatch {
    /// The claimed rows, now `delivering` under the claim's `worker_id`: rooms in the order
    /// their first claimed row fell due (rows the sync path released first), each room's rows
    /// in id order.
    pub rows: Vec<OutboxRow>,
    /// The claim left claimable rows it saw (a room's rows beyond its share of the batch or the
    /// per-room cap, rooms beyond the batch, rooms after the ones it looked at): claim again
    /// soon rather than at the next poll.
    pub more: bool,
    /// Where the next claim's round robin starts ([`Claim::after_room`]).
    pub cursor: String,
}

/// The rows a node of a cluster claims: those of the shards it owns, and any other row only
/// once it has been claimable for `orphaned_after` (its owner died before relaying it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimScope {
    /// Shards owned.
    pub shards: Vec<u16>,
    /// The safety net's grace.
    pub orphaned_after: Duration,
}

/// What becomes of one claimed row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Published (or skipped by the filter): `delivered`.
    Delivered,
    /// A failed attempt: `retryable`, `retry_count + 1`, claimable again after `after`.
    Retry {
        /// Short error for `last_error` (class, code, text; no secrets).
        error: String,
        /// Not claimable before this delay.
        after: Duration,
    },
    /// A failed attempt that parks the row: `failed`, `retry_count + 1`, never claimed again
    /// until a person requeues it.
    Park {
        /// Why (`permanent`, `group_id_too_long`, `max_attempts`, ...): bounded.
        reason: &'static str,
        /// Short error for `last_error`.
        error: String,
    },
    /// Not attempted (publishing paused, an earlier row of its room failed or was handed
    /// back, or the worker stopping): back to `pending`/`retryable` claimable after `after`, `retry_count`
    /// unchanged.
    Defer {
        /// Not claimable before this delay.
        after: Duration,
    },
}

/// The result of one claimed row.
#[derive(Debug, Clone)]
pub struct PublishResult {
    /// Row id.
    pub id: i64,
    /// What to write.
    pub mark: Mark,
}

/// What a batch mark changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkReport {
    /// Rows marked delivered.
    pub delivered: u64,
    /// Rows marked retryable.
    pub retried: u64,
    /// Rows parked as failed.
    pub parked: u64,
    /// Rows handed back unattempted.
    pub deferred: u64,
    /// Rows no longer held by this worker (lease lost): unchanged.
    pub lease_lost: u64,
}
