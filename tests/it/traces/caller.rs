//! What a caller's trace context may ask (issue #45): a sampled `traceparent` on every command
//! is kept only within the node's `telemetry.otlp.forced_per_sec` (beyond it the ratio
//! decides, the trace id still continued), and a `traceparent` sent twice — over HTTP or in
//! gRPC metadata — continues neither: the command starts a trace of its own.

use std::time::{Duration, Instant};

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use room_service::telemetry::names;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::json;

use super::{CALLER_SPAN, Receiver, TRACE, answered_trace, post, traceparent};
use crate::delivery::Node;
use crate::observability::exposition::Exposition;
use crate::outbox::harness::{ADMIN, APP, KEY};

/// A node exporting to `receiver` with `env` on top.
fn node(dir: &std::path::Path, im: &FakeIm, receiver: &Receiver, env: &[(&str, &str)]) -> Node {
    let mut node = Node::new(&format!("sqlite://{}/rooms.db?mode=rwc", dir.display()), im);
    node.env = receiver.env();
    node.env.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    node
}

fn create(id: &str) -> serde_json::Value {
    json!({"command_id": id, "room_id": id, "owner_id": "o", "title": "t"})
}

#[tokio::test]
async fn a_caller_sampling_every_command_gets_only_the_budgets_worth_kept() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let env = [
        ("ROOM_SERVICE__TELEMETRY__OTLP__SAMPLE_RATIO", "0.0"),
        ("ROOM_SERVICE__TELEMETRY__OTLP__FORCED_PER_SEC", "3"),
    ];
    let node = node(dir.path(), &im, &receiver, &env);
    let _child = node.spawn();
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{}", node.port)).await;

    let started = Instant::now();
    let (mut kept, mut refused) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let trace = format!("{:032x}", 0xf00d_0000_u128 + i);
        let answer = post(
            node.port,
            "/v1/rooms",
            create(&format!("f{i}")),
            Some(&traceparent(&trace, CALLER_SPAN, "01")),
        )
        .await;
        assert_eq!(answer.status(), 200);
        assert_eq!(answered_trace(answer.headers()), trace, "the caller's trace is continued, kept or not");
        let flags = answer.headers()["traceparent"].to_str().unwrap().rsplit('-').next().unwrap().to_owned();
        if flags == "01" { kept.push(trace) } else { refused.push(trace) }
    }
    // 3 at once, and 3 a second while the commands ran (the ratio, 0, keeps none).
    let most = 3 + 3 * started.elapsed().as_secs_f64().ceil() as usize;
    assert!((3..=most).contains(&kept.len()), "kept {} of 20 in {:?}", kept.len(), started.elapsed());
    assert!(kept.len() < 20);
    let metrics = Exposition::parse(&node.metrics().await);
    assert_eq!(metrics.sum(names::TRACE_FORCED_REFUSED_TOTAL, &[]), refused.len() as f64);

    // The kept ones are exported, the refused ones not.
    let last = kept.last().unwrap();
    receiver.wait_for_all(last, &["http", "command"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for trace in &kept {
        assert!(!receiver.trace(trace).0.is_empty(), "kept trace {trace} exported");
    }
    for trace in &refused {
        assert!(receiver.trace(trace).0.is_empty(), "refused trace {trace} not exported");
    }
}

#[tokio::test]
async fn a_traceparent_sent_twice_starts_a_new_trace_over_http_and_grpc() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let im = FakeIm::start(FakeImOptions::new(APP, KEY, ADMIN)).await;
    let node = node(dir.path(), &im, &receiver, &[]);
    let _child = node.spawn();
    crate::support::wait_ready(&reqwest::Client::new(), &format!("http://127.0.0.1:{}", node.port)).await;
    let other = "0af7651916cd43dd8448eb211c80319c";
    let (first, second) = (traceparent(TRACE, CALLER_SPAN, "01"), traceparent(other, CALLER_SPAN, "01"));

    // HTTP: two traceparent headers (and two tracestates).
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/rooms", node.port))
        .header("traceparent", &first)
        .header("traceparent", &second)
        .header("tracestate", "caller=1")
        .header("tracestate", "caller=2")
        .json(&create("d1"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let fresh = answered_trace(answer.headers());
    assert!(fresh != TRACE && fresh != other, "neither traceparent is continued: {fresh}");
    assert!(answer.headers().get("tracestate").is_none(), "nor either tracestate");
    let trace = receiver.wait_for_all(&fresh, &["http", "command"]).await;
    assert_eq!(trace.named("http").next().unwrap()["parent_span_id"], "", "a root: {:#?}", trace.shape());

    // One traceparent and two tracestates: the trace is continued, without a tracestate.
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/v1/rooms", node.port))
        .header("traceparent", &first)
        .header("tracestate", "caller=1")
        .header("tracestate", "caller=2")
        .json(&create("d2"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answered_trace(answer.headers()), TRACE);
    assert!(answer.headers().get("tracestate").is_none(), "a tracestate sent twice is dropped");

    // gRPC: two traceparent metadata entries.
    let mut client =
        RoomServiceClient::connect(format!("http://127.0.0.1:{}", node.grpc_port)).await.expect("gRPC");
    let mut request = tonic::Request::new(pb::MemberRequest {
        command_id: "d3".into(),
        room_id: "d1".into(),
        user_id: "u".into(),
    });
    request.metadata_mut().append("traceparent", first.parse().unwrap());
    request.metadata_mut().append("traceparent", second.parse().unwrap());
    let answer = client.join_room(request).await.expect("joined over gRPC");
    let answered = answer.metadata().get("traceparent").expect("traceparent metadata").to_str().unwrap();
    let fresh = answered.split('-').nth(1).unwrap().to_owned();
    assert!(fresh != TRACE && fresh != other, "neither traceparent is continued: {answered}");
    let trace = receiver.wait_for_all(&fresh, &["grpc", "command"]).await;
    assert_eq!(trace.named("grpc").next().unwrap()["parent_span_id"], "", "a root: {:#?}", trace.shape());
}
