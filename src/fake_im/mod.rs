//! A Tencent-faithful fake of the IM REST API (`send_group_msg` only), for integration tests,
//! local demos and benchmarks. It verifies the usersig with the very
//! [`crate::publish::tencent::usersig::verify`] the real service is tested against, validates
//! the body, records accepted messages, dedups `(GroupId, Random)` for 5 minutes, enforces the
//! per-group (drop with `MsgDropReason`) and global (60007) limits, and serves injected faults.
//!
//! Run it in-process with [`FakeIm::start`] (tests) or [`serve`] on a listener of your own
//! (a CLI subcommand); drive it from Rust through [`FakeIm`] or over HTTP under `/fake/`.

mod control;
pub mod fault;
mod send;
pub(crate) mod server;
pub mod state;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;

pub use fault::{Fault, FaultKind, FaultSpec};
pub use state::{EventSends, FakeStats, RecordedMessage};

use crate::publish::tencent::wire::SEND_GROUP_MSG_PATH;
use state::FakeState;

/// Settings of a fake server.
#[derive(Clone)]
pub struct FakeImOptions {
    /// The only SDKAppID accepted.
    pub sdk_app_id: u64,
    /// Key the usersigs must be signed with.
    pub secret_key: String,
    /// The only identifier accepted (the app admin).
    pub admin_identifier: String,
    /// Added to every `send_group_msg` call.
    pub latency: Duration,
    /// Messages per second per group before drops (Tencent: 40); `None` = unlimited.
    pub per_group_limit_per_sec: Option<u32>,
    /// Calls per second before 60007 (Tencent: 200); `None` = unlimited.
    pub global_limit_per_sec: Option<u32>,
}

impl FakeImOptions {
    /// Options with Tencent's limits (40/s per group, 200/s global) and no latency.
    pub fn new(sdk_app_id: u64, secret_key: impl Into<String>, admin: impl Into<String>) -> Self {
        Self {
            sdk_app_id,
            secret_key: secret_key.into(),
            admin_identifier: admin.into(),
            latency: Duration::ZERO,
            per_group_limit_per_sec: Some(40),
            global_limit_per_sec: Some(200),
        }
    }
}

impl fmt::Debug for FakeImOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeImOptions")
            .field("sdk_app_id", &self.sdk_app_id)
            .field("secret_key", &"<redacted>")
            .field("admin_identifier", &self.admin_identifier)
            .field("latency", &self.latency)
            .field("per_group_limit_per_sec", &self.per_group_limit_per_sec)
            .field("global_limit_per_sec", &self.global_limit_per_sec)
            .finish()
    }
}

/// The routes of the fake over its state.
fn app(state: Arc<FakeState>) -> Router {
    Router::new()
        .route(SEND_GROUP_MSG_PATH, post(send::send_group_msg))
        .route("/fake/messages", get(control::messages))
        .route("/fake/faults", post(control::faults))
        .route("/fake/latency", post(control::latency))
        .route("/fake/reset", post(control::reset))
        .route("/fake/stats", get(control::stats))
        .with_state(state)
}

/// Serves a fake on `listener` until `shutdown` completes; open connections are then closed.
pub async fn serve(
    listener: TcpListener,
    opts: FakeImOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    server::run(listener, app(Arc::new(FakeState::new(opts))), shutdown).await
}

/// The most of `times` (oldest first, as [`FakeIm::call_times`] answers) within any window
/// `[t, t + width)`.
pub fn busiest_window(times: &[tokio::time::Instant], width: Duration) -> usize {
    let mut most = 0;
    let mut start = 0;
    for (end, t) in times.iter().enumerate() {
        while start < end && t.saturating_duration_since(times[start]) >= width {
            start += 1;
        }
        most = most.max(end + 1 - start);
    }
    most
}

/// A fake running in the background on `127.0.0.1`, for tests. Dropping it stops it.
#[derive(Debug)]
pub struct FakeIm(server::Served<FakeState>);

impl FakeIm {
    /// Binds `127.0.0.1:0` and serves in a spawned task.
    ///
    /// # Panics
    /// If no loopback port can be bound; use [`FakeIm::try_start`] to get the error instead.
    pub async fn start(opts: FakeImOptions) -> FakeIm {
        server::started_or_panic(Self::try_start(opts).await, "fake IM")
    }

    /// Like [`FakeIm::start`], returning the bind error.
    pub async fn try_start(opts: FakeImOptions) -> io::Result<FakeIm> {
        Ok(FakeIm(server::Served::start(FakeState::new(opts), app).await?))
    }

    /// `http://127.0.0.1:<port>`, to use as the IM base URL.
    pub fn base_url(&self) -> String {
        self.0.base_url()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    /// Recorded messages of one `GroupId` (prefix included), oldest first.
    pub fn messages(&self, group: &str) -> Vec<RecordedMessage> {
        self.0.state.messages(Some(group))
    }

    /// Every recorded message, oldest first.
    pub fn all_messages(&self) -> Vec<RecordedMessage> {
        self.0.state.messages(None)
    }

    /// Serves `fault` to the next `count` calls (after faults already queued).
    pub fn inject(&self, fault: Fault, count: u32) {
        self.0.state.inject(fault, count);
    }

    /// Sets the latency of every later call.
    pub fn set_latency(&self, latency: Duration) {
        self.0.state.set_latency(latency);
    }

    /// How often each `event_id` was sent since start or the last [`FakeIm::clear`]: every
    /// `send_group_msg` call that carried it (accepted, deduplicated, faulted or refused) and
    /// those IM took ([`EventSends`]).
    pub fn sends_by_event(&self) -> std::collections::HashMap<String, EventSends> {
        self.0.state.sends_by_event()
    }

    /// When each `send_group_msg` call arrived (whatever its answer), oldest first.
    pub fn call_times(&self) -> Vec<tokio::time::Instant> {
        self.0.state.call_times()
    }

    /// The most `send_group_msg` calls that arrived within any sliding second (whatever their
    /// answers): what an app-wide limit of that many calls per second must not be below.
    pub fn most_calls_in_one_second(&self) -> usize {
        busiest_window(&self.call_times(), Duration::from_secs(1))
    }

    /// Counters since start or the last [`FakeIm::clear`].
    pub fn stats(&self) -> FakeStats {
        self.0.state.stats()
    }

    /// Forgets messages, dedup, rate windows, faults and counters.
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
