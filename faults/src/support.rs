//! What every part of the harness needs: free loopback ports, signals sent with the `kill`
//! command, resident memory read from `/proc`, bounded waits, and a scratch directory that is
//! removed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// A loopback port nobody listened on a moment ago (bound to port 0, then released).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Sends `signal` (`STOP`, `CONT`, `TERM`, `KILL`) to `pid` with the `kill` command.
pub fn signal(pid: u32, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running kill -s {signal} {pid}"))?;
    anyhow::ensure!(status.success(), "kill -s {signal} {pid} failed: {status}");
    Ok(())
}

/// Resident memory of `pid` in MB (`VmRSS` of `/proc/<pid>/status`), `None` once it is gone.
pub fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Polls `check` every 50 ms until it answers true; fails naming `what` after `timeout`.
/// Returns how long it took.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(started.elapsed() < timeout, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A directory removed with everything in it when dropped, unless told to stay.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    keep: bool,
}

impl ScratchDir {
    /// Creates `<temp>/room-service-faults-<pid>-<random>`.
    pub fn new() -> anyhow::Result<Self> {
        let name = format!("room-service-faults-{}-{:08x}", std::process::id(), rand::random::<u32>());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self { path, keep: false })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory in place (logs of a failed run).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {error}", self.path.display());
        }
    }
}

/// Copies the tree at `from` into `to` (created), files and directories only.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Seconds with one decimal, for the table.
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
