//! [`RateLimitLayer`]: holds the limits; each stack it builds shares one set of limiters.

use std::sync::Arc;
use std::time::Duration;

use tower::Layer;

use super::RateLimit;
use super::cluster::ClusterQuota;
use super::limits::Limits;

/// The limits of a [`RateLimitLayer`] (`im_rate_limit.*` and `outbox_worker.rate_limit_pause`).
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimitOptions {
    /// App-wide calls per second, both paths together.
    pub global_per_sec: u32,
    /// Messages per second into one group.
    pub per_group_per_sec: u32,
    /// Share of `global_per_sec` the worker may use, in (0, 1].
    pub worker_share: f64,
    /// How long a group (or the app) is paused after a rate-limited answer.
    pub pause: Duration,
}

/// A [`Layer`] that wraps a service in [`RateLimit`] middleware. Holds configuration only; the
/// limiters are created when the stack is built, so every clone of that stack shares them.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    options: RateLimitOptions,
    cluster: Option<ClusterQuota>,
}

impl RateLimitLayer {
    /// A layer with these limits; the app-wide one is this node's alone.
    pub fn new(options: RateLimitOptions) -> Self {
        Self { options, cluster: None }
    }

    /// The app-wide limit is shared by the cluster through `quota` (in Redis) instead; per-group
    /// limits and the worker's share stay this node's.
    pub fn with_cluster_quota(mut self, quota: Option<ClusterQuota>) -> Self {
        self.cluster = quota;
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit { inner, limits: Arc::new(Limits::new(&self.options, self.cluster.as_ref())) }
    }
}
