//! B10's two child processes, both the real `room-service` binary next to this harness: the
//! service (`serve`, configured only by `ROOM_SERVICE__*` variables over `config/config.yaml`,
//! on loopback ports of its own) and the fake Tencent IM (`fake-im`, at Tencent's limits with
//! a given latency). Each one's stderr goes to a log file in the temp directory, removed when
//! it stops cleanly and named in the error when it does not start.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::process::{Child, Command};

use crate::support::{SDK_APP_ID, SECRET_KEY};

/// How long a started process may take to answer its readiness URL.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Tencent's limits, as the fake is told them: calls per second per app, messages per second
/// per group.
pub(crate) const TENCENT_LIMITS: (u32, u32) = (200, 40);
/// No limit on either (the fake's 0).
pub(crate) const NO_LIMITS: (u32, u32) = (0, 0);

/// The `room-service` binary next to this harness.
pub(crate) fn binary() -> anyhow::Result<PathBuf> {
    beside("room-service")
}

/// The binary `name` of this workspace next to this harness (`cargo build --release
/// --workspace` builds them all into one directory).
fn beside(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    anyhow::ensure!(
        path.exists(),
        "{} is missing: build it first (cargo build --release -p room-service -p room-service-fakes -p room-service-bench)",
        path.display()
    );
    Ok(path)
}

/// `room-service --version` of [`binary`], for the record.
pub(crate) async fn version() -> anyhow::Result<String> {
    let out = Command::new(binary()?).arg("--version").output().await?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A loopback port nobody listened on a moment ago (bound to port 0, then released).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// A child process, killed when dropped.
#[derive(Debug)]
pub(crate) struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Spawns `command` (stderr to a log file named after `what`) and waits until `ready`
    /// answers a 2xx.
    async fn spawn(what: &str, mut command: Command, ready: String) -> anyhow::Result<Self> {
        let log =
            std::env::temp_dir().join(format!("room-service-bench-b10-{}-{what}.log", std::process::id()));
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(file).kill_on_drop(true);
        let child = command.spawn().with_context(|| format!("spawning {what}"))?;
        let mut proc = Self { child, log };
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        let started = Instant::now();
        loop {
            if http.get(&ready).send().await.is_ok_and(|r| r.status().is_success()) {
                return Ok(proc);
            }
            let exited = proc.child.try_wait()?;
            if exited.is_some() || started.elapsed() > READY_TIMEOUT {
                let _ = proc.child.kill().await;
                anyhow::bail!(
                    "{what} not ready at {ready} (exit status {exited:?}); its log {}:\n{}",
                    proc.log.display(),
                    tail(&proc.log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id (0 once reaped).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// Kills and reaps the process, and removes its log.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The last 2,000 characters of a log.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let start = text.char_indices().rev().nth(2_000).map_or(0, |(i, _)| i);
    text[start..].to_owned()
}

/// `room-service-fakes fake-im` with `latency` per call and limits (calls/s per app, messages/s per group).
#[derive(Debug)]
pub(crate) struct FakeProc {
    pub(crate) proc: Proc,
    /// `http://127.0.0.1:<port>`.
    pub(crate) base: String,
}

/// Starts the fake IM and waits until `GET /fake/stats` answers.
pub(crate) async fn start_fake(latency: Duration, limits: (u32, u32)) -> anyhow::Result<FakeProc> {
    start_fake_requiring(latency, limits, false).await
}

/// [`start_fake`], refusing a message to a group never created when `require_groups` (as
/// Tencent does).
pub(crate) async fn start_fake_requiring(
    latency: Duration,
    (global, per_group): (u32, u32),
    require_groups: bool,
) -> anyhow::Result<FakeProc> {
    let base = format!("http://127.0.0.1:{}", free_port()?);
    let mut command = Command::new(beside("room-service-fakes")?);
    command
        .arg("fake-im")
        .args(["--listen", base.trim_start_matches("http://")])
        .args(["--sdk-app-id", &SDK_APP_ID.to_string()])
        .args(["--latency", &format!("{}ms", latency.as_millis())])
        .args(["--per-group-limit", &per_group.to_string()])
        .args(["--global-limit", &global.to_string()])
        .env("ROOM_SERVICE_FAKE_IM_SECRET_KEY", SECRET_KEY);
    if !require_groups {
        command.arg("--allow-missing-groups");
    }
    let what = format!("fake-im-{}ms", latency.as_millis());
    let proc = Proc::spawn(&what, command, format!("{base}/fake/stats")).await?;
    Ok(FakeProc { proc, base })
}

/// `room-service serve` on the database at `db_url`, IM pointed at the fake at `im` (IM
/// disabled, the log sink, when `None`); everything else at its defaults but presence (off:
/// nobody heartbeats).
#[derive(Debug)]
pub(crate) struct ServiceProc {
    pub(crate) proc: Proc,
    /// `http://127.0.0.1:<port>`: the public API.
    pub(crate) base: String,
}

/// Starts the service and waits until `/readyz` answers 200; `more` are further
/// `ROOM_SERVICE__*` variables, without the prefix (`("TELEMETRY__OTLP__ENDPOINT", ...)`).
pub(crate) async fn start_service(
    db_url: &str,
    im: Option<&str>,
    in_flight: usize,
    more: &[(&str, String)],
) -> anyhow::Result<ServiceProc> {
    let (port, admin) = (free_port()?, free_port()?);
    let base = format!("http://127.0.0.1:{port}");
    // The service's own config file, at the workspace root (this crate is a member beside it).
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/config.yaml");
    let mut command = Command::new(binary()?);
    command.arg("--config").arg(config).arg("serve");
    // Only what is set here: none of the caller's own ROOM_SERVICE__* variables.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ROOM_SERVICE__") {
            command.env_remove(key);
        }
    }
    let mut vars: Vec<(&str, String)> = vec![
        ("DATABASE__URL", db_url.to_owned()),
        ("HTTP__LISTEN", format!("127.0.0.1:{port}")),
        ("HTTP__ADMIN_LISTEN", format!("127.0.0.1:{admin}")),
        ("GRPC__LISTEN", "127.0.0.1:0".into()),
        ("PRESENCE__ENABLED", "false".into()),
        ("OUTBOX_WORKER__ENABLED", "true".into()),
        ("LOG__LEVEL", "warn".into()),
        ("LOG__FORMAT", "json".into()),
        ("TENCENT_IM__ENABLED", im.is_some().to_string()),
        ("IM_BATCH__IN_FLIGHT_PER_ROOM", in_flight.to_string()),
        // The benchmarks create many rooms of one owner (a benchmark of the cap sets its own).
        ("ROOMS__MAX_OPEN_PER_OWNER", "0".into()),
        ("ROOMS__SEAT_ACTIONS_PER_USER_PER_SEC", "0".into()),
        ("ROOMS__MEMBERS__READS_PER_SEC_PER_CLIENT", "0".into()),
    ];
    if let Some(im) = im {
        vars.push(("TENCENT_IM__BASE_URL", im.to_owned()));
        vars.push(("TENCENT_IM__SDK_APP_ID", SDK_APP_ID.to_string()));
        vars.push(("TENCENT_IM__SECRET_KEY", SECRET_KEY.to_owned()));
    }
    vars.extend(more.iter().map(|(k, v)| (*k, v.clone())));
    command.envs(vars.into_iter().map(|(k, v)| (format!("ROOM_SERVICE__{k}"), v)));
    let what = if im.is_some() { "service-im-on" } else { "service-im-off" };
    let proc = Proc::spawn(what, command, format!("{base}/readyz")).await?;
    Ok(ServiceProc { proc, base })
}
