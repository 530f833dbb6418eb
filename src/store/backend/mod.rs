//! The [`Dialect`]: everything that differs between MySQL/MariaDB and SQLite, stated once —
//! the database clock, locking reads, index hints, the claim's lock, upserts, how a write
//! transaction begins, the purge's lock, the open-writers probe. Every statement
//! (`room_sql.rs`, `queue_sql.rs`, `admin_sql.rs`, `lease_sql.rs`, `consumer_sql.rs`) is built
//! once over it, with the binding helpers here; the probe's own text is in `open_writers_sql.rs`.

use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::{Database, MySql, Pool, QueryBuilder, Sqlite};

use super::admin::PurgeLock;
use super::open_writers_sql::OpenWriters;
use super::types::StoreError;

/// Columns of `room_outbox`, in `OutboxRow` order.
pub(super) const OUTBOX_COLUMNS: &str = "id, event_id, room_id, event_type, envelope, status, retry_count, \
     last_error, worker_id, lock_until_ms, created_at_ms, updated_at_ms, delivered_at_ms, park_reason, \
     trace_context";

/// What differs between the SQL of MySQL/MariaDB and SQLite.
pub(super) trait Dialect: Database {
    /// The database clock, milliseconds since the epoch.
    const NOW_MS: &'static str;
    /// Binds an integer.
    fn bind_i64(q: &mut QueryBuilder<Self>, value: i64);
    /// Binds an integer or NULL. (A `NULL` written into the text instead would make a
    /// multi-row statement's text differ with where its NULLs fall: every such text is
    /// prepared and cached on each connection, and a cache thrashing between them cost a hot
    /// room half its commits on MariaDB; see docs/BENCHMARKS.md, B10.)
    fn bind_opt_i64(q: &mut QueryBuilder<Self>, value: Option<i64>);
    /// Binds a string.
    fn bind_str(q: &mut QueryBuilder<Self>, value: &str);
    /// Binds a string or NULL (bound either way, as [`Dialect::bind_opt_i64`] says why).
    fn bind_opt_str(q: &mut QueryBuilder<Self>, value: Option<&str>);
    /// Rows a statement changed.
    fn rows_affected(result: &Self::QueryResult) -> u64;
    /// Appended to a read that must lock its rows until commit (empty where the transaction
    /// already holds the write lock).
    const LOCKING_READ: &'static str;
    /// Appended to a read that keeps writers of its rows out until commit (empty where a read
    /// transaction already sees one consistent snapshot).
    const SHARED_READ: &'static str;
    /// Appended to a multi-row `INSERT` so that a row whose `key` exists overwrites `columns`.
    fn upsert(key: &str, columns: &[&str]) -> String;
    /// After `FROM table`: make the planner walk `index` (the claim and the purge name theirs,
    /// which the planners do not always pick on their own).
    fn index_hint(index: &str) -> String;
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
    /// How to count this database's open transactions that began at or before a time (`None`:
    /// every id is handed out under the one write lock, so none can be open behind a reader).
    const OPEN_WRITERS: Option<OpenWriters>;
    /// True when `error` says this session may not run [`Dialect::OPEN_WRITERS`].
    fn access_denied(error: &sqlx::Error) -> bool;
    /// Tries, without waiting, to become the one instance that purges (`None`: another holds
    /// the lock).
    fn try_purge_lock(pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>>;
}

/// The part of a [`Dialect`] both backends write alike (sqlx's bounds are concrete only in the
/// impl of each).
macro_rules! binds_by_value {
    () => {
        fn bind_i64(q: &mut QueryBuilder<Self>, value: i64) {
            q.push_bind(value);
        }
        fn bind_opt_i64(q: &mut QueryBuilder<Self>, value: Option<i64>) {
            q.push_bind(value);
        }
        fn bind_str(q: &mut QueryBuilder<Self>, value: &str) {
            q.push_bind(value.to_owned());
        }
        fn bind_opt_str(q: &mut QueryBuilder<Self>, value: Option<&str>) {
            q.push_bind(value.map(str::to_owned));
        }
        fn rows_affected(result: &Self::QueryResult) -> u64 {
            result.rows_affected()
        }
    };
}

impl Dialect for MySql {
    const NOW_MS: &'static str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";
    const LOCKING_READ: &'static str = " FOR UPDATE";
    const SHARED_READ: &'static str = " LOCK IN SHARE MODE";
    const CLAIM_LOCK: &'static str = " FOR UPDATE SKIP LOCKED";
    const COLUMN_COLLATION: &'static str = " COLLATE utf8mb4_bin";
    const BEGIN_WRITE: &'static str = "BEGIN";
    fn try_purge_lock(pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>> {
        Box::pin(super::mysql::purge_lock(pool))
    }
    // INNODB_TRX, read past its cache: see `open_writers_sql::mysql_open_writers`. The probe's
    // transaction locks the one room_cluster row: it always exists and nothing writes it.
    const OPEN_WRITERS: Option<OpenWriters> = Some(OpenWriters {
        begin: "SELECT id FROM room_cluster WHERE id = 1 LOCK IN SHARE MODE",
        count: super::open_writers_sql::mysql_open_writers,
    });
    fn access_denied(error: &sqlx::Error) -> bool {
        // 1227: PROCESS privilege missing; 1142/1044: no access to the table/schema.
        let code =
            error.as_database_error().and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>());
        code.is_some_and(|e| matches!(e.number(), 1044 | 1142 | 1227))
    }
    fn index_hint(index: &str) -> String {
        format!(" FORCE INDEX ({index})")
    }
    fn upsert(_key: &str, columns: &[&str]) -> String {
        format!(" ON DUPLICATE KEY UPDATE {}", assignments(columns, |c| format!("VALUES({c})")))
    }
    binds_by_value!();
}

impl Dialect for Sqlite {
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
    // One file, one writer at a time, and deletes are idempotent: the lock holds nothing.
    fn try_purge_lock(_pool: &Pool<Self>) -> BoxFuture<'_, Result<Option<PurgeLock>, StoreError>> {
        Box::pin(async { Ok(Some(PurgeLock::none())) })
    }
    const OPEN_WRITERS: Option<OpenWriters> = None;
    fn access_denied(_error: &sqlx::Error) -> bool {
        false
    }
    fn index_hint(index: &str) -> String {
        format!(" INDEXED BY {index}")
    }
    fn upsert(key: &str, columns: &[&str]) -> String {
        format!(" ON CONFLICT ({key}) DO UPDATE SET {}", assignments(columns, |c| format!("excluded.{c}")))
    }
    binds_by_value!();
}

/// `column = new value, ...` of an upsert: the list both dialects write, each naming the
/// inserted value its own way.
fn assignments(columns: &[&str], new_value: impl Fn(&str) -> String) -> String {
    columns.iter().map(|c| format!("{c} = {}", new_value(c))).collect::<Vec<_>>().join(", ")
}

/// `INSERT INTO table (columns, stamp) VALUES (values, now)`, leaving the row as it is when one
/// with the same `key` exists: the upsert sets the key to itself, an insert-or-ignore that
/// (unlike `INSERT IGNORE`) still fails on anything but the duplicate key.
pub(super) fn insert_or_ignore<DB: Dialect>(
    table: &str,
    columns: &[(&str, &str)],
    stamp: &str,
    key: &str,
) -> QueryBuilder<DB> {
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let mut q = QueryBuilder::new(format!("INSERT INTO {table} ({}, {stamp}) VALUES (", names.join(", ")));
    for (i, (_, value)) in columns.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        DB::bind_str(&mut q, value);
    }
    q.push(format!(", {})", DB::NOW_MS));
    q.push(DB::upsert(key, &[key]));
    q
}

pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Appends `(v1, v2, ...)` binding each value.
pub(super) fn push_list<DB: Dialect, T>(
    q: &mut QueryBuilder<DB>,
    values: &[T],
    bind: fn(&mut QueryBuilder<DB>, &T),
) {
    q.push("(");
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        bind(q, v);
    }
    q.push(")");
}

/// Appends `(id, ...)`.
pub(super) fn push_ids<DB: Dialect>(q: &mut QueryBuilder<DB>, ids: &[i64]) {
    push_list(q, ids, |q, id| DB::bind_i64(q, *id));
}

/// Appends `('value', ...)`.
pub(super) fn push_strs<DB: Dialect>(q: &mut QueryBuilder<DB>, values: &[String]) {
    push_list(q, values, |q, v| DB::bind_str(q, v));
}
