//! Bearer tokens verified lately. A client sends the same token with every command for as long
//! as the token lives, and verifying it is the costly part of authentication (an RS256
//! signature check is ~60 µs of CPU alone and 100–180 µs a command under load here, B12 and
//! B1; a token taken on trust, 0.4 µs). So a token that verified is remembered, by its
//! SHA-256, until the earlier of its own expiry (wall clock, as the verifier reads it) and
//! [`HOLD`] after it was verified (monotonic time: a clock stepped back never stretches it);
//! within that time the very same token names the same user without being verified again.
//!
//! Only tokens that verified are remembered (a flood of bad tokens costs verifications, never
//! room here), and at most [`CAPACITY`] of them (quick_cache's CLOCK-Pro eviction). A UserSig
//! can be spelled several ways that all verify (Tencent's base64 takes `*` or `+`, the signed
//! fields are not the compressed document); each spelling is its own entry, so a caller
//! spelling its one UserSig anew on every request only pays a verification each time, as it
//! would without this cache.
//!
//! What [`HOLD`] bounds: once a node no longer holds a key (a JWKS refresh, every
//! `auth.jwt.jwks_refresh`, no longer lists it), the tokens it signed stop at most [`HOLD`]
//! later.

use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use sha2::{Digest, Sha256};

use crate::domain::UserId;

/// Longest a verified token is taken on trust.
pub const HOLD: Duration = Duration::from_secs(60);
/// Most tokens remembered (~150 bytes each).
pub const CAPACITY: usize = 65_536;

/// A verified token's user, its own expiry (Unix seconds) and the end of its hold.
#[derive(Debug, Clone)]
struct Entry {
    user: UserId,
    expires_at: u64,
    held_until: Instant,
}

impl Entry {
    fn trusted(&self, now: u64, at: Instant) -> bool {
        now < self.expires_at && at < self.held_until
    }
}

/// The tokens verified lately.
pub struct Verified {
    cache: Cache<[u8; 32], Entry>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified").field("tokens", &self.cache.len()).finish()
    }
}

impl Default for Verified {
    fn default() -> Self {
        Self { cache: Cache::new(CAPACITY) }
    }
}

impl Verified {
    /// The user `token` named when it verified, while it is still taken on trust at `now`
    /// (Unix seconds) and `at`.
    pub fn get(&self, token: &str, now: u64, at: Instant) -> Option<UserId> {
        let key = digest(token);
        let entry = self.cache.get(&key)?;
        if entry.trusted(now, at) {
            return Some(entry.user);
        }
        // Only if still stale: a fresh entry put meanwhile stays.
        self.cache.remove_if(&key, |entry| !entry.trusted(now, at));
        None
    }

    /// Remembers that `token` verified at `now` and `at` as `user`; `expires_at` is its own
    /// expiry (`exp`, or a UserSig's time + expire), `None` when it has none that can be read.
    pub fn put(&self, token: &str, user: UserId, expires_at: Option<u64>, now: u64, at: Instant) {
        let Some(expires_at) = expires_at.filter(|&expires_at| now < expires_at) else { return };
        self.cache.insert(digest(token), Entry { user, expires_at, held_until: at + HOLD });
    }

    /// Tokens remembered now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn user(name: &str) -> UserId {
        UserId::parse(name).expect("a valid user id")
    }

    #[test]
    fn a_verified_token_names_its_user_until_its_expiry_or_the_hold_whichever_comes_first() {
        let (verified, at) = (Verified::default(), Instant::now());
        verified.put("long-lived", user("alice"), Some(NOW + 3_600), NOW, at);
        verified.put("short-lived", user("bob"), Some(NOW + 10), NOW, at);
        let later = |secs| at + Duration::from_secs(secs);
        assert_eq!(verified.get("long-lived", NOW + 59, later(59)), Some(user("alice")));
        assert_eq!(verified.get("long-lived", NOW + 60, later(60)), None, "held at most HOLD");
        assert_eq!(verified.get("short-lived", NOW + 9, later(9)), Some(user("bob")));
        assert_eq!(verified.get("short-lived", NOW + 10, later(10)), None, "never past its own expiry");
        assert_eq!(verified.len(), 0, "what is no longer trusted is forgotten");
    }

    #[test]
    fn the_hold_runs_on_monotonic_time_whatever_the_wall_clock_does() {
        let (verified, at) = (Verified::default(), Instant::now());
        verified.put("token", user("alice"), Some(NOW + 3_600), NOW, at);
        // The wall clock stepped back 10 minutes, 61 s after the verification.
        assert_eq!(verified.get("token", NOW - 600, at + Duration::from_secs(61)), None);
    }

    #[test]
    fn only_the_very_token_is_found_and_tokens_without_a_readable_expiry_or_expired_are_not_kept() {
        let (verified, at) = (Verified::default(), Instant::now());
        verified.put("token", user("alice"), Some(NOW + 30), NOW, at);
        assert_eq!(verified.get("token.", NOW, at), None, "another token, however close, is not this one");
        assert_eq!(verified.get("Token", NOW, at), None);
        assert_eq!(verified.get("token", NOW, at), Some(user("alice")));
        verified.put("no-expiry", user("bob"), None, NOW, at);
        verified.put("expired", user("carol"), Some(NOW), NOW, at);
        assert_eq!(verified.len(), 1, "only the first token is kept");
    }
}
