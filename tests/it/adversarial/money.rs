//! Money, one caller against another (SPEC §13.1): bob reuses alice's `command_id`s — while
//! hers are in flight, before she sends them (squatting), for gifts that commit and for gifts
//! that are refused — over real HTTP with JWT auth, the fake wallet over loopback HTTP, on
//! MariaDB and SQLite. Whatever the interleaving: each user's net debits equal the gifts that
//! user committed, every other debit is refunded, nobody gets another's answer, and an honest
//! caller's command is never refused because another used its id.
//!
//! The review this answers: bob's 9,999 × 9,999 gift committed without debiting bob, alice was
//! charged and answered 409, and squatted ids answered alice 409 for good.

use std::collections::BTreeMap;

use room_service_fakes::fake_wallet::{FakeWallet, FakeWalletOptions};
use serde_json::{Value, json};

use crate::auth::{Answer, Made, jwt_overrides, make, pairs, post, rs256, serve_jwks};
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

const BALANCE: u64 = 100_000_000;
/// Rounds of each interleaving.
const ROUNDS: usize = 12;

fn gift(command_id: &str, sender: &str, count: u32, unit_value: u32) -> Value {
    json!({"command_id": command_id, "sender_id": sender, "receiver_id": "alice", "gift_id": "rose",
           "count": count, "unit_value": unit_value})
}

async fn start(db: &TestDb, made: &Made, wallet: &FakeWallet) -> TestApp {
    let jwks_url = serve_jwks(made.jwks.clone()).await;
    let overrides = jwt_overrides(&jwks_url);
    let base_url = wallet.base_url();
    let all = pairs(&overrides, &[("wallet.enabled", "true"), ("wallet.base_url", &base_url)]);
    TestApp::start(settings(db.url(), None, &all)).await
}

/// Each user's money as the wallet holds it: debits kept (not refunded), per user.
fn kept_debits(wallet: &FakeWallet) -> BTreeMap<String, u64> {
    let mut kept = BTreeMap::new();
    for debit in wallet.debits().into_iter().filter(|d| !d.refunded) {
        *kept.entry(debit.user_id).or_insert(0) += debit.amount;
    }
    kept
}

/// Each sender's committed gifts, as the database holds them.
async fn committed_gifts(db: &TestDb) -> BTreeMap<String, u64> {
    let rows: Vec<(String, i64)> = match db.name() {
        "sqlite" => sqlx::query_as("SELECT user_id, total_value FROM room_gift_total WHERE room_id = 'r1'")
            .fetch_all(db.sqlite_pool())
            .await
            .unwrap(),
        _ => sqlx::query_as("SELECT user_id, total_value FROM room_gift_total WHERE room_id = 'r1'")
            .fetch_all(db.mysql_pool())
            .await
            .unwrap(),
    };
    rows.into_iter().filter(|(_, total)| *total > 0).map(|(user, total)| (user, total as u64)).collect()
}

fn is_honest_success(answer: &Answer) -> bool {
    answer.status == 200 && answer.body["applied"] == json!(true) && answer.body["replayed"] == json!(false)
}

#[tokio::test]
async fn another_callers_reused_command_ids_never_move_anyones_money_but_their_own() {
    let made =
        make(json!({"jwts": {"alice": rs256("alice"), "bob": rs256("bob"), "mallory": rs256("mallory")}}));
    for db in backends().await {
        let wallet = FakeWallet::start(FakeWalletOptions { initial_balance: BALANCE }).await;
        let app = start(&db, &made, &wallet).await;
        let (alice, bob, mallory) = (made.token("alice"), made.token("bob"), made.token("mallory"));
        let create = json!({"command_id": "c", "room_id": "r1", "owner_id": "alice", "title": "t"});
        assert_eq!(post(&app, "/v1/rooms", create, Some(alice)).await.status, 200, "{db}");
        for (user, token) in [("alice", alice), ("bob", bob)] {
            let join = json!({"command_id": format!("join-{user}"), "user_id": user});
            assert_eq!(post(&app, "/v1/rooms/r1/join", join, Some(token)).await.status, 200, "{db}");
        }
        // mallory is not a member: each of her gifts is refused after its debit, and refunded.

        let mut honest = Vec::new();
        for round in 0..ROUNDS {
            let id = format!("g-{round}");
            let alice_gift = post(&app, "/v1/rooms/r1/gifts", gift(&id, "alice", 2, 50), Some(alice));
            // bob's own gift under alice's id, mallory's refused gift under it too, all at once.
            let bob_gift = post(&app, "/v1/rooms/r1/gifts", gift(&id, "bob", 9_999, 99), Some(bob));
            let mallory_gift = post(&app, "/v1/rooms/r1/gifts", gift(&id, "mallory", 7, 7), Some(mallory));
            let (a, b, m) = tokio::join!(alice_gift, bob_gift, mallory_gift);
            assert_eq!(m.code(), "not_member", "{db}: {m:?}");
            assert!(is_honest_success(&b), "{db}: bob's own gift is his own command: {b:?}");
            honest.push(a);
        }
        // Squatting: bob sends the ids alice will use, first.
        for round in 0..ROUNDS {
            let id = format!("s-{round}");
            let squat = post(&app, "/v1/rooms/r1/gifts", gift(&id, "bob", 1, 1), Some(bob)).await;
            assert!(is_honest_success(&squat), "{db}: {squat:?}");
            honest.push(post(&app, "/v1/rooms/r1/gifts", gift(&id, "alice", 1, 3), Some(alice)).await);
        }
        for answer in &honest {
            assert!(
                is_honest_success(answer),
                "{db}: alice's gift refused or answered another's: {answer:?}"
            );
        }
        // A replay answers its own caller only, with its own outcome.
        let replay = post(&app, "/v1/rooms/r1/gifts", gift("g-0", "alice", 2, 50), Some(alice)).await;
        assert_eq!(replay.body["replayed"], json!(true), "{db}: {replay:?}");
        assert_eq!(replay.body["events"], honest[0].body["events"], "{db}: alice's own events");

        // The same caller reusing its id for another gift while the first is in flight: one
        // commits; the other is 409 (the first is logged) or 502 payment_mismatch (the wallet's
        // debit under the key is the first one's) and moves no money.
        let first = post(&app, "/v1/rooms/r1/gifts", gift("twice", "bob", 3, 3), Some(bob));
        let second = post(&app, "/v1/rooms/r1/gifts", gift("twice", "bob", 4, 4), Some(bob));
        let (first, second) = tokio::join!(first, second);
        let codes = [first.code().to_owned(), second.code().to_owned()];
        assert_eq!(
            [first.status, second.status].iter().filter(|s| **s == 200).count(),
            1,
            "{db}: {first:?} {second:?}"
        );
        assert!(
            codes.iter().any(|c| c == "command_conflict" || c == "payment_mismatch"),
            "{db}: {first:?} {second:?}"
        );

        app.settle().await;
        let kept = kept_debits(&wallet);
        let gifts = committed_gifts(&db).await;
        eprintln!(
            "{db}: money after {} rounds of shared ids: kept debits {kept:?}, committed gifts {gifts:?}, {} debits, {} refunded",
            ROUNDS * 2,
            wallet.debits().len(),
            wallet.debits().iter().filter(|d| d.refunded).count()
        );
        assert_eq!(kept, gifts, "{db}: each user's net debits = the gifts that user committed");
        let alice_paid = ROUNDS as u64 * (2 * 50 + 3);
        assert_eq!(gifts.get("alice"), Some(&alice_paid), "{db}: every gift of alice committed, paid by her");
        assert!(!gifts.contains_key("mallory"), "{db}");
        for user in ["alice", "bob", "mallory"] {
            let spent = kept.get(user).copied().unwrap_or(0);
            assert_eq!(wallet.balance(user), BALANCE - spent, "{db}: {user}'s balance");
        }
        app.stop().await;
    }
}

/// The same over gRPC: bob and mallory send gifts under alice's ids at the same moment.
#[tokio::test]
async fn over_grpc_another_callers_reused_ids_move_no_money_but_their_own() {
    use room_service::grpc::pb;
    use room_service::grpc::pb::room_service_client::RoomServiceClient;

    let made =
        make(json!({"jwts": {"alice": rs256("alice"), "bob": rs256("bob"), "mallory": rs256("mallory")}}));
    let db = TestDb::mysql().await;
    let wallet = FakeWallet::start(FakeWalletOptions { initial_balance: BALANCE }).await;
    let app = start(&db, &made, &wallet).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.app.grpc_addr))
        .unwrap()
        .connect_lazy();
    let authed = |message: pb::SendGiftRequest, user: &str| {
        let mut request = tonic::Request::new(message);
        let bearer = format!("Bearer {}", made.token(user));
        request.metadata_mut().insert("authorization", bearer.parse().unwrap());
        request
    };
    let grpc_gift = |id: &str, sender: &str, count: u32| pb::SendGiftRequest {
        command_id: id.into(),
        room_id: "r1".into(),
        sender_id: sender.into(),
        receiver_id: "alice".into(),
        gift_id: "rose".into(),
        count,
        unit_value: 7,
    };
    let create = json!({"command_id": "c", "room_id": "r1", "owner_id": "alice", "title": "t"});
    assert_eq!(post(&app, "/v1/rooms", create, Some(made.token("alice"))).await.status, 200);
    for user in ["alice", "bob"] {
        let join = json!({"command_id": format!("join-{user}"), "user_id": user});
        assert_eq!(post(&app, "/v1/rooms/r1/join", join, Some(made.token(user))).await.status, 200);
    }
    for round in 0..ROUNDS {
        let id = format!("g-{round}");
        let (mut a, mut b, mut m) = (
            RoomServiceClient::new(channel.clone()),
            RoomServiceClient::new(channel.clone()),
            RoomServiceClient::new(channel.clone()),
        );
        let (alice, bob, mallory) = tokio::join!(
            a.send_gift(authed(grpc_gift(&id, "alice", 2), "alice")),
            b.send_gift(authed(grpc_gift(&id, "bob", 5), "bob")),
            m.send_gift(authed(grpc_gift(&id, "mallory", 3), "mallory")),
        );
        for (who, answer) in [("alice", alice), ("bob", bob)] {
            let answer = answer.unwrap_or_else(|e| panic!("{who}'s own gift: {e:?}")).into_inner();
            assert!(answer.applied && !answer.replayed, "{who}: {answer:?}");
        }
        assert_eq!(mallory.expect_err("not a member").code(), tonic::Code::FailedPrecondition);
    }
    app.settle().await;
    let (kept, gifts) = (kept_debits(&wallet), committed_gifts(&db).await);
    eprintln!("grpc: kept debits {kept:?}, committed gifts {gifts:?}");
    assert_eq!(kept, gifts, "each user's net debits = the gifts that user committed");
    assert_eq!(gifts.get("alice"), Some(&(ROUNDS as u64 * 14)), "every gift of alice, paid by her");
    app.stop().await;
}
