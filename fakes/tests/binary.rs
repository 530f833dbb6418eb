//! The `room-service-fakes` binary as compose, the image check and the demos run it: each fake
//! serves its contract and control API on `--listen`, and stops with exit 0 on SIGTERM (a
//! container's first process: `docker stop` kills it after its grace otherwise).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A child process of the fakes binary, killed and reaped when dropped (a failed assertion
/// included).
struct Spawned(Child);

impl Spawned {
    fn spawn(command: &mut Command, what: &str) -> Spawned {
        Spawned(command.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}")))
    }
}

impl std::ops::Deref for Spawned {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test]
async fn the_fake_im_subcommand_serves_its_control_api() {
    let port = free_port();
    let mut child = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_room-service-fakes"))
            .args(["fake-im", "--listen", &format!("127.0.0.1:{port}"), "--latency", "5ms"])
            .env("ROOM_SERVICE_FAKE_IM_SECRET_KEY", "k")
            .stderr(Stdio::null()),
        "room-service-fakes fake-im",
    );
    let client = reqwest::Client::new();
    let mut stats = None;
    for _ in 0..100 {
        if let Ok(r) = client.get(format!("http://127.0.0.1:{port}/fake/stats")).send().await {
            stats = Some(r.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(stats.expect("fake IM answered")["calls"], 0);
}

/// `fake-im` and `fake-wallet` as a container's first process: `docker stop` sends SIGTERM and
/// kills them after its grace (exit 137) unless they stop on it. Each must exit 0 within 2 s.
#[tokio::test]
async fn the_fake_im_and_fake_wallet_subcommands_exit_0_soon_after_sigterm() {
    let client = reqwest::Client::new();
    for fake in ["fake-im", "fake-wallet"] {
        let port = free_port();
        let mut child = Spawned::spawn(
            Command::new(env!("CARGO_BIN_EXE_room-service-fakes"))
                .args([fake, "--listen", &format!("127.0.0.1:{port}")])
                .env("ROOM_SERVICE_FAKE_IM_SECRET_KEY", "k")
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            fake,
        );
        let mut up = false;
        for _ in 0..100 {
            if client.get(format!("http://127.0.0.1:{port}/fake/stats")).send().await.is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(up, "{fake} never answered on {port}");
        let terminated = tokio::time::Instant::now();
        let pid = child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(terminated.elapsed() < Duration::from_secs(2), "{fake} still runs 2 s after SIGTERM");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(status.success(), "{fake} exited with {status} after SIGTERM");
    }
}

#[tokio::test]
async fn the_fake_wallet_subcommand_serves_the_contract_and_its_control_api() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut child = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_room-service-fakes"))
            .args(["fake-wallet", "--listen", &format!("127.0.0.1:{port}"), "--initial-balance", "50"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "room-service-fakes fake-wallet",
    );
    let client = reqwest::Client::new();
    let mut up = false;
    for _ in 0..100 {
        if client.get(format!("{base}/fake/stats")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let debit = json!({"idempotency_key": "k1", "user_id": "u", "amount": 20});
    let debited = match up {
        true => client.post(format!("{base}/v1/debits")).json(&debit).send().await.ok(),
        false => None,
    };
    let balances = match debited {
        Some(_) => client.get(format!("{base}/fake/balances")).send().await.ok(),
        None => None,
    };
    let balances: Option<Value> = match balances {
        Some(response) => response.json().await.ok(),
        None => None,
    };
    child.kill().expect("kill the fake wallet");
    child.wait().expect("reap the fake wallet");
    assert!(up, "the fake wallet never answered on {base}");
    assert_eq!(balances, Some(json!({"u": 30})));
}

#[tokio::test]
async fn the_fake_im_subcommand_refuses_a_message_to_a_group_never_created_unless_allowed() {
    use room_service::publish::tencent::usersig::{generate, system_now_secs};

    let port = free_port();
    let _child = Spawned::spawn(
        Command::new(env!("CARGO_BIN_EXE_room-service-fakes"))
            .args(["fake-im", "--listen", &format!("127.0.0.1:{port}")])
            .env("ROOM_SERVICE_FAKE_IM_SECRET_KEY", "k")
            .stderr(Stdio::null()),
        "room-service-fakes fake-im",
    );
    let sig = generate("k", 1_400_000_000, "administrator", 3600, system_now_secs());
    let url = format!(
        "http://127.0.0.1:{port}/v4/group_open_http_svc/send_group_msg?sdkappid=1400000000\
         &identifier=administrator&usersig={sig}&random=1&contenttype=json"
    );
    let body = json!({
        "GroupId": "g", "Random": 1,
        "MsgBody": [{"MsgType": "TIMCustomElem", "MsgContent": {"Data": "{}", "Desc": "T"}}],
    });
    let client = reqwest::Client::new();
    let mut answer = None;
    for _ in 0..100 {
        if let Ok(r) = client.post(&url).json(&body).send().await {
            answer = Some(r.json::<Value>().await.unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answer.expect("fake IM answered")["ErrorCode"], 10010);
}
