//! The service started in-process on a loopback port, over a [`TestDb`](super::TestDb), with
//! IM disabled (log sink) or pointed at a [`FakeIm`] — the same publish stack as `main.rs`.

use std::path::Path;

use room_service::app::{self, RunningApp};
use room_service::config::{self, Settings};
use room_service::publish::Publisher;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::Value;

/// SDKAppID the fake accepts in tests.
pub const SDK_APP_ID: u64 = 1_400_000_000;
/// Secret key shared by the service and the fake in tests.
pub const SECRET_KEY: &str = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e";

/// A fake Tencent IM with the test credentials and no rate limits, refusing a message to a group
/// never created (10010) as Tencent does: the service creates its rooms' groups
/// (`tencent_im.manage_groups`, on by default).
pub async fn fake_im() -> FakeIm {
    let mut options = FakeImOptions::new(SDK_APP_ID, SECRET_KEY, "administrator");
    options.per_group_limit_per_sec = None;
    options.global_limit_per_sec = None;
    options.require_groups = true;
    FakeIm::start(options).await
}

/// Settings from `config/config.yaml` with the database, a free port, IM and the given
/// overrides (`("outbox_worker.enabled", "false")`, ...) applied as env variables would be.
pub fn settings(db_url: &str, im: Option<&FakeIm>, overrides: &[(&str, &str)]) -> Settings {
    let mut vars = vec![
        ("database.url".to_owned(), db_url.to_owned()),
        ("http.listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("http.admin_listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("grpc.listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("outbox_worker.enabled".to_owned(), "false".to_owned()),
        ("presence.enabled".to_owned(), "false".to_owned()),
        ("outbox_worker.publish_timeout".to_owned(), "1s".to_owned()),
        // Limits no test reaches unless it is about them (those set their own).
        ("im_rate_limit.global_per_sec".to_owned(), "100000".to_owned()),
        ("im_rate_limit.per_group_per_sec".to_owned(), "100000".to_owned()),
        ("rooms.seat_actions_per_user_per_sec".to_owned(), "0".to_owned()),
        ("rooms.max_open_per_owner".to_owned(), "0".to_owned()),
        ("rooms.members.reads_per_sec_per_client".to_owned(), "0".to_owned()),
    ];
    if let Some(im) = im {
        vars.push(("tencent_im.enabled".into(), "true".into()));
        vars.push(("tencent_im.base_url".into(), im.base_url()));
        vars.push(("tencent_im.sdk_app_id".into(), SDK_APP_ID.to_string()));
        vars.push(("tencent_im.secret_key".into(), SECRET_KEY.into()));
    }
    // An override replaces a default above (the environment holds one value per name).
    for (key, value) in overrides {
        vars.retain(|(k, _)| k != key);
        vars.push((key.to_string(), value.to_string()));
    }
    let env = vars
        .into_iter()
        .map(|(k, v)| (format!("{}{}", config::ENV_PREFIX, k.replace('.', "__").to_ascii_uppercase()), v));
    config::load_with_env(Path::new("config/config.yaml"), env).expect("test settings")
}

/// What the routers need over `db`: a room service publishing to the log sink (IM disabled),
/// serving, no metrics recorder. For router tests driven with `oneshot`.
pub fn router_state(db: &super::TestDb) -> room_service::api::AppState {
    let rooms = room_service::room::RoomService::new(
        db.repo.clone(),
        publisher(&settings(db.url(), None, &[])),
        room_service::room::RoomOptions::new(std::time::Duration::from_secs(1)),
        room_service::room::system_clock(),
    );
    room_service::api::AppState {
        rooms,
        repo: db.repo.clone(),
        db_ping: room_service::api::readiness::DbPing::new(db.repo.clone()),
        lifecycle: Default::default(),
        metrics: None,
        forwarder: None,
        node: Default::default(),
        auth: Default::default(),
        reads: None,
        seat_actions: None,
        bounds: Default::default(),
    }
}

/// The publish stack `main.rs` serves with, for `settings`.
pub fn publisher(settings: &Settings) -> Publisher {
    app::publisher(settings).expect("im client")
}

/// A running service and an HTTP client for it.
pub struct TestApp {
    /// The service.
    pub app: RunningApp,
    /// `http://127.0.0.1:PORT` of the public listener.
    pub base: String,
    /// `http://127.0.0.1:PORT` of the admin listener (`/admin/*`, `/metrics`).
    pub admin_base: String,
    /// Client.
    pub http: reqwest::Client,
    /// The settings it was started with.
    pub settings: Settings,
}

impl TestApp {
    /// Starts the service with `settings`.
    pub async fn start(settings: Settings) -> TestApp {
        let publisher = publisher(&settings);
        let app = app::start(settings.clone(), publisher).await.expect("start app");
        let base = format!("http://{}", app.addr);
        let admin_base = format!("http://{}", app.admin_addr);
        TestApp { app, base, admin_base, http: reqwest::Client::new(), settings }
    }

    /// POSTs JSON; returns status and body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.expect("post");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// GETs from the public listener; returns status and body (JSON, or a string).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        read(self.http.get(format!("{}{path}", self.base))).await
    }

    /// GETs from the admin listener (with the configured token, if any).
    pub async fn admin_get(&self, path: &str) -> (u16, Value) {
        read(self.admin(self.http.get(format!("{}{path}", self.admin_base)))).await
    }

    /// POSTs JSON to the admin listener (with the configured token, if any).
    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        read(self.admin(self.http.post(format!("{}{path}", self.admin_base)).json(&body))).await
    }

    fn admin(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.settings.http.admin_token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        }
    }

    /// Waits until the delivery marks of every command answered so far are written: the
    /// service writes them in the background, batched across concurrent commands.
    pub async fn settle(&self) {
        self.app.rooms.flush_delivery_marks().await;
    }

    /// Stops the service in order.
    pub async fn stop(self) {
        self.app.stop().await.expect("clean stop");
    }
}

/// Sends `request`; returns the status and the body (JSON, or a string).
async fn read(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}
