//! Storage, split by role over the tables (`room_command_log`, `room_outbox`, `room_snapshot`,
//! `room_member`, `room_gift_total`, the lease and consumer tables):
//!
//! - [`CommandStore`] — the command path: load a room, commit one or more of its commands — their
//!   log rows, outbox rows, the small snapshot and the member and gift rows they changed — in one
//!   transaction ([`CommandStore::commit_room`]);
//! - [`OutboxQueue`] — the outbox worker: claim by room, finish, release, renew;
//! - [`OutboxAdmin`] — the operator: stats, listing, requeue, purge;
//! - [`LeaseRepository`] — shard leases; [`ConsumerRepository`] — the event consumers.
//!
//! [`Repository`] gathers them (plus ping, pool stats, close) for wiring. One implementation,
//! [`SqlRepository`], serves MySQL/MariaDB and SQLite: the SQL is written once over the
//! `Dialect` (`sql.rs`), which states what differs, and each role is one generic impl over a
//! `Backend` (`backend.rs`), which runs the statements. Every time comparison on outbox rows
//! uses the database's clock, never the node's.

#[path = "admin/mod.rs"]
mod admin;
#[path = "admin/sql.rs"]
mod admin_sql;
#[path = "backend/run.rs"]
mod backend;
#[path = "queue/claim/take.rs"]
mod claim_plan;
#[path = "command/mod.rs"]
mod command_store;
#[path = "consumer/mod.rs"]
mod consumer;
mod consumer_impl;
#[path = "consumer/sql.rs"]
mod consumer_sql;
#[path = "command/commit.rs"]
mod flows;
#[path = "lease/mod.rs"]
mod lease;
#[path = "lease/sql.rs"]
mod lease_sql;
#[path = "backend/mysql.rs"]
mod mysql;
#[path = "backend/open_writers.rs"]
mod open_writers_sql;
#[path = "queue/types.rs"]
mod outbox_types;
pub mod pool_metrics;
#[path = "queue/mod.rs"]
mod queue;
#[path = "queue/claim/sql.rs"]
mod queue_sql;
mod repository;
#[path = "command/commit_sql.rs"]
mod room_sql;
#[path = "command/rows.rs"]
mod rows;
#[path = "backend/mod.rs"]
mod sql;
#[path = "backend/sqlite.rs"]
mod sqlite;
#[path = "command/outbox_sql.rs"]
mod sync_sql;
#[path = "command/types.rs"]
mod types;

use std::sync::Arc;

use async_trait::async_trait;

pub use admin::{
    MAX_PURGE_BATCH, MAX_REQUEUE_BATCH, OutboxAdmin, PURGE_LOCK_PREFIX, PurgeLock, REQUEUEABLE,
    RequeueTarget, RequeuedRow,
};
pub use command_store::CommandStore;
pub use consumer::{
    AuditEntry, ConsumerLease, ConsumerRepository, ConsumerRow, EventRow, ResetReport, ResetTo,
};
pub use lease::{ClusterNode, LeaseRepository, ShardLease};
pub use outbox_types::{
    Claim, ClaimScope, ClaimedBatch, Mark, MarkReport, OutboxQuery, OutboxRow, OutboxStats, OutboxStatus,
    PublishResult,
};
pub use queue::OutboxQueue;
pub use repository::{MySqlRepository, SqlRepository, SqliteRepository};
pub use types::{
    CommandKey, CommitError, GiftTotalRow, HistoryEvent, LoggedCommand, MemberChanges, NewOutboxRow,
    PoolStats, RoomCommit, SnapshotWrite, StoreError, StoredCommand, StoredRoom,
};

use crate::config::Backend;

/// Shared handle to the repository.
pub type SharedRepository = Arc<dyn Repository>;

/// The command path's store, shared by the room service's steps.
pub type SharedCommandStore = Arc<dyn CommandStore>;

/// Every role of the store, for wiring (one handle, narrowed where a part needs one role only).
/// One conformance suite (`tests/it/store`) runs unchanged against both backends.
#[async_trait]
pub trait Repository:
    CommandStore
    + OutboxQueue
    + OutboxAdmin
    + LeaseRepository
    + ConsumerRepository
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
{
    /// Cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Connections of the pool, in use and idle, and its upper bound (no round trip).
    fn pool_stats(&self) -> PoolStats;

    /// Closes the pool; waits for connections in use to be returned.
    async fn close(&self);
}

/// Opens the database named by `url` (`mysql://`, `mariadb://` or `sqlite:`), checks the
/// engine, and runs migrations when asked.
pub async fn connect(
    url: &str,
    max_connections: u32,
    run_migrations: bool,
) -> Result<SharedRepository, StoreError> {
    open(url, max_connections, Some(run_migrations)).await
}

/// Opens the existing database at `url` for an operator tool: never migrates, and never
/// creates a SQLite file.
pub async fn connect_existing(url: &str, max_connections: u32) -> Result<SharedRepository, StoreError> {
    open(url, max_connections, None).await
}

/// `run_migrations: None` opens an existing database as it is.
async fn open(
    url: &str,
    max_connections: u32,
    migrations: Option<bool>,
) -> Result<SharedRepository, StoreError> {
    let run_migrations = migrations == Some(true);
    let url = url.trim_start();
    match Backend::from_url(url) {
        Some(Backend::Sqlite) => {
            let repo = if migrations.is_some() {
                SqliteRepository::connect(url, max_connections).await?
            } else {
                SqliteRepository::connect_existing(url, max_connections).await?
            };
            if run_migrations {
                repo.migrate().await?;
            }
            Ok(Arc::new(repo))
        }
        Some(Backend::MySql) => {
            let url = url.replacen("mariadb:", "mysql:", 1);
            let repo = MySqlRepository::connect(&url, max_connections).await?;
            repo.check_engine().await?;
            if run_migrations {
                repo.migrate().await?;
            }
            Ok(Arc::new(repo))
        }
        None => {
            Err(StoreError::Config("database.url must start with sqlite:, mysql:// or mariadb://".into()))
        }
    }
}

/// Truncates an error message to what fits `last_error` (512 chars), on a char boundary.
pub fn short_error(message: &str) -> String {
    const MAX: usize = 512;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}
