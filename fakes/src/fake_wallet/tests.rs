//! Tests of the fake wallet over real loopback HTTP with a bare reqwest client: the contract's
//! answers, strict request reading, faults and the control endpoints.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

async fn post(fake: &FakeWallet, path: &str, body: Value) -> (u16, Value) {
    let response =
        reqwest::Client::new().post(format!("{}{path}", fake.base_url())).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn debit(key: &str, user: &str, amount: u64) -> Value {
    json!({"idempotency_key": key, "user_id": user, "amount": amount})
}

#[tokio::test]
async fn debits_follow_the_contract() {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance: 100 }).await;
    let (status, first) = post(&fake, DEBITS_PATH, debit("k1", "alice", 40)).await;
    assert_eq!((status, first["balance"].as_u64()), (200, Some(60)), "{first}");
    // The same key again: the first answer, no second debit.
    assert_eq!(post(&fake, DEBITS_PATH, debit("k1", "alice", 40)).await, (200, first.clone()));
    let (status, refused) = post(&fake, DEBITS_PATH, debit("k2", "alice", 61)).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("insufficient_balance")));
    assert_eq!(fake.balance("alice"), 60);
    assert_eq!(
        post(&fake, REFUNDS_PATH, json!({"idempotency_key": "k1"})).await,
        (200, json!({"refunded": true}))
    );
    assert_eq!(
        post(&fake, REFUNDS_PATH, json!({"idempotency_key": "k1"})).await,
        (200, json!({"refunded": true}))
    );
    assert_eq!(
        post(&fake, REFUNDS_PATH, json!({"idempotency_key": "k9"})).await,
        (200, json!({"refunded": false}))
    );
    assert_eq!(fake.balance("alice"), 100);
}

#[tokio::test]
async fn malformed_requests_are_refused_with_400() {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance: 100 }).await;
    let bad = [
        debit("", "alice", 1),
        debit("k", "", 1),
        debit("k", "alice", 0),
        json!({"idempotency_key": "k", "user_id": "alice", "amount": 1, "extra": true}),
        json!({"idempotency_key": "k", "user_id": "alice", "amount": -1}),
    ];
    for body in bad {
        let (status, answer) = post(&fake, DEBITS_PATH, body.clone()).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid_request")), "{body}");
    }
    let (status, _) = post(&fake, REFUNDS_PATH, json!({"key": "k"})).await;
    assert_eq!(status, 400);
    assert!(fake.debits().is_empty());
}

#[tokio::test]
async fn control_endpoints_work_over_http() {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance: 5 }).await;
    let http = reqwest::Client::new();
    let base = fake.base_url();
    let put = http.put(format!("{base}/fake/balances/bob")).json(&json!({"balance": 70})).send();
    assert_eq!(put.await.unwrap().status(), 204);
    let fault = json!({"kind": "http_503", "count": 1});
    assert_eq!(http.post(format!("{base}/fake/faults")).json(&fault).send().await.unwrap().status(), 204);
    let incomplete = json!({"kind": "delay"});
    assert_eq!(
        http.post(format!("{base}/fake/faults")).json(&incomplete).send().await.unwrap().status(),
        400
    );
    let (status, answer) = post(&fake, DEBITS_PATH, debit("k", "bob", 20)).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (503, Some("unavailable")));
    assert_eq!(post(&fake, DEBITS_PATH, debit("k", "bob", 20)).await.0, 200);
    let balances: BTreeMap<String, u64> =
        http.get(format!("{base}/fake/balances")).send().await.unwrap().json().await.unwrap();
    assert_eq!(balances, BTreeMap::from([("bob".to_owned(), 50)]));
    let debits: Vec<RecordedDebit> =
        http.get(format!("{base}/fake/debits")).send().await.unwrap().json().await.unwrap();
    assert_eq!((debits.len(), debits[0].amount, debits[0].refunded), (1, 20, false));
    let stats: FakeWalletStats =
        http.get(format!("{base}/fake/stats")).send().await.unwrap().json().await.unwrap();
    assert_eq!((stats.debit_calls, stats.debits, stats.faults_served), (2, 1, 1));
    assert_eq!(http.post(format!("{base}/fake/reset")).send().await.unwrap().status(), 204);
    assert!(fake.balances().is_empty());
}

#[tokio::test]
async fn accept_then_delay_debits_before_answering() {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance: 10 }).await;
    fake.inject(Fault::AcceptThenDelay(std::time::Duration::from_secs(30)), Call::Debit, 1);
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_millis(300)).build().unwrap();
    let sent =
        client.post(format!("{}{DEBITS_PATH}", fake.base_url())).json(&debit("k", "u", 4)).send().await;
    assert!(sent.unwrap_err().is_timeout());
    assert_eq!(fake.balance("u"), 6, "the debit landed although the caller timed out");
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let fake = FakeWallet::start(FakeWalletOptions { initial_balance: 0 }).await;
    let base = fake.base_url();
    fake.shutdown().await.unwrap();
    assert!(reqwest::get(format!("{base}/fake/stats")).await.is_err());
}
