//! The embedded SQLite file (the default: `cargo run` works anywhere): its [`Backend`] impl,
//! and what only it does — opening the file (creating it, or refusing to) and its migrations.
//! SQLite has one writer at a time: every write transaction takes the write lock up front
//! (`BEGIN IMMEDIATE`); WAL mode lets readers run beside it.

use std::str::FromStr;
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Pool, Sqlite};

use super::open_writers::OpenWriters;
use super::purge_lock::PurgeLock;
use super::{Backend, SqlRepository, assignments, written_alike};
use crate::store::error::StoreError;

/// The store on an embedded SQLite file (the default: `cargo run` works anywhere).
pub type SqliteRepository = SqlRepository<Sqlite>;

impl Backend for Sqlite {
    const NOW_MS: &'static str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
    // Command transactions start with BEGIN IMMEDIATE: the write lock is already held.
    const LOCKING_READ: &'static str = "";
    // WAL: a read transaction sees one snapshot from its first read to its end.
    const SHARED_READ: &'static str = "";
    // Claims run in BEGIN IMMEDIATE: the one write lock is held.
    const CLAIM_LOCK: &'static str = "";
    // Text compares with the column's own collation (BINARY) already.
    const COLUMN_COLLATION: &'static str = "";
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    fn upsert(key: &str, columns: &[&str]) -> String {
        format!(" ON CONFLICT ({key}) DO UPDATE SET {}", assignments(columns, |c| format!("excluded.{c}")))
    }
    fn index_hint(index: &str) -> String {
        format!(" INDEXED BY {index}")
    }
    written_alike!();
    const OPEN_WRITERS: Option<OpenWriters> = None;
    fn access_denied(_error: &sqlx::Error) -> bool {
        false
    }
    // One file, one writer at a time, and deletes are idempotent: the lock holds nothing.
    fn try_purge_lock(_pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>> {
        Box::pin(async { Ok(Some(PurgeLock::none())) })
    }
}

impl SqlRepository<Sqlite> {
    /// Opens (creating when the URL says `mode=rwc`) the file and its parent directory.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::open(url, max_connections, true).await
    }

    /// Opens an existing database file and never creates one (nor its directory), whatever
    /// `mode=` the URL asks for: the operator tools act on the service's database only.
    pub async fn connect_existing(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        Self::open(url, max_connections, false).await
    }

    async fn open(url: &str, max_connections: u32, create: bool) -> Result<Self, StoreError> {
        let mut options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        if !create {
            options = options.create_if_missing(false);
            let file = options.get_filename();
            if !file.exists() {
                return Err(StoreError::Config(format!(
                    "database.url: no SQLite database at {} (run the service or `room-service migrate` first)",
                    file.display()
                )));
            }
        }
        if let Some(dir) = options.get_filename().parent().filter(|d| create && !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Config(format!("database.url: cannot create directory {}: {e}", dir.display()))
            })?;
        }
        Ok(Self { pool: Self::pool_options(max_connections).connect_with(options).await? })
    }

    /// Runs `migrations/sqlite`.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }
}
