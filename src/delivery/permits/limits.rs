//! The limiters behind [`RateLimits`](super::RateLimits): an app-wide GCRA limiter shared by both
//! paths (this node's, or the cluster's in Redis: [`super::cluster`]), the worker's own at
//! `worker_share` of it, a keyed one per group, and the pauses set by rate-limited answers.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::Quota;
use tokio::time::Instant;

use super::clock::{self, DirectLimiter, KeyedLimiter};
use super::cluster::{ClusterQuota, SharedLimiter};
use super::options::RateLimitOptions;

/// The keyed limiter forgets idle groups every this many calls.
const RETAIN_EVERY: u64 = 4096;

#[derive(Debug)]
pub(super) struct Limits {
    global: Global,
    worker: DirectLimiter,
    groups: KeyedLimiter<String>,
    pause: Duration,
    paused: Mutex<Pauses>,
    calls: AtomicU64,
    /// Waiters for the local app-wide permit queue here, first come first served (tokio's
    /// mutex is fair): each room's lane waits once, so under a busy quota rooms take turns and
    /// a hot room cannot starve quiet ones. The cluster's quota queues its own waiters.
    turn: tokio::sync::Mutex<()>,
}

/// Where the app-wide permits come from.
#[derive(Debug)]
enum Global {
    /// This node alone publishes for the app.
    Local(DirectLimiter),
    /// The nodes share one quota in Redis.
    Cluster(Arc<SharedLimiter>),
}

/// The first, I/O-free answer of [`Limits::try_acquire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    Granted,
    Refused,
    /// Every local permit is there; the app-wide one is Redis' to give ([`Limits::check_cluster`]).
    AskCluster,
}

#[derive(Debug, Default)]
struct Pauses {
    app: Option<Instant>,
    groups: HashMap<String, Instant>,
}

impl Pauses {
    /// When the pause over `group` ends, if one is running at `now`.
    fn until(&mut self, group: &str, now: Instant) -> Option<Instant> {
        self.groups.retain(|_, end| *end > now);
        let app = self.app.filter(|end| *end > now);
        app.max(self.groups.get(group).copied())
    }
}

/// A GCRA quota that never lets more than `limit` cells into any one-second window: a burst of
/// `burst`, and the rest at `limit - burst + 1` per second with the period rounded up.
pub(super) fn window_quota(limit: u32, burst: u32) -> Quota {
    let burst = burst.clamp(1, limit.max(1));
    let rate = u64::from(limit.max(1) - burst + 1);
    let period = Duration::from_nanos(1_000_000_000_u64.div_ceil(rate));
    Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN))
}

impl Limits {
    pub(super) fn new(options: &RateLimitOptions, cluster: Option<&ClusterQuota>) -> Self {
        let global = options.global_per_sec.max(1);
        // Small bursts let live events through beside a draining worker, and a room's gift
        // right after a join; the window bound holds all the same.
        let global_burst = (global / 20).max(1);
        let per_group = options.per_group_per_sec.max(1);
        let worker = ((f64::from(global) * options.worker_share).floor() as u32).clamp(1, global);
        let global = match cluster {
            Some(quota) => Global::Cluster(SharedLimiter::new(quota, global, global_burst)),
            None => Global::Local(clock::direct(window_quota(global, global_burst))),
        };
        Self {
            global,
            // A burst of 2 keeps its waiters from losing a share of the rate to timer slack.
            worker: clock::direct(window_quota(worker, 2)),
            groups: clock::keyed(window_quota(per_group, (per_group / 7).max(1))),
            pause: options.pause,
            paused: Mutex::new(Pauses::default()),
            calls: AtomicU64::new(0),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    fn pauses(&self) -> std::sync::MutexGuard<'_, Pauses> {
        self.paused.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tick(&self) {
        if self.calls.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.groups.retain_recent();
        }
    }

    /// A permit now, or none (sync path): the group's first, so a refused app-wide permit
    /// wastes no more than one group cell. With the cluster's quota in Redis the app-wide
    /// permit is asked for after this ([`Admission::AskCluster`]).
    pub(super) fn try_acquire(&self, group: &str) -> Admission {
        self.tick();
        if self.pauses().until(group, Instant::now()).is_some()
            || self.groups.check_key(&group.to_owned()).is_err()
        {
            return Admission::Refused;
        }
        let granted = match &self.global {
            Global::Local(global) => global.check().is_ok(),
            Global::Cluster(shared) => match shared.check_now() {
                Some(granted) => granted,
                None => return Admission::AskCluster,
            },
        };
        if granted { Admission::Granted } else { Admission::Refused }
    }

    /// The app-wide permit from the cluster's quota, after [`Admission::AskCluster`]: one Redis
    /// round trip (or the local share while Redis is away), never a wait for a permit.
    pub(super) async fn check_cluster(&self) -> bool {
        match &self.global {
            Global::Local(global) => global.check().is_ok(),
            Global::Cluster(shared) => Arc::clone(shared).check().await,
        }
    }

    /// Waits for a permit: the end of any pause, the worker's share (for the worker), the
    /// group's, and the app-wide one last (so calls leave as the app-wide limiter lets them).
    /// A pause that began while it waited is honoured before the call.
    pub(super) async fn acquire(&self, group: String, worker: bool) {
        self.tick();
        loop {
            let until = self.pauses().until(&group, Instant::now());
            if let Some(end) = until {
                tokio::time::sleep_until(end).await;
                continue;
            }
            if worker {
                clock::ready(&self.worker).await;
            }
            clock::key_ready(&self.groups, &group).await;
            match &self.global {
                Global::Local(global) => {
                    let _turn = self.turn.lock().await;
                    clock::ready(global).await;
                }
                Global::Cluster(shared) => shared.until_ready().await,
            }
            if self.pauses().until(&group, Instant::now()).is_none() {
                return;
            }
        }
    }

    /// The receiver said rate-limited: pause the group, or the app.
    pub(super) fn pause(&self, group: &str, app_wide: bool) {
        let end = Instant::now() + self.pause;
        let mut pauses = self.pauses();
        if app_wide {
            pauses.app = pauses.app.max(Some(end));
        } else {
            let entry = pauses.groups.entry(group.to_owned()).or_insert(end);
            *entry = (*entry).max(end);
        }
    }
}
