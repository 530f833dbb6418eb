//! A fake of the wallet service (SPEC §11.4), for integration tests, local demos and compose:
//! balances in memory (unknown users start with an initial balance), `POST /v1/debits` that
//! debits a key once and answers a repeated key with its first answer, `POST /v1/refunds`
//! that gives a key's debit back once, and injected faults (503, delay, debit-then-delay).
//!
//! Run it in-process with [`FakeWallet::start`] (tests) or [`serve`] on a listener of your own
//! (the `fake-wallet` subcommand); drive it from Rust through [`FakeWallet`] or over HTTP
//! under `/fake/`.

mod api;
mod control;
pub mod fault;
mod state;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};
use tokio::net::TcpListener;

pub use control::BalanceBody;
pub use fault::{Call, Fault, FaultKind, FaultSpec};
pub use state::{FakeWalletStats, RecordedDebit};

use crate::fake_im::server;
use crate::wallet::wire::{DEBITS_PATH, REFUNDS_PATH};
use state::FakeWalletState;

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
        .route("/fake/reset", post(control::reset))
        .route("/fake/stats", get(control::stats))
        .with_state(state)
}

/// Serves a fake on `listener` until `shutdown` completes; open connections are then closed.
pub async fn serve(
    listener: TcpListener,
    opts: FakeWalletOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    server::run(listener, app(Arc::new(FakeWalletState::new(opts.initial_balance))), shutdown).await
}

/// A fake running in the background on `127.0.0.1`, for tests. Dropping it stops it.
#[derive(Debug)]
pub struct FakeWallet(server::Served<FakeWalletState>);

impl FakeWallet {
    /// Binds `127.0.0.1:0` and serves in a spawned task.
    ///
    /// # Panics
    /// If no loopback port can be bound; use [`FakeWallet::try_start`] to get the error instead.
    pub async fn start(opts: FakeWalletOptions) -> FakeWallet {
        server::started_or_panic(Self::try_start(opts).await, "fake wallet")
    }

    /// Like [`FakeWallet::start`], returning the bind error.
    pub async fn try_start(opts: FakeWalletOptions) -> io::Result<FakeWallet> {
        Ok(FakeWallet(server::Served::start(FakeWalletState::new(opts.initial_balance), app).await?))
    }

    /// `http://127.0.0.1:<port>`, to use as `wallet.base_url`.
    pub fn base_url(&self) -> String {
        self.0.base_url()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    /// One user's balance (the initial balance for a user never seen).
    pub fn balance(&self, user_id: &str) -> u64 {
        self.0.state.balance(user_id)
    }

    /// Every known user's balance.
    pub fn balances(&self) -> BTreeMap<String, u64> {
        self.0.state.balances()
    }

    /// Sets one user's balance.
    pub fn set_balance(&self, user_id: &str, balance: u64) {
        self.0.state.set_balance(user_id, balance);
    }

    /// Every debit taken, oldest first (refunded ones included, marked).
    pub fn debits(&self) -> Vec<RecordedDebit> {
        self.0.state.debits()
    }

    /// Serves `fault` to the next `count` calls of `call` (after faults already queued).
    pub fn inject(&self, fault: Fault, call: Call, count: u32) {
        self.0.state.inject(fault, call, count);
    }

    /// Counters since start or the last [`FakeWallet::clear`].
    pub fn stats(&self) -> FakeWalletStats {
        self.0.state.stats()
    }

    /// Forgets balances, debits, faults and counters.
    pub fn clear(&self) {
        self.0.state.clear();
    }

    /// Stops serving and waits for the server task.
    pub async fn shutdown(self) -> io::Result<()> {
        self.0.shutdown().await
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
