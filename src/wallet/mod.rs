//! The wallet gifts are paid from (SPEC §11.4): the [`Wallet`] trait the room pipeline debits
//! a gift's sender through before the gift commits, its HTTP client [`HttpWallet`], and the
//! [`wire`] format the client and the fake wallet (`room_service_fakes::fake_wallet`) share.
//!
//! Every call carries an idempotency key derived from the command's identity (its caller and
//! `command_id`, so no other caller can reach it): the wallet answers a repeated debit with its
//! first answer and never debits twice, and a refund under a key is idempotent too. Which
//! debits stay and which are refunded is decided in `crate::room`.

mod error;
mod http;
pub mod wire;

use async_trait::async_trait;

pub use error::{FailureClass, WalletError};
pub use http::{HttpWallet, HttpWalletOptions};

/// A debit to take from a user's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debit {
    /// Derived from the command's caller and `command_id`: the same key again never debits
    /// twice.
    pub idempotency_key: String,
    /// Whose balance.
    pub user_id: String,
    /// How much, in the wallet's smallest unit (a gift's `count × unit_value`).
    pub amount: u64,
}

/// A debit the wallet took under a key (now, or the first time that key was used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debited {
    /// The wallet's id of the debit.
    pub debit_id: String,
    /// The user's balance right after the debit.
    pub balance: u64,
    /// Whose balance the debit under the key was taken from, as the wallet says.
    pub user_id: Option<String>,
    /// How much it took, as the wallet says.
    pub amount: Option<u64>,
}

impl Debited {
    /// True when the wallet says it took exactly `debit` (its user and amount): a debit under
    /// the key that is not this one (the same caller's id reused for another gift while the
    /// first is in flight, or a wallet that answers for another debit) never pays for it.
    pub fn is(&self, debit: &Debit) -> bool {
        self.user_id.as_deref() == Some(debit.user_id.as_str()) && self.amount == Some(debit.amount)
    }
}

/// The wallet service, as the room pipeline sees it.
#[async_trait]
pub trait Wallet: Send + Sync + std::fmt::Debug {
    /// Takes `debit` from the user's balance, or answers the first answer given under its key.
    async fn debit(&self, debit: &Debit) -> Result<Debited, WalletError>;

    /// Gives back what was debited under `idempotency_key`: true when something was (now or
    /// by an earlier refund of the same key), false when nothing was debited under it.
    async fn refund(&self, idempotency_key: &str) -> Result<bool, WalletError>;
}
