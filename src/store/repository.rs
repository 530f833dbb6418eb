//! [`SqlRepository`]: the one implementation of every role of the store, over a pool of either
//! backend. Each role's SQL is written once, over the [`Dialect`](super::sql::Dialect), and run
//! by one `impl<DB: Backend>` (`command_store.rs`, `queue.rs`, `admin.rs`, `lease_sql.rs`,
//! `consumer_impl.rs`, and the umbrella below); the [`Backend`] states, per backend, what only
//! sqlx's concrete types know. What only one backend does — opening its pool, its migrations,
//! MySQL's engine check — lives in `mysql.rs` and `sqlite.rs`.

use async_trait::async_trait;
use sqlx::{MySql, Pool, Sqlite};

use super::backend::Backend;
use super::types::{PoolStats, StoreError};

/// The store on a pool of `DB` (MySQL/MariaDB or SQLite).
pub struct SqlRepository<DB: sqlx::Database> {
    pub(super) pool: Pool<DB>,
}

/// The store on MySQL 8 / MariaDB >= 10.6 (production).
pub type MySqlRepository = SqlRepository<MySql>;
/// The store on an embedded SQLite file (the default: `cargo run` works anywhere).
pub type SqliteRepository = SqlRepository<Sqlite>;

impl<DB: sqlx::Database> SqlRepository<DB> {
    /// The pool settings of both backends: at most `max_connections`, and a command waits 5 s
    /// at most for a connection (then answers 503) instead of hanging on a database gone away.
    pub(super) fn pool_options(max_connections: u32) -> sqlx::pool::PoolOptions<DB> {
        sqlx::pool::PoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(std::time::Duration::from_secs(5))
    }

    /// The underlying pool (tests and benchmarks).
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}

impl<DB: sqlx::Database> Clone for SqlRepository<DB> {
    fn clone(&self) -> Self {
        Self { pool: self.pool.clone() }
    }
}

impl<DB: sqlx::Database> std::fmt::Debug for SqlRepository<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlRepository").field("pool", &self.pool).finish()
    }
}

/// The umbrella [`Repository`](super::Repository).
#[async_trait]
impl<DB: Backend> super::Repository for SqlRepository<DB> {
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
