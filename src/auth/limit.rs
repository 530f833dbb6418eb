//! `auth.per_user_commands_per_sec`: a GCRA per caller (governor, keyed by user), bursts of up
//! to one second's worth. A refused command answers how long until the next one is taken. The
//! keyed rate underneath ([`KeyedRate`]) is shared by the other per-key limits of callers.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::AuthError;
use crate::domain::UserId;

/// A keyed limiter forgets idle keys every this many checks.
const RETAIN_EVERY: u64 = 4096;

/// A GCRA per key (governor), bursts of up to one second's worth, whose memory stays bounded:
/// every `RETAIN_EVERY` checks it forgets the keys whose budget is full again, so many
/// keys seen once cost only until their second has passed. The one per-key rate machinery of
/// the callers' limits (commands here, seat actions in `api::seat_limit`).
#[derive(Debug)]
pub struct KeyedRate<K: Hash + Eq + Clone> {
    per_sec: u32,
    limiter: DefaultKeyedRateLimiter<K>,
    checks: AtomicU64,
}

impl<K: Hash + Eq + Clone> KeyedRate<K> {
    /// `per_sec` a second per key; `None` for 0 (no limit).
    pub fn new(per_sec: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_sec)?;
        let limiter = RateLimiter::keyed(Quota::per_second(rate));
        Some(Self { per_sec, limiter, checks: AtomicU64::new(0) })
    }

    /// The limit, a second per key.
    pub fn per_sec(&self) -> u32 {
        self.per_sec
    }

    /// Takes one of `key`'s budget, or says how long until one more would be taken (at least
    /// 1 ms).
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(key).map_err(|not_until| {
            not_until.wait_time_from(DefaultClock::default().now()).max(Duration::from_millis(1))
        })
    }

    /// Keys remembered now (forgotten ones excluded once `RETAIN_EVERY` checks passed).
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    /// True when no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One GCRA per user.
#[derive(Debug)]
pub struct CommandLimiter {
    rate: KeyedRate<UserId>,
}

impl CommandLimiter {
    /// A limiter of `per_sec` commands per second per user; `None` for 0 (no limit).
    pub fn new(per_sec: u32) -> Option<Self> {
        KeyedRate::new(per_sec).map(|rate| Self { rate })
    }

    /// Takes one command of `user`, or says how long until one more would be taken.
    pub fn check(&self, user: &UserId) -> Result<(), AuthError> {
        self.rate
            .check(user)
            .map_err(|retry_after| AuthError::RateLimited { per_sec: self.rate.per_sec(), retry_after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_over_the_limit_is_refused_for_that_user_only() {
        let limiter = CommandLimiter::new(3).expect("a limit");
        let (alice, bob) = (UserId::parse("alice").unwrap(), UserId::parse("bob").unwrap());
        for _ in 0..3 {
            limiter.check(&alice).expect("within the burst");
        }
        match limiter.check(&alice) {
            Err(AuthError::RateLimited { per_sec: 3, retry_after }) => {
                assert!(
                    retry_after > Duration::ZERO && retry_after <= Duration::from_millis(334),
                    "{retry_after:?}"
                );
            }
            other => panic!("expected rate_limited, got {other:?}"),
        }
        limiter.check(&bob).expect("bob has his own limit");
        assert!(CommandLimiter::new(0).is_none(), "0 is no limit");
    }
}
