//! [`HttpWallet`] against the in-process fake wallet over real loopback HTTP.

use std::time::Duration;

use room_service::wallet::wire::{DEBITS_PATH, REFUNDS_PATH};
use room_service::wallet::*;
use room_service_fakes::fake_wallet::{Call, FakeWallet, FakeWalletOptions, Fault};

const TIMEOUT: Duration = Duration::from_millis(300);

fn wallet(base_url: String) -> HttpWallet {
    HttpWallet::new(HttpWalletOptions { base_url, timeout: TIMEOUT }).expect("client")
}

fn debit(key: &str, user: &str, amount: u64) -> Debit {
    Debit { idempotency_key: key.into(), user_id: user.into(), amount }
}

async fn fake(initial_balance: u64) -> (FakeWallet, HttpWallet) {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance }).await;
    // A trailing slash is ignored.
    let client = wallet(format!("{}/", fake.base_url()));
    (fake, client)
}

fn class(result: Result<impl std::fmt::Debug, WalletError>) -> Option<FailureClass> {
    result.expect_err("unavailable expected").class()
}

#[tokio::test]
async fn a_debit_takes_the_amount_and_answers_the_balance() {
    let (fake, wallet) = fake(100).await;
    let debited = wallet.debit(&debit("c1", "alice", 30)).await.unwrap();
    assert_eq!(debited.balance, 70);
    assert!(!debited.debit_id.is_empty());
    assert_eq!(fake.balance("alice"), 70);
}

#[tokio::test]
async fn a_debit_over_the_balance_is_insufficient_and_takes_nothing() {
    let (fake, wallet) = fake(10).await;
    assert_eq!(wallet.debit(&debit("c1", "alice", 11)).await, Err(WalletError::InsufficientBalance));
    assert_eq!(fake.balance("alice"), 10);
}

#[tokio::test]
async fn a_repeated_key_answers_the_first_answer_and_debits_once() {
    let (fake, wallet) = fake(100).await;
    let first = wallet.debit(&debit("c1", "alice", 30)).await.unwrap();
    let again = wallet.debit(&debit("c1", "alice", 30)).await.unwrap();
    assert_eq!(again, first);
    assert_eq!(fake.balance("alice"), 70);
    assert_eq!(fake.debits().len(), 1);
}

#[tokio::test]
async fn a_refund_gives_the_debit_back_once_and_is_false_without_a_debit() {
    let (fake, wallet) = fake(100).await;
    wallet.debit(&debit("c1", "alice", 30)).await.unwrap();
    assert_eq!(wallet.refund("c1").await, Ok(true));
    assert_eq!(wallet.refund("c1").await, Ok(true));
    assert_eq!(fake.balance("alice"), 100);
    assert_eq!(wallet.refund("never-debited").await, Ok(false));
    assert_eq!(fake.stats().refunds, 1);
}

#[tokio::test]
async fn no_answer_in_time_is_an_unavailable_timeout() {
    let (fake, wallet) = fake(100).await;
    fake.inject(Fault::Delay(Duration::from_secs(10)), Call::Debit, 1);
    let started = tokio::time::Instant::now();
    assert_eq!(class(wallet.debit(&debit("c1", "alice", 30)).await), Some(FailureClass::Timeout));
    assert!(started.elapsed() < Duration::from_secs(2), "bounded by the timeout: {:?}", started.elapsed());
    fake.inject(Fault::AcceptThenDelay(Duration::from_secs(10)), Call::Refund, 1);
    assert_eq!(class(wallet.refund("c1").await), Some(FailureClass::Timeout));
}

#[tokio::test]
async fn a_5xx_is_unavailable_and_debits_nothing() {
    let (fake, wallet) = fake(100).await;
    fake.inject(Fault::Http503, Call::Debit, 1);
    fake.inject(Fault::Http503, Call::Refund, 1);
    let error = wallet.debit(&debit("c1", "alice", 30)).await.unwrap_err();
    assert_eq!(error.class(), Some(FailureClass::Status));
    assert!(error.to_string().contains("http 503"), "{error}");
    assert_eq!(class(wallet.refund("c1").await), Some(FailureClass::Status));
    assert_eq!(fake.balance("alice"), 100);
}

#[tokio::test]
async fn an_unreachable_wallet_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let wallet = wallet(format!("http://127.0.0.1:{port}"));
    assert_eq!(class(wallet.debit(&debit("c1", "alice", 1)).await), Some(FailureClass::Transport));
}

#[tokio::test]
async fn an_answer_that_does_not_decode_is_unavailable() {
    // A wallet that drifted from the contract: 200 with a proxy's page.
    let router = axum::Router::new()
        .route(DEBITS_PATH, axum::routing::post(|| async { "<html>OK</html>" }))
        .route(REFUNDS_PATH, axum::routing::post(|| async { "{\"refunded\":\"yes\"}" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let wallet = wallet(base_url);
    assert_eq!(class(wallet.debit(&debit("c1", "alice", 1)).await), Some(FailureClass::Answer));
    assert_eq!(class(wallet.refund("c1").await), Some(FailureClass::Answer));
    server.abort();
}

#[test]
fn a_base_url_that_is_not_http_is_refused() {
    for bad in ["ftp://wallet", "not a url", ""] {
        let options = HttpWalletOptions { base_url: bad.into(), timeout: TIMEOUT };
        let error = HttpWallet::new(options).expect_err(bad);
        assert_eq!(error.class(), Some(FailureClass::Config), "{bad}");
    }
}
