//! Errors of the command pipeline, each mapping to one HTTP status and code.

use std::sync::Arc;

use crate::domain::DomainError;
use crate::store::StoreError;
use crate::wallet::WalletError;

/// Why a command or query failed. Nothing was written in every case, except
/// [`RoomError::Unavailable`], whose commit may or may not have landed (a retry with the same
/// `command_id` answers the original outcome if it did).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RoomError {
    /// The domain refused the command.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The command id was used for a different command: never retry it.
    #[error("{0}")]
    CommandConflict(String),
    /// The room changed concurrently (on another node, twice in a row), or the command id is
    /// being committed concurrently: retry the command as it is.
    #[error("{0}")]
    VersionConflict(String),
    /// The database is unavailable; memory is unchanged. Shared: every command of a failed
    /// group commit gets the same error.
    #[error("storage unavailable")]
    Unavailable(#[source] Arc<StoreError>),
    /// Another node owns the room's shard now (or none does, for a moment): retry; the
    /// request is routed to the owner.
    #[error("this node does not own the room now; retry")]
    NotOwner,
    /// The database failed before the commit: the transaction rolled back, nothing was
    /// written (memory is unchanged too). Answered like [`RoomError::Unavailable`]; only a
    /// gift's payment tells them apart (its debit is refunded).
    #[error("storage unavailable; nothing was written")]
    NotCommitted(#[source] Arc<StoreError>),
    /// The wallet refused a gift's debit or could not be asked; nothing was written.
    #[error(transparent)]
    Wallet(#[from] WalletError),
    /// This gift's `command_id` was paid and refunded (it did not commit): paying again under
    /// the same key would commit it unpaid. Send it again under a new `command_id`.
    #[error("the payment of this command was refunded; send the gift again with a new command_id")]
    PaymentRefunded,
    /// The wallet's debit under this command's key is not this gift's (another user or
    /// amount): refused, nothing committed, nothing refunded (the debit is another command's).
    #[error("the wallet's debit under this command's key is another debit; nothing was written")]
    PaymentMismatch,
    /// Stored data could not be read back (a snapshot or logged outcome that does not parse).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

impl RoomError {
    /// The task running the command stopped before answering (the runtime is shutting down).
    pub(super) fn unknown_outcome() -> Self {
        RoomError::Unavailable(Arc::new(StoreError::Config(
            "the command's outcome is unknown; retry it with the same command_id".into(),
        )))
    }
}

impl From<StoreError> for RoomError {
    fn from(e: StoreError) -> Self {
        RoomError::Unavailable(Arc::new(e))
    }
}
