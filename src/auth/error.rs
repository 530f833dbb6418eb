//! Why a request was refused ([`AuthError`]: 401, 403 or 429) with its bounded [`Reason`],
//! the `reason` label of `room_auth_refusals_total` (exported at 0 for every reason by
//! [`init_refusal_counters`]), and why the authenticator could not be built ([`SetupError`]).
//! What a client is told never carries the token.

use std::time::Duration;

use crate::telemetry::names;

/// Why a request was refused: the bounded `reason` label of `room_auth_refusals_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// No `Authorization` header (or metadata entry).
    Missing,
    /// Not `Bearer <token>`, or a token that is not a JWT / UserSig at all.
    Malformed,
    /// The signature does not verify with our key (another key, a tampered token).
    BadSignature,
    /// `exp` (or the UserSig's `time + expire`) has passed.
    Expired,
    /// `nbf` is still ahead.
    NotYetValid,
    /// `iss` is not `auth.jwt.issuer`.
    WrongIssuer,
    /// `aud` does not hold `auth.jwt.audience`.
    WrongAudience,
    /// The UserSig was issued for another SDKAppID.
    WrongApp,
    /// The JWT's `kid` is in no key set we have.
    UnknownKid,
    /// The JWT's `alg` is not one of `auth.jwt.algorithms` (`none` included).
    Algorithm,
    /// The user claim is missing or not a valid user id; another required claim is missing.
    Claim,
    /// No JWKS has been fetched yet.
    KeysUnavailable,
    /// The caller may not do this (403).
    Forbidden,
    /// Beyond `auth.per_user_commands_per_sec` (429).
    RateLimited,
}

impl Reason {
    /// Every reason, for exporting the counter at 0.
    pub const ALL: [Reason; 14] = [
        Reason::Missing,
        Reason::Malformed,
        Reason::BadSignature,
        Reason::Expired,
        Reason::NotYetValid,
        Reason::WrongIssuer,
        Reason::WrongAudience,
        Reason::WrongApp,
        Reason::UnknownKid,
        Reason::Algorithm,
        Reason::Claim,
        Reason::KeysUnavailable,
        Reason::Forbidden,
        Reason::RateLimited,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Malformed => "malformed",
            Reason::BadSignature => "bad_signature",
            Reason::Expired => "expired",
            Reason::NotYetValid => "not_yet_valid",
            Reason::WrongIssuer => "wrong_issuer",
            Reason::WrongAudience => "wrong_audience",
            Reason::WrongApp => "wrong_app",
            Reason::UnknownKid => "unknown_kid",
            Reason::Algorithm => "algorithm",
            Reason::Claim => "claim",
            Reason::KeysUnavailable => "keys_unavailable",
            Reason::Forbidden => "forbidden",
            Reason::RateLimited => "rate_limited",
        }
    }

    /// What the client is told (never the token).
    fn describe(self) -> &'static str {
        match self {
            Reason::Missing => "this route needs Authorization: Bearer <token>",
            Reason::Malformed => "the bearer token cannot be read",
            Reason::BadSignature => "the token's signature does not verify",
            Reason::Expired => "the token has expired",
            Reason::NotYetValid => "the token is not valid yet (nbf)",
            Reason::WrongIssuer => "the token's issuer (iss) is not accepted",
            Reason::WrongAudience => "the token's audience (aud) is not this service",
            Reason::WrongApp => "the UserSig was issued for another SDKAppID",
            Reason::UnknownKid => "the token's key id (kid) is unknown",
            Reason::Algorithm => "the token's algorithm (alg) is not accepted",
            Reason::Claim => "the token does not name a valid user",
            Reason::KeysUnavailable => "the keys to verify tokens could not be fetched yet; retry",
            Reason::Forbidden => "forbidden",
            Reason::RateLimited => "too many commands",
        }
    }
}

/// A refused request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// 401: no credential, or one that does not verify.
    #[error("{}", .0.describe())]
    Unauthenticated(Reason),
    /// 403: the caller may not set `field` as it did (or do this at all).
    #[error("{field}: {why}")]
    Forbidden {
        /// The request field at fault (`owner_id`, `user_id`, `sender_id`, ...).
        field: &'static str,
        /// Why.
        why: &'static str,
    },
    /// 429: the caller sent commands faster than its limit.
    #[error("more than {per_sec} commands per second from this caller; retry after {} ms", retry_after.as_millis())]
    RateLimited {
        /// The limit.
        per_sec: u32,
        /// How long until one more is taken.
        retry_after: Duration,
    },
}

impl AuthError {
    /// The `reason` label.
    pub fn reason(&self) -> Reason {
        match self {
            AuthError::Unauthenticated(reason) => *reason,
            AuthError::Forbidden { .. } => Reason::Forbidden,
            AuthError::RateLimited { .. } => Reason::RateLimited,
        }
    }

    /// True for a 401 whose request carried a token (`error="invalid_token"`).
    pub fn token_was_given(&self) -> bool {
        matches!(self, AuthError::Unauthenticated(reason) if *reason != Reason::Missing)
    }

    /// Counts the refusal in `room_auth_refusals_total` and hands it back.
    pub fn counted(self) -> Self {
        metrics::counter!(names::AUTH_REFUSALS_TOTAL, names::LABEL_REASON => self.reason().as_str())
            .increment(1);
        self
    }
}

/// Exports `room_auth_refusals_total` at 0 for every reason (a counter that first appears at
/// 1 shows no `increase()`).
pub fn init_refusal_counters() {
    for reason in Reason::ALL {
        metrics::counter!(names::AUTH_REFUSALS_TOTAL, names::LABEL_REASON => reason.as_str()).increment(0);
    }
}

/// Why the authenticator could not be built (startup fails; the message names the key).
#[derive(Debug, thiserror::Error)]
#[error("invalid value for `{key}`: {reason}")]
pub struct SetupError {
    /// The configuration key at fault.
    pub key: &'static str,
    /// Why (never a secret).
    pub reason: String,
}
