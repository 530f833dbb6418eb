//! Storage, split by role over the tables (`room_command_log`, `room_outbox`, `room_snapshot`,
//! `room_member`, `room_gift_total`, the lease and consumer tables). One folder per role, each
//! holding its trait, its values, its one SQL implementation and its statements side by side:
//!
//! - `command/` — [`CommandStore`], the command path: load a room, commit one or more of its
//!   commands — their log rows, outbox rows, the small snapshot and the member and gift rows
//!   they changed — in one transaction ([`CommandStore::commit_room`]); the marks of the outbox
//!   rows it publishes itself, the room's event history, the gift refunds;
//! - `queue/` — [`OutboxQueue`], the outbox worker: claim by room (`queue/claim/`), finish,
//!   release, renew;
//! - `admin/` — [`OutboxAdmin`], the operator: stats, listing, requeue, purge;
//! - `lease/` — [`LeaseRepository`], shard leases and cluster membership;
//! - `consumer/` — [`ConsumerRepository`], the event consumers and the audit log;
//! - `backend/` — the SQL plumbing under them all: [`SqlRepository`], the one `Backend` trait
//!   stating what differs between MySQL/MariaDB and SQLite (one impl each, in `mysql.rs` and
//!   `sqlite.rs`, with what only that database does: opening, migrations, MySQL's engine check
//!   and purge lock), and the helpers that run and bind statements.
//!
//! Shared by the roles: [`StoreError`] (`error.rs`), the outbox row and its status
//! (`outbox_row.rs`), the pool's gauges ([`pool_metrics`]). [`Repository`] (`repository.rs`)
//! gathers every role (plus ping, pool stats, close) for wiring, and [`connect`] opens one.
//!
//! The SQL is written once over `Backend`, and each role is one generic impl on
//! [`SqlRepository`], which serves MySQL/MariaDB and SQLite alike. A role depends on the shared
//! files and `backend/` only, never on another role. Every time comparison on outbox rows uses
//! the database's clock, never the node's.

mod admin;
mod backend;
mod command;
mod consumer;
mod error;
mod lease;
mod outbox_row;
pub mod pool_metrics;
mod queue;
mod repository;

pub use admin::{
    MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, OutboxAdmin, OutboxQuery, OutboxStats, REQUEUEABLE, RequeueTarget,
    RequeuedRow,
};
pub use backend::SqlRepository;
pub use backend::mysql::MySqlRepository;
pub use backend::purge_lock::{PURGE_LOCK_PREFIX, PurgeLock};
pub use backend::sqlite::SqliteRepository;
pub use command::{
    AttributeChanges, AttributeRow, CommandKey, CommandStore, CommitError, DueSeatRequest, GiftTotalRow,
    HistoryEvent, LoggedCommand, MemberChanges, NewOutboxRow, RestrictionChanges, RestrictionRow, RoomCommit,
    SeatRequestChanges, SeatRequestRow, SharedCommandStore, SnapshotWrite, StoredCommand, StoredRoom,
};
pub use consumer::{
    AuditEntry, ConsumerLease, ConsumerRepository, ConsumerRow, EventRow, ResetReport, ResetTo,
};
pub use error::{StoreError, short_error};
pub use lease::{ClusterNode, LeaseRepository, ShardLease};
pub use outbox_row::{OutboxRow, OutboxStatus};
pub use pool_metrics::PoolStats;
pub use queue::{Claim, ClaimScope, ClaimedBatch, Mark, MarkReport, OutboxQueue, PublishResult};
pub use repository::{Repository, SharedRepository, connect, connect_existing};
