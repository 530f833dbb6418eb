//! [`RateLimitOptions`]: the limits of [`RateLimits`](super::RateLimits).

use std::time::Duration;

/// The limits of [`RateLimits`](super::RateLimits) (`im_rate_limit.*` and
/// `outbox_worker.rate_limit_pause`).
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimitOptions {
    /// App-wide calls per second, both drivers together.
    pub global_per_sec: u32,
    /// Messages per second into one group.
    pub per_group_per_sec: u32,
    /// Share of `global_per_sec` the worker may use, in (0, 1].
    pub worker_share: f64,
    /// How long a group (or the app) is paused after a rate-limited answer.
    pub pause: Duration,
}
