//! The cluster-wide app quota: with Redis configured, every node takes its app-wide permits from
//! one GCRA key in Redis, so the nodes together stay within `im_rate_limit.global_per_sec`
//! (Tencent's 200 calls/s are per app, not per node). Per-group limits and the worker's share
//! stay local: a room's events are published by the one node that owns it.
//!
//! The key, `room-service:im:global:{sdk_app_id}` ([`quota_key`]), holds the theoretical
//! arrival time of the next cell in microseconds on Redis' own clock (`TIME`), so the nodes'
//! clocks never matter. The quota is the local one's (`window_quota`): a burst
//! of `burst`, then `limit − burst + 1` per second with the period rounded up, so no one-second
//! window ever holds more than `limit` permits.
//!
//! Redis is never trusted to be there: on an error or a timeout the node falls back to a local
//! limiter at `global_per_sec / cluster.expected_nodes` (warned once), tries Redis again at most
//! every [`RETRY_EVERY`] in the background (so a dead Redis costs no call any latency), and goes
//! back to the shared quota once Redis answers (said once). A publish never fails for Redis.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::clock::{self, DirectLimiter};
use super::limits::window_quota;
use crate::redis_conn::{REDIS_TIMEOUT, RedisConn};
use crate::telemetry::names;

/// Prefix of the quota key; the SDKAppID follows in braces (a Redis Cluster hash tag).
pub const QUOTA_KEY_PREFIX: &str = "room-service:im:global:";

/// While in fallback, Redis is tried again at most this often.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The longest a waiting worker sleeps before asking Redis again.
const MAX_SLEEP: Duration = Duration::from_millis(250);

/// GCRA on Redis' clock. KEYS[1]: the key (theoretical arrival time, µs). ARGV: the emission
/// interval (µs), the tolerance (µs, `(burst − 1) × interval`), the cost (1 takes a permit, 0
/// only looks). Answers 0 when a permit is (or would be) granted, else the µs until one is.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now) or now
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait > 0 then return wait end
if cost > 0 then
  local next_tat = tat + interval * cost
  local ttl_ms = math.ceil((next_tat - now) / 1000) + 1000
  redis.call('SET', KEYS[1], string.format('%d', next_tat), 'PX', string.format('%d', ttl_ms))
end
return 0
";

/// The quota key of an app.
pub fn quota_key(sdk_app_id: u64) -> String {
    format!("{QUOTA_KEY_PREFIX}{{{sdk_app_id}}}")
}

/// Where the app-wide permits come from when several nodes publish for one app (SPEC §11.4).
#[derive(Clone, Debug)]
pub struct ClusterQuota {
    /// The node's Redis handle.
    pub redis: RedisConn,
    /// The GCRA key every node shares ([`quota_key`]; tests use their own).
    pub key: String,
    /// Nodes expected to run: each takes `1 / expected_nodes` of the quota while Redis is away.
    pub expected_nodes: u32,
}

impl ClusterQuota {
    /// The quota of `sdk_app_id` over `redis`, shared by `expected_nodes` nodes.
    pub fn new(redis: RedisConn, sdk_app_id: u64, expected_nodes: u32) -> Self {
        Self { redis, key: quota_key(sdk_app_id), expected_nodes }
    }
}

/// The app-wide limiter of one node over a [`ClusterQuota`].
#[derive(Debug)]
pub(super) struct SharedLimiter {
    redis: RedisConn,
    key: String,
    script: redis::Script,
    interval_us: u64,
    tolerance_us: u64,
    /// The node's share, used while Redis is away.
    fallback: DirectLimiter,
    mode: Mutex<Mode>,
    /// One waiting worker at a time asks Redis (the others queue here, first come first served).
    turn: tokio::sync::Mutex<()>,
    probing: AtomicBool,
    /// The gauge says 0 from the first answer of Redis on (the stack is built before the
    /// metrics recorder is installed, so it cannot be set at construction).
    answered: AtomicBool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Shared,
    /// Redis failed; it is tried again from `retry_at` on.
    Fallback {
        retry_at: Instant,
    },
}

impl SharedLimiter {
    /// `limit` permits per second with a burst of `burst`, cluster-wide.
    pub(super) fn new(quota: &ClusterQuota, limit: u32, burst: u32) -> Arc<Self> {
        let limit = limit.max(1);
        let burst = burst.clamp(1, limit);
        let interval_us = 1_000_000_u64.div_ceil(u64::from(limit - burst + 1));
        let share = (limit / quota.expected_nodes.max(1)).max(1);
        Arc::new(Self {
            redis: quota.redis.clone(),
            key: quota.key.clone(),
            script: redis::Script::new(GCRA),
            interval_us,
            tolerance_us: interval_us * u64::from(burst - 1),
            fallback: clock::direct(window_quota(share, (share / 20).max(1))),
            mode: Mutex::new(Mode::Shared),
            turn: tokio::sync::Mutex::new(()),
            probing: AtomicBool::new(false),
            answered: AtomicBool::new(false),
        })
    }

    fn mode(&self) -> Mode {
        *self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True while the node uses its local share.
    pub(super) fn in_fallback(&self) -> bool {
        matches!(self.mode(), Mode::Fallback { .. })
    }

    /// The answer without I/O, when there is one: in fallback, the local share's (and a
    /// background retry of Redis when one is due). `None`: ask Redis ([`Self::check`]).
    pub(super) fn check_now(self: &Arc<Self>) -> Option<bool> {
        self.in_fallback().then(|| {
            self.retry_if_due();
            self.fallback.check().is_ok()
        })
    }

    /// A permit now or false (sync path): one Redis round trip, never a wait for a permit.
    pub(super) async fn check(self: Arc<Self>) -> bool {
        if let Some(answer) = self.check_now() {
            return answer;
        }
        match self.take(1).await {
            Ok(wait_us) => wait_us == 0,
            Err(error) => {
                self.enter_fallback(&error);
                self.fallback.check().is_ok()
            }
        }
    }

    /// Waits for a permit (worker path).
    pub(super) async fn until_ready(self: &Arc<Self>) {
        let _turn = self.turn.lock().await;
        loop {
            if self.in_fallback() {
                self.retry_if_due();
                clock::ready(&self.fallback).await;
                return;
            }
            match self.take(1).await {
                Ok(0) => return,
                Ok(wait_us) => tokio::time::sleep(Duration::from_micros(wait_us).min(MAX_SLEEP)).await,
                Err(error) => self.enter_fallback(&error),
            }
        }
    }

    /// Runs the script: 0 when a permit was granted (or, with `cost` 0, would be), else the
    /// µs until one is. Bounded: past twice [`REDIS_TIMEOUT`] it is an error.
    async fn take(&self, cost: u32) -> Result<u64, redis::RedisError> {
        let mut conn = self.redis.connection();
        let mut invocation = self.script.key(&self.key);
        invocation.arg(self.interval_us).arg(self.tolerance_us).arg(cost);
        let answer =
            match tokio::time::timeout(2 * REDIS_TIMEOUT, invocation.invoke_async::<u64>(&mut conn)).await {
                Ok(answer) => answer,
                Err(_) => Err(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))),
            };
        if answer.is_ok() && !self.answered.swap(true, Ordering::Relaxed) {
            // Under the mode's lock, like every other write of the gauge, so a fall racing
            // with this first answer is never overwritten.
            let mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
            if *mode == Mode::Shared {
                metrics::gauge!(names::IM_QUOTA_FALLBACK).set(0.0);
            }
        }
        answer
    }

    fn enter_fallback(&self, error: &redis::RedisError) {
        let retry_at = Instant::now() + RETRY_EVERY;
        let mut mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        if *mode == Mode::Shared {
            // The kind only: a Redis error may quote what it was asked, never the URL, but
            // nothing more is needed to act on it.
            tracing::warn!(
                kind = ?error.kind(),
                timeout = error.is_timeout(),
                retry_every = ?RETRY_EVERY,
                "Redis unreachable: the IM quota falls back to this node's share"
            );
            metrics::gauge!(names::IM_QUOTA_FALLBACK).set(1.0);
        }
        *mode = Mode::Fallback { retry_at };
    }

    /// In fallback and due: asks Redis again in the background (one retry at a time).
    fn retry_if_due(self: &Arc<Self>) {
        let Mode::Fallback { retry_at } = self.mode() else { return };
        if Instant::now() < retry_at || self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.probing.store(false, Ordering::Release);
            return;
        };
        let this = Arc::clone(self);
        runtime.spawn(async move {
            // Cost 0: checks Redis and the script without taking a permit.
            match this.take(0).await {
                Ok(_) => this.recover(),
                Err(_) => {
                    let mut mode = this.mode.lock().unwrap_or_else(|e| e.into_inner());
                    *mode = Mode::Fallback { retry_at: Instant::now() + RETRY_EVERY };
                }
            }
            this.probing.store(false, Ordering::Release);
        });
    }

    fn recover(&self) {
        let mut mode = self.mode.lock().unwrap_or_else(|e| e.into_inner());
        if *mode != Mode::Shared {
            *mode = Mode::Shared;
            tracing::info!("Redis is back: the IM quota is shared by the cluster again");
            metrics::gauge!(names::IM_QUOTA_FALLBACK).set(0.0);
        }
    }
}

#[cfg(test)]
mod tests;
