//! What every benchmark needs: a throwaway MariaDB database, service settings, the publish
//! stack composed exactly as `main.rs` does (its rate limiter when IM is enabled, an optional
//! acceptance probe around the leaf), the fake IM (limits off, or Tencent's limits on a thread
//! of its own so its CPU can be told apart), latency samples and status counters.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use futures::future::BoxFuture;
use room_service::app::im_stack;
use room_service::config::{self, Settings};
use room_service::publish::{BoxError, Message, Outcome, Path as PublishPath, Publisher};
use room_service::store::MySqlRepository;
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use sqlx::mysql::{MySqlConnection, MySqlPool};
use sqlx::{AssertSqlSafe, Connection, Executor, Row};
use tower::Service;

mod measure;

pub use measure::{CpuTimes, Samples, cpu_of, global_status, ms, session_status};

/// SDKAppID shared by the service and the fake IM.
pub const SDK_APP_ID: u64 = 1_400_000_000;
/// Key shared by the service and the fake IM (a throwaway, loopback only).
pub const SECRET_KEY: &str = "bench-secret-key-loopback-only";

/// A fresh MariaDB database, dropped by [`BenchDb::drop_now`].
#[derive(Debug)]
pub struct BenchDb {
    base: String,
    name: String,
}

impl BenchDb {
    /// Creates `rs_bench_<tag>_<unix secs>_<random>` on the server at `base` (no path).
    async fn create(base: &str, tag: &str) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').replacen("mariadb:", "mysql:", 1);
        let mut admin = MySqlConnection::connect(&base)
            .await
            .with_context(|| format!("connecting to MariaDB at {base}"))?;
        let name = format!("rs_bench_{tag}_{}_{:06x}", unix_ms() / 1000, rand::random::<u32>() & 0xff_ffff);
        admin.execute(AssertSqlSafe(format!("CREATE DATABASE `{name}`"))).await?;
        let _ = admin.close().await;
        Ok(Self { base, name })
    }

    /// Runs `measure` on a fresh database tagged `tag` on the server at `base`, and drops it
    /// afterwards whatever `measure` answered.
    pub async fn scoped<T>(
        base: &str,
        tag: &str,
        measure: impl AsyncFnOnce(&BenchDb) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let db = Self::create(base, tag).await?;
        let result = measure(&db).await;
        db.drop_now().await;
        result
    }

    /// A repository over this database with `connections` connections, migrated.
    pub async fn repository(&self, connections: u32) -> anyhow::Result<MySqlRepository> {
        let repo = MySqlRepository::connect(&self.url(), connections).await?;
        repo.migrate().await?;
        Ok(repo)
    }

    /// `mysql://.../<name>`.
    pub fn url(&self) -> String {
        format!("{}/{}", self.base, self.name)
    }

    /// Drops the database (best effort, reported on stderr).
    pub async fn drop_now(self) {
        let dropped = async {
            let mut admin = MySqlConnection::connect(&self.base).await?;
            admin.execute(AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{}`", self.name))).await?;
            admin.close().await
        };
        if let Err(error) = dropped.await {
            eprintln!("could not drop benchmark database {}: {error}", self.name);
        }
    }
}

/// Service settings: the built-in defaults (or `config/config.yaml`) with `db_url`, a free
/// loopback port, IM pointed at `im` (log sink when `None`), presence off, and `overrides`
/// given as `("section.key", "value")` exactly like `ROOM_SERVICE__SECTION__KEY` variables.
pub fn settings(db_url: &str, im: Option<&FakeIm>, overrides: &[(&str, &str)]) -> anyhow::Result<Settings> {
    let mut vars = vec![
        ("database.url".to_owned(), db_url.to_owned()),
        ("http.listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("http.admin_listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("grpc.listen".to_owned(), "127.0.0.1:0".to_owned()),
        ("presence.enabled".to_owned(), "false".to_owned()),
        ("log.level".to_owned(), "warn".to_owned()),
        // The benchmarks create many rooms of one owner (a benchmark of the cap sets its own).
        ("rooms.max_open_per_owner".to_owned(), "0".to_owned()),
        // A benchmark's few users act far faster than a person: its per-caller shares lifted
        // (a benchmark of a share sets its own).
        ("rooms.seat_actions_per_user_per_sec".to_owned(), "0".to_owned()),
        ("rooms.members.reads_per_sec_per_client".to_owned(), "0".to_owned()),
    ];
    if let Some(im) = im {
        vars.push(("tencent_im.enabled".into(), "true".into()));
        vars.push(("tencent_im.base_url".into(), im.base_url()));
        vars.push(("tencent_im.sdk_app_id".into(), SDK_APP_ID.to_string()));
        vars.push(("tencent_im.secret_key".into(), SECRET_KEY.into()));
    } else {
        vars.push(("tencent_im.enabled".into(), "false".into()));
    }
    vars.extend(overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let env = vars
        .into_iter()
        .map(|(k, v)| (format!("{}{}", config::ENV_PREFIX, k.replace('.', "__").to_ascii_uppercase()), v));
    config::load_with_env(Path::new(config::DEFAULT_CONFIG_PATH), env)
        .map_err(|e| anyhow::anyhow!("benchmark settings: {e}"))
}

/// Options of a fake Tencent IM with `latency` per call and its rate limits off.
pub fn fake_options(latency: Duration) -> FakeImOptions {
    let mut options = tencent_fake_options(latency);
    options.per_group_limit_per_sec = None;
    options.global_limit_per_sec = None;
    options
}

/// Options of a fake Tencent IM with `latency` per call and Tencent's limits (40 messages/s
/// per group, answered OK with `MsgDropReason` beyond; 200 calls/s per app, refused 60007).
pub fn tencent_fake_options(latency: Duration) -> FakeImOptions {
    let mut options = FakeImOptions::new(SDK_APP_ID, SECRET_KEY, "administrator");
    options.latency = latency;
    options
}

/// A fake Tencent IM on loopback with `latency` per call and its rate limits off.
pub async fn fake_im(latency: Duration) -> anyhow::Result<FakeIm> {
    Ok(FakeIm::try_start(fake_options(latency)).await?)
}

/// A fake IM served by a single-threaded runtime on a thread of its own, so the CPU it uses
/// can be read apart from the rest of the process ([`FakeThread::cpu`]).
#[derive(Debug)]
pub struct FakeThread {
    im: Option<FakeIm>,
    stat: std::path::PathBuf,
    done: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeThread {
    /// Starts the fake with `options` on a new thread.
    pub async fn start(options: FakeImOptions) -> anyhow::Result<Self> {
        let (started, ready) = tokio::sync::oneshot::channel();
        let (done, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name("fake-im".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = started.send(Err(anyhow::Error::from(error)));
                    return;
                }
            };
            runtime.block_on(async move {
                // `/proc/thread-self` links to `<pid>/task/<tid>`: this thread's own counters.
                let stat = std::fs::read_link("/proc/thread-self")
                    .map(|p| Path::new("/proc").join(p).join("stat"))
                    .unwrap_or_default();
                let im = FakeIm::try_start(options).await.map_err(anyhow::Error::from);
                let _ = started.send(im.map(|im| (im, stat)));
                let _ = stop.await;
            });
        })?;
        let (im, stat) = ready.await.context("fake IM thread ended before starting")??;
        Ok(Self { im: Some(im), stat, done: Some(done), thread: Some(thread) })
    }

    /// The fake (stats, faults, base URL).
    pub fn im(&self) -> &FakeIm {
        self.im.as_ref().unwrap_or_else(|| unreachable!("the fake lives until drop"))
    }

    /// CPU time (user + system) the fake's thread used so far.
    pub fn cpu(&self) -> Duration {
        cpu_of(&self.stat)
    }
}

impl Drop for FakeThread {
    fn drop(&mut self) {
        // Stop serving first (the server task runs on the fake's runtime), then end the runtime.
        drop(self.im.take());
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// When IM accepted each event (wall clock, ms), by event id, as seen by the probe.
pub type Acceptances = Arc<Mutex<HashMap<String, (PublishPath, i64)>>>;

/// What the probe just above the IM leaf does besides passing messages through.
#[derive(Clone, Debug, Default)]
pub struct ProbeOptions {
    /// Records each acceptance here.
    pub seen: Option<Acceptances>,
    /// Synchronous publishes into groups (room ids) starting with this prefix fail at once, as
    /// if IM were unreachable for them (class `transient`); the worker's go through.
    pub fail_sync_prefix: Option<String>,
}

/// The publish stack exactly as `main.rs` composes it — Trace → Metrics → EventFilter →
/// Timeout → leaf (Tencent, or the log sink when IM is disabled) — with `probe` recording each
/// acceptance just above the leaf when given. Tencent's rate limits are the delivery core's,
/// which `app::start` builds from the settings.
pub fn publisher(settings: &Settings, probe: Option<Acceptances>) -> anyhow::Result<Publisher> {
    publisher_with(settings, ProbeOptions { seen: probe, fail_sync_prefix: None })
}

/// [`publisher`] with every [`ProbeOptions`].
pub fn publisher_with(settings: &Settings, probe: ProbeOptions) -> anyhow::Result<Publisher> {
    let leaf = room_service::app::im_leaf(settings)?;
    Ok(im_stack(
        Probe { inner: leaf, seen: probe.seen, fail_sync_prefix: probe.fail_sync_prefix },
        settings.outbox_worker.publish_timeout,
    ))
}

/// Records when the leaf answered `Delivered` for each event, and fails the synchronous
/// publishes it is told to; otherwise transparent.
#[derive(Clone, Debug)]
struct Probe<S> {
    inner: S,
    seen: Option<Acceptances>,
    fail_sync_prefix: Option<String>,
}

impl<S> Service<Message> for Probe<S>
where
    S: Service<Message, Response = Outcome>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Outcome;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Outcome, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, message: Message) -> Self::Future {
        if message.path == PublishPath::Sync
            && self.fail_sync_prefix.as_deref().is_some_and(|p| message.group.starts_with(p))
        {
            return Box::pin(std::future::ready(Err("bench: IM unreachable for this sync publish".into())));
        }
        let ids: Vec<String> = message.events.iter().map(|e| e.event_id.clone()).collect();
        let (path, seen) = (message.path, self.seen.clone());
        let answer = self.inner.call(message);
        Box::pin(async move {
            let outcome = answer.await.map_err(Into::into)?;
            if let (Some(seen), Outcome::Delivered) = (seen, outcome) {
                let at = unix_ms();
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                seen.extend(ids.into_iter().map(|id| (id, (path, at))));
            }
            Ok(outcome)
        })
    }
}

/// Wall clock, ms since the epoch (the same clock MariaDB's `NOW(3)` reads on this machine).
pub fn unix_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// POSTs `body` as JSON to `url`; anything but a 2xx is an error naming the status and body.
pub async fn post_ok(http: reqwest::Client, url: String, body: serde_json::Value) -> anyhow::Result<()> {
    post_ok_as(http, url, body, None).await
}

/// As [`post_ok`], with `token` as the bearer token when given.
pub async fn post_ok_as(
    http: reqwest::Client,
    url: String,
    body: serde_json::Value,
    token: Option<String>,
) -> anyhow::Result<()> {
    let mut request = http.post(url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "HTTP {}: {}",
        response.status(),
        response.text().await.unwrap_or_default()
    );
    Ok(())
}
