//! Fault row 10, unknown rooms cost nothing lasting (SPEC §13.1), against the real binary
//! (SQLite file, IM disabled, `auth.mode: none` on loopback, so reads need no token): 60,000
//! reads of distinct rooms that do not exist, over kept-alive connections from a few clients,
//! then heartbeats (single and batch) and a gRPC `GetRoom` of unknown rooms.
//!
//! Promised: every answer is 404 `room_not_found` (gRPC `NOT_FOUND`), resident memory grows by
//! at most 32 MB, and a room created afterwards — even one whose miss was just remembered — is
//! readable at once. Run with `--nocapture` for the figures (docs/RELIABILITY.md).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};

use crate::support::{Spawned, free_port, rss_kb, wait_ready};

/// Distinct unknown rooms read.
const READS: usize = 60_000;
/// Concurrent clients, each on its own kept-alive connection.
const CLIENTS: usize = 4;
/// RSS growth allowed (kB).
const MAX_GROWTH_KB: u64 = 32 * 1024;

/// CPU time (user + system, in clock ticks of 10 ms) the process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name (in parentheses): state is field 3, utime 14, stime 15.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    fields.get(11..13).map_or(0, |t| t.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
}

fn spawn(dir: &std::path::Path, port: u16, admin_port: u16, grpc_port: u16) -> Spawned {
    let log = std::fs::File::create(dir.join("log")).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_room-service"));
    command
        .args(["--config", "config/config.yaml", "serve"])
        .env("ROOM_SERVICE__DATABASE__URL", format!("sqlite://{}/rooms.db?mode=rwc", dir.display()))
        .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", format!("127.0.0.1:{admin_port}"))
        .env("ROOM_SERVICE__GRPC__LISTEN", format!("127.0.0.1:{grpc_port}"))
        .env("ROOM_SERVICE__TENCENT_IM__ENABLED", "false")
        .env("ROOM_SERVICE__AUTH__MODE", "none")
        .env("ROOM_SERVICE__LOG__LEVEL", "warn")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(log);
    Spawned::spawn(&mut command, "room-service")
}

/// The status and error code of an answer (`""` when it has none).
async fn answer(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, body["error"]["code"].as_str().unwrap_or_default().to_owned())
}

/// Reads `/v1/rooms/{prefix}-{i}` for every `i` of `ids` on one kept-alive connection; the
/// answers counted by (status, code).
async fn read_all(base: String, prefix: String, ids: std::ops::Range<usize>) -> BTreeMap<(u16, String), u32> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    let mut answers = BTreeMap::new();
    for i in ids {
        let got = match client.get(format!("{base}/v1/rooms/{prefix}-{i}")).send().await {
            Ok(response) => answer(response).await,
            Err(_) => (0, "transport".to_owned()),
        };
        *answers.entry(got).or_default() += 1;
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_rooms_cost_nothing_lasting() {
    let dir = tempfile::tempdir().unwrap();
    let (port, admin_port, grpc_port) = (free_port(), free_port(), free_port());
    let mut child = spawn(dir.path(), port, admin_port, grpc_port);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
    wait_ready(&client, &base).await;
    // Warm the read path once (allocator arenas, the pool's connections) before measuring.
    let warm = read_all(base.clone(), "warm".into(), 0..500).await;
    assert_eq!(warm.keys().collect::<Vec<_>>(), [&(404, "room_not_found".to_owned())], "{warm:?}");
    let rss_before = rss_kb(child.id());
    let (cpu_before, our_cpu_before) = (cpu_ticks(child.id()), cpu_ticks(std::process::id()));

    let started = Instant::now();
    let per_client = READS / CLIENTS;
    let readers: Vec<_> = (0..CLIENTS)
        .map(|c| tokio::spawn(read_all(base.clone(), "nope".into(), c * per_client..(c + 1) * per_client)))
        .collect();
    let mut answers = BTreeMap::<(u16, String), u32>::new();
    for reader in readers {
        for (key, n) in reader.await.unwrap() {
            *answers.entry(key).or_default() += n;
        }
    }
    let took = started.elapsed();
    let rss_after = rss_kb(child.id());
    let server_cpu = Duration::from_millis(cpu_ticks(child.id()).saturating_sub(cpu_before) * 10);
    let client_cpu = Duration::from_millis(cpu_ticks(std::process::id()).saturating_sub(our_cpu_before) * 10);

    // Heartbeats of unknown rooms, single and batch, and a gRPC read.
    let mut beats = BTreeMap::<(u16, String), u32>::new();
    for i in 0..200 {
        let single = client
            .post(format!("{base}/v1/rooms/beat-{i}/heartbeat"))
            .json(&json!({"user_id": "u1"}))
            .send()
            .await
            .unwrap();
        *beats.entry(answer(single).await).or_default() += 1;
        let batch = client
            .post(format!("{base}/v1/rooms/beats-{i}/heartbeats"))
            .json(&json!({"user_ids": ["u1", "u2"]}))
            .send()
            .await
            .unwrap();
        *beats.entry(answer(batch).await).or_default() += 1;
    }
    let channel = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{grpc_port}"))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect");
    let mut grpc = RoomServiceClient::new(channel);
    let mut grpc_codes = BTreeMap::<String, u32>::new();
    for i in 0..200 {
        let code = match grpc.get_room(pb::GetRoomRequest { room_id: format!("grpc-nope-{i}") }).await {
            Ok(_) => "OK".to_owned(),
            Err(status) => format!("{:?}", status.code()),
        };
        *grpc_codes.entry(code).or_default() += 1;
    }
    let rss_end = rss_kb(child.id());

    // A room read while unknown (its miss remembered), then created here: readable at once.
    assert_eq!(answer(client.get(format!("{base}/v1/rooms/late")).send().await.unwrap()).await.0, 404);
    let create = json!({"command_id": "create-late", "room_id": "late", "owner_id": "o", "title": "t"});
    assert_eq!(client.post(format!("{base}/v1/rooms")).json(&create).send().await.unwrap().status(), 200);
    let late = client.get(format!("{base}/v1/rooms/late")).send().await.unwrap();
    let late_status = late.status().as_u16();
    let via_grpc = grpc.get_room(pb::GetRoomRequest { room_id: "late".into() }).await;

    child.kill().unwrap();
    child.wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    eprintln!(
        "row 10 unknown rooms: {READS} distinct unknown rooms read by {CLIENTS} clients in {took:?} \
         ({:.0}/s; CPU: service {server_cpu:?}, clients {client_cpu:?}): {answers:?}; RSS {} kB before, {} kB after (+{} kB, {} B per room); \
         heartbeats {beats:?}; gRPC GetRoom {grpc_codes:?}; RSS {} kB at the end",
        READS as f64 / took.as_secs_f64(),
        rss_before,
        rss_after,
        rss_after.saturating_sub(rss_before),
        rss_after.saturating_sub(rss_before) * 1024 / READS as u64,
        rss_end,
    );
    assert_eq!(
        answers.into_iter().collect::<Vec<_>>(),
        vec![((404, "room_not_found".to_owned()), READS as u32)],
        "every unknown room is 404 room_not_found"
    );
    assert!(
        rss_after <= rss_before + MAX_GROWTH_KB,
        "RSS grew from {rss_before} kB to {rss_after} kB reading {READS} unknown rooms"
    );
    assert_eq!(beats.get(&(404, "room_not_found".to_owned())), Some(&400), "heartbeats: {beats:?}");
    assert_eq!(grpc_codes.into_iter().collect::<Vec<_>>(), vec![("NotFound".to_owned(), 200)]);
    assert_eq!(late_status, 200, "a room created here is readable at once");
    assert!(via_grpc.is_ok(), "and over gRPC: {via_grpc:?}");
    assert!(!log.contains("panicked"), "{log}");
}

/// Commands on rooms that do not exist, as a hostile client sends them over HTTP and gRPC: each
/// is refused `room_not_found` and leaves no cell behind (the drain task that refused it takes
/// the cell away), so a caller cannot grow other callers' node with ids of rooms that never were.
#[tokio::test]
async fn commands_on_unknown_rooms_over_http_and_grpc_leave_no_cell() {
    use crate::support::TestDb;
    use crate::support::app::{TestApp, settings};

    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    let mut refused = BTreeMap::<String, u32>::new();
    for i in 0..300 {
        let body = json!({"command_id": format!("h-{i}"), "user_id": "mallory"});
        let (status, answer) = app.post(&format!("/v1/rooms/http-nope-{i}/join"), body).await;
        let code = answer["error"]["code"].as_str().unwrap_or_default();
        *refused.entry(format!("http {status} {code}")).or_default() += 1;
    }
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.app.grpc_addr))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connect");
    let mut grpc = RoomServiceClient::new(channel);
    for i in 0..300 {
        let join = pb::MemberRequest {
            command_id: format!("g-{i}"),
            room_id: format!("grpc-nope-{i}"),
            user_id: "mallory".into(),
        };
        let code = match grpc.join_room(join).await {
            Ok(_) => "OK".to_owned(),
            Err(status) => format!("{:?}", status.code()),
        };
        *refused.entry(format!("grpc {code}")).or_default() += 1;
    }
    let expected =
        BTreeMap::from([("grpc NotFound".to_owned(), 300), ("http 404 room_not_found".to_owned(), 300)]);
    assert_eq!(refused, expected);
    let mut cells = app.app.rooms.cell_count();
    for _ in 0..100 {
        if cells == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        cells = app.app.rooms.cell_count();
    }
    assert_eq!(cells, 0, "600 refused commands on unknown rooms left {cells} cells in memory");
    assert_eq!(db.count("room_command_log").await, 0, "nothing was written");
    app.app.stop().await.expect("stop");
}
