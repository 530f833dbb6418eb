//! The purge's lock ([`OutboxAdmin::try_purge_lock`](crate::store::OutboxAdmin::try_purge_lock)),
//! which lets one instance at a time purge: on MySQL an advisory lock (`GET_LOCK`) held by a
//! session of its own; on SQLite nothing (one file, and deletes are idempotent). Each backend
//! hands it out through [`Backend::try_purge_lock`](super::Backend::try_purge_lock).

use sqlx::mysql::MySqlPool;
use sqlx::{Connection, MySqlConnection};

use crate::store::error::StoreError;

/// Prefix of the MySQL advisory lock (`GET_LOCK`) that lets one instance at a time purge; the
/// database name follows it, so services sharing a server do not block each other.
pub const PURGE_LOCK_PREFIX: &str = "room_outbox_retention";

/// Held by the one instance allowed to purge. On MySQL it owns the session holding the advisory
/// lock: [`PurgeLock::release`] releases it, and dropping it closes the session, which releases
/// it too. On SQLite (one file, deletes are idempotent) it holds nothing.
#[derive(Debug)]
pub struct PurgeLock {
    session: Option<(MySqlConnection, String)>,
}

impl PurgeLock {
    /// A lock that holds nothing (SQLite).
    pub(super) fn none() -> Self {
        Self { session: None }
    }

    /// Releases the lock and closes its session.
    pub async fn release(self) -> Result<(), StoreError> {
        if let Some((mut conn, name)) = self.session {
            sqlx::query("SELECT RELEASE_LOCK(?)").bind(&name).execute(&mut conn).await?;
            conn.close().await?;
        }
        Ok(())
    }
}

/// MySQL's purge lock: `GET_LOCK` on a session of its own, outside the pool — a pooled one
/// would go back to the pool still holding the lock.
pub(super) async fn mysql_purge_lock(pool: &MySqlPool) -> Result<Option<PurgeLock>, StoreError> {
    let mut conn = pool.acquire().await?.detach();
    let name: String = sqlx::query_scalar("SELECT LEFT(CONCAT(?, '.', COALESCE(DATABASE(), '')), 64)")
        .bind(PURGE_LOCK_PREFIX)
        .fetch_one(&mut conn)
        .await?;
    let got: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(?, 0)").bind(&name).fetch_one(&mut conn).await?;
    if got == Some(1) {
        Ok(Some(PurgeLock { session: Some((conn, name)) }))
    } else {
        conn.close().await?;
        Ok(None)
    }
}
