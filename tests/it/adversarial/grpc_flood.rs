//! Row 9, the gRPC flood (SPEC §13.1 "gRPC edge = HTTP edge"), against the real binary
//! (`auth.mode: jwt` with an HS256 secret, SQLite, IM disabled): 50 raw HTTP/2 connections, each
//! opening as many `Heartbeats` streams as the server allows, every one without a token,
//! announcing a maximum-size message and sending all of it but the last kilobyte, then holding.
//!
//! Promised: resident memory grows by at most 64 MB while the flood is held, and an
//! authenticated `CreateRoom` is served during the flood and after it. Before the gRPC edge
//! had its limits, the same flood raised RSS by over a gigabyte. Run with `--nocapture` for
//! the figures (docs/RELIABILITY.md).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{Method, Request};
use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use tokio::net::TcpStream;
use tonic::transport::Channel;

use crate::support::{Spawned, free_port, rss_kb};

/// The HS256 key of the node under test.
const SECRET: &str = "a-flood-test-hs256-key-of-32-bytes-or-more";
/// Connections of the flood.
const CONNECTIONS: usize = 50;
/// Streams tried per connection: more than any server here allows (hyper's default is 200).
const MOST_STREAMS: usize = 256;
/// The largest `Heartbeats` message (`BATCH_HEARTBEAT_BYTES`), announced by every stream.
const MAX_MESSAGE: usize = room_service::api::BATCH_HEARTBEAT_BYTES;
/// What each stream leaves unsent of its message: the server waits for it forever.
const HELD_BACK: usize = 1024;
/// Most the flood may add to the node's resident memory.
const MAX_GROWTH_KB: u64 = 64 * 1024;

fn spawn(dir: &std::path::Path, grpc_port: u16) -> Spawned {
    let log = std::fs::File::create(dir.join("log")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_room-service"));
    command
        .args(["--config", "config/config.yaml", "serve"])
        .env("ROOM_SERVICE__DATABASE__URL", format!("sqlite://{}/rooms.db?mode=rwc", dir.display()))
        .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("ROOM_SERVICE__GRPC__LISTEN", format!("127.0.0.1:{grpc_port}"))
        .env("ROOM_SERVICE__AUTH__MODE", "jwt")
        .env("ROOM_SERVICE__AUTH__JWT__ALGORITHMS", "HS256")
        .env("ROOM_SERVICE__AUTH__JWT__SECRET", SECRET)
        .env("ROOM_SERVICE__LOG__LEVEL", "warn")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(log);
    Spawned::spawn(&mut command, "room-service")
}

/// An HS256 token for `user`, valid for five minutes.
fn token(user: &str) -> String {
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 300;
    let claims = serde_json::json!({"sub": user, "exp": exp});
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap();
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), &claims, &key).unwrap()
}

/// Alice creates room `room` over gRPC with her token, on a connection of its own.
async fn create_room(grpc_port: u16, room: &str) -> Result<pb::CommandOutcome, tonic::Status> {
    let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(pb::CreateRoomRequest {
        command_id: format!("create-{room}"),
        room_id: room.into(),
        owner_id: "alice".into(),
        title: "t".into(),
        seats: None,
    });
    request.metadata_mut().insert("authorization", format!("Bearer {}", token("alice")).parse().unwrap());
    RoomServiceClient::new(channel).create_room(request).await.map(tonic::Response::into_inner)
}

/// One connection of the flood, held while it lives: its streams and their answers.
struct Held {
    streams: Vec<(h2::SendStream<Bytes>, h2::client::ResponseFuture)>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the client last saw it.
    allowed: usize,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Opens a connection and as many streams as the server lets it (at most [`MOST_STREAMS`]),
/// each sending a maximum-size message but its last [`HELD_BACK`] bytes, without a token.
async fn flood_connection(grpc_port: u16) -> Option<Held> {
    let stream = TcpStream::connect(("127.0.0.1", grpc_port)).await.ok()?;
    let (mut client, connection) = h2::client::handshake(stream).await.ok()?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    // The server's SETTINGS (its stream limit) arrive first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut frame = Vec::with_capacity(MAX_MESSAGE - HELD_BACK + 5);
    frame.push(0);
    frame.extend_from_slice(&u32::try_from(MAX_MESSAGE).unwrap().to_be_bytes());
    frame.resize(MAX_MESSAGE - HELD_BACK + 5, 0x0a);
    let frame = Bytes::from(frame);
    let mut streams = Vec::new();
    let mut allowed = client.current_max_send_streams();
    while streams.len() < MOST_STREAMS.min(allowed) {
        // A server at its stream limit (holding every stream) makes this wait: that is all.
        let Ok(Ok(ready)) = tokio::time::timeout(Duration::from_millis(500), client.ready()).await else {
            break;
        };
        client = ready;
        allowed = client.current_max_send_streams();
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://127.0.0.1:{grpc_port}/room.v1.RoomService/Heartbeats"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let Ok((response, mut body)) = client.send_request(request, false) else { break };
        if body.send_data(frame.clone(), false).is_err() {
            break;
        }
        streams.push((body, response));
        tokio::task::yield_now().await;
    }
    Some(Held { streams, allowed, driver })
}

#[tokio::test]
async fn half_sent_max_size_messages_without_a_token_cost_the_node_little() {
    let dir = tempfile::tempdir().unwrap();
    let grpc_port = free_port();
    let mut child = spawn(dir.path(), grpc_port);
    let mut ready = Err(tonic::Status::unavailable("not started"));
    for _ in 0..100 {
        ready = create_room(grpc_port, "before").await;
        if ready.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ready.expect("an authenticated CreateRoom before the flood");
    let rss_before = rss_kb(child.id());

    let started = Instant::now();
    let held: Vec<Held> = futures::future::join_all((0..CONNECTIONS).map(|_| flood_connection(grpc_port)))
        .await
        .into_iter()
        .flatten()
        .collect();
    let streams: usize = held.iter().map(|h| h.streams.len()).sum();
    let connections = held.len();
    let allowed = held.iter().map(|h| h.allowed).max().unwrap_or_default();
    let opened_in = started.elapsed();
    // Held for a few seconds: the figure is the highest RSS seen meanwhile.
    let mut rss_peak = rss_kb(child.id());
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        rss_peak = rss_peak.max(rss_kb(child.id()));
    }
    let during = tokio::time::timeout(Duration::from_secs(10), create_room(grpc_port, "during"))
        .await
        .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer in 10 s")));
    rss_peak = rss_peak.max(rss_kb(child.id()));
    drop(held);
    let after = create_room(grpc_port, "after").await;
    let rss_after = rss_kb(child.id());
    child.stop();
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();

    eprintln!(
        "row 9 gRPC flood: {connections} connections (streams allowed per connection: {allowed}), {streams} streams of {MAX_MESSAGE}-byte messages ({} bytes sent \
         each, no token) opened in {opened_in:?}; RSS {} MB before, {} MB while held (+{} MB), {} MB after; \
         CreateRoom during: {}, after: {}",
        MAX_MESSAGE - HELD_BACK,
        rss_before / 1024,
        rss_peak / 1024,
        rss_peak.saturating_sub(rss_before) / 1024,
        rss_after / 1024,
        answer(&during),
        answer(&after),
    );
    assert!(!log.contains("panicked"), "{log}");
    assert!(streams >= CONNECTIONS, "the flood opened only {streams} streams");
    assert!(during.expect("CreateRoom during the flood").applied);
    assert!(after.expect("CreateRoom after the flood").applied);
    assert!(
        rss_peak <= rss_before + MAX_GROWTH_KB,
        "RSS grew from {rss_before} kB to {rss_peak} kB while the flood was held"
    );
}

/// What a CreateRoom answered, for the figures.
fn answer(result: &Result<pb::CommandOutcome, tonic::Status>) -> String {
    match result {
        Ok(outcome) => format!("applied={}", outcome.applied),
        Err(status) => format!("{:?} {}", status.code(), status.message()),
    }
}
