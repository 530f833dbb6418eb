//! The publish stack of the real binary (`main.rs` → `app::publisher` → `PublishLayers`), seen
//! from outside: this runs it against the fake IM and reads its `/metrics` — the filter answers
//! `RoomCreated` without IM, a call slower than `outbox_worker.publish_timeout` is cut off and
//! counted as a timeout, and every publish is counted under its path (`sync`, `worker`). The
//! rate limit's place (outside the timeout) is `publish::stack`'s tests'.

use std::time::Duration;

use room_service::telemetry::names::{PUBLISH_FAILURE_TOTAL, PUBLISH_SUCCESS_TOTAL};
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::json;

use super::{Node, eventually};
use crate::outbox::harness::{ADMIN, APP, KEY};
use crate::support::TestDb;

/// The sum of the series of `name` carrying every label pair of `labels` in a `/metrics` text.
fn counted(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix('{')?;
            let (set, value) = rest.split_once("} ")?;
            let matches = labels.iter().all(|(k, v)| set.contains(&format!("{k}=\"{v}\"")));
            if matches { value.trim().parse::<f64>().ok() } else { None }
        })
        .sum()
}

/// Sends a command to the node's public API and asserts it was answered 200.
async fn command(http: &reqwest::Client, node: &Node, path: &str, body: serde_json::Value) {
    let url = format!("http://127.0.0.1:{}{path}", node.port);
    let response = http.post(url).json(&body).send().await.expect("the node answers");
    let status = response.status();
    assert_eq!(status, 200, "{}", response.text().await.unwrap_or_default());
}

#[tokio::test]
async fn the_binary_filters_times_out_and_counts_by_path() {
    let db = TestDb::mysql().await;
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    let im = FakeIm::start(options).await;
    let mut node = Node::new(db.url(), &im);
    node.node_id = "main-stack".into();
    node.env.push(("ROOM_SERVICE__OUTBOX_WORKER__PUBLISH_TIMEOUT".into(), "300ms".into()));
    let mut child = node.spawn();
    let http = reqwest::Client::new();
    eventually("the node serves", Duration::from_secs(30), || async {
        let url = format!("http://127.0.0.1:{}/readyz", node.port);
        http.get(url).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;

    // RoomCreated is no message but the group's creation (delivered on the sync path); a join
    // reaches IM as a message; a gift's RoomHeatChanged never reaches IM (the filter: counted
    // as skipped).
    let create = json!({"command_id": "c-1", "room_id": "r-1", "owner_id": "o", "title": "t"});
    command(&http, &node, "/v1/rooms", create).await;
    command(&http, &node, "/v1/rooms/r-1/join", json!({"command_id": "j-1", "user_id": "a"})).await;
    let gift = json!({"command_id": "g-1", "sender_id": "a", "receiver_id": "o", "gift_id": "rose",
        "count": 1, "unit_value": 1});
    command(&http, &node, "/v1/rooms/r-1/gifts", gift).await;
    eventually(
        "the skip and the deliveries are counted on the sync path",
        Duration::from_secs(10),
        || async {
            let text = node.metrics().await;
            let created = [("path", "sync"), ("event_type", "RoomCreated"), ("result", "delivered")];
            let skipped = [("path", "sync"), ("event_type", "RoomHeatChanged"), ("result", "skipped")];
            let delivered = [("path", "sync"), ("event_type", "RoomUserJoined"), ("result", "delivered")];
            counted(&text, PUBLISH_SUCCESS_TOTAL, &created) >= 1.0
                && counted(&text, PUBLISH_SUCCESS_TOTAL, &skipped) >= 1.0
                && counted(&text, PUBLISH_SUCCESS_TOTAL, &delivered) >= 1.0
        },
    )
    .await;
    let sent = im.all_messages();
    assert!(sent.iter().all(|m| m.desc != "RoomCreated" && m.desc != "RoomHeatChanged"), "filtered");
    assert!(im.journal().iter().any(|e| e.api == "create_group"), "the room's group was created");

    // IM slower than publish_timeout: the sync publish is cut off and counted as a timeout,
    // then the worker's attempts too, until IM is fast again and the worker delivers.
    im.set_latency(Duration::from_secs(1));
    command(&http, &node, "/v1/rooms/r-1/join", json!({"command_id": "j-2", "user_id": "b"})).await;
    eventually("timeouts are counted on both paths", Duration::from_secs(20), || async {
        let text = node.metrics().await;
        let sync = [("path", "sync"), ("class", "timeout")];
        let worker = [("path", "worker"), ("class", "timeout")];
        counted(&text, PUBLISH_FAILURE_TOTAL, &sync) >= 1.0
            && counted(&text, PUBLISH_FAILURE_TOTAL, &worker) >= 1.0
    })
    .await;
    im.set_latency(Duration::ZERO);
    eventually("the worker delivers once IM is fast again", Duration::from_secs(20), || async {
        let worker = [("path", "worker"), ("event_type", "RoomUserJoined"), ("result", "delivered")];
        counted(&node.metrics().await, PUBLISH_SUCCESS_TOTAL, &worker) >= 1.0
    })
    .await;

    child.kill().expect("kill the node");
    child.wait().expect("reap the node");
}
