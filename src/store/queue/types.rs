//! Values of the outbox passed to and from the [`OutboxQueue`](super::OutboxQueue) and the
//! [`OutboxAdmin`](super::OutboxAdmin).

use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

/// Status of an outbox row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxStatus {
    /// Written by the command transaction.
    Pending,
    /// Claimed by a worker under a lease.
    Delivering,
    /// Published.
    Delivered,
    /// A worker publish failed; claimed again later.
    Retryable,
    /// Parked for a person (permanent error, or out of attempts); requeue brings it back.
    Failed,
}

impl OutboxStatus {
    /// Every status.
    pub const ALL: [OutboxStatus; 5] = [
        OutboxStatus::Pending,
        OutboxStatus::Delivering,
        OutboxStatus::Delivered,
        OutboxStatus::Retryable,
        OutboxStatus::Failed,
    ];

    /// Column value.
    pub fn as_str(self) -> &'static str {
        match self {
            OutboxStatus::Pending => "pending",
            OutboxStatus::Delivering => "delivering",
            OutboxStatus::Delivered => "delivered",
            OutboxStatus::Retryable => "retryable",
            OutboxStatus::Failed => "failed",
        }
    }
}

impl FromStr for OutboxStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        OutboxStatus::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| {
            format!("unknown status {s:?} (expected pending, delivering, delivered, retryable or failed)")
        })
    }
}

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

/// Backlog figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OutboxStats {
    /// Rows per status, delivered excluded (that count grows without bound).
    pub pending: u64,
    /// Claimed rows.
    pub delivering: u64,
    /// Rows waiting for another attempt.
    pub retryable: u64,
    /// Parked rows.
    pub failed: u64,
    /// Parked rows by reason.
    pub parked_by_reason: std::collections::BTreeMap<String, u64>,
    /// Age (ms, database clock) of the oldest row not yet delivered.
    pub oldest_pending_age_ms: Option<i64>,
    /// Age (ms) of the oldest retryable row.
    pub oldest_retryable_age_ms: Option<i64>,
    /// Highest retry count among undelivered rows.
    pub max_retry_count: i64,
}

/// Admin listing filter.
#[derive(Debug, Clone, Default)]
pub struct OutboxQuery {
    /// Only this status.
    pub status: Option<OutboxStatus>,
    /// Only ids greater than this (paging).
    pub after_id: i64,
    /// At most this many rows.
    pub limit: u32,
}

/// One outbox row as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OutboxRow {
    /// Primary key.
    pub id: i64,
    /// UUIDv7.
    pub event_id: String,
    /// Room.
    pub room_id: String,
    /// Event type name.
    pub event_type: String,
    /// Envelope JSON.
    pub envelope: String,
    /// Status column.
    pub status: String,
    /// Worker attempts that failed.
    pub retry_count: i32,
    /// Last worker error.
    pub last_error: Option<String>,
    /// Claiming worker.
    pub worker_id: Option<String>,
    /// See the schema.
    pub lock_until_ms: Option<i64>,
    /// Database clock at insert.
    pub created_at_ms: i64,
    /// Database clock at last change.
    pub updated_at_ms: i64,
    /// Database clock at delivery.
    pub delivered_at_ms: Option<i64>,
    /// Why a `failed` row was parked.
    pub park_reason: Option<String>,
    /// The `traceparent` of the command that wrote it, when its trace was sampled.
    pub trace_context: Option<String>,
}

/// Groups a batch's marks so it costs one UPDATE per distinct (kind, error, delay), not one
/// per row. Errors are shortened to what `last_error` holds: a longer one would fail the whole
/// mark on MySQL in strict mode (and be stored whole on SQLite).
pub(super) fn group_marks(results: &[PublishResult]) -> Vec<(Mark, Vec<i64>)> {
    let mut groups: Vec<(Mark, Vec<i64>)> = Vec::new();
    for r in results {
        let key = match &r.mark {
            Mark::Retry { error, after } => Mark::Retry { error: super::short_error(error), after: *after },
            Mark::Park { reason, error } => Mark::Park { reason, error: super::short_error(error) },
            other => other.clone(),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ids)) => ids.push(r.id),
            None => groups.push((key, vec![r.id])),
        }
    }
    groups
}

/// Folds `(status, count, age of oldest, max retry_count)` groups into [`OutboxStats`].
pub(super) fn stats_from_groups(groups: Vec<(String, i64, Option<i64>, Option<i32>)>) -> OutboxStats {
    let mut stats = OutboxStats::default();
    for (status, count, age, max_retry) in groups {
        let count = count.max(0) as u64;
        match status.parse::<OutboxStatus>() {
            Ok(OutboxStatus::Pending) => stats.pending = count,
            Ok(OutboxStatus::Delivering) => stats.delivering = count,
            Ok(OutboxStatus::Retryable) => {
                stats.retryable = count;
                stats.oldest_retryable_age_ms = age;
            }
            Ok(OutboxStatus::Failed) => stats.failed = count,
            Ok(OutboxStatus::Delivered) | Err(_) => continue,
        }
        if status != "failed" {
            stats.oldest_pending_age_ms = stats.oldest_pending_age_ms.max(age);
        }
        stats.max_retry_count = stats.max_retry_count.max(i64::from(max_retry.unwrap_or(0)));
    }
    stats
}

/// Parses `(event_id, status)` pairs, skipping statuses this version does not know.
pub(super) fn parse_statuses(rows: impl Iterator<Item = (String, String)>) -> Vec<(String, OutboxStatus)> {
    rows.filter_map(|(id, status)| status.parse().ok().map(|s| (id, s))).collect()
}
