//! The raw `auth` section (SPEC §12.3): who may call the public API, as whom, and how fast.

use super::*;

/// `auth.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawAuth {
    /// `none` (every request acts as whoever it names), `jwt` or `usersig`.
    pub mode: String,
    /// Lets `mode: none` serve on a non-loopback `http.listen` / `grpc.listen`.
    pub allow_anonymous: bool,
    /// `name=token,name2=token2`: backend callers that may act for any user; from
    /// `ROOM_SERVICE__AUTH__SERVICE_TOKENS`.
    pub service_tokens: Secret,
    /// `GET /v1/rooms/{id}` and `/members` (and their RPCs) without a token.
    pub public_reads: bool,
    /// Commands per second one caller may send (a GCRA per caller); 0: no limit.
    pub per_user_commands_per_sec: u32,
    /// How JWTs are verified (`mode: jwt`).
    #[serde(deserialize_with = "null_as_default")]
    pub jwt: RawJwt,
}

impl Default for RawAuth {
    fn default() -> Self {
        Self {
            mode: "none".into(),
            allow_anonymous: false,
            service_tokens: Secret::default(),
            public_reads: true,
            per_user_commands_per_sec: 0,
            jwt: RawJwt::default(),
        }
    }
}

/// `auth.jwt.*`
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawJwt {
    /// The `alg` values accepted (HS256/384/512, RS256/384/512, PS256/384/512, ES256/384,
    /// EdDSA); a token of any other `alg` (`none` included) is refused.
    #[serde(deserialize_with = "names")]
    pub algorithms: Vec<String>,
    /// The HS* key; from `ROOM_SERVICE__AUTH__JWT__SECRET`.
    pub secret: Secret,
    /// A PEM public key file (RS*, PS*, ES*, EdDSA).
    pub public_key_file: String,
    /// A JWKS endpoint: keys by `kid`.
    pub jwks_url: String,
    /// How often the JWKS is fetched again.
    pub jwks_refresh: RawDuration,
    /// When set, `iss` must equal it.
    pub issuer: String,
    /// When set, `aud` must contain it.
    pub audience: String,
    /// The claim naming the user.
    pub user_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: RawDuration,
}

impl Default for RawJwt {
    fn default() -> Self {
        Self {
            algorithms: vec!["RS256".into()],
            secret: Secret::default(),
            public_key_file: String::new(),
            jwks_url: String::new(),
            jwks_refresh: RawDuration::new("10m"),
            issuer: String::new(),
            audience: String::new(),
            user_claim: "sub".into(),
            leeway: RawDuration::new("30s"),
        }
    }
}
