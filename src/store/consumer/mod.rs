//! Event consumers other than IM (SPEC §11.6): each has its own row in `room_event_consumer`
//! — its position in `room_outbox` (the highest id it has passed), a lease so that one
//! instance at a time consumes it (database clock), and its last error. A consumer's progress
//! never touches the IM columns of `room_outbox`: an event delivered to IM may not have reached
//! the audit log yet, and the other way round.
//!
//! Consumers read `room_outbox` by id. Ids are not commit order on MySQL/MariaDB (a transaction
//! holding id N may commit after N+1 was read), so a consumer only passes a missing id once
//! [`ConsumerRepository::open_writers_since`] proves that no transaction able to hold it is
//! still open, or after a grace window (see `crate::consumer::HighWater`).
//! [`ConsumerRepository`] is a supertrait of [`Repository`](super::Repository); the SQL is
//! written once in `consumer_sql.rs` for both backends.

use std::time::Duration;

use async_trait::async_trait;

use super::types::StoreError;

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

/// Consumer positions and leases, and the reads consumers make; times are the database's.
#[async_trait]
pub trait ConsumerRepository: Send + Sync {
    /// Takes (or renews) `lease` when it is free, expired or already its owner's; creates the
    /// consumer's row at position 0 when missing. Returns the position to resume after, or
    /// `None` when another instance holds the lease.
    async fn acquire_consumer(&self, lease: ConsumerLease<'_>) -> Result<Option<i64>, StoreError>;

    /// Records that every event up to `to` was passed, clears `last_error` and renews the lease
    /// — fenced on the owner still holding the row and on the position still being `from` (what
    /// this owner read). `false`: the lease was lost (taken over, or the consumer reset by an
    /// operator); nothing changed.
    async fn advance_consumer(
        &self,
        lease: ConsumerLease<'_>,
        from: i64,
        to: i64,
    ) -> Result<bool, StoreError>;

    /// Records a failed delivery (`error` is truncated to fit) and renews the lease, fenced on
    /// the owner as [`ConsumerRepository::advance_consumer`] is. `false`: the lease was lost.
    async fn record_consumer_error(&self, lease: ConsumerLease<'_>, error: &str) -> Result<bool, StoreError>;

    /// Frees `lease` if its owner holds it (a stopping instance), so another takes over at once.
    async fn release_consumer(&self, lease: ConsumerLease<'_>) -> Result<(), StoreError>;

    /// Up to `limit` events with an id above `position`, by ascending id.
    async fn events_after(&self, position: i64, limit: u32) -> Result<Vec<EventRow>, StoreError>;

    /// How long ago (database clock) the first event after `position` committed: the
    /// consumer's lag. `None`: nothing is left to consume.
    async fn consumer_lag(&self, position: i64) -> Result<Option<Duration>, StoreError>;

    /// The database clock now, in ms: taken when a consumer first sees a missing id.
    async fn database_now_ms(&self) -> Result<i64, StoreError>;

    /// How many write transactions that began at or before `since_ms` (database clock) are still
    /// open. Zero proves that an id missing at `since_ms` was rolled back (or deleted) and will
    /// never appear. `None`: this database cannot tell (MySQL without the PROCESS privilege,
    /// or a server whose transaction list stayed older than the question for about 0.6 s — its
    /// `INNODB_TRX` cache is refreshed only once nobody has read it for 0.1 s); the consumer then
    /// waits out its grace window. On MySQL the count may include writers that began up to a
    /// second after `since_ms` (whole-second start times): it errs towards waiting. SQLite always answers `Some(0)`: ids are
    /// handed out under its one write lock, so a reader never sees an id above one still open.
    async fn open_writers_since(&self, since_ms: i64) -> Result<Option<u64>, StoreError>;

    /// Every consumer row, by name.
    async fn list_consumers(&self) -> Result<Vec<ConsumerRow>, StoreError>;

    /// Moves consumer `name` (creating its row when missing) and frees its lease, so a running
    /// instance loses its fence and resumes from the new position.
    async fn reset_consumer(&self, name: &str, to: ResetTo) -> Result<ResetReport, StoreError>;

    /// The lowest position among every stored consumer and the `enabled` ones (an enabled
    /// consumer without a row yet counts as 0): retention deletes no event above it. Every
    /// stored row counts, whichever node's configuration enables it, so a node that does not
    /// know a consumer (a rolling deploy, an operator's file) never purges what it still needs;
    /// [`ConsumerRepository::retire_consumer`] lets a consumer go for good. `None`: no consumer.
    async fn consumers_floor(&self, enabled: &[&str]) -> Result<Option<i64>, StoreError>;

    /// Deletes the row of `name`: it no longer holds retention back, and if it is enabled again
    /// it starts from the oldest stored event. `false`: there was none.
    async fn retire_consumer(&self, name: &str) -> Result<bool, StoreError>;

    /// Appends `entries` to the audit log in one statement, in order, stamped with the database
    /// clock. An entry whose event is already there (a redelivery after a crash between the
    /// append and the consumer's advance) is left as it is.
    async fn append_audit(&self, entries: &[AuditEntry]) -> Result<(), StoreError>;

    /// Up to `limit` audit entries (of `room_id` only, when given), oldest first: the order
    /// they were recorded in.
    async fn audit_entries(&self, room_id: Option<&str>, limit: u32) -> Result<Vec<AuditEntry>, StoreError>;
}
