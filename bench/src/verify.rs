//! B12, token verification: what `Auth::authenticate` costs a command for a token it has not
//! verified yet (the signature check and the claims) and for the same token again (taken on
//! trust, `room_service::auth::verified`), for an HS256 JWT, an RS256 JWT (a PEM public key)
//! and a Tencent UserSig, in process. `--verify-tokens` users each get a token; every token is
//! authenticated once (all fresh), then every token once more (all seen), one after another on
//! one task, so the time per call is the CPU of one call.

use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use room_service::auth::Auth;
use room_service::config::{AuthMode, AuthSettings, JwtSettings, UserSigSettings};
use room_service::publish::tencent::usersig;
use room_service::secret::Secret;
use serde_json::json;

use crate::Args;
use crate::command::auth::{HS_SECRET, RSA_PRIVATE_PEM, RSA_PUBLIC_PEM};
use crate::report::Line;
use crate::support::{SDK_APP_ID, SECRET_KEY};

/// Runs B12 and returns its lines.
pub async fn run(args: &Args) -> anyhow::Result<Vec<Line>> {
    let key_file = std::env::temp_dir().join(format!("room-service-bench-b12-{}.pem", std::process::id()));
    std::fs::write(&key_file, RSA_PUBLIC_PEM)?;
    let lines = measure(args, &key_file).await;
    let _ = std::fs::remove_file(&key_file);
    lines
}

/// The lines, with the RS256 public key in the PEM file `key_file`.
async fn measure(args: &Args, key_file: &std::path::Path) -> anyhow::Result<Vec<Line>> {
    let users: Vec<String> = (0..args.verify_tokens).map(|n| format!("u{n}")).collect();
    let mut lines = Vec::new();
    let kinds = [
        ("HS256", jwt(Algorithm::HS256, None)),
        ("RS256", jwt(Algorithm::RS256, Some(key_file.to_path_buf()))),
        (
            "UserSig",
            AuthMode::UserSig(UserSigSettings {
                sdk_app_id: SDK_APP_ID,
                secret_key: Secret::new(SECRET_KEY),
            }),
        ),
    ];
    for (name, mode) in kinds {
        let settings = AuthSettings { mode, ..AuthSettings::default() };
        let auth = Auth::from_settings(&settings, reqwest::Client::new()).await?;
        let headers = tokens(name, &users)?;
        let fresh = per_call(&auth, &headers).await?;
        let seen = per_call(&auth, &headers).await?;
        lines.push(Line::ratio(
            &format!("B12 {name}: authenticate a token seen before"),
            us(seen),
            format!("{} a token not verified yet; {} tokens", us(fresh), headers.len()),
            seen.as_secs_f64() / fresh.as_secs_f64().max(1e-12),
        ));
    }
    Ok(lines)
}

/// `auth.mode: jwt` taking `alg`, with the benchmark's HS secret or the PEM public key at `pem`.
fn jwt(alg: Algorithm, pem: Option<std::path::PathBuf>) -> AuthMode {
    AuthMode::Jwt(JwtSettings {
        algorithms: vec![alg],
        secret: pem.is_none().then(|| Secret::new(HS_SECRET)),
        public_key_file: pem,
        jwks_url: None,
        jwks_refresh: Duration::from_secs(600),
        issuer: None,
        audience: None,
        user_claim: "sub".into(),
        leeway: Duration::from_secs(30),
    })
}

/// An `Authorization` value for each of `users`, of the kind `name`.
fn tokens(name: &str, users: &[String]) -> anyhow::Result<Vec<Vec<u8>>> {
    let now = usersig::system_now_secs();
    let key = match name {
        "HS256" => Some((Algorithm::HS256, EncodingKey::from_secret(HS_SECRET.as_bytes())?)),
        "RS256" => Some((Algorithm::RS256, EncodingKey::from_rsa_pem(RSA_PRIVATE_PEM.as_bytes())?)),
        _ => None,
    };
    users
        .iter()
        .map(|user| {
            let token = match &key {
                Some((alg, key)) => {
                    jsonwebtoken::encode(&Header::new(*alg), &json!({"sub": user, "exp": now + 3600}), key)?
                }
                None => usersig::generate(SECRET_KEY, SDK_APP_ID, user, 3600, now),
            };
            Ok(format!("Bearer {token}").into_bytes())
        })
        .collect()
}

/// Mean time of one `authenticate` over `headers`, each once; every one must name a user.
async fn per_call(auth: &Auth, headers: &[Vec<u8>]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for header in headers {
        let caller = auth.authenticate(Some(header)).await;
        anyhow::ensure!(caller.is_ok(), "b12: a benchmark token was refused: {caller:?}");
    }
    Ok(started.elapsed() / u32::try_from(headers.len().max(1)).unwrap_or(u32::MAX))
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}
