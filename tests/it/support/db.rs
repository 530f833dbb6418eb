//! Fresh, migrated databases for tests: SQLite in a temporary directory, MariaDB as a
//! throwaway database per test.
//!
//! A conformance test runs unchanged against both backends and names the backend in its
//! assertion messages:
//!
//! ```ignore
//! for db in backends().await {
//!     db.repo.commit_room(&c).await.unwrap();
//!     assert_eq!(db.count("room_outbox").await, 1, "{db}");
//! }
//! ```
//!
//! MariaDB comes from `ROOM_SERVICE_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306`,
//! no database path). If it is unreachable the test fails with a message saying so: it never
//! skips. Each MariaDB test database is `rs_t_<unix secs>_<random>`, dropped when the
//! [`TestDb`] drops; ones older than an hour (left by killed runs) are swept at first use.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use room_service::store::{
    MySqlRepository, OutboxQuery, OutboxRow, SharedRepository, SqliteRepository, StoredCommand,
};
use sqlx::mysql::{MySqlConnection, MySqlPool};
use sqlx::sqlite::SqlitePool;
use sqlx::{AssertSqlSafe, Connection, Executor};
use tempfile::TempDir;
use tokio::sync::OnceCell;

/// Env var naming the MariaDB server (no database path).
pub const MYSQL_URL_ENV: &str = "ROOM_SERVICE_TEST_MYSQL_URL";
const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306";
const DB_PREFIX: &str = "rs_t_";
const STALE_AFTER_SECS: u64 = 3600;
const POOL_SIZE: u32 = 8;

/// One fresh, migrated database and a repository over it.
///
/// Dropping it removes the database (best effort). Field order matters: the repository and
/// pools drop before the guard that removes the database.
pub struct TestDb {
    /// The repository under test.
    pub repo: SharedRepository,
    pool: Pool,
    url: String,
    _guard: Guard,
}

/// The repository's own pool (same session settings as the service uses).
enum Pool {
    Sqlite(SqlitePool),
    MySql(MySqlPool),
}

/// Held only for its `Drop`: removes the database.
#[allow(dead_code)]
enum Guard {
    Sqlite(TempDir),
    MySql(DropDatabase),
}

/// Both backends, SQLite first. Panics (with a clear message) when MariaDB is unreachable.
pub async fn backends() -> Vec<TestDb> {
    vec![TestDb::sqlite().await, TestDb::mysql().await]
}

impl TestDb {
    /// A migrated SQLite file in a fresh temporary directory.
    pub async fn sqlite() -> TestDb {
        Self::sqlite_with(true).await
    }

    /// A fresh SQLite file, migrated or empty.
    pub async fn sqlite_with(migrate: bool) -> TestDb {
        let dir = tempfile::tempdir().expect("create temp dir");
        let url = format!("sqlite://{}/t.db?mode=rwc", dir.path().display());
        let repo = SqliteRepository::connect(&url, POOL_SIZE).await.expect("open sqlite");
        if migrate {
            repo.migrate().await.expect("migrate sqlite");
        }
        TestDb {
            pool: Pool::Sqlite(repo.pool().clone()),
            repo: std::sync::Arc::new(repo),
            url,
            _guard: Guard::Sqlite(dir),
        }
    }

    /// A migrated, fresh MariaDB database. Panics when the server is unreachable.
    pub async fn mysql() -> TestDb {
        Self::mysql_with(true).await
    }

    /// A fresh MariaDB database, migrated or empty.
    pub async fn mysql_with(migrate: bool) -> TestDb {
        let base = mysql_base_url();
        let mut admin = admin_connection(&base).await;
        SWEPT.get_or_init(|| sweep_stale(&mut admin)).await;
        let name = format!("{DB_PREFIX}{}_{:08x}", unix_secs(), rand::random::<u32>());
        admin
            .execute(AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        let _ = admin.close().await;
        let guard = DropDatabase { admin_url: base.clone(), name: name.clone() };
        let url = format!("{base}/{name}");
        let repo = MySqlRepository::connect(&url, POOL_SIZE).await.expect("open mariadb pool");
        repo.check_engine().await.expect("engine check");
        if migrate {
            repo.migrate().await.expect("migrate mariadb");
        }
        TestDb {
            pool: Pool::MySql(repo.pool().clone()),
            repo: std::sync::Arc::new(repo),
            url,
            _guard: Guard::MySql(guard),
        }
    }

    /// `"sqlite"` or `"mariadb"`, for assertion messages.
    pub fn name(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::MySql(_) => "mariadb",
        }
    }

    /// The database URL (for `room_service::store::connect`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The MariaDB repository's pool (sessions at READ COMMITTED). Panics on SQLite.
    pub fn mysql_pool(&self) -> &MySqlPool {
        match &self.pool {
            Pool::MySql(pool) => pool,
            Pool::Sqlite(_) => panic!("mysql_pool() on a SQLite TestDb"),
        }
    }

    /// The SQLite repository's pool. Panics on MariaDB.
    pub fn sqlite_pool(&self) -> &SqlitePool {
        match &self.pool {
            Pool::Sqlite(pool) => pool,
            Pool::MySql(_) => panic!("sqlite_pool() on a MariaDB TestDb"),
        }
    }

    /// Runs one literal statement (both backends take `?`-free SQL alike); rows affected.
    pub async fn execute(&self, sql: impl Into<String>) -> u64 {
        let sql = sql.into();
        let result = match &self.pool {
            Pool::Sqlite(pool) => pool.execute(AssertSqlSafe(sql.clone())).await.map(|r| r.rows_affected()),
            Pool::MySql(pool) => pool.execute(AssertSqlSafe(sql.clone())).await.map(|r| r.rows_affected()),
        };
        result.unwrap_or_else(|e| panic!("{self}: {sql}: {e}"))
    }

    /// The single integer a literal query returns (NULL reads as `None`).
    pub async fn scalar(&self, sql: impl Into<String>) -> Option<i64> {
        let sql = sql.into();
        let result = match &self.pool {
            Pool::Sqlite(pool) => sqlx::query_scalar(AssertSqlSafe(sql.clone())).fetch_one(pool).await,
            Pool::MySql(pool) => sqlx::query_scalar(AssertSqlSafe(sql.clone())).fetch_one(pool).await,
        };
        result.unwrap_or_else(|e| panic!("{self}: {sql}: {e}"))
    }

    /// `SELECT COUNT(*) FROM <table>`.
    pub async fn count(&self, table: &str) -> i64 {
        self.scalar(format!("SELECT COUNT(*) FROM {table}")).await.unwrap_or(0)
    }

    /// The database clock in ms, the expression the repository uses.
    pub async fn now_ms(&self) -> i64 {
        let sql = match self.pool {
            Pool::Sqlite(_) => "SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)",
            Pool::MySql(_) => "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
        };
        self.scalar(sql).await.expect("database clock")
    }

    /// Every outbox row, by id (through `list_outbox`).
    pub async fn outbox(&self) -> Vec<OutboxRow> {
        let query = OutboxQuery { status: None, after_id: 0, limit: u32::MAX };
        self.repo.list_outbox(&query).await.unwrap_or_else(|e| panic!("{self}: list_outbox: {e}"))
    }

    /// The outbox row of `event_id`. Panics when there is none.
    pub async fn outbox_row(&self, event_id: &str) -> OutboxRow {
        self.outbox()
            .await
            .into_iter()
            .find(|r| r.event_id == event_id)
            .unwrap_or_else(|| panic!("{self}: no outbox row for event {event_id}"))
    }

    /// The command log row of `command_id`, whoever sent it (the tests use each id once).
    pub async fn logged(&self, command_id: &str) -> Option<StoredCommand> {
        let rows = self.repo.find_commands(&[command_id.to_owned()]).await.expect("read the command log");
        rows.into_iter().next()
    }
}

impl fmt::Display for TestDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for TestDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDb").field("backend", &self.name()).field("url", &self.url).finish()
    }
}

static SWEPT: OnceCell<()> = OnceCell::const_new();

fn mysql_base_url() -> String {
    let url = std::env::var(MYSQL_URL_ENV).unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_owned());
    url.trim_end_matches('/').replacen("mariadb:", "mysql:", 1)
}

async fn admin_connection(base: &str) -> MySqlConnection {
    let connect = tokio::time::timeout(Duration::from_secs(10), MySqlConnection::connect(base)).await;
    match connect {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!(
            "MariaDB is not reachable at {base}: {e}. The store tests need a real MariaDB (CI starts \
             one); start it or point {MYSQL_URL_ENV} at one."
        ),
        Err(_) => panic!(
            "MariaDB at {base} did not answer within 10s. The store tests need a real MariaDB (CI \
             starts one); start it or point {MYSQL_URL_ENV} at one."
        ),
    }
}

/// Drops `rs_t_<secs>_*` databases older than an hour, left behind by killed runs.
async fn sweep_stale(admin: &mut MySqlConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'rs\\_t\\_%'",
    )
    .fetch_all(&mut *admin)
    .await
    .unwrap_or_default();
    let cutoff = unix_secs().saturating_sub(STALE_AFTER_SECS);
    for name in names {
        let created = name.strip_prefix(DB_PREFIX).and_then(|rest| rest.split('_').next());
        if created.and_then(|s| s.parse::<u64>().ok()).is_some_and(|secs| secs < cutoff) {
            let _ = admin.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`"))).await;
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Drops the test database on a thread of its own (a test's runtime cannot block in `Drop`).
struct DropDatabase {
    admin_url: String,
    name: String,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let (url, name) = (self.admin_url.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let mut conn = MySqlConnection::connect(&url).await?;
                // A test that failed may still hold a transaction (and its metadata lock) on a
                // connection its runtime can no longer roll back: end those sessions first.
                let sessions: Vec<i64> =
                    sqlx::query_scalar("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ?")
                        .bind(&name)
                        .fetch_all(&mut conn)
                        .await?;
                for id in sessions {
                    let _ = conn.execute(AssertSqlSafe(format!("KILL CONNECTION {id}"))).await;
                }
                // Never hang here; the sweep catches what this misses.
                conn.execute("SET SESSION lock_wait_timeout = 5").await?;
                conn.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`"))).await?;
                conn.close().await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}
