//! The outbox row as stored and its status: the values the command path, the
//! [`OutboxQueue`](crate::store::OutboxQueue) and the [`OutboxAdmin`](crate::store::OutboxAdmin)
//! all read back from `room_outbox`, and the column list they select.

use std::str::FromStr;

use serde::Serialize;

/// Columns of `room_outbox`, in `OutboxRow` order.
pub(in crate::store) const OUTBOX_COLUMNS: &str = "id, event_id, room_id, event_type, envelope, status, retry_count, \
     last_error, worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms, park_reason, \
     trace_context";

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
