//! Unit tests of the JWT verifier with tokens made by `jsonwebtoken` itself (HS256, and the
//! HS-with-the-public-key attack); the independent tokens (PyJWT, RS256, a JWKS) are the
//! integration tests'.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{EncodingKey, Header, encode, get_current_timestamp};
use serde_json::{Value, json};

use super::*;
use crate::secret::Secret;

const SECRET: &str = "an-hs256-key-of-at-least-32-bytes!!";
const PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAkcResTAEDKCs8k2Cujau
QpK9kdLL/rrQUeuQEpSLdlCyQ7vauqj8ZM4JLRFgZ/utzB9jtVbcy9mZ+k8kTo37
xMuPNjgHKN+1y3N8cuxuGSMwAOo4P0b5V5fPwJO+FdLU0HLlTYor/XOpj+ACVhLV
ux4zXfF4xYZpQ2Goxq0n035lyMWw8J1Ah8YGwvF5t2un94SvFZNypyhGHoYG7gTC
cx895Uy1Tb+KiWFhDcHGvfjirqFeJSqpCIc7bWl2fr5fytJf/+W21FFAmN40YKCd
MScLZfET88OOJFtY+BB1ctXs4wJ345LwmdhnGLRzpEruZWGOPp6bmFyPlgx9q50z
1wIDAQAB
-----END PUBLIC KEY-----
";

fn settings(algorithms: &[Algorithm]) -> JwtSettings {
    JwtSettings {
        algorithms: algorithms.to_vec(),
        secret: Some(Secret::new(SECRET)),
        public_key_file: None,
        jwks_url: None,
        jwks_refresh: Duration::from_secs(600),
        issuer: Some("https://issuer.test".into()),
        audience: Some("room-service".into()),
        user_claim: "sub".into(),
        leeway: Duration::from_secs(30),
    }
}

fn verifier(settings: &JwtSettings) -> JwtVerifier {
    JwtVerifier::without_jwks(settings).expect("verifier")
}

fn claims(overrides: Value) -> Value {
    let now = get_current_timestamp();
    let mut claims =
        json!({"sub": "alice", "iss": "https://issuer.test", "aud": "room-service", "exp": now + 300});
    for (key, value) in overrides.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(key);
        } else {
            claims[key] = value.clone();
        }
    }
    claims
}

fn hs(alg: Algorithm, key: &[u8], claims: &Value) -> String {
    encode(&Header::new(alg), claims, &EncodingKey::from_secret(key).unwrap()).unwrap()
}

async fn check(verifier: &JwtVerifier, token: &str) -> Result<String, Reason> {
    verifier.verify(token).await.map(|u| u.user.as_str().to_owned())
}

#[tokio::test]
async fn a_valid_token_names_its_user() {
    let v = verifier(&settings(&[Algorithm::HS256]));
    assert_eq!(
        check(&v, &hs(Algorithm::HS256, SECRET.as_bytes(), &claims(json!({})))).await,
        Ok("alice".into())
    );
    let mut custom = settings(&[Algorithm::HS256]);
    custom.user_claim = "uid".into();
    let token = hs(Algorithm::HS256, SECRET.as_bytes(), &claims(json!({"uid": "bob"})));
    assert_eq!(check(&verifier(&custom), &token).await, Ok("bob".into()));
}

#[tokio::test]
async fn every_bad_token_is_refused_with_its_reason() {
    let v = verifier(&settings(&[Algorithm::HS256]));
    let now = get_current_timestamp();
    let key = SECRET.as_bytes();
    let cases = [
        ("expired", hs(Algorithm::HS256, key, &claims(json!({"exp": now - 60}))), Reason::Expired),
        ("no exp", hs(Algorithm::HS256, key, &claims(json!({"exp": null}))), Reason::Claim),
        ("not yet valid", hs(Algorithm::HS256, key, &claims(json!({"nbf": now + 120}))), Reason::NotYetValid),
        (
            "wrong issuer",
            hs(Algorithm::HS256, key, &claims(json!({"iss": "https://evil.test"}))),
            Reason::WrongIssuer,
        ),
        ("no issuer", hs(Algorithm::HS256, key, &claims(json!({"iss": null}))), Reason::WrongIssuer),
        (
            "wrong audience",
            hs(Algorithm::HS256, key, &claims(json!({"aud": "other"}))),
            Reason::WrongAudience,
        ),
        (
            "another key",
            hs(Algorithm::HS256, b"another-key-of-at-least-32-bytes!!!", &claims(json!({}))),
            Reason::BadSignature,
        ),
        ("alg not accepted", hs(Algorithm::HS384, key, &claims(json!({}))), Reason::Algorithm),
        ("no user", hs(Algorithm::HS256, key, &claims(json!({"sub": null}))), Reason::Claim),
        ("bad user id", hs(Algorithm::HS256, key, &claims(json!({"sub": "a b"}))), Reason::Claim),
        ("numeric user", hs(Algorithm::HS256, key, &claims(json!({"sub": 7}))), Reason::Claim),
        ("garbage", "garbage".to_owned(), Reason::Malformed),
        ("three dots", "a.b.c".to_owned(), Reason::Malformed),
    ];
    for (name, token, reason) in cases {
        assert_eq!(check(&v, &token).await, Err(reason), "{name}");
    }
}

#[tokio::test]
async fn leeway_forgives_a_little_clock_skew_only() {
    let v = verifier(&settings(&[Algorithm::HS256]));
    let now = get_current_timestamp();
    let token = hs(Algorithm::HS256, SECRET.as_bytes(), &claims(json!({"exp": now - 10, "nbf": now + 10})));
    assert_eq!(check(&v, &token).await, Ok("alice".into()), "inside the 30 s leeway");
}

#[tokio::test]
async fn a_tampered_payload_and_alg_none_are_refused() {
    let v = verifier(&settings(&[Algorithm::HS256]));
    let token = hs(Algorithm::HS256, SECRET.as_bytes(), &claims(json!({})));
    let parts: Vec<&str> = token.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(claims(json!({"sub": "mallory"})).to_string());
    assert_eq!(check(&v, &format!("{}.{forged}.{}", parts[0], parts[2])).await, Err(Reason::BadSignature));
    let none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    assert_eq!(check(&v, &format!("{none}.{}.", parts[1])).await, Err(Reason::Algorithm));
    let garbage = URL_SAFE_NO_PAD.encode("not json");
    assert_eq!(check(&v, &format!("{garbage}.{}.", parts[1])).await, Err(Reason::Malformed));
}

#[tokio::test]
async fn an_hs256_token_keyed_with_the_public_key_is_refused() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), PUBLIC_PEM).unwrap();
    let mut rs = settings(&[Algorithm::RS256]);
    rs.secret = None;
    rs.public_key_file = Some(file.path().to_owned());
    let v = verifier(&rs);
    let token = hs(Algorithm::HS256, PUBLIC_PEM.as_bytes(), &claims(json!({})));
    assert_eq!(check(&v, &token).await, Err(Reason::Algorithm));
    // Even with HS256 accepted too, an HS token is checked with the secret only.
    let mut both = rs.clone();
    both.algorithms = vec![Algorithm::RS256, Algorithm::HS256];
    both.secret = Some(Secret::new(SECRET));
    assert_eq!(check(&verifier(&both), &token).await, Err(Reason::BadSignature));
}

#[test]
fn a_pem_file_of_the_wrong_kind_fails_setup_naming_the_key() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), PUBLIC_PEM).unwrap();
    let mut es = settings(&[Algorithm::ES256]);
    es.secret = None;
    es.public_key_file = Some(file.path().to_owned());
    let error = JwtVerifier::without_jwks(&es).expect_err("an RSA key for ES256");
    assert_eq!(error.key, "auth.jwt.public_key_file");
    es.public_key_file = Some("/nonexistent/key.pem".into());
    assert_eq!(JwtVerifier::without_jwks(&es).expect_err("missing file").key, "auth.jwt.public_key_file");
}
