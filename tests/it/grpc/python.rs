//! The real binary against independent clients: `tests/peer/grpc_client.py` generates its
//! own stubs from `proto/` with grpcio-tools and drives every RPC, replay and the failure
//! statuses; `tests/peer/grpc_reflection_client.py` is Python's grpcio-reflection client,
//! which speaks reflection v1alpha only. `scripts/test.sh` installs grpcio, grpcio-tools and
//! grpcio-reflection.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{Spawned, free_port};

/// Starts the binary on a fresh SQLite file and waits until it is ready; returns it with the
/// address of its gRPC listener.
async fn serve(dir: &std::path::Path) -> (Spawned, String) {
    let db_url = format!("sqlite://{}/rooms.db?mode=rwc", dir.display());
    let (port, grpc_port) = (free_port(), free_port());
    let service = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_room-service"))
            .args(["--config", "config/config.yaml", "serve"])
            .env("ROOM_SERVICE__DATABASE__URL", &db_url)
            .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
            .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", "127.0.0.1:0")
            .env("ROOM_SERVICE__GRPC__LISTEN", format!("127.0.0.1:{grpc_port}"))
            .env("ROOM_SERVICE__LOG__LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "room-service",
    );
    let client = reqwest::Client::new();
    let mut ready = false;
    for _ in 0..100 {
        if let Ok(r) = client.get(format!("http://127.0.0.1:{port}/readyz")).send().await {
            ready = r.status() == 200;
        }
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the service never became ready");
    (service, format!("127.0.0.1:{grpc_port}"))
}

/// Runs `python3 args...`; asserts it exits 0 printing `ok`.
async fn python(args: &[&str], hint: &str) {
    let output = tokio::process::Command::new("python3")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("python3 must be installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "{} failed ({hint}):\n{stdout}\n{stderr}",
        args[0]
    );
}

#[tokio::test]
async fn an_independent_python_client_drives_the_real_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (_service, grpc) = serve(dir.path()).await;
    python(&["tests/peer/grpc_client.py", "proto", &grpc], "pip install grpcio grpcio-tools").await;
}

#[tokio::test]
async fn the_python_reflection_client_lists_and_resolves_the_room_service_over_v1alpha() {
    let dir = tempfile::tempdir().unwrap();
    let (_service, grpc) = serve(dir.path()).await;
    python(&["tests/peer/grpc_reflection_client.py", &grpc], "pip install grpcio grpcio-reflection").await;
}
