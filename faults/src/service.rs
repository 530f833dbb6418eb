//! The real `room-service` binary in a child process, configured by environment variables
//! like `tests/it/delivery/crash.rs` does: the row's private MariaDB, fixed loopback ports
//! (kept across restarts, so clients keep their URLs), Tencent IM pointed at the in-process
//! fake, a fast outbox worker, and stderr appended to one log file per instance (read for
//! panics). It can be stopped (SIGTERM), killed (SIGKILL), frozen (SIGSTOP) and restarted.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use room_service_fakes::fake_im::FakeIm;

use crate::support::{free_port, signal, wait_until};

/// SDKAppID shared by the services and the fake IM.
pub const SDK_APP_ID: u64 = 1_400_000_555;
/// Key shared by the services and the fake IM (a throwaway, loopback only).
pub const SECRET_KEY: &str = "faults-secret-key-loopback-only";
/// The app admin identifier.
pub const ADMIN: &str = "administrator";

/// How long a started service may take to answer `/readyz`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `room-service` binary next to this harness (one target directory for the workspace).
pub fn binary() -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name("room-service");
    anyhow::ensure!(
        path.exists(),
        "{} is missing: build it first (cargo build --locked -p room-service -p room-service-faults)",
        path.display()
    );
    Ok(path)
}

/// What an instance is started with.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// `node_id` (`a`, `b`): its worker ids start with it.
    pub node_id: String,
    /// The database URL.
    pub db_url: String,
    /// The fake IM's base URL.
    pub im_url: String,
    /// More `ROOM_SERVICE__*` variables, applied last.
    pub env: Vec<(String, String)>,
    /// Where stderr is appended.
    pub log: PathBuf,
}

/// One instance. Dropping it kills it.
#[derive(Debug)]
pub struct Service {
    config: ServiceConfig,
    port: u16,
    admin_port: u16,
    child: Option<Child>,
    /// The running process's pid (0 when none), shared with the memory sampler.
    pid: Arc<AtomicU32>,
    http: reqwest::Client,
}

impl Service {
    /// Picks two free ports, starts the binary and waits until `/readyz` answers 200.
    pub async fn start(config: ServiceConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
        let mut service = Self {
            config,
            port: free_port()?,
            admin_port: free_port()?,
            child: None,
            pid: Arc::new(AtomicU32::new(0)),
            http,
        };
        service.spawn().await?;
        Ok(service)
    }

    /// `http://127.0.0.1:<port>`: the public API.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The node id.
    pub fn node_id(&self) -> &str {
        &self.config.node_id
    }

    /// The running process's pid, shared (0 while none runs).
    pub fn pid_cell(&self) -> Arc<AtomicU32> {
        self.pid.clone()
    }

    fn pid(&self) -> anyhow::Result<u32> {
        self.child
            .as_ref()
            .map(Child::id)
            .with_context(|| format!("service {} is not running", self.node_id()))
    }

    /// Spawns the binary and waits for `/readyz`; returns how long that took.
    async fn spawn(&mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let log = OpenOptions::new().create(true).append(true).open(&self.config.log)?;
        let c = &self.config;
        // The service's own config file, at the workspace root (this crate is a member beside it).
        let config_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/config.yaml");
        let mut command = Command::new(binary()?);
        command
            .arg("--config")
            .arg(config_file)
            .arg("serve")
            .env("ROOM_SERVICE__NODE_ID", &c.node_id)
            .env("ROOM_SERVICE__DATABASE__URL", &c.db_url)
            .env("ROOM_SERVICE__HTTP__LISTEN", format!("127.0.0.1:{}", self.port))
            .env("ROOM_SERVICE__HTTP__ADMIN_LISTEN", format!("127.0.0.1:{}", self.admin_port))
            .env("ROOM_SERVICE__GRPC__LISTEN", "127.0.0.1:0")
            .env("ROOM_SERVICE__LOG__LEVEL", "warn")
            .env("ROOM_SERVICE__LOG__FORMAT", "json")
            .env("ROOM_SERVICE__PRESENCE__ENABLED", "false")
            // The load's few owners open many rooms each: the open-room cap is not under test.
            .env("ROOM_SERVICE__ROOMS__MAX_OPEN_PER_OWNER", "0")
            .env("ROOM_SERVICE__TENCENT_IM__ENABLED", "true")
            .env("ROOM_SERVICE__TENCENT_IM__BASE_URL", &c.im_url)
            .env("ROOM_SERVICE__TENCENT_IM__SDK_APP_ID", SDK_APP_ID.to_string())
            .env("ROOM_SERVICE__TENCENT_IM__SECRET_KEY", SECRET_KEY)
            .env("ROOM_SERVICE__TENCENT_IM__ADMIN_IDENTIFIER", ADMIN)
            .env("ROOM_SERVICE__TENCENT_IM__GROUP_ID_PREFIX", "live_")
            .env("ROOM_SERVICE__OUTBOX_WORKER__POLL_INTERVAL", "100ms")
            .env("ROOM_SERVICE__OUTBOX_WORKER__PUBLISH_TIMEOUT", "1s")
            .env("ROOM_SERVICE__IM_RATE_LIMIT__GLOBAL_PER_SEC", "400")
            .env("ROOM_SERVICE__IM_RATE_LIMIT__PER_GROUP_PER_SEC", "40")
            .envs(c.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = command.spawn().context("spawning room-service")?;
        self.pid.store(child.id(), Ordering::Relaxed);
        self.child = Some(child);
        let ready = format!("{}/readyz", self.base_url());
        let http = self.http.clone();
        let what = format!("service {} ready", self.node_id());
        let wait = wait_until(&what, READY_TIMEOUT, || {
            let (http, ready) = (http.clone(), ready.clone());
            async move { http.get(&ready).send().await.is_ok_and(|r| r.status().is_success()) }
        });
        if let Err(error) = wait.await {
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            self.kill();
            anyhow::bail!("{error} (exit status: {exited:?}; see {})", self.config.log.display());
        }
        Ok(started.elapsed())
    }

    /// SIGTERM, then waits up to `bound` for the exit; `Ok(Some(took))` when it exited in
    /// time (with status 0), `Ok(None)` when it had to be killed (a broken promise).
    pub async fn terminate(&mut self, bound: Duration) -> anyhow::Result<Option<Duration>> {
        signal(self.pid()?, "TERM")?;
        let started = Instant::now();
        let Some(child) = self.child.as_mut() else { return Ok(None) };
        while started.elapsed() < bound {
            if let Some(status) = child.try_wait()? {
                self.child = None;
                self.pid.store(0, Ordering::Relaxed);
                anyhow::ensure!(status.success(), "service exited with {status} after SIGTERM");
                return Ok(Some(started.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill();
        Ok(None)
    }

    /// True while the process runs (it never exited on its own).
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL, and reaps the process.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.pid.store(0, Ordering::Relaxed);
    }

    /// Starts the binary again on the same ports; returns how long until it was ready.
    pub async fn restart(&mut self) -> anyhow::Result<Duration> {
        self.kill();
        self.spawn().await
    }

    /// SIGSTOP.
    pub fn freeze(&self) -> anyhow::Result<()> {
        signal(self.pid()?, "STOP")
    }

    /// SIGCONT.
    pub fn thaw(&self) -> anyhow::Result<()> {
        signal(self.pid()?, "CONT")
    }

    /// The sum of the samples of `name` on the admin listener's `/metrics` (0 when absent).
    pub async fn metric(&self, name: &str) -> anyhow::Result<f64> {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin_port);
        let text = self.http.get(url).send().await?.error_for_status()?.text().await?;
        Ok(text
            .lines()
            .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Lines of a service log that report a panic.
pub fn panics_in(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|text| text.lines().filter(|l| l.contains("panicked")).count())
        .unwrap_or(0)
}

/// Starts the fake IM every instance of a row talks to: Tencent's behaviour, its rate limits
/// off (the rows measure faults, not throttling).
pub async fn fake_im() -> anyhow::Result<FakeIm> {
    let mut options = room_service_fakes::fake_im::FakeImOptions::new(SDK_APP_ID, SECRET_KEY, ADMIN);
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    Ok(FakeIm::try_start(options).await?)
}
