//! The SQL plumbing under every role: [`SqlRepository`], the store on a pool of either
//! database, and the one [`Backend`] trait saying what differs between MySQL/MariaDB and
//! SQLite — the database clock, locking reads, index hints, the claim's lock, upserts, how a
//! write transaction begins, the purge's lock, the open-writers probe, and the three things only
//! sqlx's concrete types know: running a statement on the pool, running one on a connection,
//! and decoding a row.
//!
//! - `mysql.rs`, `sqlite.rs` — the two impls of [`Backend`], and what only that database does:
//!   opening its pool, its migrations, MySQL's engine check and purge lock;
//! - `run.rs` — sqlx's `execute` and `fetch_*` on a statement of any backend ([`run::Run`]);
//! - `bind.rs` — binding lists and durations, the insert-or-ignore every role writes alike;
//! - `purge_lock.rs`, `open_writers.rs` — the two server-specific pieces the trait hands out.
//!
//! Every role's SQL is written once over [`Backend`] (`store/<role>/…sql.rs`) and each role is
//! one `impl<DB: Backend>` on [`SqlRepository`].
//!
//! Why each backend answers the sqlx parts itself rather than through bounds: sqlx implements
//! `Executor` for `&mut MySqlConnection`, `Decode<MySql>` for `i64` and so on one backend at a
//! time, so a generic impl needs `for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>`
//! and one `for<'r> T: FromRow<'r, DB::Row>` per row type. Rust implies only the bounds a trait
//! puts on `Self` and its associated types, never ones like these, so a `Backend` carrying them
//! as where-clauses would still have every impl and function that names it restate them. Each
//! backend answers them instead, in its impl: the two impls read alike, but each is checked
//! against its own concrete types, which is what a generic one cannot be.

pub(super) mod bind;
pub(super) mod mysql;
pub(super) mod open_writers;
pub(super) mod purge_lock;
pub(super) mod run;
pub(super) mod sqlite;

use futures::future::BoxFuture;
use sqlx::mysql::MySqlRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Database, Executor, FromRow, IntoArguments, Pool, QueryBuilder};

use self::open_writers::OpenWriters;
use self::purge_lock::PurgeLock;
use super::error::StoreError;

/// A database the store runs on: what its SQL says differently, and how sqlx runs it there.
pub(in crate::store) trait Backend: Database<Arguments: IntoArguments<Self>> {
    // What the SQL text says differently.

    /// The database clock, milliseconds since the epoch.
    const NOW_MS: &'static str;
    /// Appended to a read that must lock its rows until commit (empty where the transaction
    /// already holds the write lock).
    const LOCKING_READ: &'static str;
    /// Appended to a read that keeps writers of its rows out until commit (empty where a read
    /// transaction already sees one consistent snapshot).
    const SHARED_READ: &'static str;
    /// Appended to the claim's SELECT: lock the rows, skipping those another claim holds
    /// (empty where the transaction already holds the only write lock).
    const CLAIM_LOCK: &'static str;
    /// Appended to a string compared with a text column of ours, so that it is taken in the
    /// column's collation. (MySQL: sqlx's sessions use `utf8mb4_unicode_ci`; a literal in it
    /// next to a `utf8mb4_bin` column keeps the planner from reading a `GROUP BY` in index
    /// order — it sorts instead.)
    const COLUMN_COLLATION: &'static str;
    /// Starts a transaction that reads, then writes (SQLite: take the write lock up front, so
    /// the write cannot fail on a snapshot that moved since the read).
    const BEGIN_WRITE: &'static str;
    /// Appended to a multi-row `INSERT` so that a row whose `key` exists overwrites `columns`.
    fn upsert(key: &str, columns: &[&str]) -> String;
    /// After `FROM table`: make the planner walk `index` (the claim and the purge name theirs,
    /// which the planners do not always pick on their own).
    fn index_hint(index: &str) -> String;

    // Binding values.

    /// Binds an integer.
    fn bind_i64(q: &mut QueryBuilder<Self>, value: i64);
    /// Binds an integer or NULL. (A `NULL` written into the text instead would make a
    /// multi-row statement's text differ with where its NULLs fall: every such text is
    /// prepared and cached on each connection, and a cache thrashing between them cost a hot
    /// room half its commits on MariaDB; see docs/BENCHMARKS.md, B10.)
    fn bind_opt_i64(q: &mut QueryBuilder<Self>, value: Option<i64>);
    /// Binds a string.
    fn bind_str(q: &mut QueryBuilder<Self>, value: &str);
    /// Binds a string or NULL (bound either way, as [`Backend::bind_opt_i64`] says why).
    fn bind_opt_str(q: &mut QueryBuilder<Self>, value: Option<&str>);

    // Running statements (see the module docs for why each backend answers these).

    /// The pool, as sqlx's executor (each statement on a connection of its own).
    fn on_pool(pool: &Pool<Self>) -> impl Executor<'_, Database = Self>;
    /// A connection — a transaction's, as `&mut tx` — as sqlx's executor.
    fn on_conn(conn: &mut Self::Connection) -> impl Executor<'_, Database = Self>;
    /// One row as `T`.
    fn decode<T: Readable>(row: &Self::Row) -> Result<T, sqlx::Error>;
    /// Rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;

    // What only the server can say.

    /// How to count this database's open transactions that began at or before a time (`None`:
    /// every id is handed out under the one write lock, so none can be open behind a reader).
    const OPEN_WRITERS: Option<OpenWriters>;
    /// True when `error` says this session may not run [`Backend::OPEN_WRITERS`].
    fn access_denied(error: &sqlx::Error) -> bool;
    /// Tries, without waiting, to become the one instance that purges (`None`: another holds
    /// the lock).
    fn try_purge_lock(pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>>;
}

/// The part of a [`Backend`] impl both databases write alike: the same text, checked against
/// each one's own concrete types (see the module docs).
macro_rules! written_alike {
    () => {
        fn bind_i64(q: &mut sqlx::QueryBuilder<Self>, value: i64) {
            q.push_bind(value);
        }
        fn bind_opt_i64(q: &mut sqlx::QueryBuilder<Self>, value: Option<i64>) {
            q.push_bind(value);
        }
        fn bind_str(q: &mut sqlx::QueryBuilder<Self>, value: &str) {
            q.push_bind(value.to_owned());
        }
        fn bind_opt_str(q: &mut sqlx::QueryBuilder<Self>, value: Option<&str>) {
            q.push_bind(value.map(str::to_owned));
        }
        fn on_pool(pool: &sqlx::Pool<Self>) -> impl sqlx::Executor<'_, Database = Self> {
            pool
        }
        fn on_conn(conn: &mut Self::Connection) -> impl sqlx::Executor<'_, Database = Self> {
            conn
        }
        fn decode<T: $crate::store::backend::Readable>(row: &Self::Row) -> Result<T, sqlx::Error> {
            T::from_row(row)
        }
        fn rows_affected(result: &Self::QueryResult) -> u64 {
            result.rows_affected()
        }
    };
}
use written_alike;

/// A row the store reads back — a `#[derive(sqlx::FromRow)]` struct, a tuple of columns, or
/// `()` for "is there a row" — decodable from the rows of either backend.
pub(in crate::store) trait Readable:
    for<'r> FromRow<'r, MySqlRow> + for<'r> FromRow<'r, SqliteRow>
{
}

impl<T> Readable for T where T: for<'r> FromRow<'r, MySqlRow> + for<'r> FromRow<'r, SqliteRow> {}

/// `column = new value, ...` of an upsert: the list both backends write, each naming the
/// inserted value its own way.
fn assignments(columns: &[&str], new_value: impl Fn(&str) -> String) -> String {
    columns.iter().map(|c| format!("{c} = {}", new_value(c))).collect::<Vec<_>>().join(", ")
}

/// The store on a pool of `DB` (MySQL/MariaDB or SQLite): the one implementation of every role.
pub struct SqlRepository<DB: Database> {
    pub(in crate::store) pool: Pool<DB>,
}

impl<DB: Database> SqlRepository<DB> {
    /// The pool settings of both backends: at most `max_connections`, and a command waits 5 s
    /// at most for a connection (then answers 503) instead of hanging on a database gone away.
    fn pool_options(max_connections: u32) -> sqlx::pool::PoolOptions<DB> {
        sqlx::pool::PoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(std::time::Duration::from_secs(5))
    }

    /// The underlying pool (tests and benchmarks).
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }
}

impl<DB: Database> Clone for SqlRepository<DB> {
    fn clone(&self) -> Self {
        Self { pool: self.pool.clone() }
    }
}

impl<DB: Database> std::fmt::Debug for SqlRepository<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlRepository").field("pool", &self.pool).finish()
    }
}
