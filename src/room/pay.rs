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
//! the caller's id reused for another command must not charge it (it answers 409). The payment runs in a task of
//! its own, so a caller that goes away (a cut connection, the request timeout) never leaves
//! the debit of a gift that did not commit un-refunded.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::error::RoomError;
use super::outcome::CommandResponse;
use crate::domain::{Command, MAX_GIFT_COUNT, MAX_UNIT_VALUE, RoomId};
use crate::store::{CommandKey, SharedCommandStore};
use crate::wallet::{Debit, Wallet};

/// Refund calls made before a refund is given up on (and logged for reconciliation).
const REFUND_ATTEMPTS: u32 = 3;
/// Pause before the second refund call; doubled before each later one.
const REFUND_BACKOFF: Duration = Duration::from_millis(200);

/// How long this process remembers a refunded `command_id` on its own (the database keeps it
/// for good).
pub const REFUNDED_KEPT_FOR: Duration = Duration::from_secs(3600);
/// Above this many remembered refunds, those older than [`REFUNDED_KEPT_FOR`] are forgotten.
const REFUNDED_PRUNE_ABOVE: usize = 10_000;
/// Most unfinished refunds one sweep sends again.
const UNFINISHED_REFUNDS_PER_SWEEP: u32 = 100;

/// The `command_id`s whose debit this process refunded, and when: the refusal of a retry
/// holds even while the database cannot take or answer the record.
#[derive(Debug, Default)]
struct RefundedKeys(std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>);

impl RefundedKeys {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, std::time::Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remember(&self, key: &str) {
        let mut map = self.map();
        if map.len() >= REFUNDED_PRUNE_ABOVE {
            map.retain(|_, at| at.elapsed() < REFUNDED_KEPT_FOR);
        }
        map.insert(key.to_owned(), std::time::Instant::now());
    }

    fn contains(&self, key: &str) -> bool {
        self.map().get(key).is_some_and(|at| at.elapsed() < REFUNDED_KEPT_FOR)
    }
}

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
pub(super) struct Charge {
    wallet: Arc<dyn Wallet>,
    debit: Debit,
    room_id: String,
    key: CommandKey,
    fingerprint: String,
}

/// Gifts paid from the wallet (none configured: gifts are free).
pub(super) struct Payments {
    wallet: Option<Arc<dyn Wallet>>,
    /// The command log (a logged `command_id` is never debited) and the refund records.
    repo: SharedCommandStore,
    refunded: RefundedKeys,
}

impl Payments {
    /// Payments from `wallet`, asking `repo` whether a command is logged already.
    pub(super) fn new(wallet: Option<Arc<dyn Wallet>>, repo: SharedCommandStore) -> Self {
        Self { wallet, repo, refunded: RefundedKeys::default() }
    }

    /// What `command` costs when it is a gift and a wallet is configured. A gift whose count
    /// or unit value is out of range costs nothing: the domain refuses it unpaid.
    pub(super) fn charge(
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
    pub(super) async fn paid<F>(
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
        let debited = charge.wallet.debit(&charge.debit).await?;
        if !debited.is(&charge.debit) {
            tracing::error!(
                room_id = %charge.room_id,
                command_id = %charge.key.command_id,
                user_id = %charge.debit.user_id,
                amount = charge.debit.amount,
                wallet_user_id = ?debited.user_id,
                wallet_amount = ?debited.amount,
                debit_id = %debited.debit_id,
                "The wallet's debit under this command's key is not this gift's; refused, nothing committed"
            );
            return Err(RoomError::PaymentMismatch);
        }
        let result = queued.await;
        if nothing_committed(&result) {
            // Recorded first: a crash before the wallet call leaves an unfinished refund that
            // the room's owner sends again ([`Self::finish_refunds`]), never a refunded gift
            // that commits on its retry.
            self.refunded.remember(key);
            let recorded =
                retried("record the refund", key, || self.repo.record_refund(key, &charge.room_id))
                    .await
                    .is_ok();
            let wallet = charge.wallet.as_ref();
            match retried("refund", key, || wallet.refund(key)).await {
                Ok(refunded) => {
                    tracing::info!(command_id = key, refunded, "Gift did not commit; debit refunded");
                    if recorded && let Err(error) = self.repo.finish_refund(key).await {
                        tracing::debug!(command_id = key, %error, "Cannot record the refund as done; it is sent again later");
                    }
                }
                Err(_) if recorded => {
                    tracing::warn!(
                        command_id = key,
                        "The wallet took no refund yet; the room's owner sends it again"
                    );
                }
                Err(_) => tracing::error!(
                    command_id = key,
                    "Refund neither taken by the wallet nor recorded; the debit stays until reconciled, and \
                     only this process refuses a retry of the same command_id"
                ),
            }
        }
        result
    }

    /// Sends again the refunds recorded at least `older_than` ago that the wallet has not
    /// confirmed, of the rooms `owns` (this node's); returns how many it confirmed now. A
    /// refund is idempotent by key, so one sent twice gives the money back once.
    pub(super) async fn finish_refunds(&self, older_than: Duration, owns: impl Fn(&str) -> bool) -> usize {
        let Some(wallet) = self.wallet.as_deref() else { return 0 };
        let unfinished = match self.repo.unfinished_refunds(older_than, UNFINISHED_REFUNDS_PER_SWEEP).await {
            Ok(unfinished) => unfinished,
            Err(error) => {
                tracing::warn!(%error, "Cannot read the unfinished refunds");
                return 0;
            }
        };
        let mut finished = 0;
        for (key, _) in unfinished.iter().filter(|(_, room_id)| owns(room_id)) {
            let done = match wallet.refund(key).await {
                Ok(_) => self.repo.finish_refund(key).await.map_err(|e| e.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match done {
                Ok(()) => finished += 1,
                Err(error) => {
                    tracing::warn!(command_id = %key, %error, "Refund still not finished; sent again later")
                }
            }
        }
        if finished > 0 {
            tracing::info!(finished, "Unfinished refunds taken by the wallet");
        }
        finished
    }
}

/// `step` until it succeeds, at most [`REFUND_ATTEMPTS`] times with a doubling pause; the
/// last error is logged as what `what` could not do.
async fn retried<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    what: &str,
    key: &str,
    mut step: impl FnMut() -> F,
) -> Result<T, E> {
    let mut pause = REFUND_BACKOFF;
    let mut attempt = 1;
    loop {
        match step().await {
            Err(error) if attempt < REFUND_ATTEMPTS => {
                tracing::debug!(command_id = key, attempt, %error, "Cannot {what}; retrying");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            Err(error) => {
                tracing::warn!(command_id = key, attempt, %error, "Cannot {what}");
                return Err(error);
            }
            Ok(value) => return Ok(value),
        }
    }
}

/// True when the answer says the command committed nothing, so its debit goes back.
fn nothing_committed(result: &Result<CommandResponse, RoomError>) -> bool {
    match result {
        Ok(response) => !response.applied && !response.replayed,
        Err(RoomError::Domain(_) | RoomError::NotCommitted(_)) => true,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::DomainError;
    use crate::store::StoreError;
    use crate::wallet::WalletError;

    fn response(applied: bool, replayed: bool) -> Result<CommandResponse, RoomError> {
        Ok(CommandResponse { applied, room_version: 1, replayed, room: None, events: Vec::new() })
    }

    fn store_error() -> Arc<StoreError> {
        Arc::new(StoreError::Config("down".into()))
    }

    #[test]
    fn a_refunded_key_is_remembered() {
        let keys = RefundedKeys::default();
        assert!(!keys.contains("c-1"));
        keys.remember("c-1");
        assert!(keys.contains("c-1") && !keys.contains("c-2"));
    }

    #[test]
    fn only_answers_that_committed_nothing_refund() {
        assert!(!nothing_committed(&response(true, false)));
        assert!(!nothing_committed(&response(true, true)));
        assert!(nothing_committed(&response(false, false)));
        assert!(nothing_committed(&Err(DomainError::RoomClosed.into())));
        assert!(nothing_committed(&Err(RoomError::NotCommitted(store_error()))));
        // The COMMIT may have landed: the retry settles it.
        assert!(!nothing_committed(&Err(RoomError::Unavailable(store_error()))));
        assert!(!nothing_committed(&Err(RoomError::VersionConflict("busy".into()))));
        assert!(!nothing_committed(&Err(RoomError::CommandConflict("reused".into()))));
        // Fenced or not the owner: the retry is routed to the owner and pays under the same key.
        assert!(!nothing_committed(&Err(RoomError::NotOwner)));
        assert!(!nothing_committed(&Err(RoomError::Wallet(WalletError::InsufficientBalance))));
    }
}
