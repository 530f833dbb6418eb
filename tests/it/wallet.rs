//! Gifts paid through the wallet (SPEC §11.4): the service started in-process with
//! `wallet.enabled`, the fake wallet over real loopback HTTP, real MariaDB and SQLite. Each
//! test checks what the wallet holds (balances, debits taken and refunded) against what the
//! database committed (command log, snapshot version, outbox).

use std::time::Duration;

use room_service_fakes::fake_wallet::{Call, FakeWallet, FakeWalletOptions, Fault};
use serde_json::{Value, json};

use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

/// Every sender starts with this much.
const BALANCE: u64 = 10_000;
/// The gift every test sends: 2 × 500.
const GIFT_VALUE: u64 = 1_000;
/// `wallet.timeout` of the service under test.
const WALLET_TIMEOUT: &str = "400ms";

/// A service paying through a fake wallet, over `db`, with room `r1` (owner alice, member bob).
struct Paying {
    app: TestApp,
    wallet: FakeWallet,
}

impl Paying {
    async fn start(db: &TestDb) -> Paying {
        Self::on(db, FakeWallet::start(FakeWalletOptions { initial_balance: BALANCE }).await).await
    }

    /// A service over `db` paying through `wallet` (the room commands replay on a database
    /// that has them).
    async fn on(db: &TestDb, wallet: FakeWallet) -> Paying {
        let overrides = [
            ("wallet.enabled", "true"),
            ("wallet.base_url", &wallet.base_url()),
            ("wallet.timeout", WALLET_TIMEOUT),
        ];
        let app = TestApp::start(settings(db.url(), None, &overrides)).await;
        let paying = Paying { app, wallet };
        let created = json!({"command_id": "c-create", "room_id": "r1", "owner_id": "alice", "title": "t"});
        assert_eq!(paying.app.post("/v1/rooms", created).await.0, 200, "{db}: create");
        assert_eq!(
            paying.app.post("/v1/rooms/r1/join", json!({"command_id": "c-join", "user_id": "bob"})).await.0,
            200
        );
        paying
    }

    /// Sends the test gift (2 × 500) from `sender` under `command_id`.
    async fn gift(&self, command_id: &str, sender: &str) -> (u16, Value) {
        let body = json!({
            "command_id": command_id, "sender_id": sender, "receiver_id": "alice",
            "gift_id": "rocket", "count": 2, "unit_value": 500,
        });
        self.app.post("/v1/rooms/r1/gifts", body).await
    }
}

/// What the database committed for room `r1`: its version, command-log and outbox rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Committed {
    version: Option<i64>,
    commands: i64,
    outbox: i64,
}

async fn committed(db: &TestDb) -> Committed {
    Committed {
        version: db.scalar("SELECT version FROM room_snapshot WHERE room_id = 'r1'").await,
        commands: db.count("room_command_log").await,
        outbox: db.count("room_outbox").await,
    }
}

/// Log rows of one command id.
async fn logged(db: &TestDb, command_id: &str) -> i64 {
    db.scalar(format!("SELECT COUNT(*) FROM room_command_log WHERE command_id = '{command_id}'"))
        .await
        .unwrap_or(0)
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn an_insufficient_balance_answers_409_and_commits_nothing() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        paying.wallet.set_balance("bob", GIFT_VALUE - 1);
        let before = committed(&db).await;
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!((status, code(&body)), (409, "insufficient_balance"), "{db}: {body}");
        assert_eq!(committed(&db).await, before, "{db}: nothing committed");
        assert_eq!(logged(&db, "g1").await, 0, "{db}");
        assert_eq!(paying.wallet.balance("bob"), GIFT_VALUE - 1, "{db}");
        assert!(paying.wallet.debits().is_empty(), "{db}");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_wallet_timeout_answers_503_and_commits_nothing() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        // Far longer than the test: the wallet has not debited anything when it is checked.
        paying.wallet.inject(Fault::Delay(Duration::from_secs(30)), Call::Debit, 1);
        let before = committed(&db).await;
        let started = tokio::time::Instant::now();
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!((status, code(&body)), (503, "wallet_unavailable"), "{db}: {body}");
        assert!(started.elapsed() < Duration::from_secs(3), "{db}: bounded by wallet.timeout");
        assert_eq!(committed(&db).await, before, "{db}: nothing committed");
        assert_eq!(paying.wallet.balance("bob"), BALANCE, "{db}: nothing debited");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_wallet_answering_503_answers_503_and_commits_nothing() {
    let db = TestDb::mysql().await;
    let paying = Paying::start(&db).await;
    paying.wallet.inject(Fault::Http503, Call::Debit, 1);
    let before = committed(&db).await;
    let (status, body) = paying.gift("g1", "bob").await;
    assert_eq!((status, code(&body)), (503, "wallet_unavailable"), "{body}");
    assert_eq!(committed(&db).await, before);
    assert_eq!(paying.wallet.balance("bob"), BALANCE);
    // The wallet is back: the same command_id goes through, paid once.
    assert_eq!(paying.gift("g1", "bob").await.0, 200);
    assert_eq!(paying.wallet.balance("bob"), BALANCE - GIFT_VALUE);
    paying.app.stop().await;
}

#[tokio::test]
async fn a_retry_after_a_timeout_whose_debit_landed_debits_once_and_commits_once() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        paying.wallet.inject(Fault::AcceptThenDelay(Duration::from_secs(30)), Call::Debit, 1);
        let before = committed(&db).await;
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!((status, code(&body)), (503, "wallet_unavailable"), "{db}: {body}");
        assert_eq!(committed(&db).await, before, "{db}: nothing committed");
        assert_eq!(paying.wallet.balance("bob"), BALANCE - GIFT_VALUE, "{db}: the debit landed");
        // The client retries: the wallet answers the first debit, the gift commits now.
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!(status, 200, "{db}: {body}");
        assert_eq!(
            (body["applied"].as_bool(), body["replayed"].as_bool()),
            (Some(true), Some(false)),
            "{db}"
        );
        assert_eq!(body["room"]["heat"].as_u64(), Some(GIFT_VALUE), "{db}");
        assert_eq!(paying.wallet.balance("bob"), BALANCE - GIFT_VALUE, "{db}: debited exactly once");
        assert_eq!(paying.wallet.debits().len(), 1, "{db}");
        assert!(!paying.wallet.debits()[0].refunded, "{db}");
        assert_eq!(logged(&db, "g1").await, 1, "{db}: committed once");
        assert_eq!(committed(&db).await.version, before.version.map(|v| v + 1), "{db}");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_commit_that_fails_after_the_debit_is_refunded() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        // A definite failure inside the room transaction, for gifts only.
        let trigger = match db.name() {
            "mariadb" => {
                "CREATE TRIGGER fail_gifts BEFORE INSERT ON room_command_log FOR EACH ROW \
                          BEGIN IF NEW.command_type = 'send_gift' THEN \
                          SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected by the test'; END IF; END"
            }
            _ => {
                "CREATE TRIGGER fail_gifts BEFORE INSERT ON room_command_log \
                  WHEN NEW.command_type = 'send_gift' BEGIN SELECT RAISE(ABORT, 'injected by the test'); END"
            }
        };
        db.execute(trigger).await;
        let before = committed(&db).await;
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!((status, code(&body)), (503, "storage_unavailable"), "{db}: {body}");
        assert_eq!(committed(&db).await, before, "{db}: nothing committed");
        let debits = paying.wallet.debits();
        assert_eq!(debits.len(), 1, "{db}: debited before the commit");
        assert!(debits[0].refunded, "{db}: refunded");
        assert_eq!(paying.wallet.balance("bob"), BALANCE, "{db}");
        // The room still takes commands (memory was left as committed).
        let (status, _) =
            paying.app.post("/v1/rooms/r1/join", json!({"command_id": "c-j2", "user_id": "carol"})).await;
        assert_eq!(status, 200, "{db}");
        // The same command_id again would be answered the first (refunded) debit: refused, so
        // the gift never commits unpaid; a new command_id pays and commits.
        db.execute("DROP TRIGGER fail_gifts").await;
        let (status, body) = paying.gift("g1", "bob").await;
        assert_eq!((status, code(&body)), (409, "payment_refunded"), "{db}: {body}");
        assert_eq!(logged(&db, "g1").await, 0, "{db}: the refunded gift never commits");
        let (status, body) = paying.gift("g1-again", "bob").await;
        assert_eq!(status, 200, "{db}: {body}");
        assert_eq!(paying.wallet.balance("bob"), BALANCE - GIFT_VALUE, "{db}: paid once, by the new id");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_refunded_gift_is_still_refused_after_a_restart() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        let (status, body) = paying.gift("g1", "carol").await;
        assert_eq!((status, code(&body)), (409, "not_member"), "{db}: {body}");
        assert!(paying.wallet.debits()[0].refunded, "{db}: refunded");
        let Paying { app, wallet } = paying;
        app.stop().await;
        // A new process on the same database (a restart, or the room's new owner), and carol
        // is a member now: the wallet would answer the retry's debit with the first (refunded)
        // one, so only the recorded refund keeps the gift from committing unpaid.
        let paying = Paying::on(&db, wallet).await;
        let join = json!({"command_id": "c-carol", "user_id": "carol"});
        assert_eq!(paying.app.post("/v1/rooms/r1/join", join).await.0, 200, "{db}");
        let (status, body) = paying.gift("g1", "carol").await;
        assert_eq!((status, code(&body)), (409, "payment_refunded"), "{db}: {body}");
        assert_eq!(logged(&db, "g1").await, 0, "{db}: the refunded gift never commits");
        assert_eq!(paying.wallet.debits().len(), 1, "{db}: the retry is not even sent to the wallet");
        assert_eq!(paying.wallet.balance("carol"), BALANCE, "{db}");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_refund_the_wallet_did_not_take_is_sent_again_until_it_does() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        // Every refund attempt of the command path fails.
        paying.wallet.inject(Fault::Http503, Call::Refund, 3);
        let (status, body) = paying.gift("g1", "carol").await;
        assert_eq!((status, code(&body)), (409, "not_member"), "{db}: {body}");
        assert_eq!(paying.wallet.balance("carol"), BALANCE - GIFT_VALUE, "{db}: not refunded yet");
        let unfinished = "SELECT COUNT(*) FROM room_payment_refund WHERE wallet_refunded_at_ms IS NULL";
        assert_eq!(db.scalar(unfinished).await, Some(1), "{db}: the refund is recorded, unfinished");
        // Refused meanwhile: the money is on its way back.
        let (status, body) = paying.gift("g1", "carol").await;
        assert_eq!((status, code(&body)), (409, "payment_refunded"), "{db}: {body}");
        let rooms = &paying.app.app.rooms;
        assert_eq!(rooms.finish_refunds(Duration::ZERO).await, 1, "{db}: sent again, taken");
        assert_eq!(paying.wallet.balance("carol"), BALANCE, "{db}: refunded once");
        assert_eq!(db.scalar(unfinished).await, Some(0), "{db}");
        assert_eq!(rooms.finish_refunds(Duration::ZERO).await, 0, "{db}: nothing left");
        assert_eq!(paying.wallet.balance("carol"), BALANCE, "{db}");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_gift_refused_by_the_domain_after_its_debit_is_refunded() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        let before = committed(&db).await;
        let (status, body) = paying.gift("g1", "carol").await;
        assert_eq!((status, code(&body)), (409, "not_member"), "{db}: {body}");
        assert_eq!(committed(&db).await, before, "{db}: nothing committed");
        let close = json!({"command_id": "c-close"});
        assert_eq!(paying.app.post("/v1/rooms/r1/close", close).await.0, 200, "{db}");
        let (status, body) = paying.gift("g2", "bob").await;
        assert_eq!((status, code(&body)), (409, "room_closed"), "{db}: {body}");
        let debits = paying.wallet.debits();
        assert_eq!(debits.len(), 2, "{db}: both were debited first");
        assert!(debits.iter().all(|d| d.refunded), "{db}: {debits:?}");
        assert_eq!(
            (paying.wallet.balance("carol"), paying.wallet.balance("bob")),
            (BALANCE, BALANCE),
            "{db}"
        );
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn a_repeated_command_id_after_success_is_not_debited_again() {
    for db in backends().await {
        let paying = Paying::start(&db).await;
        let (status, first) = paying.gift("g1", "bob").await;
        assert_eq!(status, 200, "{db}: {first}");
        let (status, again) = paying.gift("g1", "bob").await;
        assert_eq!((status, again["replayed"].as_bool()), (200, Some(true)), "{db}: {again}");
        assert_eq!(again["room_version"], first["room_version"], "{db}");
        assert_eq!(paying.wallet.balance("bob"), BALANCE - GIFT_VALUE, "{db}: one debit");
        assert_eq!(paying.wallet.stats().debit_calls, 1, "{db}: the repeat never reached the wallet");
        assert_eq!(logged(&db, "g1").await, 1, "{db}");
        paying.app.stop().await;
    }
}

#[tokio::test]
async fn an_invalid_gift_is_refused_without_a_debit() {
    let db = TestDb::sqlite().await;
    let paying = Paying::start(&db).await;
    let body = json!({
        "command_id": "g1", "sender_id": "bob", "receiver_id": "alice",
        "gift_id": "rocket", "count": 0, "unit_value": 500,
    });
    let (status, answer) = paying.app.post("/v1/rooms/r1/gifts", body).await;
    assert_eq!((status, code(&answer)), (400, "invalid_argument"), "{answer}");
    assert_eq!(paying.wallet.stats().debit_calls, 0);
    paying.app.stop().await;
}
