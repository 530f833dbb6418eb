//! Bearer tokens verified lately. A client sends the same token with every command for as long
//! as the token lives, and verifying it is the costly part of authentication (an RS256
//! signature check is ~60 µs of CPU alone and 100–180 µs a command under load here, B12 and
//! B1; a token taken on trust, 0.4 µs). So a token that verified is remembered, by its SHA-256, until the earlier of its
//! own expiry and [`HOLD`] after it was verified; within that time the same token names the
//! same user without being verified again. Only tokens that verified are remembered (a flood of
//! bad tokens costs verifications, never room here), and at most [`CAPACITY`] of them (least
//! recently used first out).
//!
//! What [`HOLD`] bounds: a key taken out of the JWKS, or a changed secret, stops the tokens it
//! signed at most that long after they were last verified.

use quick_cache::sync::Cache;
use sha2::{Digest, Sha256};

use crate::domain::UserId;

/// Longest a verified token is taken on trust, in seconds.
pub const HOLD: u64 = 60;
/// Most tokens remembered (~150 bytes each).
const CAPACITY: usize = 65_536;

/// A verified token's user, the second it verified and the second it stops being taken on
/// trust.
#[derive(Debug, Clone)]
struct Entry {
    user: UserId,
    verified_at: u64,
    until: u64,
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
    /// (Unix seconds). A clock that went back before the verification forgets the entry, so
    /// trust never lasts more than [`HOLD`] of the clock's time.
    pub fn get(&self, token: &str, now: u64) -> Option<UserId> {
        let key = digest(token);
        let entry = self.cache.get(&key)?;
        if entry.verified_at <= now && now < entry.until {
            return Some(entry.user);
        }
        self.cache.remove(&key);
        None
    }

    /// Remembers that `token` verified at `now` as `user`; `expires_at` is its own expiry
    /// (`exp`, or a UserSig's time + expire), `None` when it has none that can be read.
    pub fn put(&self, token: &str, user: UserId, expires_at: Option<u64>, now: u64) {
        let Some(expires_at) = expires_at else { return };
        let until = expires_at.min(now.saturating_add(HOLD));
        if now < until {
            self.cache.insert(digest(token), Entry { user, verified_at: now, until });
        }
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
        let verified = Verified::default();
        verified.put("long-lived", user("alice"), Some(NOW + 3_600), NOW);
        verified.put("short-lived", user("bob"), Some(NOW + 10), NOW);
        assert_eq!(verified.get("long-lived", NOW + HOLD - 1), Some(user("alice")));
        assert_eq!(verified.get("long-lived", NOW + HOLD), None, "held at most HOLD");
        assert_eq!(verified.get("short-lived", NOW + 9), Some(user("bob")));
        assert_eq!(verified.get("short-lived", NOW + 10), None, "never past its own expiry");
    }

    #[test]
    fn only_the_very_token_is_found_and_tokens_without_a_readable_expiry_or_expired_are_not_kept() {
        let verified = Verified::default();
        verified.put("token", user("alice"), Some(NOW + 30), NOW);
        assert_eq!(verified.get("token.", NOW), None, "another token, however close, is not this one");
        assert_eq!(verified.get("Token", NOW), None);
        verified.put("no-expiry", user("bob"), None, NOW);
        assert_eq!(verified.get("no-expiry", NOW), None);
        verified.put("expired", user("carol"), Some(NOW), NOW);
        assert_eq!(verified.get("expired", NOW), None);
    }

    #[test]
    fn a_clock_gone_back_before_the_verification_forgets_the_token() {
        let verified = Verified::default();
        verified.put("token", user("alice"), Some(NOW + 3_600), NOW);
        assert_eq!(verified.get("token", NOW - 1), None);
        assert_eq!(verified.get("token", NOW), None, "forgotten, not only hidden");
    }
}
