//! Errors of the command pipeline, each mapping to one HTTP status and code.

use crate::domain::DomainError;
use crate::store::StoreError;

/// Why a command or query failed. Nothing was written in every case.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    /// The domain refused the command.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The command id was used for a different command, or the room changed concurrently on
    /// another node twice in a row.
    #[error("{0}")]
    CommandConflict(String),
    /// The database is unavailable; memory is unchanged.
    #[error("storage unavailable")]
    Unavailable(#[source] StoreError),
    /// Stored data could not be read back (a snapshot or logged outcome that does not parse).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

impl From<StoreError> for RoomError {
    fn from(e: StoreError) -> Self {
        RoomError::Unavailable(e)
    }
}
