//! A private MariaDB server per row, on a data directory of its own and a free loopback port,
//! so a row can kill, freeze and restart it without touching the shared server.
//!
//! `mariadb-install-db` runs once per invocation into a [`Template`]; each row copies it
//! ([`MariaDb::start`]) and runs `mariadbd` on the copy. The server is durable as shipped
//! (`innodb_flush_log_at_trx_commit=1`): a `kill -9` loses nothing a commit acknowledged.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sqlx::{Connection, Executor};

use crate::support::{copy_tree, free_port, signal, wait_until};

/// How long a server may take to accept connections (crash recovery included).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stopped server may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Options that keep a small server quick to start: a small redo log and buffer pool, no
/// binary log, no name resolution, no performance schema, no buffer pool dump or load. (The
/// Galera nodes run with them too, as `mysql`; this one runs as root.)
pub const SERVER_OPTIONS: [&str; 7] = [
    "--skip-log-bin",
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=8M",
    "--skip-name-resolve",
    "--performance-schema=OFF",
    "--innodb-buffer-pool-load-at-startup=OFF",
    "--innodb-buffer-pool-dump-at-shutdown=OFF",
];

/// A temporary directory of the server's own, beside its data directory. Never the default
/// `/tmp`: a starting `mariadbd` deletes every `#sql*` file in its tmpdir, which would pull the
/// temporary tables from under the shared MariaDB the other tests use.
fn private_tmpdir(datadir: &Path) -> anyhow::Result<PathBuf> {
    let dir = datadir.with_extension("tmp");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// `name` from `PATH`, else from `/usr/sbin` or `/usr/bin` (`mariadbd` lives in `/usr/sbin`,
/// which a non-login `PATH` may lack); `name` itself when found nowhere (the spawn then fails
/// naming it).
pub fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// `mysql://root@127.0.0.1:<port>`: a private server (or HAProxy in front of some), as root.
pub fn server_url(port: u16) -> String {
    format!("mysql://root@127.0.0.1:{port}")
}

/// Creates the database `rooms` the services use, on the server at `port`.
pub async fn create_rooms_database(port: u16) -> anyhow::Result<()> {
    let mut conn = sqlx::mysql::MySqlConnection::connect(&server_url(port)).await?;
    conn.execute("CREATE DATABASE rooms").await?;
    let _ = conn.close().await;
    Ok(())
}

/// An initialised, never started data directory (system tables, passwordless `root`).
#[derive(Debug)]
pub struct Template {
    dir: PathBuf,
    /// How long `mariadb-install-db` took.
    pub install_time: Duration,
}

impl Template {
    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `mariadb-install-db` into `dir` (which must not exist yet).
    pub fn install(dir: &Path) -> anyhow::Result<Self> {
        let started = Instant::now();
        let log = dir.with_extension("install.log");
        let output = Command::new(program("mariadb-install-db"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.display()))
            .arg(format!("--tmpdir={}", private_tmpdir(dir)?.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db", "--user=root"])
            .args(["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=64M"])
            .stdin(Stdio::null())
            .stdout(File::create(&log)?)
            .stderr(Stdio::piped())
            .output()
            .context("running mariadb-install-db (is mariadb-server installed?)")?;
        anyhow::ensure!(
            output.status.success(),
            "mariadb-install-db failed ({}): {} (see {})",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
            log.display()
        );
        Ok(Self { dir: dir.to_owned(), install_time: started.elapsed() })
    }
}

/// One private server. Dropping it kills it.
#[derive(Debug)]
pub struct MariaDb {
    datadir: PathBuf,
    port: u16,
    child: Option<Child>,
    /// Started (first start included).
    pub starts: u32,
}

impl MariaDb {
    /// Copies `template` to `datadir`, starts a server on a free port, waits until it accepts
    /// connections and creates the database `rooms`.
    pub async fn start(template: &Template, datadir: PathBuf) -> anyhow::Result<Self> {
        copy_tree(&template.dir, &datadir)
            .with_context(|| format!("copying the template data directory to {}", datadir.display()))?;
        let mut db = Self { datadir, port: free_port()?, child: None, starts: 0 };
        db.spawn().await?;
        create_rooms_database(db.port).await?;
        Ok(db)
    }

    /// `mysql://root@127.0.0.1:<port>/rooms`.
    pub fn url(&self) -> String {
        format!("{}/rooms", server_url(self.port))
    }

    fn server_url(&self) -> String {
        server_url(self.port)
    }

    /// The server's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts `mariadbd` on the data directory and waits until it accepts connections.
    async fn spawn(&mut self) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let dir = &self.datadir;
        let log = dir.join("error.log");
        let child = Command::new(program("mariadbd"))
            .arg("--no-defaults")
            .arg(format!("--datadir={}", dir.display()))
            .arg(format!("--tmpdir={}", private_tmpdir(dir)?.display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg("--user=root")
            .args(SERVER_OPTIONS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("running mariadbd")?;
        self.child = Some(child);
        self.starts += 1;
        let url = self.server_url();
        let ready = wait_until("MariaDB accepting connections", START_TIMEOUT, || {
            let url = url.clone();
            async move {
                let connect = sqlx::mysql::MySqlConnection::connect(&url);
                match tokio::time::timeout(Duration::from_secs(2), connect).await {
                    Ok(Ok(conn)) => {
                        let _ = conn.close().await;
                        true
                    }
                    _ => false,
                }
            }
        });
        if let Err(error) = ready.await {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            self.kill9();
            anyhow::bail!("{error}; last lines of {}: {tail:?}", log.display());
        }
        Ok(started.elapsed())
    }

    /// `kill -9`, and reaps the process.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same data directory and port (after [`MariaDb::kill9`]
    /// or [`MariaDb::stop`]); returns how long until it accepted connections.
    pub async fn restart(&mut self) -> anyhow::Result<Duration> {
        self.kill9();
        self.spawn().await
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing.
    pub fn freeze(&self) -> anyhow::Result<()> {
        signal(self.pid().context("MariaDB is not running")?, "STOP")
    }

    /// SIGCONT after [`MariaDb::freeze`].
    pub fn thaw(&self) -> anyhow::Result<()> {
        signal(self.pid().context("MariaDB is not running")?, "CONT")
    }

    /// SIGTERM, then waits for the exit (killed after a bound).
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = signal(child.id(), "CONT");
        let _ = signal(child.id(), "TERM");
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.kill9();
    }
}
