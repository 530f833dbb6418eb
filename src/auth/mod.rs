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
//!
//! Here is the authenticator ([`Auth`]: which verifier, the service tokens, the cache of
//! verified tokens, the limiter); who a caller is lives in `caller`, why one is refused
//! (and why the authenticator could not be built) in `error`.

mod caller;
mod error;
mod jwks;
pub mod jwt;
pub mod limit;
pub mod policy;
mod service;
pub mod usersig;
pub mod verified;

use std::sync::Arc;

use crate::config::{AuthMode, AuthSettings};

pub use caller::{Caller, TokenUser};
pub use error::{AuthError, Reason, SetupError, init_refusal_counters};
pub use policy::authorize;

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
