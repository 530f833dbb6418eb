//! A fake of the wallet service (SPEC §11.4), for integration tests, local demos and compose:
//! balances in memory (unknown users start with an initial balance), `POST /v1/debits` that
//! debits a key once and answers a repeated key with its first answer, `POST /v1/refunds`
//! that gives a key's debit back once, and injected faults (503, delay, debit-then-delay).
//!
//! Run it in-process with [`Fake::start`] (tests) or [`crate::fake_im::server::serve`] on a
//! listener of your own (the `fake-wallet` subcommand); drive it from Rust through
//! [`FakeWallet`] or over HTTP under `/fake/`.

mod api;
mod control;
pub mod fault;
pub mod state;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};

pub use control::BalanceBody;
pub use fault::{Call, Fault, FaultKind, FaultSpec};
pub use state::{FakeWalletState, FakeWalletStats, RecordedDebit};

use crate::fake_im::server::controls;
use crate::fake_im::{Fake, FakeApp};
use room_service::wallet::wire::{DEBITS_PATH, REFUNDS_PATH};

/// Settings of a fake wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeWalletOptions {
    /// The balance of a user the fake has not seen yet.
    pub initial_balance: u64,
}

/// The routes of the fake over its state.
fn app(state: Arc<FakeWalletState>) -> Router {
    Router::new()
        .route(DEBITS_PATH, post(api::debit))
        .route(REFUNDS_PATH, post(api::refund))
        .route("/fake/balances", get(control::balances))
        .route("/fake/balances/{user_id}", put(control::set_balance))
        .route("/fake/debits", get(control::debits))
        .route("/fake/faults", post(control::faults))
        .with_state(Arc::clone(&state))
        .merge(controls(state, FakeWalletState::clear, FakeWalletState::stats))
}

/// The fake wallet running in the background on `127.0.0.1`, for tests: [`Fake::start`] it
/// with [`FakeWalletOptions`]; the methods of [`FakeWalletState`] inspect and steer it.
/// Dropping it stops it.
pub type FakeWallet = Fake<FakeWalletState>;

impl FakeApp for FakeWalletState {
    type Options = FakeWalletOptions;
    const NAME: &'static str = "fake wallet";

    fn new(options: FakeWalletOptions) -> Self {
        FakeWalletState::new(options.initial_balance)
    }

    fn app(state: Arc<Self>) -> Router {
        app(state)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
