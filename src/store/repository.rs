//! [`SqlRepository`]: the one implementation of every role of the store, over a pool of either
//! backend. Each role's SQL is written once, over the [`Dialect`](super::sql::Dialect); the
//! macros (one per role, next to its trait) implement it for each of the two backends, where
//! sqlx's bounds are concrete. What only one backend does — opening its pool, its migrations,
//! MySQL's engine check — lives in `mysql.rs` and `sqlite.rs`.

use sqlx::{MySql, Pool, Sqlite};

use super::admin::impl_outbox_admin;
use super::command_store::impl_command_store;
use super::consumer_impl::impl_consumer_repository;
use super::lease_sql::{self, impl_lease_repository};
use super::types::StoreError;

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

/// The umbrella [`Repository`](super::Repository) for `SqlRepository<$db>`.
macro_rules! impl_repository {
    ($db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::Repository for SqlRepository<$db> {
            async fn ping(&self) -> Result<(), StoreError> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            fn pool_stats(&self) -> $crate::store::PoolStats {
                $crate::store::PoolStats::of(&self.pool)
            }

            async fn close(&self) {
                self.pool.close().await;
            }
        }
    };
}

/// Every role, for both backends.
macro_rules! impl_all_roles {
    ($($db:ty),*) => {$(
        impl_command_store!($db);
        super::queue::impl_outbox_queue!($db);
        impl_outbox_admin!($db);
        impl_lease_repository!(SqlRepository<$db>, $db);
        impl_consumer_repository!(SqlRepository<$db>, $db);
        impl_repository!($db);
    )*};
}

impl_all_roles!(MySql, Sqlite);
