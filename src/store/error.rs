//! [`StoreError`]: how every role of the store fails, and what a caller can tell from it (the
//! database refused the statement, a node is unavailable, the data is at fault).

/// A database failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the statement.
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The engine or its configuration cannot run this service.
    #[error("{0}")]
    Config(String),
}

impl StoreError {
    /// True when the database answered and refused the statement (a constraint, a value that
    /// does not fit, a deadlock): the server is there, and the statement's data may be at
    /// fault. False when it was lost or unavailable (I/O, pool timeout, closed pool, a Galera
    /// node outside the primary component: [`StoreError::is_node_unavailable`]).
    pub fn is_refusal(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(_))) && !self.is_node_unavailable()
    }

    /// True when the server answered that it cannot serve at all: a Galera node that lost
    /// quorum or is still joining (1047 `WSREP has not yet prepared node for application use`;
    /// docs/DEPLOY-HA.md). Nothing of the statement's data is at fault: the load balancer moves
    /// the connections to a node that can, and a retry goes there.
    pub fn is_node_unavailable(&self) -> bool {
        let StoreError::Database(sqlx::Error::Database(e)) = self else { return false };
        e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().is_some_and(|e| e.number() == 1047)
    }

    /// True when the statement's data is at fault: a value too long or out of range for its
    /// column (SQLSTATE class 22, MySQL 1366/1406/1264/1265), or too big for SQLite.
    pub fn is_data_fault(&self) -> bool {
        let StoreError::Database(sqlx::Error::Database(e)) = self else { return false };
        let mysql = e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().map(|e| e.number());
        matches!(mysql, Some(1264 | 1265 | 1366 | 1406))
            || e.code().is_some_and(|code| code.starts_with("22") || code == "18")
    }
}

/// Every database error of the store passes here: a connection acquisition that timed out
/// (every connection in use for the whole acquire timeout) is counted in
/// `room_db_pool_acquire_timeouts_total`.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if matches!(error, sqlx::Error::PoolTimedOut) {
            super::pool_metrics::count_acquire_timeout();
        }
        StoreError::Database(error)
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
