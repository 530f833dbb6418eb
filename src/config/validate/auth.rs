//! The rules of `auth` (SPEC §12.3): a known mode with what it needs (a key for every accepted
//! JWT algorithm, the IM key for UserSigs), well-formed service tokens, and no anonymous API on
//! a non-loopback listener unless `auth.allow_anonymous` says so. No message ever carries a
//! token or a secret.

use std::path::PathBuf;
use std::str::FromStr;

use jsonwebtoken::{Algorithm, AlgorithmFamily};

use super::*;
use crate::config::raw::{RawAuth, RawJwt};
use crate::config::settings::{AuthMode, AuthSettings, JwtSettings, ServiceToken, UserSigSettings};

/// Shortest accepted service token and HS* secret, in bytes (RFC 7518 §3.2: an HS256 key has
/// at least 256 bits).
pub(crate) const MIN_SECRET_BYTES: usize = 32;
/// Shortest accepted `auth.jwt.jwks_refresh`.
const MIN_JWKS_REFRESH: Duration = Duration::from_secs(10);

/// Applies the rules; `http` and `grpc` are the listeners (an anonymous API is loopback only),
/// `im` the IM application whose UserSigs `mode: usersig` takes.
pub(super) fn auth(
    p: &mut Problems,
    raw: RawAuth,
    http: &HttpSettings,
    grpc: &GrpcSettings,
    im: Option<&TencentImSettings>,
) -> AuthSettings {
    let mode = match raw.mode.trim().to_ascii_lowercase().as_str() {
        "none" => AuthMode::None,
        "jwt" => AuthMode::Jwt(jwt(p, raw.jwt)),
        "usersig" => match im {
            Some(im) => AuthMode::UserSig(UserSigSettings {
                sdk_app_id: im.sdk_app_id,
                secret_key: im.secret_key.clone(),
            }),
            None => {
                p.add(
                    "auth.mode",
                    "usersig needs tencent_im.enabled: UserSigs are verified with tencent_im.secret_key",
                );
                AuthMode::None
            }
        },
        _ => {
            p.add("auth.mode", format!("{:?} is not one of none, jwt, usersig", raw.mode));
            AuthMode::None
        }
    };
    if mode == AuthMode::None && !raw.allow_anonymous && raw.mode.trim().eq_ignore_ascii_case("none") {
        let open = [("http.listen", http.listen), ("grpc.listen", grpc.listen)]
            .into_iter()
            .find(|(_, address)| !address.ip().is_loopback());
        if let Some((key, address)) = open {
            p.add(
                "auth.mode",
                format!(
                    "none serves anyone as anyone, and {key} {address} is not a loopback address: set \
                     auth.mode to jwt or usersig, or auth.allow_anonymous: true \
                     (ROOM_SERVICE__AUTH__ALLOW_ANONYMOUS) if a gateway in front authenticates"
                ),
            );
        }
    }
    if raw.per_user_commands_per_sec > 0 && mode == AuthMode::None {
        p.add(
            "auth.per_user_commands_per_sec",
            "needs auth.mode jwt or usersig: with none there is no caller to count",
        );
    }
    AuthSettings {
        mode,
        allow_anonymous: raw.allow_anonymous,
        service_tokens: service_tokens(p, &raw.service_tokens),
        public_reads: raw.public_reads,
        per_user_commands_per_sec: raw.per_user_commands_per_sec,
    }
}

/// `name=token,name2=token2`: names `[A-Za-z0-9_.-]{1,64}` and unique, tokens of at least
/// [`MIN_SECRET_BYTES`] and unique. Whitespace around an entry is not part of it.
fn service_tokens(p: &mut Problems, raw: &Secret) -> Vec<ServiceToken> {
    const KEY: &str = "auth.service_tokens";
    let mut tokens: Vec<ServiceToken> = Vec::new();
    for (i, entry) in raw.expose().split(',').map(str::trim).filter(|e| !e.is_empty()).enumerate() {
        let Some((name, token)) = entry.split_once('=') else {
            p.add(KEY, format!("entry {} is not name=token", i + 1));
            continue;
        };
        let (name, token) = (name.trim(), token.trim());
        if !is_valid_node_id(name) {
            p.add(KEY, format!("entry {}: the name must be 1-64 characters of [A-Za-z0-9_.-]", i + 1));
        } else if token.len() < MIN_SECRET_BYTES {
            p.add(KEY, format!("the token of {name} is shorter than {MIN_SECRET_BYTES} characters"));
        } else if tokens.iter().any(|t| t.name == name) {
            p.add(KEY, format!("{name} is named twice"));
        } else if tokens.iter().any(|t| t.token.expose() == token) {
            p.add(KEY, format!("the token of {name} is also another name's"));
        } else {
            tokens.push(ServiceToken { name: name.to_owned(), token: Secret::new(token) });
        }
    }
    tokens
}

/// `auth.jwt.*` when `mode: jwt`: every accepted algorithm has its key, and no key is left
/// without an algorithm (an HS* secret beside RS* would otherwise sit unused, or worse).
fn jwt(p: &mut Problems, raw: RawJwt) -> JwtSettings {
    let algorithms = jwt_algorithms(p, &raw.algorithms);
    let hmac = algorithms.iter().any(|a| a.family() == AlgorithmFamily::Hmac);
    let public = algorithms.iter().any(|a| a.family() != AlgorithmFamily::Hmac);
    let secret = jwt_secret(p, &raw.secret, hmac);
    let (public_key_file, jwks_url) = jwt_public_keys(p, &raw.public_key_file, &raw.jwks_url, public);
    let jwks_refresh = p.positive("auth.jwt.jwks_refresh", &raw.jwks_refresh, Duration::from_secs(600));
    if jwks_refresh < MIN_JWKS_REFRESH {
        p.add("auth.jwt.jwks_refresh", "must be at least 10s");
    }
    let user_claim = raw.user_claim.trim().to_owned();
    if user_claim.is_empty() {
        p.add("auth.jwt.user_claim", "must name the claim holding the user id (e.g. sub)");
    }
    let nonempty = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    JwtSettings {
        algorithms,
        secret,
        public_key_file,
        jwks_url,
        jwks_refresh,
        issuer: nonempty(raw.issuer),
        audience: nonempty(raw.audience),
        user_claim,
        leeway: p.or_default("auth.jwt.leeway", &raw.leeway, Duration::ZERO),
    }
}

/// `auth.jwt.algorithms`: at least one, each a known algorithm; repeats are taken once.
fn jwt_algorithms(p: &mut Problems, names: &[String]) -> Vec<Algorithm> {
    let mut algorithms = Vec::new();
    for name in names {
        match Algorithm::from_str(name.trim()) {
            Ok(alg) if !algorithms.contains(&alg) => algorithms.push(alg),
            Ok(_) => {}
            Err(_) => p.add(
                "auth.jwt.algorithms",
                format!(
                    "{name:?} is not one of HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, \
                     PS512, ES256, ES384, EdDSA"
                ),
            ),
        }
    }
    if names.is_empty() {
        p.add("auth.jwt.algorithms", "must name at least one algorithm");
    }
    algorithms
}

/// `auth.jwt.secret`: set, and long enough, exactly when an HS* algorithm (`hmac`) is accepted.
fn jwt_secret(p: &mut Problems, raw: &Secret, hmac: bool) -> Option<Secret> {
    let secret = Secret::new(raw.expose().trim());
    let secret = (!secret.is_empty()).then_some(secret);
    match (&secret, hmac) {
        (None, true) => p.add(
            "auth.jwt.secret",
            "an HS* algorithm is accepted: set the key in ROOM_SERVICE__AUTH__JWT__SECRET",
        ),
        (Some(s), true) if s.expose().len() < MIN_SECRET_BYTES => {
            p.add("auth.jwt.secret", format!("must be at least {MIN_SECRET_BYTES} bytes"));
        }
        (Some(_), false) => {
            p.add("auth.jwt.secret", "is set, but auth.jwt.algorithms accepts no HS* algorithm")
        }
        _ => {}
    }
    secret
}

/// `auth.jwt.public_key_file` and `auth.jwt.jwks_url`: exactly one of them when an
/// RS*/PS*/ES*/EdDSA algorithm (`public`) is accepted, neither otherwise; the URL well-formed.
fn jwt_public_keys(
    p: &mut Problems,
    public_key_file: &str,
    jwks_url: &str,
    public: bool,
) -> (Option<PathBuf>, Option<String>) {
    let public_key_file = Some(public_key_file.trim()).filter(|f| !f.is_empty()).map(PathBuf::from);
    let jwks_url = Some(jwks_url.trim()).filter(|u| !u.is_empty()).map(str::to_owned);
    if let Some(url) = &jwks_url
        && let Err(reason) = check_jwks_url(url)
    {
        p.add("auth.jwt.jwks_url", reason);
    }
    match (&public_key_file, &jwks_url, public) {
        (None, None, true) => p.add(
            "auth.jwt.public_key_file",
            "an RS*/PS*/ES*/EdDSA algorithm is accepted: set auth.jwt.public_key_file or auth.jwt.jwks_url",
        ),
        (Some(_), Some(_), _) => {
            p.add("auth.jwt.jwks_url", "set auth.jwt.public_key_file or auth.jwt.jwks_url, not both");
        }
        (Some(_), None, false) => {
            p.add("auth.jwt.public_key_file", "is set, but auth.jwt.algorithms accepts only HS* algorithms");
        }
        (None, Some(_), false) => {
            p.add("auth.jwt.jwks_url", "is set, but auth.jwt.algorithms accepts only HS* algorithms");
        }
        _ => {}
    }
    (public_key_file, jwks_url)
}

/// A JWKS URL: `http(s)://host...` without credentials or a fragment.
fn check_jwks_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} must start with http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() || parsed.fragment().is_some() {
        return Err(format!("{url:?} must not carry credentials or a fragment"));
    }
    Ok(())
}
