//! The limiters' clock and their waits: tokio's, and only tokio's.
//!
//! `governor`'s own waits (`until_ready`, `until_key_ready`) sleep on `futures-timer`, whose
//! helper thread parks with `std::thread::park_timeout`: an absolute `CLOCK_MONOTONIC`
//! deadline computed from the process's clock and handed to the kernel. When the process's
//! clock is not the kernel's — a node run under `faketime`, whose `CLOCK_MONOTONIC` is the
//! faked wall clock — that deadline lies decades away, and a wait for a permit ends only
//! when another timer happens to wake the thread. A room's worker pack waiting so held its
//! rows (their leases renewed on tokio's timer) and stalled the room on every node (issue
//! #37). So the limiters run on [`TokioClock`] and wait with [`ready`] and [`key_ready`]:
//! `check`, then `tokio::time::sleep_until` the instant the limiter names, on the timer that
//! every other wait of the service uses (relative timeouts to the kernel, and paused time in
//! tests). `clippy.toml` forbids the `governor` waits.

use std::hash::Hash;
use std::ops::Add;

use governor::clock::{Clock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// An instant of tokio's clock, as `governor` reckons time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TokioInstant(tokio::time::Instant);

impl Add<Nanos> for TokioInstant {
    type Output = Self;

    fn add(self, other: Nanos) -> Self {
        Self(self.0 + std::time::Duration::from(other))
    }
}

impl Reference for TokioInstant {
    fn duration_since(&self, earlier: Self) -> Nanos {
        self.0.saturating_duration_since(earlier.0).into()
    }

    fn saturating_sub(&self, duration: Nanos) -> Self {
        Self(self.0.checked_sub(duration.into()).unwrap_or(self.0))
    }
}

/// tokio's clock (`tokio::time::Instant::now`), for `governor`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TokioClock;

impl Clock for TokioClock {
    type Instant = TokioInstant;

    fn now(&self) -> TokioInstant {
        TokioInstant(tokio::time::Instant::now())
    }
}

/// A limiter of one stream of cells on tokio's clock.
pub(crate) type DirectLimiter =
    RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<TokioInstant>>;

/// A limiter per key on tokio's clock.
pub(crate) type KeyedLimiter<K> =
    RateLimiter<K, DefaultKeyedStateStore<K>, TokioClock, NoOpMiddleware<TokioInstant>>;

/// A limiter of `quota` on tokio's clock.
pub(crate) fn direct(quota: Quota) -> DirectLimiter {
    RateLimiter::direct_with_clock(quota, TokioClock)
}

/// A limiter of `quota` per key on tokio's clock.
pub(crate) fn keyed<K: Hash + Eq + Clone>(quota: Quota) -> KeyedLimiter<K> {
    RateLimiter::new(quota, DefaultKeyedStateStore::default(), TokioClock)
}

/// Waits on tokio's timer until `limiter` grants a cell, and takes it.
pub(crate) async fn ready(limiter: &DirectLimiter) {
    while let Err(not_until) = limiter.check() {
        tokio::time::sleep_until(not_until.earliest_possible().0).await;
    }
}

/// Waits on tokio's timer until `limiter` grants a cell of `key`, and takes it.
pub(crate) async fn key_ready<K: Hash + Eq + Clone>(limiter: &KeyedLimiter<K>, key: &K) {
    while let Err(not_until) = limiter.check_key(key) {
        tokio::time::sleep_until(not_until.earliest_possible().0).await;
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_wait_for_a_permit_ends_on_tokios_clock() {
        // Two a second, no burst: the second cell is due half a second after the first.
        let limiter = direct(Quota::per_second(NonZeroU32::new(2).unwrap()).allow_burst(NonZeroU32::MIN));
        let start = tokio::time::Instant::now();
        ready(&limiter).await;
        ready(&limiter).await;
        // Paused time moves only when every task waits on tokio's timer: a wait on any other
        // clock or thread would never end here (or would end at once, had it not waited).
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_keyed_wait_waits_for_its_own_key_only() {
        let limiter: KeyedLimiter<String> =
            keyed(Quota::per_second(NonZeroU32::new(4).unwrap()).allow_burst(NonZeroU32::MIN));
        let start = tokio::time::Instant::now();
        let (a, b) = ("a".to_owned(), "b".to_owned());
        key_ready(&limiter, &a).await;
        key_ready(&limiter, &b).await;
        assert_eq!(start.elapsed(), Duration::ZERO, "another key's cell is not waited for");
        key_ready(&limiter, &a).await;
        assert_eq!(start.elapsed(), Duration::from_millis(250));
    }
}
