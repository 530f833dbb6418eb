//! Child processes that die with their test. [`Spawned`] starts a command in a process group
//! of its own and, when dropped — the test returned, failed an assertion or panicked before
//! stopping it — SIGKILLs the whole group and reaps the child. The group reaches what the child
//! started too: the service a wrapper (`faketime`, `sh -c 'ulimit ...; exec ...'`, `env`) runs
//! as its child, which `Child::kill` (and tokio's `kill_on_drop`) never reach.
//!
//! `scripts/test.sh` checks after the run that no process started from this checkout's
//! `target/` is still alive.

use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// A child process leading its own process group, killed with the group on drop.
#[derive(Debug)]
pub struct Spawned(Child);

impl Spawned {
    /// Spawns `command` in a new process group (its pid is the group id). Panics naming
    /// `what` when it cannot be started.
    pub fn spawn(command: &mut Command, what: &str) -> Spawned {
        Spawned(command.process_group(0).spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}")))
    }

    /// Sends `signal` (`-KILL`, `-TERM`, `-STOP`, `-CONT`) to every process of the group.
    pub fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
    }

    /// SIGKILLs the group and reaps the child (what dropping it does, at a chosen moment).
    pub fn stop(&mut self) {
        self.signal_group("-KILL");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Deref for Spawned {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Spawned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The resident memory of process `pid`, in kB (`VmRSS`; 0 when it cannot be read).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Waits (at most 10 s) until the service at `base` answers `/readyz` 200.
pub async fn wait_ready(client: &reqwest::Client, base: &str) {
    for _ in 0..100 {
        if client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn alive(pid: u32) -> bool {
        // A zombie is dead, only not reaped yet.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
    }

    #[test]
    fn dropping_it_kills_the_grandchild_a_wrapper_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        // The shell backgrounds a sleeper (a grandchild of this test) and waits on it.
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let spawned = Spawned::spawn(Command::new("sh").args(["-c", &script]), "sh");
        let give_up = Instant::now() + Duration::from_secs(10);
        let grandchild = loop {
            if let Some(pid) =
                std::fs::read_to_string(&pid_file).ok().and_then(|t| t.trim().parse::<u32>().ok())
            {
                break pid;
            }
            assert!(Instant::now() < give_up, "the wrapper never started its child");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(alive(grandchild));
        drop(spawned);
        let give_up = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) {
            assert!(Instant::now() < give_up, "the grandchild {grandchild} outlived the guard");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
