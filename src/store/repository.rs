//! [`Repository`]: every role of the store in one handle, for wiring (narrowed where a part
//! needs one role only), its impl for [`SqlRepository`], and [`connect`]: opening one from the
//! configured URL.

use std::sync::Arc;

use async_trait::async_trait;

use super::admin::OutboxAdmin;
use super::backend::mysql::MySqlRepository;
use super::backend::sqlite::SqliteRepository;
use super::backend::{Backend, SqlRepository};
use super::command::CommandStore;
use super::consumer::ConsumerRepository;
use super::error::StoreError;
use super::lease::LeaseRepository;
use super::pool_metrics::PoolStats;
use super::queue::OutboxQueue;
use crate::config::Backend as BackendKind;

/// Shared handle to the repository.
pub type SharedRepository = Arc<dyn Repository>;

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

#[async_trait]
impl<DB: Backend> Repository for SqlRepository<DB> {
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(DB::on_pool(&self.pool)).await?;
        Ok(())
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::of(&self.pool)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
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
    match BackendKind::from_url(url) {
        Some(BackendKind::Sqlite) => {
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
        Some(BackendKind::MySql) => {
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
