//! The real binary against an independent client: `tests/peer/grpc_client.py` generates its
//! own stubs from `proto/` with grpcio-tools and drives every RPC, replay and the failure
//! statuses. `scripts/test.sh` installs grpcio and grpcio-tools.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::free_port;

struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn an_independent_python_client_drives_the_real_binary() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}/rooms.db?mode=rwc", dir.path().display());
    let (port, grpc_port) = (free_port(), free_port());
    let _service = Service(
        Command::new(env!("CARGO_BIN_EXE_room-service"))
            .args(["--config", "config/config.yaml", "serve"])
            .env("ROOM_SERVICE__DATABASE__URL", &db_url)
            .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{port}"))
            .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", "127.0.0.1:0")
            .env("ROOM_SERVICE__GRPC__LISTEN", format!("127.0.0.1:{grpc_port}"))
            .env("ROOM_SERVICE__LOG__LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn room-service"),
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
    let output = tokio::process::Command::new("python3")
        .args(["tests/peer/grpc_client.py", "proto", &format!("127.0.0.1:{grpc_port}")])
        .output()
        .await
        .expect("python3 must be installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "the Python client failed (pip install grpcio grpcio-tools):\n{stdout}\n{stderr}"
    );
}
