//! Validated settings of the public API's authentication (SPEC §12.3).

use std::path::PathBuf;
use std::time::Duration;

use crate::secret::Secret;

/// Who may call the public API, as whom, and how fast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// How a request's bearer token is verified.
    pub mode: AuthMode,
    /// `mode: none` may serve on a non-loopback listener.
    pub allow_anonymous: bool,
    /// Backend callers that may act for any user, by name.
    pub service_tokens: Vec<ServiceToken>,
    /// Room reads need no token.
    pub public_reads: bool,
    /// Commands per second one caller may send; 0: no limit.
    pub per_user_commands_per_sec: u32,
}

impl Default for AuthSettings {
    /// The defaults of `auth.*`: no authentication (loopback only), public reads, no limit.
    fn default() -> Self {
        Self {
            mode: AuthMode::None,
            allow_anonymous: false,
            service_tokens: Vec::new(),
            public_reads: true,
            per_user_commands_per_sec: 0,
        }
    }
}

/// `auth.mode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// No credential: a request acts as whoever it names.
    None,
    /// A JWT names the caller.
    Jwt(JwtSettings),
    /// The caller's own Tencent IM UserSig, verified with the IM application's key.
    UserSig(UserSigSettings),
}

/// One `auth.service_tokens` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceToken {
    /// The caller's name (`[A-Za-z0-9_.-]{1,64}`), as logs and the command log know it.
    pub name: String,
    /// The bearer token it presents.
    pub token: Secret,
}

/// How a JWT is verified (`auth.jwt.*`); at least one key source for the algorithms taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    /// The accepted `alg` values (never empty).
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    /// The HS* key, when an HS* algorithm is accepted.
    pub secret: Option<Secret>,
    /// A PEM public key file.
    pub public_key_file: Option<PathBuf>,
    /// A JWKS endpoint (`http(s)://`).
    pub jwks_url: Option<String>,
    /// How often the JWKS is fetched again.
    pub jwks_refresh: Duration,
    /// `iss` must equal it.
    pub issuer: Option<String>,
    /// `aud` must contain it.
    pub audience: Option<String>,
    /// The claim naming the user.
    pub user_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
}

/// The IM application whose UserSigs are taken (`tencent_im.sdk_app_id` and `secret_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSigSettings {
    /// `TLS.sdkappid` must equal it.
    pub sdk_app_id: u64,
    /// The HMAC key.
    pub secret_key: Secret,
}
