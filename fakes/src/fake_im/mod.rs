//! A Tencent-faithful fake of the IM REST API (`send_group_msg` and the group admin APIs of
//! SPEC §14.2), for integration tests, local demos and benchmarks. It verifies the usersig with
//! the very [`room_service::publish::tencent::usersig::verify`] the real service is tested
//! against, validates the body, records accepted messages, dedups `(GroupId, Random)` for 5
//! minutes, enforces the per-group (drop with `MsgDropReason`) and per-API (60007) limits, and
//! serves injected faults. The admin APIs keep each group's state ([`GroupState`]); in
//! `require_groups` mode a message to a group that does not exist is refused with 10010; a
//! journal ([`JournalEntry`]) keeps every call in arrival order.
//!
//! Run it in-process with [`Fake::start`] (tests) or [`server::serve`] on a listener of your own
//! (a CLI subcommand); drive it from Rust through [`FakeIm`] or over HTTP under `/fake/`.

mod admin;
mod control;
pub mod fault;
mod gate;
pub mod groups;
mod records;
mod send;
pub mod server;
pub mod state;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

pub use fault::{Fault, FaultKind, FaultSpec};
pub use groups::{GroupState, JournalEntry};
use server::controls;
pub use server::{Fake, FakeApp};
pub use state::{EventSends, FakeState, FakeStats, RecordedMessage};

use room_service::publish::tencent::wire::SEND_GROUP_MSG_PATH;

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
    /// Calls per second of each API before 60007 (Tencent: 200 per API: `send_group_msg` and
    /// each admin API count apart); `None` = unlimited.
    pub global_limit_per_sec: Option<u32>,
    /// Refuse (10010) a message to a group that was never created or was destroyed, as
    /// Tencent does (default true; false: every group exists).
    pub require_groups: bool,
    /// Most live groups `create_group` makes before 10036 (the app's AVChatRoom quota);
    /// `None` = no quota.
    pub avchatroom_quota: Option<usize>,
    /// `ban_group_member` / `unban_group_member` work (default true); false answers 10007, like
    /// an edition without the feature.
    pub ban_enabled: bool,
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
            require_groups: true,
            avchatroom_quota: None,
            ban_enabled: true,
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
            .field("require_groups", &self.require_groups)
            .field("avchatroom_quota", &self.avchatroom_quota)
            .field("ban_enabled", &self.ban_enabled)
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
        .route("/fake/sensitive", post(control::sensitive))
        .route("/fake/require_groups", post(control::require_groups))
        .route("/fake/journal", get(control::journal))
        .route("/fake/groups", get(control::groups))
        .with_state(Arc::clone(&state))
        .merge(admin::routes(Arc::clone(&state)))
        .merge(controls(state, FakeState::clear, FakeState::stats))
}

/// The most of `times` (oldest first, as [`FakeState::call_times`] answers) within any window
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

/// The fake IM running in the background on `127.0.0.1`, for tests: [`Fake::start`] it with
/// [`FakeImOptions`]; the methods of [`FakeState`] inspect and steer it. Dropping it stops it.
pub type FakeIm = Fake<FakeState>;

impl FakeApp for FakeState {
    type Options = FakeImOptions;
    const NAME: &'static str = "fake IM";

    fn new(options: FakeImOptions) -> Self {
        FakeState::new(options)
    }

    fn app(state: Arc<Self>) -> Router {
        app(state)
    }
}

impl FakeIm {
    /// Recorded messages of one `GroupId` (prefix included), oldest first.
    pub fn messages(&self, group: &str) -> Vec<RecordedMessage> {
        self.recorded(Some(group))
    }

    /// Every recorded message, oldest first.
    pub fn all_messages(&self) -> Vec<RecordedMessage> {
        self.recorded(None)
    }

    /// The most `send_group_msg` calls that arrived within any sliding second (whatever their
    /// answers): what an app-wide limit of that many calls per second must not be below.
    pub fn most_calls_in_one_second(&self) -> usize {
        busiest_window(&self.call_times(), Duration::from_secs(1))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
