//! Unit tests of [`Auth::authenticate`]: the bearer scheme, service tokens before user tokens,
//! mode none ignoring credentials, and what is taken on trust once verified.

use super::*;
use crate::config::{ServiceToken, UserSigSettings};
use crate::domain::UserId;
use crate::publish::tencent::usersig as sig;
use crate::secret::Secret;

const KEY: &str = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e";
const APP: u64 = 1_400_000_000;
const SERVICE_TOKEN: &str = "gateway-token-0123456789abcdef-xyz";

async fn usersig_auth() -> Auth {
    let settings = AuthSettings {
        mode: AuthMode::UserSig(UserSigSettings { sdk_app_id: APP, secret_key: Secret::new(KEY) }),
        service_tokens: vec![ServiceToken { name: "gateway".into(), token: Secret::new(SERVICE_TOKEN) }],
        per_user_commands_per_sec: 2,
        ..AuthSettings::default()
    };
    Auth::from_settings(&settings, reqwest::Client::new()).await.expect("auth")
}

fn header(value: &str) -> Option<Vec<u8>> {
    Some(value.as_bytes().to_vec())
}

#[tokio::test]
async fn a_bearer_token_names_the_user_or_the_service() {
    let auth = usersig_auth().await;
    let alice = sig::generate(KEY, APP, "alice", 3600, sig::system_now_secs());
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let caller = auth.authenticate(header(&format!("{scheme} {alice}")).as_deref()).await;
        assert_eq!(caller, Ok(Caller::User(UserId::parse("alice").unwrap())), "{scheme}");
    }
    let gateway = auth.authenticate(header(&format!("Bearer {SERVICE_TOKEN}")).as_deref()).await;
    assert_eq!(gateway, Ok(Caller::Service("gateway".into())));
    assert!(!auth.is_anonymous());
    assert!(auth.public_reads());
}

#[tokio::test]
async fn no_or_unreadable_credentials_are_refused_with_their_reason() {
    let auth = usersig_auth().await;
    let refused = |reason| Err(AuthError::Unauthenticated(reason));
    assert_eq!(auth.authenticate(None).await, refused(Reason::Missing));
    for bad in ["Basic abc", "Bearer", "Bearer ", "Bearer a b", "Bearerxyz"] {
        assert_eq!(auth.authenticate(header(bad).as_deref()).await, refused(Reason::Malformed), "{bad:?}");
    }
    assert_eq!(auth.authenticate(Some(b"Bearer \xff\xfe")).await, refused(Reason::Malformed));
    let error = AuthError::Unauthenticated(Reason::Missing);
    assert!(!error.token_was_given());
    assert!(AuthError::Unauthenticated(Reason::Expired).token_was_given());
}

#[tokio::test]
async fn mode_none_ignores_credentials_and_limits_nobody() {
    let auth = Auth::default();
    assert!(auth.is_anonymous());
    assert_eq!(auth.authenticate(None).await, Ok(Caller::Anonymous));
    assert_eq!(auth.authenticate(header("Bearer whatever").as_deref()).await, Ok(Caller::Anonymous));
    for _ in 0..100 {
        auth.check_rate(&Caller::Anonymous).expect("no limit");
    }
}

#[tokio::test]
async fn the_rate_limit_counts_users_but_not_services() {
    let auth = usersig_auth().await;
    let alice = Caller::User(UserId::parse("alice").unwrap());
    auth.check_rate(&alice).expect("1");
    auth.check_rate(&alice).expect("2");
    assert_eq!(auth.check_rate(&alice).map_err(|e| e.reason()), Err(Reason::RateLimited));
    for _ in 0..10 {
        auth.check_rate(&Caller::Service("gateway".into())).expect("services are not limited");
    }
}

#[test]
fn identities_keep_users_and_services_apart() {
    assert_eq!(Caller::Anonymous.identity(), None);
    assert_eq!(Caller::User(UserId::parse("gateway").unwrap()).identity().as_deref(), Some("user:gateway"));
    assert_eq!(Caller::Service("gateway".into()).identity().as_deref(), Some("service:gateway"));
    assert!(Reason::ALL.iter().all(|r| !r.as_str().is_empty()));
}

#[tokio::test]
async fn a_token_taken_on_trust_still_expires_when_it_says() {
    let auth = usersig_auth().await;
    let now = sig::system_now_secs();
    // Valid through now + 2 (Tencent: expired once now > time + expire).
    let short = sig::generate(KEY, APP, "alice", 3, now - 1);
    let bearer = header(&format!("Bearer {short}"));
    let alice = Ok(Caller::User(UserId::parse("alice").unwrap()));
    assert_eq!(auth.authenticate(bearer.as_deref()).await, alice);
    assert_eq!(auth.inner.verified.len(), 1, "kept once verified");
    assert_eq!(auth.authenticate(bearer.as_deref()).await, alice, "the same token again, taken on trust");
    tokio::time::sleep(std::time::Duration::from_millis(3_100)).await;
    assert_eq!(
        auth.authenticate(bearer.as_deref()).await,
        Err(AuthError::Unauthenticated(Reason::Expired)),
        "trust never outlives the token"
    );
    assert_eq!(auth.inner.verified.len(), 0);
}

#[tokio::test]
async fn a_token_that_failed_is_never_kept_and_is_refused_again() {
    let auth = usersig_auth().await;
    let forged = sig::generate("another-key", APP, "alice", 3600, sig::system_now_secs());
    for _ in 0..2 {
        let refused = auth.authenticate(header(&format!("Bearer {forged}")).as_deref()).await;
        assert_eq!(refused, Err(AuthError::Unauthenticated(Reason::BadSignature)));
    }
    assert_eq!(auth.inner.verified.len(), 0);
}
