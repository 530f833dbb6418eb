//! Authentication and authorization of the public API (SPEC §12.3), shared by HTTP and gRPC.
//!
//! A request's bearer token (`Authorization: Bearer <token>`, or the `authorization` metadata
//! entry of a gRPC call) names its [`Caller`]: a backend holding a service token, or a user
//! whose JWT ([`jwt`]) or Tencent IM UserSig ([`usersig`]) verifies. With `auth.mode: none`
//! every request is [`Caller::Anonymous`] and acts as whoever it names, as before this module.
//! [`policy`] says what a caller may do (act only as itself; only a service acts for others),
//! and [`limit`] how fast it may send commands.
//!
//! ```text
//! Authorization ─▶ Auth::authenticate ─▶ Caller ─▶ policy::authorize(command) ─▶ limit ─▶ room
//!                     │ 401                          │ 403                        │ 429
//! ```
//!
//! A token that verified is taken on trust for a short while ([`verified`]: until its expiry,
//! at most a minute), so a client's commands pay for one signature check a minute, not one each.
//!
//! Refusals are [`AuthError`]s with a bounded [`Reason`] (the `reason` label of
//! `room_auth_refusals_total`); a token, a secret or a UserSig never reaches a log line, an
//! error or a metric.

mod jwks;
pub mod jwt;
pub mod limit;
pub mod policy;
mod service;
pub mod usersig;
pub mod verified;

use std::sync::Arc;
use std::time::Duration;

use crate::config::{AuthMode, AuthSettings};
use crate::domain::UserId;
use crate::telemetry::names;

pub use policy::authorize;

/// The user a token names once it verified, and when the token expires (Unix seconds;
/// `None` when its expiry cannot be read as such).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The user.
    pub user: UserId,
    /// The token's own expiry (`exp`; a UserSig's time + expire).
    pub expires_at: Option<u64>,
}

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Caller {
    /// `auth.mode: none`: nobody in particular; acts as whoever the request names.
    Anonymous,
    /// A user, by a verified JWT or UserSig.
    User(UserId),
    /// A backend holding a service token (`auth.service_tokens`), by its name.
    Service(String),
}

impl Caller {
    /// What the command log keeps of the caller (part of a command's identity): `user:<id>`,
    /// `service:<name>`, or nothing for an anonymous caller (whose commands stay as they were
    /// logged before authentication existed).
    pub fn identity(&self) -> Option<String> {
        match self {
            Caller::Anonymous => None,
            Caller::User(user) => Some(format!("user:{user}")),
            Caller::Service(name) => Some(format!("service:{name}")),
        }
    }

    /// True when the caller may act as `user`: itself, or anyone for a service or an anonymous
    /// caller (mode none).
    pub fn may_act_as(&self, user: &UserId) -> bool {
        match self {
            Caller::User(me) => me == user,
            Caller::Anonymous | Caller::Service(_) => true,
        }
    }
}

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

/// How a token is verified.
#[derive(Debug)]
enum Verifier {
    /// `mode: none`.
    None,
    Jwt(jwt::JwtVerifier),
    UserSig(usersig::UserSigVerifier),
}

/// The authenticator of both APIs; cheap to clone.
#[derive(Debug, Clone)]
pub struct Auth {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    verifier: Verifier,
    services: service::ServiceTokens,
    public_reads: bool,
    limiter: Option<limit::CommandLimiter>,
    verified: verified::Verified,
}

impl Default for Auth {
    /// `mode: none`: every request anonymous, reads public, no limit.
    fn default() -> Self {
        Self::from_parts(Verifier::None, &AuthSettings::default())
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

impl Auth {
    /// The authenticator `settings` describe. Reads the PEM key file, and fetches the JWKS
    /// once with `client` (a failed fetch is logged: tokens are refused until one succeeds).
    pub async fn from_settings(settings: &AuthSettings, client: reqwest::Client) -> Result<Self, SetupError> {
        let verifier = match &settings.mode {
            AuthMode::None => Verifier::None,
            AuthMode::Jwt(jwt) => Verifier::Jwt(jwt::JwtVerifier::new(jwt, client).await?),
            AuthMode::UserSig(sig) => Verifier::UserSig(usersig::UserSigVerifier::new(sig)),
        };
        Ok(Self::from_parts(verifier, settings))
    }

    fn from_parts(verifier: Verifier, settings: &AuthSettings) -> Self {
        let limiter = limit::CommandLimiter::new(settings.per_user_commands_per_sec);
        let inner = Inner {
            verifier,
            services: service::ServiceTokens::new(&settings.service_tokens),
            public_reads: settings.public_reads,
            limiter,
            verified: verified::Verified::default(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// True with `mode: none`: nothing is verified, every request is anonymous.
    pub fn is_anonymous(&self) -> bool {
        matches!(self.inner.verifier, Verifier::None)
    }

    /// True when room reads need no token.
    pub fn public_reads(&self) -> bool {
        self.inner.public_reads || self.is_anonymous()
    }

    /// The caller an `Authorization` value names (uncounted refusals: the edge counts them);
    /// an `auth` span of the request's trace when traces are exported.
    pub async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Caller, AuthError> {
        use tracing::Instrument;
        let span = crate::telemetry::traces::span_if_on(|| {
            tracing::info_span!("auth", refused = tracing::field::Empty)
        });
        let caller = self.verify(authorization).instrument(span.clone()).await;
        if caller.is_err() {
            span.record("refused", true);
        }
        caller
    }

    async fn verify(&self, authorization: Option<&[u8]>) -> Result<Caller, AuthError> {
        if self.is_anonymous() {
            return Ok(Caller::Anonymous);
        }
        let header = authorization.ok_or(AuthError::Unauthenticated(Reason::Missing))?;
        let token = bearer(header).ok_or(AuthError::Unauthenticated(Reason::Malformed))?;
        if let Some(name) = self.inner.services.find(token) {
            return Ok(Caller::Service(name.to_owned()));
        }
        let token = std::str::from_utf8(token).map_err(|_| AuthError::Unauthenticated(Reason::Malformed))?;
        let (now, at) = (crate::publish::tencent::usersig::system_now_secs(), std::time::Instant::now());
        if let Some(user) = self.inner.verified.get(token, now, at) {
            return Ok(Caller::User(user));
        }
        let named = match &self.inner.verifier {
            Verifier::None => return Ok(Caller::Anonymous),
            Verifier::Jwt(jwt) => jwt.verify(token).await,
            Verifier::UserSig(sig) => sig.verify_at(token, now),
        }
        .map_err(AuthError::Unauthenticated)?;
        self.inner.verified.put(token, named.user.clone(), named.expires_at, now, at);
        Ok(Caller::User(named.user))
    }

    /// Takes one command of `caller` from its limit (services and anonymous callers are not
    /// limited).
    pub fn check_rate(&self, caller: &Caller) -> Result<(), AuthError> {
        match (&self.inner.limiter, caller) {
            (Some(limiter), Caller::User(user)) => limiter.check(user),
            _ => Ok(()),
        }
    }
}

/// The token of `Bearer <token>` (the scheme is case-insensitive, RFC 7235); `None` for any
/// other scheme or an empty token.
pub(crate) fn bearer(header: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = header.split_at_checked(7)?;
    (scheme.eq_ignore_ascii_case(b"bearer ") && !token.is_empty() && !token.contains(&b' ')).then_some(token)
}

#[cfg(test)]
mod tests;
