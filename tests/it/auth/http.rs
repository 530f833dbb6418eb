//! The HTTP API under `auth.mode: jwt` and `usersig`: every bad credential answers 401 and
//! writes nothing, a caller acts only as itself (403 naming the field), a service token acts
//! for anyone, the caller is part of a command's identity, reads are public unless configured
//! otherwise, and a burst over the per-caller limit answers 429 for that caller only.

use room_service_fakes::fake_wallet::{FakeWallet, FakeWalletOptions};
use serde_json::{Value, json};

use super::*;
use crate::support::app::{SDK_APP_ID, SECRET_KEY, TestApp, fake_im, settings};
use crate::support::{TestDb, backends};

fn create(command_id: &str, room: &str, owner: &str) -> Value {
    json!({"command_id": command_id, "room_id": room, "owner_id": owner, "title": "t"})
}

fn join(command_id: &str, user: &str) -> Value {
    json!({"command_id": command_id, "user_id": user})
}

fn gift(command_id: &str, sender: &str) -> Value {
    json!({"command_id": command_id, "sender_id": sender, "receiver_id": "alice", "gift_id": "rose",
           "count": 2, "unit_value": 5})
}

/// Tokens for alice, bob and carol, and every bad one of the acceptance list.
fn tokens() -> Made {
    make(json!({"jwts": {
        "alice": rs256("alice"),
        "bob": rs256("bob"),
        "carol": rs256("carol"),
        "expired": {"alg": "RS256", "key": "a", "kid": "ka", "claims": with(claims("alice"), json!({"exp": -120}))},
        "not_yet_valid": {"alg": "RS256", "key": "a", "kid": "ka", "claims": with(claims("alice"), json!({"nbf": 120}))},
        "wrong_issuer": {"alg": "RS256", "key": "a", "kid": "ka", "claims": with(claims("alice"), json!({"iss": "https://evil.test"}))},
        "wrong_audience": {"alg": "RS256", "key": "a", "kid": "ka", "claims": with(claims("alice"), json!({"aud": "another-service"}))},
        "another_key": {"alg": "RS256", "key": "b", "kid": "ka", "claims": claims("alice")},
        "unknown_kid": {"alg": "RS256", "key": "b", "kid": "kb", "claims": claims("alice")},
        "alg_none": {"alg": "none", "key": "none", "claims": claims("alice")},
        "hs256_with_public_key": {"alg": "HS256", "key": "public_as_hs", "claims": claims("alice")},
    }}))
}

/// The bad tokens and the reason each is counted under.
const BAD: [(&str, &str); 9] = [
    ("expired", "expired"),
    ("not_yet_valid", "not_yet_valid"),
    ("wrong_issuer", "wrong_issuer"),
    ("wrong_audience", "wrong_audience"),
    ("another_key", "bad_signature"),
    ("unknown_kid", "unknown_kid"),
    ("alg_none", "algorithm"),
    ("hs256_with_public_key", "algorithm"),
    ("tampered", "bad_signature"),
];

/// A payload swapped for another user's under alice's signature.
fn tampered(made: &Made) -> String {
    let alice: Vec<&str> = made.token("alice").split('.').collect();
    let bob: Vec<&str> = made.token("bob").split('.').collect();
    format!("{}.{}.{}", alice[0], bob[1], alice[2])
}

/// A service verifying RS256 tokens against a loopback JWKS, paying gifts through `wallet`.
async fn start(db: &TestDb, made: &Made, wallet: &FakeWallet, more: &[(&str, &str)]) -> TestApp {
    let jwks_url = serve_jwks(made.jwks.clone()).await;
    let overrides = jwt_overrides(&jwks_url);
    let base_url = wallet.base_url();
    let mut all = pairs(&overrides, &[("wallet.enabled", "true"), ("wallet.base_url", &base_url)]);
    all.extend_from_slice(more);
    TestApp::start(settings(db.url(), None, &all)).await
}

async fn wallet() -> FakeWallet {
    FakeWallet::start(FakeWalletOptions { initial_balance: 10_000 }).await
}

#[tokio::test]
async fn every_bad_jwt_answers_401_and_writes_nothing() {
    let made = tokens();
    let tampered = tampered(&made);
    for db in backends().await {
        let wallet = wallet().await;
        let app = start(&db, &made, &wallet, &[]).await;
        assert_eq!(
            post(&app, "/v1/rooms", create("c1", "r1", "alice"), Some(made.token("alice"))).await.status,
            200
        );
        let before = written(&db).await;

        let none = post(&app, "/v1/rooms/r1/gifts", gift("g1", "alice"), None).await;
        assert_eq!((none.status, none.code()), (401, "unauthenticated"), "{db}: {none:?}");
        assert_eq!(none.challenge.as_deref(), Some("Bearer"), "{db}: no token, no error attribute");
        let expired_before = refusals(&app, "expired").await;
        for (name, reason) in BAD {
            let token = if name == "tampered" { tampered.as_str() } else { made.token(name) };
            let answer = post(&app, "/v1/rooms/r1/gifts", gift("g1", "alice"), Some(token)).await;
            assert_eq!((answer.status, answer.code()), (401, "unauthenticated"), "{db}: {name}: {answer:?}");
            assert_eq!(answer.challenge.as_deref(), Some(r#"Bearer error="invalid_token""#), "{db}: {name}");
            assert!(!answer.message().contains(token), "{db}: {name}: the token is echoed");
            assert!(refusals(&app, reason).await >= 1.0, "{db}: {name} counted as {reason}");
        }
        for garbage in ["garbage", "a.b.c", "eJy%%%"] {
            let answer = post(&app, "/v1/rooms/r1/gifts", gift("g1", "alice"), Some(garbage)).await;
            assert_eq!(answer.status, 401, "{db}: {garbage:?}");
        }
        let basic = app.http.post(format!("{}/v1/rooms/r1/gifts", app.base)).basic_auth("alice", Some("pw"));
        assert_eq!(basic.json(&gift("g1", "alice")).send().await.unwrap().status(), 401, "{db}: Basic");
        assert!(refusals(&app, "expired").await > expired_before, "{db}: counted");
        assert_eq!(written(&db).await, before, "{db}: nothing written for a refused request");
        assert!(wallet.debits().is_empty(), "{db}: nothing debited");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_user_acts_only_as_itself_and_a_service_for_anyone() {
    let made = tokens();
    for db in backends().await {
        let wallet = wallet().await;
        let app = start(&db, &made, &wallet, &[]).await;
        let (alice, bob) = (Some(made.token("alice")), Some(made.token("bob")));
        assert_eq!(post(&app, "/v1/rooms", create("c1", "r1", "alice"), alice).await.status, 200, "{db}");
        assert_eq!(post(&app, "/v1/rooms/r1/join", join("j1", "bob"), bob).await.status, 200, "{db}");
        let before = written(&db).await;

        let refused = [
            ("/v1/rooms", create("c2", "r2", "alice"), "owner_id"),
            ("/v1/rooms/r1/join", join("j2", "alice"), "user_id"),
            ("/v1/rooms/r1/leave", join("l1", "alice"), "user_id"),
            ("/v1/rooms/r1/gifts", gift("g1", "alice"), "sender_id"),
            ("/v1/rooms/r1/close", json!({"command_id": "x1"}), "actor_id"),
            ("/v1/rooms/r1/heartbeat", json!({"user_id": "alice"}), "user_id"),
            ("/v1/rooms/r1/heartbeats", json!({"user_ids": ["bob"]}), "user_ids"),
        ];
        for (path, body, field) in refused {
            let answer = post(&app, path, body, bob).await;
            assert_eq!((answer.status, answer.code()), (403, "forbidden"), "{db}: {path}: {answer:?}");
            assert!(answer.message().starts_with(&format!("{field}:")), "{db}: {path}: {}", answer.message());
        }
        assert_eq!(written(&db).await, before, "{db}: nothing written for a refused request");
        assert!(wallet.debits().is_empty(), "{db}: a gift in another's name debits nobody");

        // Own actions.
        assert_eq!(post(&app, "/v1/rooms/r1/gifts", gift("g2", "bob"), bob).await.status, 200, "{db}");
        assert_eq!(wallet.balance("bob"), 10_000 - 10, "{db}: bob paid for his own gift");
        assert_eq!(post(&app, "/v1/rooms/r1/heartbeat", json!({"user_id": "bob"}), bob).await.status, 204);
        // The service acts for anyone, the batch heartbeat included.
        let gateway = Some(SERVICE_TOKEN);
        assert_eq!(post(&app, "/v1/rooms/r1/join", join("j3", "carol"), gateway).await.status, 200, "{db}");
        let beats =
            post(&app, "/v1/rooms/r1/heartbeats", json!({"user_ids": ["bob", "carol"]}), gateway).await;
        assert_eq!((beats.status, beats.body["alive"].as_u64()), (200, Some(2)), "{db}: {beats:?}");
        let wrong_service = format!("{SERVICE_TOKEN}x");
        assert_eq!(
            post(&app, "/v1/rooms/r1/join", join("j4", "dave"), Some(&wrong_service)).await.status,
            401
        );
        // Only the owner closes.
        let closed = post(&app, "/v1/rooms/r1/close", json!({"command_id": "x2"}), alice).await;
        assert_eq!(closed.status, 200, "{db}: {closed:?}");
        let gone = post(&app, "/v1/rooms/nowhere/close", json!({"command_id": "x3"}), bob).await;
        assert_eq!(gone.code(), "room_not_found", "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_command_id_used_by_another_caller_is_another_command_never_the_first_answer() {
    let made = tokens();
    let db = TestDb::sqlite().await;
    let wallet = wallet().await;
    let app = start(&db, &made, &wallet, &[]).await;
    let (alice, carol) = (Some(made.token("alice")), Some(made.token("carol")));
    assert_eq!(post(&app, "/v1/rooms", create("c1", "r1", "alice"), alice).await.status, 200);
    // The gateway joins carol; carol sending the very same command is another caller's: its
    // own command (a no-op, she is a member), never the gateway's answer.
    let first = post(&app, "/v1/rooms/r1/join", join("j1", "carol"), Some(SERVICE_TOKEN)).await;
    assert_eq!(first.status, 200);
    let hers = post(&app, "/v1/rooms/r1/join", join("j1", "carol"), carol).await;
    assert_eq!(
        (hers.status, hers.body["replayed"].as_bool(), hers.body["applied"].as_bool()),
        (200, Some(false), Some(false)),
        "{hers:?}"
    );
    let again = post(&app, "/v1/rooms/r1/join", join("j1", "carol"), Some(SERVICE_TOKEN)).await;
    assert_eq!(
        (again.status, again.body["replayed"].as_bool()),
        (200, Some(true)),
        "the same caller replays"
    );
    // alice closes; bob repeating her close is refused before the log is asked.
    assert_eq!(post(&app, "/v1/rooms/r1/close", json!({"command_id": "x1"}), alice).await.status, 200);
    let bob = post(&app, "/v1/rooms/r1/close", json!({"command_id": "x1"}), Some(made.token("bob"))).await;
    assert_eq!(bob.status, 403, "{bob:?}");
    app.stop().await;
}

#[tokio::test]
async fn reads_are_public_unless_public_reads_is_off() {
    let made = tokens();
    let db = TestDb::sqlite().await;
    let wallet = wallet().await;
    let app = start(&db, &made, &wallet, &[]).await;
    assert_eq!(
        post(&app, "/v1/rooms", create("c1", "r1", "alice"), Some(made.token("alice"))).await.status,
        200
    );
    assert_eq!(call(&app, "GET", "/v1/rooms/r1", None, None).await.status, 200);
    assert_eq!(call(&app, "GET", "/v1/rooms/r1/members", None, None).await.status, 200);
    assert_eq!(call(&app, "GET", "/v1/rooms/r1/events", None, None).await.status, 200);
    app.stop().await;

    let app = start(&db, &made, &wallet, &[("auth.public_reads", "false")]).await;
    for path in ["/v1/rooms/r1", "/v1/rooms/r1/members", "/v1/rooms/r1/events"] {
        let anonymous = call(&app, "GET", path, None, None).await;
        assert_eq!((anonymous.status, anonymous.code()), (401, "unauthenticated"), "{path}");
        assert_eq!(call(&app, "GET", path, None, Some(made.token("expired"))).await.status, 401, "{path}");
        assert_eq!(call(&app, "GET", path, None, Some(made.token("bob"))).await.status, 200, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_burst_over_the_per_caller_limit_answers_429_for_that_caller_only() {
    let made = tokens();
    let db = TestDb::sqlite().await;
    let wallet = wallet().await;
    let app = start(&db, &made, &wallet, &[("auth.per_user_commands_per_sec", "2")]).await;
    let (alice, bob) = (Some(made.token("alice")), Some(made.token("bob")));
    assert_eq!(post(&app, "/v1/rooms", create("c1", "r1", "alice"), alice).await.status, 200);
    let hb = || json!({"user_id": "alice"});
    // The room's owner is no member: the heartbeat is refused by the room, after the limit.
    assert_eq!(post(&app, "/v1/rooms/r1/heartbeat", hb(), alice).await.code(), "not_member");
    let limited = post(&app, "/v1/rooms/r1/heartbeat", hb(), alice).await;
    assert_eq!((limited.status, limited.code()), (429, "rate_limited"), "{limited:?}");
    let seconds: u64 = limited.retry_after.as_deref().expect("Retry-After").parse().expect("seconds");
    assert!((1..=1).contains(&seconds), "{seconds}");
    let before = written(&db).await;
    assert_eq!(post(&app, "/v1/rooms/r1/join", join("j1", "alice"), alice).await.status, 429);
    assert_eq!(written(&db).await, before, "a limited command writes nothing");
    assert_eq!(post(&app, "/v1/rooms/r1/join", join("j2", "bob"), bob).await.status, 200, "bob has his own");
    for i in 0..5 {
        let body = join(&format!("s{i}"), &format!("user{i}"));
        assert_eq!(
            post(&app, "/v1/rooms/r1/join", body, Some(SERVICE_TOKEN)).await.status,
            200,
            "service {i}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn hs256_tokens_verify_with_the_secret_only() {
    let made = make(json!({"jwts": {
        "alice": {"alg": "HS256", "key": "hs", "claims": claims("alice")},
        "other_secret": {"alg": "HS256", "key": "hs_other", "claims": claims("alice")},
        "rs256": rs256("alice"),
    }}));
    let db = TestDb::sqlite().await;
    let overrides = [
        ("auth.mode", "jwt"),
        ("auth.jwt.algorithms", "HS256"),
        ("auth.jwt.secret", HS_SECRET),
        ("auth.jwt.issuer", ISSUER),
        ("auth.jwt.audience", AUDIENCE),
    ];
    let app = TestApp::start(settings(db.url(), None, &overrides)).await;
    assert_eq!(
        post(&app, "/v1/rooms", create("c1", "r1", "alice"), Some(made.token("alice"))).await.status,
        200
    );
    for bad in ["other_secret", "rs256"] {
        let answer = post(&app, "/v1/rooms", create("c2", "r2", "alice"), Some(made.token(bad))).await;
        assert_eq!(answer.status, 401, "{bad}: {answer:?}");
    }
    assert_eq!(db.count("room_command_log").await, 1);
    app.stop().await;
}

#[tokio::test]
async fn a_pem_public_key_file_verifies_rs256() {
    let made = make(
        json!({"jwts": {"alice": rs256("alice"), "another_key": {"alg": "RS256", "key": "b", "claims": claims("alice")}}}),
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &made.public_pem).unwrap();
    let db = TestDb::sqlite().await;
    let path = file.path().to_str().unwrap();
    let overrides =
        [("auth.mode", "jwt"), ("auth.jwt.algorithms", "RS256"), ("auth.jwt.public_key_file", path)];
    let app = TestApp::start(settings(db.url(), None, &overrides)).await;
    assert_eq!(
        post(&app, "/v1/rooms", create("c1", "r1", "alice"), Some(made.token("alice"))).await.status,
        200
    );
    let other = post(&app, "/v1/rooms", create("c2", "r2", "alice"), Some(made.token("another_key"))).await;
    assert_eq!(other.status, 401, "{other:?}");
    app.stop().await;
}

#[tokio::test]
async fn usersigs_of_another_key_app_or_expired_answer_401() {
    let sig = |user: &str, app: u64, key: &str, age: u64| json!({"user": user, "sdk_app_id": app, "key": key, "expire": 3600, "age": age});
    let made = make(json!({"usersigs": {
        "alice": sig("alice", SDK_APP_ID, SECRET_KEY, 0),
        "another_key": sig("alice", SDK_APP_ID, "another-secret-key", 0),
        "another_app": sig("alice", SDK_APP_ID + 1, SECRET_KEY, 0),
        "expired": sig("alice", SDK_APP_ID, SECRET_KEY, 7200),
    }}));
    let im = fake_im().await;
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), Some(&im), &[("auth.mode", "usersig")])).await;
    assert_eq!(
        post(&app, "/v1/rooms", create("c1", "r1", "alice"), Some(made.token("alice"))).await.status,
        200
    );
    let as_bob = post(&app, "/v1/rooms", create("c2", "r2", "bob"), Some(made.token("alice"))).await;
    assert_eq!((as_bob.status, as_bob.code()), (403, "forbidden"));
    for bad in ["another_key", "another_app", "expired"] {
        let answer = post(&app, "/v1/rooms", create("c3", "r3", "alice"), Some(made.token(bad))).await;
        assert_eq!((answer.status, answer.code()), (401, "unauthenticated"), "{bad}: {answer:?}");
        assert_eq!(answer.challenge.as_deref(), Some(r#"Bearer error="invalid_token""#), "{bad}");
    }
    assert_eq!(db.count("room_command_log").await, 1, "only alice's own create");
    app.stop().await;
}
