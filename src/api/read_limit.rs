//! A GCRA per reader of a read API (governor, keyed by client), bursts of up to one second's
//! worth: the events API's (`rooms.history.reads_per_sec_per_client`) and the members
//! listing's (`rooms.members.reads_per_sec_per_client`), one limiter each ([`ReadApi`]). A
//! reader is the user of an authenticated read, else the address the request came from (an
//! IPv6 address by its /64: one host's share, whatever addresses it picks in it). Service
//! tokens are trusted and not limited. Beyond the limit a read answers 429 `rate_limited` with
//! `Retry-After`, before it costs anything else: one hostile reader costs only its own reads.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// The read API a limiter meters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadApi {
    /// `GET /v1/rooms/{id}/events`, gRPC `ListEvents`.
    Events,
    /// `GET /v1/rooms/{id}/members`, gRPC `ListMembers`.
    Members,
}

impl ReadApi {
    /// The configuration key of its limit.
    pub fn key(self) -> &'static str {
        match self {
            ReadApi::Events => "rooms.history.reads_per_sec_per_client",
            ReadApi::Members => "rooms.members.reads_per_sec_per_client",
        }
    }

    /// The counter of its refused reads.
    fn limited_counter(self) -> &'static str {
        match self {
            ReadApi::Events => names::HISTORY_READS_LIMITED_TOTAL,
            ReadApi::Members => names::MEMBERS_READS_LIMITED_TOTAL,
        }
    }
}

/// A read refused: over the reader's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit {
    /// The limit (reads per second per reader).
    pub per_sec: u32,
    /// How long until the read would be taken.
    pub retry_after: Duration,
}

/// One GCRA per reader of one read API.
#[derive(Debug)]
pub struct ReadLimiter {
    api: ReadApi,
    per_sec: u32,
    limiter: DefaultKeyedRateLimiter<Reader>,
    checks: AtomicU64,
}

impl ReadLimiter {
    /// A limiter of `per_sec` reads of `api` per second per reader; `None` for 0 (no limit).
    pub fn new(api: ReadApi, per_sec: u32) -> Option<Self> {
        let rate = NonZeroU32::new(per_sec)?;
        Some(Self {
            api,
            per_sec,
            limiter: RateLimiter::keyed(Quota::per_second(rate)),
            checks: AtomicU64::new(0),
        })
    }

    /// The limit: reads per second per reader (also the most one reader may burst).
    pub fn per_sec(&self) -> u32 {
        self.per_sec
    }

    /// Takes one read of `caller` (from `peer`, when the transport knows it), or says how long
    /// until one more would be taken. A read with neither a user nor an address (an
    /// in-process call) is not limited.
    pub fn check(&self, caller: &Caller, peer: Option<IpAddr>) -> Result<(), AuthError> {
        self.check_n(caller, peer, 1)
            .map_err(|over| AuthError::RateLimited { per_sec: over.per_sec, retry_after: over.retry_after })
    }

    /// Takes `cost` reads of `caller` at once (a large page costs more than a small one; at
    /// least 1, at most the burst of [`Self::per_sec`]), as [`Self::check`]: all or none.
    pub fn check_n(&self, caller: &Caller, peer: Option<IpAddr>, cost: u32) -> Result<(), OverLimit> {
        let reader = match (caller, peer) {
            (Caller::Service(_), _) => return Ok(()),
            (Caller::User(user), _) => Reader::User(user.to_string()),
            (Caller::Anonymous, Some(address)) => Reader::Address(host(address)),
            (Caller::Anonymous, None) => return Ok(()),
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % RETAIN_EVERY == RETAIN_EVERY - 1 {
            self.limiter.retain_recent();
        }
        let cost = NonZeroU32::new(cost.clamp(1, self.per_sec)).unwrap_or(NonZeroU32::MIN);
        let retry_after = match self.limiter.check_key_n(&reader, cost) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(not_until)) => not_until.wait_time_from(DefaultClock::default().now()),
            // Cannot happen (the cost is within the burst): a second's wait.
            Err(_) => Duration::from_secs(1),
        };
        metrics::counter!(self.api.limited_counter()).increment(1);
        Err(OverLimit { per_sec: self.per_sec, retry_after })
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
    use super::*;
    use crate::domain::UserId;

    #[test]
    fn each_reader_has_its_own_budget_and_services_none() {
        let limiter = ReadLimiter::new(ReadApi::Events, 2).expect("a limit");
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
        assert!(ReadLimiter::new(ReadApi::Events, 0).is_none(), "0 is no limit");
    }

    #[test]
    fn a_costly_read_takes_its_cost_at_once_and_never_more_than_the_burst() {
        let limiter = ReadLimiter::new(ReadApi::Members, 10).expect("a limit");
        let bob = Caller::User(UserId::parse("bob").unwrap());
        limiter.check_n(&bob, None, 6).expect("6 of 10");
        // 4 left: a read of 6 is refused whole (nothing taken), one of 4 passes.
        let over = limiter.check_n(&bob, None, 6).expect_err("6 of 4");
        assert_eq!(over.per_sec, 10);
        assert!(over.retry_after > Duration::ZERO && over.retry_after <= Duration::from_millis(200));
        limiter.check_n(&bob, None, 4).expect("the refused read took nothing");
        // A cost above the burst is the burst: refused now, never forever.
        let carol = Caller::User(UserId::parse("carol").unwrap());
        limiter.check_n(&carol, None, 1000).expect("a whole second's reads");
        assert!(limiter.check_n(&carol, None, 1).is_err());
        assert_eq!(ReadApi::Members.key(), "rooms.members.reads_per_sec_per_client");
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
