//! Tests of the fake over real loopback HTTP with a bare reqwest client: usersig checks,
//! answers, faults and the control endpoints.

use super::*;
use room_service::publish::tencent::usersig::{generate, system_now_secs};
use room_service::publish::tencent::wire::Answer;

const APP: u64 = 1_400_000_001;
const KEY: &str = "fake-secret";
const ADMIN: &str = "administrator";

fn body(group: &str, random: u32) -> serde_json::Value {
    serde_json::json!({
        "GroupId": group, "Random": random,
        "MsgBody": [{"MsgType": "TIMCustomElem", "MsgContent": {"Data": "{\"x\":1}", "Desc": "T"}}],
        "CloudCustomData": "{\"event_id\":\"e1\"}", "MsgPriority": "Normal",
    })
}

async fn send(fake: &FakeIm, app: u64, id: &str, sig: &str, body: &serde_json::Value) -> Answer {
    let url = format!(
        "{}{SEND_GROUP_MSG_PATH}?sdkappid={app}&identifier={id}&usersig={sig}&random=1&contenttype=json",
        fake.base_url()
    );
    let resp = reqwest::Client::new().post(url).json(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

fn good_sig() -> String {
    generate(KEY, APP, ADMIN, 3600, system_now_secs())
}

/// Options under which every group exists: these tests are about messages, not groups.
fn any_group() -> FakeImOptions {
    FakeImOptions { require_groups: false, ..FakeImOptions::new(APP, KEY, ADMIN) }
}

#[tokio::test]
async fn usersig_failures_get_tencent_codes() {
    let fake = FakeIm::start(any_group()).await;
    let now = system_now_secs();
    let b = body("g", 1);
    let code = |a: Answer| (a.action_status.unwrap(), a.error_code.unwrap());
    let expired = generate(KEY, APP, ADMIN, 10, now - 100);
    assert_eq!(code(send(&fake, APP, ADMIN, &expired, &b).await), ("FAIL".into(), 70001));
    assert_eq!(code(send(&fake, APP, ADMIN, "garbage", &b).await), ("FAIL".into(), 70003));
    let wrong_key = generate("other", APP, ADMIN, 3600, now);
    assert_eq!(code(send(&fake, APP, ADMIN, &wrong_key, &b).await), ("FAIL".into(), 70009));
    let other_id = generate(KEY, APP, "bob", 3600, now);
    assert_eq!(code(send(&fake, APP, ADMIN, &other_id, &b).await), ("FAIL".into(), 70013));
    let other_app = generate(KEY, APP + 1, ADMIN, 3600, now);
    assert_eq!(code(send(&fake, APP, ADMIN, &other_app, &b).await), ("FAIL".into(), 70014));
    assert_eq!(code(send(&fake, APP, ADMIN, &good_sig(), &b).await), ("OK".into(), 0));
    let stats = fake.stats();
    assert_eq!((stats.calls, stats.rejected, stats.accepted), (6, 5, 1));
}

#[tokio::test]
async fn accepted_message_is_recorded_and_repeat_is_deduped() {
    let fake = FakeIm::start(any_group()).await;
    let first = send(&fake, APP, ADMIN, &good_sig(), &body("g", 9)).await;
    let again = send(&fake, APP, ADMIN, &good_sig(), &body("g", 9)).await;
    assert_eq!(first.error_code, Some(0));
    assert_eq!(again.msg_seq, first.msg_seq);
    let recorded = fake.messages("g");
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].event_id.as_deref(), Some("e1"));
    assert_eq!(recorded[0].data, "{\"x\":1}");
    assert_eq!(fake.stats().duplicates, 1);
}

#[tokio::test]
async fn global_limit_answers_60007() {
    let opts = FakeImOptions { global_limit_per_sec: Some(1), ..any_group() };
    let fake = FakeIm::start(opts).await;
    assert_eq!(send(&fake, APP, ADMIN, &good_sig(), &body("g", 1)).await.error_code, Some(0));
    assert_eq!(send(&fake, APP, ADMIN, &good_sig(), &body("g", 2)).await.error_code, Some(60007));
}

#[tokio::test]
async fn control_endpoints_work_over_http() {
    let fake = FakeIm::start(any_group()).await;
    let http = reqwest::Client::new();
    let base = fake.base_url();
    let fault = serde_json::json!({"kind": "error_code", "code": 10002, "count": 1});
    let resp = http.post(format!("{base}/fake/faults")).json(&fault).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    let bad = serde_json::json!({"kind": "delay"});
    let resp = http.post(format!("{base}/fake/faults")).json(&bad).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(send(&fake, APP, ADMIN, &good_sig(), &body("g", 1)).await.error_code, Some(10002));
    assert_eq!(send(&fake, APP, ADMIN, &good_sig(), &body("g", 1)).await.error_code, Some(0));
    let msgs: Vec<RecordedMessage> =
        http.get(format!("{base}/fake/messages?group=g")).send().await.unwrap().json().await.unwrap();
    assert_eq!(msgs.len(), 1);
    let stats: FakeStats = http.get(format!("{base}/fake/stats")).send().await.unwrap().json().await.unwrap();
    assert_eq!((stats.calls, stats.faults_served), (2, 1));
    let resp = http.post(format!("{base}/fake/reset")).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    assert!(fake.all_messages().is_empty());
}

#[tokio::test]
async fn http_502_and_dropped_connection_faults() {
    let fake = FakeIm::start(any_group()).await;
    fake.inject(Fault::Http502, 1);
    fake.inject(Fault::DropConnection, 1);
    let url = format!("{}{SEND_GROUP_MSG_PATH}", fake.base_url());
    let http = reqwest::Client::new();
    let resp = http.post(&url).body("{}").send().await.unwrap();
    assert_eq!(resp.status(), 502);
    assert!(resp.text().await.unwrap().contains("Bad Gateway"));
    let err = http.post(&url).body("{}").send().await.unwrap_err();
    assert!(!err.is_timeout(), "{err}");
    // The next call is served normally.
    assert_eq!(send(&fake, APP, ADMIN, &good_sig(), &body("g", 1)).await.error_code, Some(0));
}

#[tokio::test]
async fn sends_are_counted_per_event_whatever_the_answer() {
    let fake = FakeIm::start(any_group()).await;
    fake.inject(Fault::Http502, 1);
    fake.inject(Fault::ErrorCode(10002), 1);
    // Two faulted calls, then the event is recorded, then a repeat is answered as a duplicate.
    for _ in 0..4 {
        send_any(&fake, &body("g", 5)).await;
    }
    // Refused calls count too (a bad usersig), and another event is counted apart.
    send(&fake, APP, ADMIN, "garbage", &body("g", 5)).await;
    let mut other = body("g", 6);
    other["CloudCustomData"] = "{\"event_id\":\"e2\"}".into();
    send(&fake, APP, ADMIN, &good_sig(), &other).await;
    // A call without an event id is counted nowhere.
    let mut bare = body("g", 7);
    bare.as_object_mut().unwrap().remove("CloudCustomData");
    send(&fake, APP, ADMIN, &good_sig(), &bare).await;
    let sends = fake.sends_by_event();
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert_eq!(sends["e1"], EventSends { calls: 5, received: 2 });
    assert_eq!(sends["e2"], EventSends { calls: 1, received: 1 });
    fake.clear();
    assert!(fake.sends_by_event().is_empty());
}

/// Sends `body` with a good usersig, whatever the HTTP answer.
async fn send_any(fake: &FakeIm, body: &serde_json::Value) {
    let url = format!(
        "{}{SEND_GROUP_MSG_PATH}?sdkappid={APP}&identifier={ADMIN}&usersig={}&random=1&contenttype=json",
        fake.base_url(),
        good_sig()
    );
    reqwest::Client::new().post(url).json(body).send().await.unwrap();
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let fake = FakeIm::start(any_group()).await;
    let base = fake.base_url();
    fake.shutdown().await.unwrap();
    assert!(reqwest::get(format!("{base}/fake/stats")).await.is_err());
}

#[test]
fn the_busiest_window_counts_the_most_calls_within_any_second() {
    let t0 = tokio::time::Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let times = [at(0), at(100), at(999), at(1000), at(1001), at(1500), at(1998), at(3000)];
    // [999, 1999) holds five; 3000 is a second past 1998.
    assert_eq!(busiest_window(&times, Duration::from_secs(1)), 5);
    assert_eq!(busiest_window(&times[3..], Duration::from_secs(1)), 4);
    assert_eq!(busiest_window(&times, Duration::ZERO), 1);
    assert_eq!(busiest_window(&[], Duration::from_secs(1)), 0);
}
