//! What only the embedded SQLite file does: opening it (creating it, or refusing to) and its
//! migrations. SQLite has one writer at a time: every write transaction takes the write lock up
//! front (`BEGIN IMMEDIATE`, see the dialect); WAL mode lets readers run beside it.

use std::str::FromStr;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};

use super::repository::SqlRepository;
use super::types::StoreError;

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
