//! What the fake wallet remembers: balances, the debits taken (by idempotency key), queued
//! faults and counters. All of it sits behind one short-held mutex; nothing awaits while
//! holding it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::fault::{Call, Fault, FaultQueue};
use room_service::wallet::wire::DebitAnswer;

/// One debit the fake took.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedDebit {
    /// The key it was taken under.
    pub idempotency_key: String,
    /// Whose balance.
    pub user_id: String,
    /// How much.
    pub amount: u64,
    /// The wallet's id of the debit.
    pub debit_id: String,
    /// The balance right after it (the answer replayed for the same key).
    pub balance: u64,
    /// True once refunded.
    pub refunded: bool,
}

/// Counters since start or the last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeWalletStats {
    /// Every `POST /v1/debits`, whatever its answer.
    pub debit_calls: u64,
    /// Debits taken (money moved).
    pub debits: u64,
    /// Debits answered from an earlier one under the same key (no money moved).
    pub debits_replayed: u64,
    /// Debits refused with 409 `insufficient_balance`.
    pub insufficient: u64,
    /// Every `POST /v1/refunds`, whatever its answer.
    pub refund_calls: u64,
    /// Refunds that gave money back (a repeated refund gives nothing back again).
    pub refunds: u64,
    /// Calls that were served an injected fault.
    pub faults_served: u64,
    /// Calls that will still be served a queued fault.
    pub faults_pending: u64,
}

/// What a debit call came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DebitOutcome {
    /// Taken now, or answered from the debit taken under the same key.
    Debited(DebitAnswer),
    /// The balance is below the amount; nothing was taken (nor remembered).
    Insufficient,
}

#[derive(Debug, Default)]
struct Book {
    balances: BTreeMap<String, u64>,
    debits: HashMap<String, RecordedDebit>,
    order: Vec<String>,
    debit_faults: FaultQueue,
    refund_faults: FaultQueue,
    stats: FakeWalletStats,
    next_id: u64,
}

/// The fake's state, shared by its handlers.
#[derive(Debug)]
pub struct FakeWalletState {
    initial_balance: u64,
    book: Mutex<Book>,
}

impl FakeWalletState {
    /// An empty wallet in which unknown users start with `initial_balance`.
    pub(crate) fn new(initial_balance: u64) -> Self {
        Self { initial_balance, book: Mutex::new(Book::default()) }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave the book half-written in a way that
        // matters to a fake: keep serving.
        self.book.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a call and hands out the fault it must be served, if any.
    pub(crate) fn begin_call(&self, call: Call) -> Option<Fault> {
        let mut book = self.book();
        let fault = match call {
            Call::Debit => {
                book.stats.debit_calls += 1;
                book.debit_faults.next()
            }
            Call::Refund => {
                book.stats.refund_calls += 1;
                book.refund_faults.next()
            }
        };
        if fault.is_some() {
            book.stats.faults_served += 1;
        }
        fault
    }

    /// Serves `fault` to the next `count` calls of `call` (after faults already queued).
    pub fn inject(&self, fault: Fault, call: Call, count: u32) {
        let mut book = self.book();
        match call {
            Call::Debit => book.debit_faults.push(fault, count),
            Call::Refund => book.refund_faults.push(fault, count),
        }
    }

    /// Takes `amount` from `user_id` under `key`, or answers the debit already taken under it.
    pub(crate) fn debit(&self, key: &str, user_id: &str, amount: u64) -> DebitOutcome {
        let mut book = self.book();
        if let Some(taken) = book.debits.get(key) {
            let answer = DebitAnswer {
                debit_id: taken.debit_id.clone(),
                balance: taken.balance,
                user_id: Some(taken.user_id.clone()),
                amount: Some(taken.amount),
            };
            book.stats.debits_replayed += 1;
            return DebitOutcome::Debited(answer);
        }
        let initial = self.initial_balance;
        let balance = book.balances.entry(user_id.to_owned()).or_insert(initial);
        let Some(left) = balance.checked_sub(amount) else {
            book.stats.insufficient += 1;
            return DebitOutcome::Insufficient;
        };
        *balance = left;
        book.next_id += 1;
        let debit_id = format!("d{}", book.next_id);
        let taken = RecordedDebit {
            idempotency_key: key.to_owned(),
            user_id: user_id.to_owned(),
            amount,
            debit_id: debit_id.clone(),
            balance: left,
            refunded: false,
        };
        book.debits.insert(key.to_owned(), taken);
        book.order.push(key.to_owned());
        book.stats.debits += 1;
        DebitOutcome::Debited(DebitAnswer {
            debit_id,
            balance: left,
            user_id: Some(user_id.to_owned()),
            amount: Some(amount),
        })
    }

    /// Gives back the debit under `key` (once); true when there is one.
    pub(crate) fn refund(&self, key: &str) -> bool {
        let mut book = self.book();
        let Some(taken) = book.debits.get_mut(key) else { return false };
        if taken.refunded {
            return true;
        }
        taken.refunded = true;
        let (user_id, amount) = (taken.user_id.clone(), taken.amount);
        let initial = self.initial_balance;
        let balance = book.balances.entry(user_id).or_insert(initial);
        *balance = balance.saturating_add(amount);
        book.stats.refunds += 1;
        true
    }

    /// Every known user's balance (users who were never debited nor set are not listed).
    pub fn balances(&self) -> BTreeMap<String, u64> {
        self.book().balances.clone()
    }

    /// One user's balance (the initial balance when unknown).
    pub fn balance(&self, user_id: &str) -> u64 {
        self.book().balances.get(user_id).copied().unwrap_or(self.initial_balance)
    }

    /// Sets one user's balance.
    pub fn set_balance(&self, user_id: &str, balance: u64) {
        self.book().balances.insert(user_id.to_owned(), balance);
    }

    /// Every debit taken, oldest first (refunded ones included, marked).
    pub fn debits(&self) -> Vec<RecordedDebit> {
        let book = self.book();
        book.order.iter().filter_map(|key| book.debits.get(key).cloned()).collect()
    }

    /// Counters since start or the last [`FakeWalletState::clear`].
    pub fn stats(&self) -> FakeWalletStats {
        let book = self.book();
        let pending = book.debit_faults.remaining() + book.refund_faults.remaining();
        FakeWalletStats { faults_pending: pending, ..book.stats.clone() }
    }

    /// Forgets balances, debits, faults and counters.
    pub fn clear(&self) {
        *self.book() = Book::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_debits_once_and_refunds_once() {
        let s = FakeWalletState::new(100);
        let first = s.debit("k", "u", 30);
        assert_eq!(
            first,
            DebitOutcome::Debited(DebitAnswer {
                debit_id: "d1".into(),
                balance: 70,
                user_id: Some("u".into()),
                amount: Some(30)
            })
        );
        // Same key, even with other values: the first answer (the first debit's user and
        // amount), no money moved.
        assert_eq!(s.debit("k", "u", 50), first);
        assert_eq!(s.balance("u"), 70);
        assert!(s.refund("k"));
        assert!(s.refund("k"));
        assert_eq!(s.balance("u"), 100);
        assert!(!s.refund("never-debited"));
        let stats = s.stats();
        assert_eq!((stats.debits, stats.debits_replayed, stats.refunds), (1, 1, 1));
        assert!(s.debits()[0].refunded);
    }

    #[test]
    fn an_insufficient_balance_takes_nothing_and_is_not_remembered() {
        let s = FakeWalletState::new(10);
        assert_eq!(s.debit("k", "u", 11), DebitOutcome::Insufficient);
        assert_eq!(s.balance("u"), 10);
        s.set_balance("u", 11);
        assert_eq!(
            s.debit("k", "u", 11),
            DebitOutcome::Debited(DebitAnswer {
                debit_id: "d1".into(),
                balance: 0,
                user_id: Some("u".into()),
                amount: Some(11)
            })
        );
        assert_eq!(s.balances(), BTreeMap::from([("u".to_owned(), 0)]));
        assert_eq!(s.stats().insufficient, 1);
    }

    #[test]
    fn faults_are_kept_per_call_and_clear_forgets_everything() {
        let s = FakeWalletState::new(5);
        s.inject(Fault::Http503, Call::Refund, 1);
        assert_eq!(s.begin_call(Call::Debit), None);
        assert_eq!(s.begin_call(Call::Refund), Some(Fault::Http503));
        s.inject(Fault::Http503, Call::Debit, 3);
        s.debit("k", "u", 1);
        assert_eq!(s.stats().faults_pending, 3);
        s.clear();
        assert_eq!(s.stats(), FakeWalletStats::default());
        assert!(s.debits().is_empty() && s.balances().is_empty());
    }
}
