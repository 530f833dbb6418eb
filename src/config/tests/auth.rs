//! Unit tests of the `auth` rules (SPEC §12.3): modes and what each needs, the anonymous
//! listener rule, service tokens, and secrets kept out of messages and `config check`.

use std::time::Duration;

use jsonwebtoken::Algorithm;

use super::{IM_ON, fails_on, load_yaml, ok, refuses};
use crate::config::*;

const SECRET: &str = "an-hs256-key-of-at-least-32-bytes!!";
const TOKEN: &str = "gateway-token-0123456789abcdef-xyz";

fn jwt_of(settings: &Settings) -> &JwtSettings {
    match &settings.auth.mode {
        AuthMode::Jwt(jwt) => jwt,
        other => panic!("expected mode jwt, got {other:?}"),
    }
}

#[test]
fn auth_defaults_to_none_with_public_reads_and_no_limit() {
    let s = ok("");
    assert_eq!(s.auth, AuthSettings::default());
    assert_eq!(s.auth.mode, AuthMode::None);
    assert!(s.auth.public_reads);
    assert_eq!(s.auth.per_user_commands_per_sec, 0);
    assert!(s.auth.service_tokens.is_empty());
}

#[test]
fn mode_none_on_a_non_loopback_listener_refuses_to_start_unless_anonymous_is_allowed() {
    let message = refuses("http: {listen: \"0.0.0.0:8080\"}\n", "auth.mode");
    assert!(message.contains("auth.allow_anonymous"), "{message}");
    assert!(message.contains("ROOM_SERVICE__AUTH__ALLOW_ANONYMOUS"), "{message}");
    let message = refuses("grpc: {listen: \"0.0.0.0:50051\"}\n", "auth.mode");
    assert!(message.contains("grpc.listen"), "{message}");
    let s = ok("http: {listen: \"0.0.0.0:8080\"}\nauth: {allow_anonymous: true}\n");
    assert!(s.auth.allow_anonymous);
    // An authenticating mode may listen anywhere.
    let yaml = "http: {listen: \"0.0.0.0:8080\"}\nauth: {mode: jwt, jwt: {algorithms: [HS256]}}\n";
    let s = load_yaml(yaml, &[("ROOM_SERVICE__AUTH__JWT__SECRET", SECRET)]).expect("jwt anywhere");
    assert_eq!(jwt_of(&s).algorithms, [Algorithm::HS256]);
}

#[test]
fn an_unknown_mode_fails_naming_the_key() {
    let message = refuses("auth: {mode: oauth}\n", "auth.mode");
    assert!(message.contains("none, jwt, usersig"), "{message}");
}

#[test]
fn jwt_takes_its_keys_from_the_env_and_its_defaults_otherwise() {
    let yaml = "auth:\n  mode: jwt\n  jwt: {algorithms: \"HS256, HS512\", issuer: iss, audience: aud}\n";
    let s = load_yaml(yaml, &[("ROOM_SERVICE__AUTH__JWT__SECRET", SECRET)]).expect("valid");
    let jwt = jwt_of(&s);
    assert_eq!(jwt.algorithms, [Algorithm::HS256, Algorithm::HS512]);
    assert_eq!(jwt.secret.as_ref().map(crate::secret::Secret::expose), Some(SECRET));
    assert_eq!((jwt.issuer.as_deref(), jwt.audience.as_deref()), (Some("iss"), Some("aud")));
    assert_eq!(jwt.user_claim, "sub");
    assert_eq!(jwt.leeway, Duration::from_secs(30));
    assert_eq!(jwt.jwks_refresh, Duration::from_secs(600));
    assert!(!format!("{s:?}").contains(SECRET), "Debug shows the secret");
}

#[test]
fn every_accepted_algorithm_needs_its_key_and_no_key_sits_unused() {
    let hs = "auth: {mode: jwt, jwt: {algorithms: [HS256]}}\n";
    refuses(hs, "auth.jwt.secret");
    fails_on(hs, &[("ROOM_SERVICE__AUTH__JWT__SECRET", "short")], "auth.jwt.secret");
    let rs = "auth: {mode: jwt, jwt: {algorithms: [RS256]}}\n";
    refuses(rs, "auth.jwt.public_key_file");
    // An HS secret beside only public-key algorithms is refused, not ignored.
    let message = fails_on(
        "auth: {mode: jwt, jwt: {algorithms: [RS256], jwks_url: \"http://127.0.0.1:1/jwks\"}}\n",
        &[("ROOM_SERVICE__AUTH__JWT__SECRET", SECRET)],
        "auth.jwt.secret",
    );
    assert!(!message.contains(SECRET), "{message}");
    refuses(
        "auth: {mode: jwt, jwt: {algorithms: [RS256], public_key_file: k.pem, jwks_url: \"http://h/j\"}}\n",
        "auth.jwt.jwks_url",
    );
    refuses("auth: {mode: jwt, jwt: {algorithms: [RS256], jwks_url: \"ftp://h/j\"}}\n", "auth.jwt.jwks_url");
    fails_on(
        "auth: {mode: jwt, jwt: {algorithms: [HS256], public_key_file: k.pem}}\n",
        &[("ROOM_SERVICE__AUTH__JWT__SECRET", SECRET)],
        "auth.jwt.public_key_file",
    );
    let s = ok("auth: {mode: jwt, jwt: {algorithms: [ES256, EdDSA], public_key_file: \" k.pem \"}}\n");
    assert_eq!(jwt_of(&s).public_key_file.as_deref(), Some(std::path::Path::new("k.pem")));
}

#[test]
fn unknown_algorithms_and_none_are_refused() {
    for bad in ["[none]", "[HS255]", "[]"] {
        let yaml = format!("auth: {{mode: jwt, jwt: {{algorithms: {bad}, public_key_file: k.pem}}}}\n");
        refuses(&yaml, "auth.jwt.algorithms");
    }
}

#[test]
fn jwt_durations_and_claim_are_checked() {
    let base = "auth: {mode: jwt, jwt: {algorithms: [RS256], public_key_file: k.pem";
    refuses(&format!("{base}, jwks_refresh: \"1s\"}}}}\n"), "auth.jwt.jwks_refresh");
    refuses(&format!("{base}, leeway: \"soon\"}}}}\n"), "auth.jwt.leeway");
    refuses(&format!("{base}, user_claim: \" \"}}}}\n"), "auth.jwt.user_claim");
    assert_eq!(jwt_of(&ok(&format!("{base}, leeway: \"0s\"}}}}\n"))).leeway, Duration::ZERO);
}

#[test]
fn usersig_needs_im_and_takes_its_application_and_key() {
    let message = refuses("auth: {mode: usersig}\n", "auth.mode");
    assert!(message.contains("tencent_im.enabled"), "{message}");
    let s = load_yaml(
        &format!("auth: {{mode: usersig}}\n{IM_ON}"),
        &[("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", "im-key")],
    )
    .expect("valid");
    match &s.auth.mode {
        AuthMode::UserSig(sig) => {
            assert_eq!((sig.sdk_app_id, sig.secret_key.expose()), (1_400_000_000, "im-key"));
        }
        other => panic!("expected usersig, got {other:?}"),
    }
}

#[test]
fn service_tokens_are_parsed_checked_and_never_echoed() {
    let yaml = "auth: {mode: jwt, jwt: {algorithms: [RS256], public_key_file: k.pem}}\n";
    let other = format!("{TOKEN}-2");
    let tokens = format!(" gateway={TOKEN} , batch.hb={other},");
    let s = load_yaml(yaml, &[("ROOM_SERVICE__AUTH__SERVICE_TOKENS", &tokens)]).expect("valid");
    let names: Vec<_> = s.auth.service_tokens.iter().map(|t| (t.name.as_str(), t.token.expose())).collect();
    assert_eq!(names, [("gateway", TOKEN), ("batch.hb", other.as_str())]);
    for bad in [
        format!("gateway:{TOKEN}"),
        "gateway=tiny-tok".to_owned(),
        format!("bad name={TOKEN}"),
        format!("a={TOKEN},a={other}"),
        format!("a={TOKEN},b={TOKEN}"),
    ] {
        let message = fails_on(yaml, &[("ROOM_SERVICE__AUTH__SERVICE_TOKENS", &bad)], "auth.service_tokens");
        assert!(!message.contains(TOKEN) && !message.contains("tiny-tok"), "a token is echoed: {message}");
    }
}

#[test]
fn a_per_user_limit_needs_a_caller() {
    refuses("auth: {per_user_commands_per_sec: 5}\n", "auth.per_user_commands_per_sec");
    let yaml =
        "auth: {mode: jwt, per_user_commands_per_sec: 5, jwt: {algorithms: [RS256], public_key_file: k}}\n";
    assert_eq!(ok(yaml).auth.per_user_commands_per_sec, 5);
}

#[test]
fn config_check_redacts_the_service_tokens_and_the_jwt_secret() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    std::io::Write::write_all(&mut file, b"auth: {mode: jwt, jwt: {algorithms: [HS256]}}\n").unwrap();
    let (_, yaml) = crate::config::check_with_env(
        file.path(),
        vec![
            ("ROOM_SERVICE__AUTH__SERVICE_TOKENS".to_owned(), format!("gateway={TOKEN}")),
            ("ROOM_SERVICE__AUTH__JWT__SECRET".to_owned(), SECRET.to_owned()),
        ],
    )
    .expect("valid");
    for secret in [TOKEN, SECRET] {
        assert!(!yaml.contains(secret), "{secret} printed:\n{yaml}");
    }
    assert!(yaml.contains("service_tokens: <redacted>"), "{yaml}");
    assert!(yaml.contains("secret: <redacted>"), "{yaml}");
    assert!(yaml.contains("mode: jwt"), "{yaml}");
}
