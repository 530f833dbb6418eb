//! The refund of a gift's debit when its command committed nothing: recorded in
//! `room_payment_refund` first (and remembered in memory, [`RefundedKeys`], should the database
//! not take the record), then sent to the wallet, a few times with a doubling pause. A refund
//! the wallet has not confirmed is sent again by the room's owner ([`Payments::finish_refunds`],
//! idempotent by key). A retry of a refunded gift under the same `command_id` is refused (409
//! `payment_refunded`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Charge, Payments};
use crate::room::command::outcome::CommandResponse;
use crate::room::error::RoomError;

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
pub(super) struct RefundedKeys(Mutex<HashMap<String, Instant>>);

impl RefundedKeys {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers that the debit under `key` was refunded, now.
    pub(super) fn remember(&self, key: &str) {
        let mut map = self.map();
        if map.len() >= REFUNDED_PRUNE_ABOVE {
            map.retain(|_, at| at.elapsed() < REFUNDED_KEPT_FOR);
        }
        map.insert(key.to_owned(), Instant::now());
    }

    /// True when the debit under `key` was refunded less than [`REFUNDED_KEPT_FOR`] ago.
    pub(super) fn contains(&self, key: &str) -> bool {
        self.map().get(key).is_some_and(|at| at.elapsed() < REFUNDED_KEPT_FOR)
    }
}

impl Payments {
    /// Refunds the debit of `charge`, whose command committed nothing. Recorded first: a crash
    /// before the wallet call leaves an unfinished refund that the room's owner sends again
    /// ([`Self::finish_refunds`]), never a refunded gift that commits on its retry.
    pub(super) async fn refund(&self, charge: &Charge) {
        let key = charge.debit.idempotency_key.as_str();
        self.refunded.remember(key);
        let recorded =
            retried("record the refund", key, || self.repo.record_refund(key, &charge.room_id)).await.is_ok();
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

    /// Sends again the refunds recorded at least `older_than` ago that the wallet has not
    /// confirmed, of the rooms `owns` (this node's); returns how many it confirmed now. A
    /// refund is idempotent by key, so one sent twice gives the money back once.
    pub(in crate::room) async fn finish_refunds(
        &self,
        older_than: Duration,
        owns: impl Fn(&str) -> bool,
    ) -> usize {
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
pub(super) fn nothing_committed(result: &Result<CommandResponse, RoomError>) -> bool {
    match result {
        Ok(response) => !response.applied && !response.replayed,
        Err(RoomError::Domain(_) | RoomError::NotCommitted(_)) => true,
        Err(_) => false,
    }
}
