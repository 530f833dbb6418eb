//! `rooms.history.reads_per_sec_per_client`: a GCRA per reader of the events API (governor,
//! keyed by client), bursts of up to one second's worth. A reader is the user of an
//! authenticated read, else the address the request came from (an IPv6 address by its /64: one
//! host's share, whatever addresses it picks in it). Service tokens are trusted and not
//! limited. Beyond the limit a read answers 429 `rate_limited` with `Retry-After`, before it
//! costs anything else: one hostile reader costs only its own reads.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::auth::{AuthError, Caller};
use crate::telemetry::names;

/// The keyed limiter forgets idle readers every this many checks.
const RETAIN_EVERY: u64 = 4096;

/// Who a read counts against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Reader {
    User(String),
    Address(IpAddr),
}

/// One GCRA per reader of the events API.
#[derive(Debug)]
pub struct ReadLimiter {
    per_sec: u32,
    limiter: DefaultKeyedRateLimiter<Reader>,
    checks: AtomicU64,
}

impl ReadLimiter {
    /// A limiter of `per_sec` reads per second per reader; `None` for 0 (no limit).
    pub fn new(per_sec: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_sec)?;
        Some(Self {
            per_sec,
            limiter: RateLimiter::keyed(Quota::per_second(rate)),
            checks: AtomicU64::new(0),
        })
    }

    /// Takes one read of `caller` (from `peer`, when the transport knows it), or says how long
    /// until one more would be taken. A read with neither a user nor an address (an
    /// in-process call) is not limited.
    pub fn check(&self, caller: &Caller, peer: Option<IpAddr>) -> Result<(), AuthError> {
        let reader = match (caller, peer) {
            (Caller::Service(_), _) => return Ok(()),
            (Caller::User(user), _) => Reader::User(user.to_string()),
            (Caller::Anonymous, Some(address)) => Reader::Address(host(address)),
            (Caller::Anonymous, None) => return Ok(()),
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&reader).map_err(|not_until| {
            metrics::counter!(names::HISTORY_READS_LIMITED_TOTAL).increment(1);
            AuthError::RateLimited {
                per_sec: self.per_sec,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            }
        })
    }
}

/// The part of an address one host holds: all of an IPv4 address, the /64 of an IPv6 one (an
/// IPv4-mapped IPv6 address is its IPv4 address).
fn host(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::UserId;

    #[test]
    fn each_reader_has_its_own_budget_and_services_none() {
        let limiter = ReadLimiter::new(2).expect("a limit");
        let alice = Caller::User(UserId::parse("alice").unwrap());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..2 {
            limiter.check(&alice, Some(a)).expect("within the burst");
        }
        match limiter.check(&alice, Some(a)) {
            Err(AuthError::RateLimited { per_sec: 2, retry_after }) => {
                assert!(retry_after <= Duration::from_millis(500), "{retry_after:?}")
            }
            other => panic!("expected rate_limited, got {other:?}"),
        }
        // The same address reading anonymously is another reader.
        limiter.check(&Caller::Anonymous, Some(a)).expect("the address has its own budget");
        limiter.check(&Caller::Anonymous, Some(a)).expect("within the burst");
        assert!(limiter.check(&Caller::Anonymous, Some(a)).is_err());
        for _ in 0..10 {
            limiter.check(&Caller::Service("gateway".into()), Some(a)).expect("services are trusted");
        }
        assert!(ReadLimiter::new(0).is_none(), "0 is no limit");
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_a_mapped_address_its_ipv4() {
        let one: IpAddr = "2001:db8::1".parse().unwrap();
        let other: IpAddr = "2001:db8::ffff:1234".parse().unwrap();
        assert_eq!(host(one), host(other));
        assert_ne!(host(one), host("2001:db8:0:1::1".parse().unwrap()));
        assert_eq!(host("::ffff:10.0.0.1".parse().unwrap()), "10.0.0.1".parse::<IpAddr>().unwrap());
    }
}
