//! Delivery policy v2 end to end (SPEC §11.2): the service over real MariaDB with its outbox
//! worker running, and the fake Tencent IM over loopback HTTP.
//!
//! The limits are scaled down from Tencent's (200 calls/s per app, 40 messages/s per group) to
//! keep the runs short on two cores; the margins between our limiter and the fake's stay
//! Tencent's (190 vs 200, 35 vs 40).

mod clock;
mod connection_cuts;
mod crash;
mod fair_groups;
mod hot_room;
mod im_faults;
mod limits;
mod main_stack;
mod policy;

use std::future::Future;
use std::time::Duration;

use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::{Value, json};

use crate::support::app::{SDK_APP_ID, SECRET_KEY, TestApp, settings};
use crate::support::{Spawned, TestDb, free_port};

/// The real binary as one node of the fault rows: its worker polling every 50 ms against
/// `im`, optionally run under a wrapper command (`faketime -f +10m`).
pub(crate) struct Node {
    db_url: String,
    im_base_url: String,
    /// Command and arguments the binary runs under.
    pub wrapper: Vec<String>,
    /// The public listener's port.
    pub port: u16,
    /// The admin listener's port.
    pub admin_port: u16,
    /// The gRPC listener's port.
    pub grpc_port: u16,
    /// `node_id`.
    pub node_id: String,
    /// More `ROOM_SERVICE__*` variables, applied last (they override the defaults above).
    pub env: Vec<(String, String)>,
    /// Where its log goes (stderr at `warn`, in `log.format`: `pretty` unless the env says
    /// `json`); `None`: a file named after the node in `ROOM_SERVICE_TEST_NODE_LOG`'s directory
    /// when that is set, else nowhere.
    pub log: Option<std::path::PathBuf>,
}

impl Node {
    pub(crate) fn new(db_url: &str, im: &FakeIm) -> Self {
        Self {
            db_url: db_url.to_owned(),
            im_base_url: im.base_url(),
            wrapper: Vec::new(),
            port: free_port(),
            admin_port: free_port(),
            grpc_port: free_port(),
            node_id: "node".into(),
            env: Vec::new(),
            log: None,
        }
    }

    /// Starts the node; it is killed (with its wrapper) when the returned guard is dropped.
    pub(crate) fn spawn(&self) -> Spawned {
        use crate::outbox::harness::{ADMIN, APP, KEY, PREFIX};
        let binary = env!("CARGO_BIN_EXE_room-service");
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = std::process::Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => std::process::Command::new(binary),
        };
        command
            .args(["--config", "config/config.yaml", "serve"])
            .env("ROOM_SERVICE__DATABASE__URL", &self.db_url)
            .env("ROOM_SERVICE__NODE_ID", &self.node_id)
            .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{}", self.port))
            .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", format!("127.0.0.1:{}", self.admin_port))
            .env("ROOM_SERVICE__GRPC__LISTEN", format!("127.0.0.1:{}", self.grpc_port))
            .env("ROOM_SERVICE__LOG__LEVEL", "warn")
            .env("ROOM_SERVICE__PRESENCE__ENABLED", "false")
            .env("ROOM_SERVICE__TENCENT_IM__ENABLED", "true")
            .env("ROOM_SERVICE__TENCENT_IM__BASE_URL", &self.im_base_url)
            .env("ROOM_SERVICE__TENCENT_IM__SDK_APP_ID", APP.to_string())
            .env("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", KEY)
            .env("ROOM_SERVICE__TENCENT_IM__ADMIN_IDENTIFIER", ADMIN)
            .env("ROOM_SERVICE__TENCENT_IM__GROUP_ID_PREFIX", PREFIX)
            .env("ROOM_SERVICE__OUTBOX_WORKER__POLL_INTERVAL", "50ms")
            .env("ROOM_SERVICE__OUTBOX_WORKER__PUBLISH_TIMEOUT", "1s")
            .env("ROOM_SERVICE__IM_RATE_LIMIT__GLOBAL_PER_SEC", "400")
            .env("ROOM_SERVICE__IM_RATE_LIMIT__PER_GROUP_PER_SEC", "40")
            // Tests create many rooms of one owner; the cap's own tests set it.
            .env("ROOM_SERVICE__ROOMS__MAX_OPEN_PER_OWNER", "0")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(std::process::Stdio::null())
            .stderr(match (&self.log, std::env::var_os("ROOM_SERVICE_TEST_NODE_LOG")) {
                (Some(file), _) => {
                    std::process::Stdio::from(std::fs::File::create(file).expect("the node's log"))
                }
                (None, Some(dir)) => {
                    std::fs::File::create(std::path::Path::new(&dir).join(format!("{}.log", self.node_id)))
                        .map_or_else(|_| std::process::Stdio::null(), std::process::Stdio::from)
                }
                (None, None) => std::process::Stdio::null(),
            });
        // Its own process group, so stopping it ends the service under the wrapper too.
        Spawned::spawn(&mut command, "room-service")
    }

    /// SIGKILLs `child` (spawned by [`Node::spawn`]) and its whole process group — the service
    /// a wrapper such as `faketime` runs as its child included — and reaps it.
    pub(crate) fn stop(child: &mut Spawned) {
        child.stop();
    }

    /// The node's `/metrics` text (empty while it does not answer).
    pub(crate) async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin_port);
        match reqwest::get(url).await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }
}

/// The value of an unlabelled series in a `/metrics` text.
pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A fake IM with these limits (`None`: unlimited).
async fn fake_with_limits(global: Option<u32>, per_group: Option<u32>) -> FakeIm {
    let mut options = FakeImOptions::new(SDK_APP_ID, SECRET_KEY, "administrator");
    options.global_limit_per_sec = global;
    options.per_group_limit_per_sec = per_group;
    FakeIm::start(options).await
}

/// The service with IM on `im`, its worker running (fast polls), and `overrides`.
async fn start(db: &TestDb, im: &FakeIm, overrides: &[(&str, &str)]) -> TestApp {
    let mut all = vec![
        ("outbox_worker.enabled", "true"),
        ("outbox_worker.poll_interval", "50ms"),
        ("outbox_worker.publish_timeout", "1s"),
    ];
    all.extend_from_slice(overrides);
    TestApp::start(settings(db.url(), Some(im), &all)).await
}

async fn create(app: &TestApp, room: &str) {
    let body =
        json!({"command_id": format!("create-{room}"), "room_id": room, "owner_id": "o", "title": "t"});
    let (status, body) = app.post("/v1/rooms", body).await;
    assert_eq!(status, 200, "{body}");
}

/// A join; returns the IM event's id.
async fn join(app: &TestApp, room: &str, user: &str) -> String {
    let body = json!({"command_id": format!("j-{room}-{user}"), "user_id": user});
    let (status, body) = app.post(&format!("/v1/rooms/{room}/join"), body).await;
    assert_eq!(status, 200, "{body}");
    body["events"][0]["event_id"].as_str().unwrap().to_owned()
}

/// Polls `check` every 50 ms until it holds; panics naming `what` after `limit`.
pub(crate) async fn eventually<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let give_up = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < give_up, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rows not yet delivered, any status but `delivered`.
pub(crate) async fn undelivered(db: &TestDb) -> i64 {
    db.scalar("SELECT COUNT(*) FROM room_outbox WHERE status <> 'delivered'").await.unwrap_or(-1)
}

/// `room_version` of an envelope the fake recorded.
fn version(data: &str) -> u64 {
    serde_json::from_str::<Value>(data).unwrap()["room_version"].as_u64().unwrap()
}
