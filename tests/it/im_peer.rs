//! The Tencent IM client against an independent peer: `tests/peer/tencent_im_peer.py` checks
//! the UserSig with Tencent's own code (the official `tls-sig-api-v2` package) and the body
//! against SPEC §8, sharing no code with the client or the Rust fake. `scripts/test.sh`
//! installs the package.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use room_service::config::TencentImSettings;
use room_service::publish::tencent::TencentImService;
use room_service::publish::{Event, Message, Outcome, Path, Priority, classify};
use room_service::secret::Secret;
use serde_json::Value;
use tower::ServiceExt;

const APP: u64 = 1_400_000_123;
const KEY: &str = "peer-secret-key";

struct Peer {
    /// Killed when the peer is dropped.
    _child: crate::support::Spawned,
    base_url: String,
}

fn start_peer() -> Peer {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = crate::support::Spawned::spawn(
        Command::new("python3")
            .arg("tests/peer/tencent_im_peer.py")
            .args([port.to_string(), APP.to_string(), KEY.to_owned(), "administrator".to_owned()])
            .stdout(Stdio::piped()),
        "python3 (must be installed)",
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the peer did not start (pip install tls-sig-api-v2==1.1)");
    Peer { _child: child, base_url: format!("http://127.0.0.1:{port}") }
}

fn client(base_url: &str, key: &str) -> TencentImService {
    TencentImService::new(&TencentImSettings {
        base_url: base_url.to_owned(),
        sdk_app_id: APP,
        admin_identifier: "administrator".into(),
        secret_key: Secret::new(key),
        group_id_prefix: "live_".into(),
        usersig_ttl: Duration::from_secs(86_400),
        manage_groups: true,
        avchatroom_ban: false,
    })
    .unwrap()
}

fn message(event_id: &str) -> Message {
    let envelope = serde_json::json!({
        "event_id": event_id, "event_type": "RoomGiftSent", "room_id": "r1", "room_version": 3,
        "command_id": "c", "request_id": "q", "occurred_at_ms": 1, "payload": {"count": 1},
    });
    let event = Event {
        event_id: event_id.into(),
        event_type: "RoomGiftSent",
        priority: Priority::High,
        body: Arc::from(envelope.to_string()),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: None,
    };
    Message::new("r1".into(), Path::Sync, vec![event])
}

#[tokio::test]
async fn the_official_tencent_algorithm_accepts_our_usersig_and_body() {
    let peer = start_peer();
    let outcome = client(&peer.base_url, KEY).oneshot(message("01j-peer-1")).await.expect("peer accepts");
    assert_eq!(outcome, Outcome::Delivered);
    let accepted: Value =
        reqwest::get(format!("{}/peer/messages", peer.base_url)).await.unwrap().json().await.unwrap();
    assert_eq!(accepted.as_array().unwrap().len(), 1);
    assert_eq!(accepted[0]["GroupId"], "live_r1");
    assert_eq!(accepted[0]["MsgPriority"], "High");
}

#[tokio::test]
async fn a_usersig_signed_with_another_key_is_refused_by_the_peer() {
    let peer = start_peer();
    let err = client(&peer.base_url, "not-the-key").oneshot(message("01j-peer-2")).await.unwrap_err();
    assert!(err.to_string().contains("70009"), "{err}");
    assert_eq!(classify(err.as_ref()).as_str(), "configuration");
}
