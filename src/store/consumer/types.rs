//! Values passed to and from the [`ConsumerRepository`](super::ConsumerRepository): a
//! consumer's row and lease, the events it reads, the audit log's entries, and a reset.

use std::time::Duration;

/// A consumer's row as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRow {
    /// Its name (`webhook`, `audit`).
    pub name: String,
    /// Every event with an id up to this one has been passed (0: none yet).
    pub position: i64,
    /// The instance holding the lease (or that last held it), if any.
    pub owner: Option<String>,
    /// The lease runs this much longer on the database clock (`None`: expired or free).
    pub lease_remaining: Option<Duration>,
    /// Last change of the row (database clock, ms).
    pub updated_at_ms: i64,
    /// The last failed delivery, cleared by the next success.
    pub last_error: Option<String>,
}

/// One committed event, as a consumer reads it from `room_outbox`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EventRow {
    /// Its position: the outbox row id.
    pub id: i64,
    /// Stable id of the event (receivers dedup on it).
    pub event_id: String,
    /// Event type name.
    pub event_type: String,
    /// The room.
    pub room_id: String,
    /// The envelope JSON, as published to IM.
    pub envelope: String,
    /// When the command committed (database clock, ms).
    pub created_at_ms: i64,
    /// The `traceparent` of the command that wrote it, when its trace was sampled.
    pub trace_context: Option<String>,
}

/// One row of `room_audit_log`: an event as the audit consumer recorded it. The log outlives
/// `room_outbox`'s retention, so it carries the whole envelope.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditEntry {
    /// Stable id of the event: one entry per event, however often it is delivered.
    pub event_id: String,
    /// Event type name.
    pub event_type: String,
    /// The room.
    pub room_id: String,
    /// The envelope JSON, as published to IM.
    pub envelope: String,
    /// When the command was applied (the envelope's `occurred_at_ms`).
    pub occurred_at_ms: i64,
}

/// Consumer `name`'s lease as `owner` holds (or wants) it: each write renews it for `ttl`
/// from now (database clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerLease<'a> {
    /// The consumer (`webhook`, `audit`).
    pub name: &'a str,
    /// This instance's owner id.
    pub owner: &'a str,
    /// How long a take or a renewal holds the lease.
    pub ttl: Duration,
}

impl<'a> ConsumerLease<'a> {
    /// Consumer `name`'s lease for `owner`, `ttl` at a time.
    pub fn new(name: &'a str, owner: &'a str, ttl: Duration) -> Self {
        Self { name, owner, ttl }
    }
}

/// Where `consumers reset` moves a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// Resume after this outbox id (0: from the oldest stored event).
    Id(i64),
    /// Resume with the first event committed at or after this time (ms since the epoch).
    TimeMs(i64),
}

/// What a reset changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetReport {
    /// The position before (`None`: the consumer had no row yet).
    pub before: Option<i64>,
    /// The position now.
    pub after: i64,
}
