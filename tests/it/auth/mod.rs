//! Authentication and authorization of the public API (SPEC §12.3), black box: the service
//! started in-process over real databases, tokens made by an independent implementation
//! (`tests/peer/tokens.py`: PyJWT with keys made by `cryptography`, UserSigs from Tencent's
//! official package), a JWKS served over loopback HTTP. Every refused request is checked to
//! have changed nothing: no command-log row, no outbox row, no wallet debit.

mod cluster;
mod grpc;
mod http;
mod startup;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::TestDb;
use crate::support::app::TestApp;

/// The HS256 key of the tests (`ROOM_SERVICE__AUTH__JWT__SECRET`).
pub const HS_SECRET: &str = "an-hs256-key-of-at-least-32-bytes!!";
/// The gateway's service token.
pub const SERVICE_TOKEN: &str = "gateway-token-0123456789abcdef-xyz";
/// The issuer and audience the service checks.
pub const ISSUER: &str = "https://issuer.test";
pub const AUDIENCE: &str = "room-service";

/// What the token maker made: the public key of key `a` (PEM and as a JWKS, kid `ka`) and the
/// tokens by name.
pub struct Made {
    pub public_pem: String,
    pub jwks: Value,
    tokens: HashMap<String, String>,
}

impl Made {
    /// The token made under `name`.
    pub fn token(&self, name: &str) -> &str {
        self.tokens.get(name).unwrap_or_else(|| panic!("no token {name} was made"))
    }
}

/// Runs the token maker on `spec` (see `tests/peer/tokens.py`).
pub fn make(spec: Value) -> Made {
    let mut spec = spec;
    spec["hs_secret"] = HS_SECRET.into();
    let mut child = Command::new("python3")
        .arg("tests/peer/tokens.py")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 must be installed");
    child.stdin.take().unwrap().write_all(spec.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "tokens.py failed (scripts/test.sh installs PyJWT and cryptography)");
    let made: Value = serde_json::from_slice(&output.stdout).expect("tokens.py answers JSON");
    let tokens = serde_json::from_value(made["tokens"].clone()).unwrap();
    Made { public_pem: made["public_pem"].as_str().unwrap().to_owned(), jwks: made["jwks"].clone(), tokens }
}

/// The claims of a token for `user` valid now (offsets in seconds, see `tokens.py`).
pub fn claims(user: &str) -> Value {
    json!({"sub": user, "iss": ISSUER, "aud": AUDIENCE, "exp": 300, "iat": 0})
}

/// An RS256 token of key `a` (kid `ka`) for `user`.
pub fn rs256(user: &str) -> Value {
    json!({"alg": "RS256", "key": "a", "kid": "ka", "claims": claims(user)})
}

/// `claims` with `changes` applied (a null removes a claim).
pub fn with(mut claims: Value, changes: Value) -> Value {
    for (key, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(key);
        } else {
            claims[key] = value.clone();
        }
    }
    claims
}

/// A JWKS endpoint over loopback serving `jwks`.
pub async fn serve_jwks(jwks: Value) -> String {
    let app = axum::Router::new().route("/jwks", axum::routing::get(move || async move { axum::Json(jwks) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/jwks")
}

/// The overrides of a service verifying RS256 tokens with the keys at `jwks_url`, checking
/// issuer and audience, with the gateway's service token.
pub fn jwt_overrides(jwks_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("auth.mode", "jwt".into()),
        ("auth.jwt.algorithms", "RS256".into()),
        ("auth.jwt.jwks_url", jwks_url.into()),
        ("auth.jwt.issuer", ISSUER.into()),
        ("auth.jwt.audience", AUDIENCE.into()),
        ("auth.jwt.leeway", "5s".into()),
        ("auth.service_tokens", format!("gateway={SERVICE_TOKEN}")),
    ]
}

/// Borrowed `(key, value)` pairs of `owned`, with `more`.
pub fn pairs<'a>(
    owned: &'a [(&'static str, String)],
    more: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    owned.iter().map(|(k, v)| (*k, v.as_str())).chain(more.iter().copied()).collect()
}

/// A request's answer: status, `WWW-Authenticate`, `Retry-After` and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub challenge: Option<String>,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or_default()
    }

    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

/// Sends `method path` with `body` (JSON, or none) and `token` as the bearer token.
pub async fn call(
    app: &TestApp,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> Answer {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = app.http.request(method, format!("{}{path}", app.base));
    if let Some(body) = body {
        request = request.json(&body);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("request");
    let header = |name| {
        response.headers().get(name).map(|v: &reqwest::header::HeaderValue| v.to_str().unwrap().to_owned())
    };
    let (challenge, retry_after) = (header("www-authenticate"), header("retry-after"));
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    Answer { status, challenge, retry_after, body }
}

/// POSTs `body` to `path` with `token`.
pub async fn post(app: &TestApp, path: &str, body: Value, token: Option<&str>) -> Answer {
    call(app, "POST", path, Some(body), token).await
}

/// What the database holds: command-log and outbox rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub commands: i64,
    pub outbox: i64,
}

pub async fn written(db: &TestDb) -> Written {
    Written { commands: db.count("room_command_log").await, outbox: db.count("room_outbox").await }
}

/// `room_auth_refusals_total{reason}` as the service's `/metrics` shows it.
pub async fn refusals(app: &TestApp, reason: &str) -> f64 {
    let (_, text) = app.admin_get("/metrics").await;
    let series = format!("room_auth_refusals_total{{reason=\"{reason}\"}} ");
    text.as_str()
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0.0, |value| value.trim().parse().unwrap())
}
