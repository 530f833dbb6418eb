//! A private MariaDB Galera cluster per row: three nodes on loopback (data directories, client,
//! group-communication, IST and SST ports of their own) and HAProxy in front of them as the one
//! address the services connect to — the topology of docs/DEPLOY-HA.md: one writer at a time
//! (the first node while it is healthy, then the next in order), a node taking traffic only
//! while it is Synced (HAProxy's check asks `wsrep_local_state`), the sessions of a node marked
//! down cut at once.
//!
//! Every node starts from a copy of the row template, owned by `mysql` and run as `mysql` (as
//! Debian's unit does): the SST script's rsync daemon then runs as the same user as the server
//! and can write its data directory (as root it would drop to `nobody`). The first node
//! bootstraps the cluster; the others join by SST (rsync). A node killed with `kill -9` comes
//! back as a DBA's unit brings it back: its position recovered (`--wsrep-recover`) and passed
//! as `--wsrep-start-position`, so it rejoins by IST from a donor's gcache.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use sqlx::{Connection, Executor};

use crate::mariadb::{self, Template, create_rooms_database, program, server_url};
use crate::support::{copy_tree, signal, wait_until};

/// Nodes of the cluster.
pub const NODES: usize = 3;

/// How long a node may take to be Synced (an SST included).
const SYNC_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a stopped node may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// HAProxy's check: every second, two failures mark a node down, three successes up again.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What every node runs with besides the single-server harness's small-server options
/// ([`mariadb::SERVER_OPTIONS`]): the `mysql` user, and what Galera requires (row-based
/// replication, interleaved auto-increment locks, InnoDB).
const GALERA_OPTIONS: [&str; 5] = [
    "--user=mysql",
    "--binlog-format=ROW",
    "--innodb-autoinc-lock-mode=2",
    "--default-storage-engine=InnoDB",
    // Causal reads: a read waits until the node applied every write set committed before it
    // (after a switch the new writer has certainly applied them; see docs/DEPLOY-HA.md).
    "--wsrep-sync-wait=1",
];

/// One node's ports and process.
#[derive(Debug)]
struct Node {
    name: String,
    datadir: PathBuf,
    port: u16,
    gcomm: u16,
    ist: u16,
    sst: u16,
    child: Option<Child>,
}

/// The cluster and HAProxy. Dropping it kills every process.
#[derive(Debug)]
pub struct Galera {
    dir: PathBuf,
    nodes: Vec<Node>,
    haproxy: Option<Child>,
    port: u16,
}

impl Galera {
    /// Starts three nodes from `template` under `dir` (the first bootstraps, the others join
    /// one after another), HAProxy in front, and creates the database `rooms`.
    pub async fn start(template: &Template, dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        // Every port at once: one released before the next is asked for may come back.
        let mut ports = distinct_ports(4 * NODES + 1)?.into_iter();
        let mut port = || ports.next().context("a free port");
        let mut nodes = Vec::new();
        for i in 0..NODES {
            let datadir = dir.join(format!("g{i}"));
            copy_tree(template.dir(), &datadir)?;
            let tmp = datadir.with_extension("tmp");
            std::fs::create_dir_all(&tmp)?;
            chown_mysql(&[&datadir, &tmp])?;
            let (port, gcomm, ist, sst) = (port()?, port()?, port()?, port()?);
            nodes.push(Node { name: format!("g{i}"), datadir, port, gcomm, ist, sst, child: None });
        }
        let mut cluster = Self { dir: dir.to_owned(), nodes, haproxy: None, port: port()? };
        for i in 0..NODES {
            cluster.spawn(i, i == 0, None)?;
            cluster.wait_synced(i).await?;
        }
        // HAProxy's check logs in as this user (deploy/galera/init.sql); replicated to all.
        let mut conn = sqlx::mysql::MySqlConnection::connect(&cluster.node_url(0)).await?;
        conn.execute(include_str!("../../deploy/galera/init.sql")).await?;
        let _ = conn.close().await;
        cluster.start_haproxy()?;
        let url = cluster.server_url();
        wait_until("HAProxy in front of the cluster", SYNC_TIMEOUT, || async {
            connect(&url).await.is_some()
        })
        .await?;
        create_rooms_database(cluster.port).await?;
        Ok(cluster)
    }

    /// `mysql://root@127.0.0.1:<HAProxy's port>/rooms`: what the services connect to.
    pub fn url(&self) -> String {
        format!("{}/rooms", self.server_url())
    }

    fn server_url(&self) -> String {
        server_url(self.port)
    }

    fn node_url(&self, i: usize) -> String {
        server_url(self.nodes[i].port)
    }

    /// The node HAProxy sends a new connection to now (its `@@port` asked through HAProxy).
    pub async fn writer(&self) -> anyhow::Result<usize> {
        let mut conn = sqlx::mysql::MySqlConnection::connect(&self.server_url()).await?;
        let port: i64 = sqlx::query_scalar("SELECT CAST(@@port AS SIGNED)").fetch_one(&mut conn).await?;
        let _ = conn.close().await;
        self.nodes
            .iter()
            .position(|n| i64::from(n.port) == port)
            .with_context(|| format!("HAProxy answered from port {port}, no node of the cluster"))
    }

    /// Node `i`'s name (`g0`..).
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// `kill -9` of node `i`, reaped.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP of node `i`: it keeps its sockets and answers nothing, to clients and to the
    /// cluster alike.
    pub fn freeze(&self, i: usize) -> anyhow::Result<()> {
        signal(self.pid(i)?, "STOP")
    }

    /// SIGCONT of node `i` after [`Galera::freeze`].
    pub fn thaw(&self, i: usize) -> anyhow::Result<()> {
        signal(self.pid(i)?, "CONT")
    }

    /// Cuts node `i` off the group (`gmcast.isolate`, Galera's own switch for exactly this): it
    /// loses quorum and refuses queries (`WSREP has not yet prepared node for application
    /// use`) until `isolated` is false again, when it rejoins.
    pub async fn isolate(&self, i: usize, isolated: bool) -> anyhow::Result<()> {
        let mut conn = sqlx::mysql::MySqlConnection::connect(&self.node_url(i)).await?;
        let value = if isolated { 1 } else { 0 };
        let set = format!("SET GLOBAL wsrep_provider_options = 'gmcast.isolate={value}'");
        conn.execute(sqlx::AssertSqlSafe(set)).await?;
        let _ = conn.close().await;
        Ok(())
    }

    /// Starts node `i` again after [`Galera::kill9`], from its recovered position (IST from a
    /// donor's gcache); returns how long until it was Synced.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<Duration> {
        self.kill9(i);
        let started = Instant::now();
        let position = self.recover(i)?;
        self.spawn(i, false, position.as_deref())?;
        self.wait_synced(i).await?;
        Ok(started.elapsed())
    }

    /// How node `i` joined in its last start: by IST, by SST, or with nothing to transfer
    /// (read from its error log, after its last start).
    pub fn last_transfer(&self, i: usize) -> &'static str {
        let log = std::fs::read_to_string(self.nodes[i].datadir.join("error.log")).unwrap_or_default();
        let last_start = log.rfind("Initializing allowlist service").unwrap_or(0);
        let run = &log[last_start..];
        if run.contains("SST completed on joiner") {
            "SST"
        } else if run.contains("Receiving IST") || run.contains("IST received") {
            "IST"
        } else if run.contains("state transfer needed: no") {
            "no transfer (its position was current)"
        } else {
            "an unknown transfer"
        }
    }

    /// True when node `i` answers and is Synced.
    pub async fn synced(&self, i: usize) -> bool {
        let Some(mut conn) = connect(&self.node_url(i)).await else { return false };
        let state: Option<String> = sqlx::query_scalar(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'",
        )
        .fetch_optional(&mut conn)
        .await
        .ok()
        .flatten();
        let _ = conn.close().await;
        state.as_deref() == Some("4")
    }

    /// Waits until node `i` is Synced; fails at once if its server exited (an option it
    /// refused, a state transfer that failed), naming the last lines of its error log.
    pub async fn wait_synced(&self, i: usize) -> anyhow::Result<Duration> {
        let name = &self.nodes[i].name;
        let waited = wait_until(&format!("Galera node {name} Synced"), SYNC_TIMEOUT, || async {
            self.exited(i) || self.synced(i).await
        })
        .await;
        let failure = match waited {
            Ok(_) if self.exited(i) => anyhow::anyhow!("Galera node {name} exited before it was Synced"),
            Ok(took) => return Ok(took),
            Err(error) => error,
        };
        let log = std::fs::read_to_string(self.nodes[i].datadir.join("error.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        anyhow::bail!("{failure}; last lines of its error log: {tail:?}")
    }

    /// True when node `i`'s server is not running (never started, or exited and not reaped
    /// yet: a zombie in `/proc`).
    fn exited(&self, i: usize) -> bool {
        let Ok(pid) = self.pid(i) else { return true };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        state.is_none_or(|s| s == "Z" || s == "X")
    }

    /// Stops HAProxy, then every node with SIGTERM (killed after a bound).
    pub async fn stop(&mut self) {
        if let Some(mut haproxy) = self.haproxy.take() {
            let _ = haproxy.kill();
            let _ = haproxy.wait();
        }
        for i in (0..NODES).rev() {
            let Some(mut child) = self.nodes[i].child.take() else { continue };
            let _ = signal(child.id(), "CONT");
            let _ = signal(child.id(), "TERM");
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline && !matches!(child.try_wait(), Ok(Some(_))) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn pid(&self, i: usize) -> anyhow::Result<u32> {
        self.nodes[i].child.as_ref().map(Child::id).context("the Galera node is not running")
    }

    /// The node's options: its ports, the cluster's addresses, SST by rsync.
    fn node_args(&self, i: usize) -> Vec<String> {
        let node = &self.nodes[i];
        let dir = &node.datadir;
        let members: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.gcomm)).collect();
        vec![
            "--no-defaults".into(),
            format!("--datadir={}", dir.display()),
            format!("--tmpdir={}", dir.with_extension("tmp").display()),
            format!("--port={}", node.port),
            "--bind-address=127.0.0.1".into(),
            format!("--socket={}", dir.join("sock").display()),
            format!("--pid-file={}", dir.join("mariadbd.pid").display()),
            format!("--log-error={}", dir.join("error.log").display()),
            "--wsrep-on=ON".into(),
            "--wsrep-provider=/usr/lib/galera/libgalera_smm.so".into(),
            "--wsrep-cluster-name=room-service-faults".into(),
            format!("--wsrep-node-name={}", node.name),
            "--wsrep-node-address=127.0.0.1".into(),
            format!("--wsrep-node-incoming-address=127.0.0.1:{}", node.port),
            format!("--wsrep-cluster-address=gcomm://{}", members.join(",")),
            format!(
                "--wsrep-provider-options=base_port={};ist.recv_addr=127.0.0.1:{};gcache.size=128M",
                node.gcomm, node.ist
            ),
            "--wsrep-sst-method=rsync".into(),
            // A joiner's donor: the last node first, the one least likely to be the writer (a
            // donor blocks its writes while it sends), then any.
            format!("--wsrep-sst-donor={}", donors(i)),
            format!("--wsrep-sst-receive-address=127.0.0.1:{}", node.sst),
        ]
    }

    /// Starts node `i` (`bootstrap`: a new cluster; `position`: where a restarted node stood).
    fn spawn(&mut self, i: usize, bootstrap: bool, position: Option<&str>) -> anyhow::Result<()> {
        let mut args = self.node_args(i);
        args.extend(mariadb::SERVER_OPTIONS.iter().chain(&GALERA_OPTIONS).map(|s| (*s).to_owned()));
        if bootstrap {
            args.push("--wsrep-new-cluster".into());
        }
        if let Some(position) = position {
            args.push(format!("--wsrep-start-position={position}"));
        }
        let child = Command::new(program("mariadbd"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("running mariadbd with Galera (are mariadb-server and galera-4 installed?)")?;
        self.nodes[i].child = Some(child);
        Ok(())
    }

    /// `mariadbd --wsrep-recover`: the position a stopped node's InnoDB holds, as a restarted
    /// node needs it to rejoin by IST (what Debian's `galera_recovery` does for its unit).
    fn recover(&self, i: usize) -> anyhow::Result<Option<String>> {
        let log = self.nodes[i].datadir.join("recover.log");
        let mut args = self.node_args(i);
        args.retain(|a| !a.starts_with("--log-error="));
        args.push(format!("--log-error={}", log.display()));
        args.extend(mariadb::SERVER_OPTIONS.iter().chain(&GALERA_OPTIONS).map(|s| (*s).to_owned()));
        args.push("--wsrep-recover".into());
        let status = Command::new(program("mariadbd"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running mariadbd --wsrep-recover")?;
        anyhow::ensure!(status.success(), "mariadbd --wsrep-recover failed: {status}");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        Ok(text
            .lines()
            .rev()
            .find_map(|line| line.split("WSREP: Recovered position: ").nth(1))
            .map(|p| p.trim().to_owned()))
    }

    /// HAProxy: one listener, the nodes in order (the first, then the others as backups: one
    /// writer at a time), each checked every second by `galera-check.sh`.
    fn start_haproxy(&mut self) -> anyhow::Result<()> {
        let check = self.dir.join("galera-check.sh");
        std::fs::write(&check, CHECK_SCRIPT)?;
        std::fs::set_permissions(&check, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        let mut config = format!(
            "global\n    external-check\n    insecure-fork-wanted\n    maxconn 2000\n\
             defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 1h\n    timeout server 1h\n    timeout check 2s\n\
             listen galera\n    bind 127.0.0.1:{}\n    option external-check\n    external-check path \"/usr/bin:/bin\"\n\
             \x20   external-check command {}\n\
             \x20   default-server inter {}ms fall 2 rise 3 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions\n",
            self.port,
            check.display(),
            CHECK_INTERVAL.as_millis()
        );
        for (i, node) in self.nodes.iter().enumerate() {
            let backup = if i == 0 { "" } else { " backup" };
            config.push_str(&format!("    server {} 127.0.0.1:{} check{backup}\n", node.name, node.port));
        }
        let path = self.dir.join("haproxy.cfg");
        std::fs::write(&path, config)?;
        let log = File::create(self.dir.join("haproxy.log"))?;
        let child = Command::new(program("haproxy"))
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("running haproxy (Debian's haproxy package)")?;
        self.haproxy = Some(child);
        Ok(())
    }
}

impl Drop for Galera {
    fn drop(&mut self) {
        if let Some(mut haproxy) = self.haproxy.take() {
            let _ = haproxy.kill();
            let _ = haproxy.wait();
        }
        for i in 0..NODES {
            let _ = self.nodes[i].child.as_ref().map(|c| signal(c.id(), "CONT"));
            self.kill9(i);
        }
    }
}

/// HAProxy's external check of a node, the one `deploy/galera/` ships (its comments say what it
/// asks and why).
const CHECK_SCRIPT: &str = include_str!("../../deploy/galera/galera-check.sh");

/// A connection to `url` within 2 s, or `None`.
async fn connect(url: &str) -> Option<sqlx::mysql::MySqlConnection> {
    let connect = sqlx::mysql::MySqlConnection::connect(url);
    tokio::time::timeout(Duration::from_secs(2), connect).await.ok()?.ok()
}

/// Node `i`'s donor preference: the other nodes from the last down, then any (the trailing
/// comma).
fn donors(i: usize) -> String {
    let others: Vec<String> = (0..NODES).rev().filter(|&n| n != i).map(|n| format!("g{n}")).collect();
    format!("{},", others.join(","))
}

/// `count` loopback ports free now, all different (each bound until all are found).
fn distinct_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("binding loopback ports")?;
    Ok(listeners.iter().filter_map(|l| l.local_addr().ok()).map(|a| a.port()).collect())
}

/// `chown -R mysql:mysql` of each path: the nodes run as `mysql`.
fn chown_mysql(paths: &[&Path]) -> anyhow::Result<()> {
    let status = Command::new("chown")
        .arg("-R")
        .arg("mysql:mysql")
        .args(paths)
        .status()
        .context("running chown (the Galera rows run as root, their servers as mysql)")?;
    anyhow::ensure!(status.success(), "chown -R mysql:mysql failed: {status}");
    Ok(())
}
