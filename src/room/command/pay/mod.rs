//! Paying for gifts (SPEC §11.4, §13.1): with a wallet configured, a SendGift debits its
//! sender `count × unit_value` before it is queued, under an idempotency key derived from the
//! command's identity ([`wallet_key`]: its caller and `command_id`, so no other caller can
//! reach that debit, replay it or have it refunded), and the command's answer decides whether
//! the debit stays or is refunded (same key, idempotent). The wallet's answer must name the
//! sender and the amount asked for: a debit under the key that is another one (the same caller's
//! id reused for another gift still in flight, or a wallet answering wrongly) never pays for
//! this gift — it answers 502 `payment_mismatch`, nothing is committed and nothing refunded
//! (the debit is the other command's).
//!
//! - applied, or answered from the command log (replayed): the debit paid for it and stays;
//! - refused by the domain, not applied, or rolled back before its COMMIT: nothing was
//!   committed, the debit is refunded;
//! - anything else (the COMMIT's own outcome unknown, a conflict with a concurrent use of the
//!   same `command_id`, this node no longer owning the room, ...): the debit stays. The client
//!   retries with the same `command_id`; the retry's debit answers the first one without
//!   debiting again, and the command then replays from the log or commits now.
//!
//! A refund is recorded in `room_payment_refund` before the wallet is called (and remembered
//! in memory too, should the database not take the record): the wallet answers a repeated key
//! with its first answer even after a refund, so a retry of a refunded gift under the same
//! `command_id` would otherwise commit unpaid — on this node, or after a restart or a move of
//! the room to another node. It answers 409 `payment_refunded` instead: send the gift again
//! under a new `command_id`.
//!
//! A command already in the log is never debited: a repeat was paid for the first time, and
//! the caller's id reused for another command must not charge it (it answers 409). The payment
//! runs in a task of its own, so a caller that goes away (a cut connection, the request
//! timeout) never leaves the debit of a gift that did not commit un-refunded.
//!
//! The debit and the command's run are here; the refund of a gift that committed nothing,
//! its record, and the sweep that sends unfinished refunds again are [`refund`]'s.

mod refund;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::outcome::CommandResponse;
use crate::domain::{Command, MAX_GIFT_COUNT, MAX_UNIT_VALUE, RoomId};
use crate::room::error::RoomError;
use crate::store::{CommandKey, SharedCommandStore};
use crate::wallet::{Debit, Wallet};
use refund::{RefundedKeys, nothing_committed};

/// The wallet's idempotency key of a command: hex SHA-256 over its caller and `command_id`
/// (64 characters, whatever their lengths), so two callers' equal ids are two debits.
pub(crate) fn wallet_key(key: &CommandKey) -> String {
    let mut digest = Sha256::new();
    digest.update(b"room-service debit v1\n");
    digest.update(key.caller.as_bytes());
    digest.update(b"\n");
    digest.update(key.command_id.as_bytes());
    digest.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A gift's debit, the wallet it is taken from, the room the gift is for, and the command it
/// pays for.
pub(in crate::room) struct Charge {
    wallet: Arc<dyn Wallet>,
    debit: Debit,
    room_id: String,
    key: CommandKey,
    fingerprint: String,
}

/// Gifts paid from the wallet (none configured: gifts are free).
pub(in crate::room) struct Payments {
    wallet: Option<Arc<dyn Wallet>>,
    /// The command log (a logged `command_id` is never debited) and the refund records.
    repo: SharedCommandStore,
    refunded: RefundedKeys,
}

impl Payments {
    /// Payments from `wallet`, asking `repo` whether a command is logged already.
    pub(in crate::room) fn new(wallet: Option<Arc<dyn Wallet>>, repo: SharedCommandStore) -> Self {
        Self { wallet, repo, refunded: RefundedKeys::default() }
    }

    /// What `command` costs when it is a gift and a wallet is configured. A gift whose count
    /// or unit value is out of range costs nothing: the domain refuses it unpaid.
    pub(in crate::room) fn charge(
        &self,
        room_id: &RoomId,
        key: &CommandKey,
        fingerprint: &str,
        command: &Command,
    ) -> Option<Charge> {
        let wallet = self.wallet.clone()?;
        let Command::SendGift { sender_id, count, unit_value, .. } = command else { return None };
        let in_range = (1..=MAX_GIFT_COUNT).contains(count) && (1..=MAX_UNIT_VALUE).contains(unit_value);
        let debit = Debit {
            idempotency_key: wallet_key(key),
            user_id: sender_id.to_string(),
            amount: u64::from(*count) * u64::from(*unit_value),
        };
        in_range.then(|| Charge {
            wallet,
            debit,
            room_id: room_id.to_string(),
            key: key.clone(),
            fingerprint: fingerprint.to_owned(),
        })
    }

    /// Runs `queued` (the command's way through its cell), paid for first when there is a
    /// `charge`.
    pub(in crate::room) async fn paid<F>(
        self: &Arc<Self>,
        charge: Option<Charge>,
        queued: F,
    ) -> Result<CommandResponse, RoomError>
    where
        F: Future<Output = Result<CommandResponse, RoomError>> + Send + 'static,
    {
        let Some(charge) = charge else { return queued.await };
        let payment = tokio::spawn(Arc::clone(self).pay_and_run(charge, queued));
        payment.await.unwrap_or_else(|_| Err(RoomError::unknown_outcome()))
    }

    /// Debits, runs the command, and refunds when its answer says nothing was committed.
    async fn pay_and_run<F>(self: Arc<Self>, charge: Charge, queued: F) -> Result<CommandResponse, RoomError>
    where
        F: Future<Output = Result<CommandResponse, RoomError>>,
    {
        let key = charge.debit.idempotency_key.as_str();
        let logged = self.repo.find_command(&charge.key).await?;
        if logged.iter().any(|row| row.belongs_to(&charge.key, &charge.fingerprint)) {
            return queued.await;
        }
        if self.refunded.contains(key) || self.repo.is_refunded(key).await? {
            return Err(RoomError::PaymentRefunded);
        }
        charge.take().await?;
        let result = queued.await;
        if nothing_committed(&result) {
            self.refund(&charge).await;
        }
        result
    }
}

impl Charge {
    /// Debits the gift's sender; the wallet's answer must be this debit (its user and amount).
    async fn take(&self) -> Result<(), RoomError> {
        let debited = self.wallet.debit(&self.debit).await?;
        if !debited.is(&self.debit) {
            tracing::error!(
                room_id = %self.room_id,
                command_id = %self.key.command_id,
                user_id = %self.debit.user_id,
                amount = self.debit.amount,
                wallet_user_id = ?debited.user_id,
                wallet_amount = ?debited.amount,
                debit_id = %debited.debit_id,
                "The wallet's debit under this command's key is not this gift's; refused, nothing committed"
            );
            return Err(RoomError::PaymentMismatch);
        }
        Ok(())
    }
}
