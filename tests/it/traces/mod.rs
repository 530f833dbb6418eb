//! One trace per command (SPEC §13.4), against a receiver written apart from the service:
//! `tests/peer/otlp_receiver.py`, Python's grpcio serving the OTLP TraceService from the
//! opentelemetry-proto package (`scripts/test.sh` installs both). The real binary exports to it;
//! the tests read the spans it wrote down and check how they hang together.
//!
//! - [`export`]: spans lost to a collector that does not take them, counted and warned of;
//! - [`caller`]: what a caller's trace context may ask (the forced-sampling budget, a header
//!   sent twice).

mod caller;
mod export;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::{Value, json};

use crate::cluster::Nodes;
use crate::delivery::{Node, eventually};
use crate::outbox::harness::{ADMIN, APP, KEY};
use crate::support::Spawned;

/// The caller's trace: a span of its own, sampled.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str, span: &str, flags: &str) -> String {
    format!("00-{trace}-{span}-{flags}")
}

/// The receiver, stopped with its process group when dropped.
struct Receiver {
    _process: Spawned,
    file: tempfile::NamedTempFile,
    port: u16,
}

impl Receiver {
    fn start() -> Self {
        let file = tempfile::NamedTempFile::new().expect("spans file");
        let mut process = Spawned::spawn(
            Command::new("python3")
                .arg("tests/peer/otlp_receiver.py")
                .arg(file.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped()),
            "otlp_receiver.py (pip install grpcio opentelemetry-proto)",
        );
        let mut line = String::new();
        let stdout = process.stdout.take().expect("piped");
        BufReader::new(stdout).read_line(&mut line).expect("the receiver's port");
        let port = line.trim().strip_prefix("port ").and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Self { _process: process, file, port }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `ROOM_SERVICE__*` variables that export to this receiver, every trace kept.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("ROOM_SERVICE__TELEMETRY__OTLP__ENDPOINT".into(), self.endpoint()),
            ("ROOM_SERVICE__TELEMETRY__OTLP__SAMPLE_RATIO".into(), "1.0".into()),
        ]
    }

    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.file.path()).unwrap_or_default();
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    fn trace(&self, trace_id: &str) -> Trace {
        Trace(self.spans().into_iter().filter(|s| s["trace_id"] == trace_id).collect())
    }

    /// Waits until the trace holds a span named `name` (spans leave in batches, each second).
    async fn wait_for(&self, trace_id: &str, name: &str) -> Trace {
        self.wait_for_all(trace_id, &[name]).await
    }

    /// Waits until the trace holds a span of each name, as many as the name is listed (spans
    /// leave when they end, each node its own, in batches: a parent often after its children).
    async fn wait_for_all(&self, trace_id: &str, names: &[&str]) -> Trace {
        eventually(&format!("spans {names:?} in trace {trace_id}"), Duration::from_secs(20), || async {
            let trace = self.trace(trace_id);
            names.iter().all(|name| {
                let wanted = names.iter().filter(|n| *n == name).count();
                trace.named(name).count() >= wanted
            })
        })
        .await;
        self.trace(trace_id)
    }
}

/// The spans of one trace.
struct Trace(Vec<Value>);

impl Trace {
    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0.iter().filter(move |s| s["name"] == name)
    }

    /// The one span named `name` whose parent is `parent`.
    fn child<'a>(&'a self, parent: &Value, name: &'a str) -> &'a Value {
        let found: Vec<&Value> =
            self.named(name).filter(|s| s["parent_span_id"] == parent["span_id"]).collect();
        assert_eq!(found.len(), 1, "one {name} under {}: {:#?}", parent["name"], self.0);
        found[0]
    }

    /// The span ids by name, for a failing assertion's message.
    fn shape(&self) -> HashMap<String, Vec<String>> {
        let mut shape: HashMap<String, Vec<String>> = HashMap::new();
        for s in &self.0 {
            shape
                .entry(s["name"].as_str().unwrap_or("?").to_owned())
                .or_default()
                .push(format!("{} <- {} @{}", s["span_id"], s["parent_span_id"], s["instance"]));
        }
        shape
    }
}

/// The trace id of an answer's `traceparent`.
fn answered_trace(headers: &reqwest::header::HeaderMap) -> String {
    let value = headers.get("traceparent").expect("the answer carries traceparent").to_str().unwrap();
    value.split('-').nth(1).expect("a traceparent").to_owned()
}

async fn post(port: u16, path: &str, body: Value, trace: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(format!("http://127.0.0.1:{port}{path}")).json(&body);
    if let Some(trace) = trace {
        request = request.header("traceparent", trace).header("tracestate", "caller=1");
    }
    request.send().await.expect("the node answers")
}

/// Posts until the shards have settled (503 `not_owner` right after start).
async fn post_settled(nodes: &Nodes, i: usize, path: &str, body: Value) {
    let mut answer = nodes.post(i, path, body.clone()).await;
    for _ in 0..50 {
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        answer = nodes.post(i, path, body.clone()).await;
    }
    assert_eq!(answer.0, 200, "{}", answer.1);
}

/// The owner's part of a command's trace under `edge` (its `http` span): the command, its
/// commit, its lane, the publish through the stack and the IM call carrying the event.
fn assert_command_below(trace: &Trace, edge: &Value, owner: &str) {
    assert_eq!(edge["instance"], owner, "{:#?}", trace.shape());
    trace.child(edge, "auth");
    let command = trace.child(edge, "command");
    assert_eq!(command["attributes"]["command"], "join_room");
    trace.child(command, "commit");
    let lane = trace.child(command, "lane");
    let publish = trace.child(lane, "publish");
    assert_eq!(publish["attributes"]["path"], "sync");
    let im = trace.child(publish, "im");
    assert_eq!(im["attributes"]["events"].to_string().trim_matches('"'), "1", "{im}");
    let bytes: u64 = im["attributes"]["bytes"].to_string().trim_matches('"').parse().unwrap_or(0);
    assert!(bytes > 100, "the pack's size is on the IM call's span: {im}");
}

#[tokio::test]
async fn a_command_through_two_nodes_is_one_trace_from_the_callers_span_to_the_im_call() {
    let receiver = Receiver::start();
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let nodes = Nodes::start(2, &env).await;
    post_settled(
        &nodes,
        0,
        "/v1/rooms",
        json!({"command_id": "c1", "room_id": "t-r1", "owner_id": "o", "title": "t"}),
    )
    .await;
    let owner = nodes.owner(0, "t-r1").await;
    let entry = 1 - owner;
    let (entry_id, owner_id) = (nodes.nodes[entry].node_id.as_str(), nodes.nodes[owner].node_id.as_str());

    // HTTP: the caller's traceparent is continued on the entry node, over the hop, at the owner.
    let caller = traceparent(TRACE, CALLER_SPAN, "01");
    let join = json!({"command_id": "c2", "user_id": "u1"});
    let answer = post(nodes.nodes[entry].port, "/v1/rooms/t-r1/join", join, Some(&caller)).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answered_trace(answer.headers()), TRACE, "the answer names the caller's trace");
    let spans = ["http", "http", "auth", "auth", "forward", "command", "commit", "lane", "publish", "im"];
    let trace = receiver.wait_for_all(TRACE, &spans).await;
    let edge = trace.child(&json!({"span_id": CALLER_SPAN}), "http");
    assert_eq!(edge["instance"], entry_id, "{:#?}", trace.shape());
    let forward = trace.child(edge, "forward");
    let at_owner = trace.child(forward, "http");
    assert_command_below(&trace, at_owner, owner_id);
    assert!(trace.0.iter().all(|s| s["service"] == "room-service"));

    // gRPC: the same from the call's metadata, the answer's metadata naming the trace.
    let grpc_trace = "0af7651916cd43dd8448eb211c80319c";
    let addr = format!("http://127.0.0.1:{}", nodes.nodes[entry].grpc_port);
    let mut client = RoomServiceClient::connect(addr).await.expect("gRPC");
    let mut request = tonic::Request::new(pb::MemberRequest {
        command_id: "c3".into(),
        room_id: "t-r1".into(),
        user_id: "u2".into(),
    });
    let parent = traceparent(grpc_trace, CALLER_SPAN, "01");
    request.metadata_mut().insert("traceparent", parent.parse().unwrap());
    let answer = client.join_room(request).await.expect("joined over gRPC");
    let answered = answer.metadata().get("traceparent").expect("traceparent metadata").to_str().unwrap();
    assert!(answered.contains(grpc_trace), "{answered}");
    let spans = ["grpc", "http", "auth", "auth", "forward", "command", "commit", "lane", "publish", "im"];
    let trace = receiver.wait_for_all(grpc_trace, &spans).await;
    let edge = trace.child(&json!({"span_id": CALLER_SPAN}), "grpc");
    assert_eq!(edge["instance"], entry_id);
    let at_owner = trace.child(trace.child(edge, "forward"), "http");
    assert_command_below(&trace, at_owner, owner_id);
}

#[tokio::test]
async fn a_redelivery_after_a_restart_is_a_new_trace_linked_to_the_commands_span() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let mut node = Node::new(&format!("sqlite://{}/rooms.db?mode=rwc", dir.path().display()), &im);
    node.node_id = "before".into();
    // IM cannot be reached: the lane's call fails and the row stays pending.
    node.env = receiver.env();
    node.env.push(("ROOM_SERVICE__TENCENT_IM__BASE_URL".into(), "http://127.0.0.1:9".into()));
    let base = format!("http://127.0.0.1:{}", node.port);
    let http = reqwest::Client::new();
    let mut child = node.spawn();
    crate::support::wait_ready(&http, &base).await;
    // The room's first IM call is its group's creation: it fails, and the room's rows (the
    // creation, then the join) stay pending for the worker.
    let create = json!({"command_id": "c1", "room_id": "w-r1", "owner_id": "o", "title": "t"});
    let answer = post(node.port, "/v1/rooms", create, None).await;
    assert_eq!(answer.status(), 200);
    let joined =
        post(node.port, "/v1/rooms/w-r1/join", json!({"command_id": "c2", "user_id": "u1"}), None).await;
    assert_eq!(joined.status(), 200);
    let command_trace = answered_trace(answer.headers());
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["events"][0]["delivery"], "pending", "{body}");
    let trace = receiver.wait_for_all(&command_trace, &["im", "command"]).await;
    let command = trace.named("command").next().expect("the command's span").clone();
    let failed = trace.named("im").next().unwrap();
    assert!(failed["attributes"].get("status").is_some(), "the failed call says why: {failed}");

    // Killed with the event pending; restarted (as another instance) with IM back, and the
    // audit consumer on.
    Node::stop(&mut child);
    node.node_id = "after".into();
    node.env.retain(|(key, _)| key != "ROOM_SERVICE__TENCENT_IM__BASE_URL");
    node.env.push(("ROOM_SERVICE__CONSUMERS__AUDIT__ENABLED".into(), "true".into()));
    let _child = node.spawn();
    crate::support::wait_ready(&http, &base).await;
    let linked = |s: &Value| {
        s["links"].as_array().is_some_and(|links| {
            links.iter().any(|l| l["trace_id"] == command["trace_id"] && l["span_id"] == command["span_id"])
        })
    };
    let by_worker =
        |s: &Value| s["name"] == "publish" && s["attributes"]["path"] == "worker" && s["instance"] == "after";
    eventually("the redelivery's span, linked to the command", Duration::from_secs(30), || async {
        receiver.spans().iter().any(|s| by_worker(s) && linked(s))
    })
    .await;
    let spans = receiver.spans();
    let redelivery = spans.iter().find(|s| by_worker(s) && linked(s)).unwrap();
    assert_eq!(redelivery["parent_span_id"], "", "a trace of its own: {redelivery}");
    assert_ne!(redelivery["trace_id"], command["trace_id"]);
    let redelivered = receiver.wait_for(redelivery["trace_id"].as_str().unwrap(), "im").await;
    redelivered.child(redelivery, "im");
    assert_eq!(im.all_messages().len(), 1, "the event reached IM once, by the worker");
    // The audit consumer's delivery of the same event is linked to the command too.
    eventually("the audit delivery's span, linked to the command", Duration::from_secs(30), || async {
        receiver
            .spans()
            .iter()
            .any(|s| s["name"] == "publish" && s["attributes"]["path"] == "audit" && linked(s))
    })
    .await;
}

#[tokio::test]
async fn a_callers_trace_context_is_hostile_input_a_bad_one_starts_a_new_trace() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let mut node = Node::new(&format!("sqlite://{}/rooms.db?mode=rwc", dir.path().display()), &im);
    node.env = receiver.env();
    let _child = node.spawn();
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{}", node.port)).await;
    let create = |id: &str| json!({"command_id": id, "room_id": id, "owner_id": "o", "title": "t"});

    // Not a traceparent: a new trace, answered.
    let answer = post(node.port, "/v1/rooms", create("h1"), Some("00-zz-yy-01")).await;
    assert_eq!(answer.status(), 200);
    let fresh = answered_trace(answer.headers());
    assert_ne!(fresh, "zz");
    let trace = receiver.wait_for_all(&fresh, &["command", "http"]).await;
    assert_eq!(trace.named("http").next().unwrap()["parent_span_id"], "", "a root: {:#?}", trace.shape());

    // A tracestate longer than W3C's 512 is not carried (it would ride on every span).
    let long = format!("{},{}", "a=b", "k=v".repeat(300));
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/rooms", node.port))
        .header("traceparent", traceparent(TRACE, CALLER_SPAN, "01"))
        .header("tracestate", long)
        .json(&create("h2"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answered_trace(answer.headers()), TRACE);
    assert!(answer.headers().get("tracestate").is_none(), "the long tracestate was dropped");

    // The caller's "not sampled" is kept: nothing of that trace is exported.
    let unsampled = "11111111111111111111111111111111";
    let answer =
        post(node.port, "/v1/rooms", create("h3"), Some(&traceparent(unsampled, CALLER_SPAN, "00"))).await;
    assert_eq!(answer.status(), 200);
    let answered = answer.headers()["traceparent"].to_str().unwrap().to_owned();
    assert!(answered.ends_with("-00") && answered.contains(unsampled), "{answered}");
    receiver.wait_for(TRACE, "command").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(receiver.trace(unsampled).0.is_empty(), "an unsampled trace is not exported");
}

#[tokio::test]
async fn with_no_endpoint_nothing_is_exported_and_no_trace_context_is_answered_or_stored() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let db_url = format!("sqlite://{}/rooms.db?mode=rwc", dir.path().display());
    let mut node = Node::new(&db_url, &im);
    // The SDK's own variable names the receiver: still nothing goes there.
    node.wrapper = vec!["env".into(), format!("OTEL_EXPORTER_OTLP_ENDPOINT={}", receiver.endpoint())];
    let _child = node.spawn();
    let port = node.port;
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{port}")).await;
    let create = json!({"command_id": "c1", "room_id": "n-r1", "owner_id": "o", "title": "t"});
    let answer = post(port, "/v1/rooms", create, Some(&traceparent(TRACE, CALLER_SPAN, "01"))).await;
    assert_eq!(answer.status(), 200);
    assert!(answer.headers().get("traceparent").is_none());
    let join = post(port, "/v1/rooms/n-r1/join", json!({"command_id": "c2", "user_id": "u"}), None).await;
    assert_eq!(join.status(), 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(receiver.spans().is_empty(), "nothing exported: {:?}", receiver.spans());
    let pool = sqlx::SqlitePool::connect(&db_url).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM room_outbox WHERE trace_context IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "no row keeps a trace context");
}
