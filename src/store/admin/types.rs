//! Values passed to and from the [`OutboxAdmin`](super::OutboxAdmin): backlog figures, the
//! listing's filter, a requeue's target and the rows it moved, and the batch bounds.

use serde::Serialize;

use crate::store::outbox_row::OutboxStatus;

/// Largest purge batch: one `DELETE` touches at most this many rows.
pub const MAX_PURGE_BATCH: u32 = 1000;
/// Largest requeue batch (by status).
pub const MAX_REQUEUE_BATCH: u32 = 1000;
/// The statuses a requeue moves back to `pending`.
pub const REQUEUEABLE: [OutboxStatus; 2] = [OutboxStatus::Retryable, OutboxStatus::Failed];

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

/// Which rows a requeue targets.
#[derive(Debug, Clone, Copy)]
pub enum RequeueTarget<'a> {
    /// These events, where their status is requeueable.
    EventIds(&'a [String]),
    /// One page of rows in `status` (which must be one of [`REQUEUEABLE`]) with an id above
    /// `after_id`, by ascending id, at most `limit` (capped at [`MAX_REQUEUE_BATCH`]).
    Status {
        /// `retryable` or `failed`.
        status: OutboxStatus,
        /// Only ids greater than this (the caller's cursor).
        after_id: i64,
        /// At most this many rows.
        limit: u32,
    },
}

/// A row a requeue moved back to `pending`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct RequeuedRow {
    /// Primary key.
    pub id: i64,
    /// The event.
    pub event_id: String,
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
