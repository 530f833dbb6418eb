//! The real binary: killed with SIGKILL and restarted, it gives back the last committed state.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Spawned, free_port};

fn spawn(db_url: &str, port: u16) -> Spawned {
    let mut command = Command::new(env!("CARGO_BIN_EXE_room-service"));
    command
        .args(["--config", "config/config.yaml", "serve"])
        .env("ROOM_SERVICE__DATABASE__URL", db_url)
        .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", "127.0.0.1:0")
        .env("ROOM_SERVICE__GRPC__LISTEN", "127.0.0.1:0")
        .env("ROOM_SERVICE__LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Spawned::spawn(&mut command, "room-service")
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    for _ in 0..100 {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("service at {base} never became ready");
}

#[tokio::test]
async fn sigkill_and_restart_gives_back_the_last_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}/data/rooms.db?mode=rwc", dir.path().display());
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut child = spawn(&db_url, port);
    wait_ready(&client, &base).await;
    let post = |path: &str, body: Value| client.post(format!("{base}{path}")).json(&body).send();
    assert_eq!(
        post("/v1/rooms", json!({"command_id": "c", "room_id": "r1", "owner_id": "o", "title": "t"}))
            .await
            .unwrap()
            .status(),
        200
    );
    for i in 0..5 {
        let r = post("/v1/rooms/r1/join", json!({"command_id": format!("j{i}"), "user_id": format!("u{i}")}))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let before: Value = client.get(format!("{base}/v1/rooms/r1")).send().await.unwrap().json().await.unwrap();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let mut child = spawn(&db_url, port);
    wait_ready(&client, &base).await;
    let after: Value = client.get(format!("{base}/v1/rooms/r1")).send().await.unwrap().json().await.unwrap();
    assert_eq!(after, before);
    assert_eq!(after["version"], 6);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_bad_config_fails_startup_naming_the_key() {
    let output = Command::new(env!("CARGO_BIN_EXE_room-service"))
        .args(["serve", "--config", "config/config.yaml"])
        .env("ROOM_SERVICE__OUTBOX_WORKER__RETRY_STRATEGY", "linear")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("outbox_worker.retry_strategy"), "{stderr}");
}

#[test]
fn migrate_creates_the_schema_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.db");
    let status = Command::new(env!("CARGO_BIN_EXE_room-service"))
        .args(["--config", "config/config.yaml", "migrate"])
        .env("ROOM_SERVICE__DATABASE__URL", format!("sqlite://{}?mode=rwc", path.display()))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let tables = Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sorted(r[0] for r in sqlite3.connect(sys.argv[1]).execute(\"select name from sqlite_master where type='table' and name like 'room_%'\")))"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&tables.stdout).trim(),
        "['room_attribute', 'room_audit_log', 'room_cluster', 'room_cluster_node', 'room_command_log', \
         'room_event_consumer', 'room_gift_total', 'room_member', 'room_outbox', 'room_payment_refund', \
         'room_restriction', 'room_seat_request', 'room_shard_lease', 'room_snapshot']"
    );
    let indexes = Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sorted(r[0] for r in sqlite3.connect(sys.argv[1]).execute(\"select name from sqlite_master where type='index' and tbl_name='room_snapshot' and sql is not null\")))"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&indexes.stdout).trim(),
        "['idx_room_snapshot_open', 'idx_room_snapshot_owner']"
    );
}

/// The operator's fd-exhaustion scenario: with the process limited to 256 open files, far more
/// idle connections than that are opened. The cap (`http.max_connections`) refuses the excess
/// with a 503 instead of running out of descriptors, the admin listener keeps answering, nothing
/// logs "Too many open files", and the service answers again once the idle sockets go away.
#[tokio::test]
async fn idle_connections_beyond_the_cap_are_refused_before_the_fd_limit() {
    use tokio::io::AsyncReadExt;

    let dir = tempfile::tempdir().unwrap();
    let (port, admin_port) = (free_port(), free_port());
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_room-service")])
        .args(["--config", "config/config.yaml", "serve"])
        .env("ROOM_SERVICE__DATABASE__URL", format!("sqlite://{}/rooms.db?mode=rwc", dir.path().display()))
        .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
        .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", format!("127.0.0.1:{admin_port}"))
        .env("ROOM_SERVICE__GRPC__LISTEN", "127.0.0.1:0")
        .env("ROOM_SERVICE__HTTP__MAX_CONNECTIONS", "150")
        .env("ROOM_SERVICE__LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(log.try_clone().unwrap());
    let mut child = Spawned::spawn(&mut command, "room-service");
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    wait_ready(&client, &base).await;

    let mut idle = Vec::new();
    for _ in 0..400 {
        idle.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    // The ones over the cap were answered 503 and closed.
    let mut refused = 0;
    for stream in &mut idle {
        let mut buf = [0u8; 64];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(20), stream.read(&mut buf)).await
            && buf[..n].starts_with(b"HTTP/1.1 503")
        {
            refused += 1;
        }
    }
    assert!(refused >= 200, "only {refused} of 400 connections over a cap of 150 were refused");
    let metrics = client
        .get(format!("http://127.0.0.1:{admin_port}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .expect("the admin listener answers while the public one is full");
    let text = metrics.text().await.unwrap();
    assert!(text.contains("room_http_connections_refused_total{listener=\"public\"}"), "{text}");

    drop(idle);
    let healthz = client.get(format!("{base}/healthz")).timeout(Duration::from_secs(2)).send().await;
    assert_eq!(healthz.expect("healthz answers once the idle sockets are gone").status(), 200);
    child.kill().unwrap();
    child.wait().unwrap();
    let logged = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(!logged.contains("Too many open files"), "{logged}");
}
