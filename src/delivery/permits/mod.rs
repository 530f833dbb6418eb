//! The permit step of the delivery core: keeps IM calls within Tencent's limits — app-wide
//! calls per second, messages per second into one group — for both drivers together, with
//! GCRA limiters from `governor`.
//!
//! A driver takes its message's permit **before** it builds the message (tower's
//! `ConcurrencyLimit` takes its permit in `poll_ready`, before the request exists — the same
//! idea): so a room's lane packs whatever of the room is ready when its permit comes, and no
//! layer of the publish stack ever sees a message change after it was built.
//!
//! - a room's lane asks for a permit now ([`Permits::now`]); without one it answers its
//!   commands `pending`, then waits ([`Permits::wait`]) within `publish_timeout`;
//! - the outbox worker waits, first for a permit of its own limiter at `worker_share` of the
//!   app-wide rate, so live events keep headroom during a backlog drain.
//!
//! A group admin call (SPEC §14.2) also waits for a permit of its API's own limiter
//! ([`Permits::admin`]): Tencent's 200 calls a second hold per API. A call with a share (a
//! room's creation: its owner) is admitted fairly between shares (`fair`).
//!
//! When IM answers rate-limited anyway (60007 and kin, `MsgDropReason`), the group — or the
//! whole app, for app-wide codes — is paused for `pause` ([`Permits::pause`]): no permit is
//! given into it until the pause ends.
//!
//! With Redis configured the app-wide limit is the cluster's ([`ClusterQuota`]): every node
//! takes its app-wide permits from one GCRA key in Redis, and falls back to its own share
//! (`global_per_sec / cluster.expected_nodes`) while Redis is away; see [`cluster`].
//!
//! Every limit holds in every sliding one-second window: a limiter of `L` per second with a
//! burst of `b` emits at `L − b + 1` per second, with the period rounded up, so no window of
//! one second ever sees more than `L` calls.

mod admin;
mod clock;
pub mod cluster;
mod fair;
mod limits;
mod options;

use std::sync::Arc;

use futures::future::BoxFuture;

use self::admin::AdminLimits;
pub use self::cluster::ClusterQuota;
use self::limits::{Admission, Limits};
pub use self::options::RateLimitOptions;
use crate::publish::AdminApi;

/// Where a driver's messages take their permits.
pub trait Permits: Send + Sync + std::fmt::Debug {
    /// A permit for one message into `group` if one is free now: never a wait for one (the
    /// cluster's quota may take one round trip to Redis). True when granted.
    fn now<'a>(&'a self, group: &'a str) -> BoxFuture<'a, bool>;

    /// Waits for a permit for one message into `group`: the end of any pause, the worker's
    /// share first when `worker`, the group's, then the app-wide one.
    fn wait<'a>(&'a self, group: &'a str, worker: bool) -> BoxFuture<'a, ()>;

    /// IM answered a message into `group` rate-limited: no permit into it (into any group when
    /// `app_wide`) until the pause ends.
    fn pause(&self, group: &str, app_wide: bool);

    /// Waits for a permit for one call of the group admin API `api` (SPEC §14.2): Tencent limits
    /// each API on its own, so each has its own app-wide limiter, apart from the messages'
    /// ([`Self::wait`], which a message carrying an admin call takes as well). A call of a
    /// `share` (a creation's owner: [`AdminCall::share`](crate::publish::AdminCall::share))
    /// waits in that share's turn, fairly between shares.
    fn admin<'a>(&'a self, api: AdminApi, share: Option<&'a str>) -> BoxFuture<'a, ()>;
}

/// The permits of a process, shared by its lanes and its worker.
pub type SharedPermits = Arc<dyn Permits>;

/// No limit: every permit at once (IM disabled, or a test that does not measure the limits).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl Permits for Unlimited {
    fn now<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(true))
    }

    fn wait<'a>(&'a self, _: &'a str, _: bool) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn pause(&self, _: &str, _: bool) {}

    fn admin<'a>(&'a self, _: AdminApi, _: Option<&'a str>) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// Tencent's limits (`im_rate_limit.*`), this node's or, with a [`ClusterQuota`], the
/// cluster's app-wide one; each admin API's, at `global_per_sec`, this node's alone (admin
/// calls are rare: they take nothing of the cluster's quota).
#[derive(Debug)]
pub struct RateLimits {
    limits: Limits,
    admin: AdminLimits,
}

impl RateLimits {
    /// The limits of `options`; the app-wide one shared through `cluster` when given.
    pub fn new(options: &RateLimitOptions, cluster: Option<&ClusterQuota>) -> Self {
        Self { limits: Limits::new(options, cluster), admin: AdminLimits::new(options.global_per_sec) }
    }

    /// [`Self::new`], shared.
    pub fn shared(options: &RateLimitOptions, cluster: Option<&ClusterQuota>) -> SharedPermits {
        Arc::new(Self::new(options, cluster))
    }
}

impl Permits for RateLimits {
    fn now<'a>(&'a self, group: &'a str) -> BoxFuture<'a, bool> {
        match self.limits.try_acquire(group) {
            Admission::Granted => Box::pin(std::future::ready(true)),
            Admission::Refused => Box::pin(std::future::ready(false)),
            Admission::AskCluster => Box::pin(self.limits.check_cluster()),
        }
    }

    fn wait<'a>(&'a self, group: &'a str, worker: bool) -> BoxFuture<'a, ()> {
        Box::pin(self.limits.acquire(group.to_owned(), worker))
    }

    fn pause(&self, group: &str, app_wide: bool) {
        self.limits.pause(group, app_wide);
    }

    fn admin<'a>(&'a self, api: AdminApi, share: Option<&'a str>) -> BoxFuture<'a, ()> {
        Box::pin(self.admin.acquire(api, share))
    }
}

#[cfg(test)]
mod tests;
