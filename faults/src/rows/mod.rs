//! The rows of the fault matrix and what they share: a [`Rig`] (the row's private MariaDB, the
//! fake IM, the services and a memory sampler), the load sizes, and the end of every row (the
//! three-way check, the services stopped, their logs read for panics).
//!
//! Row 1 and 2 ([`db`]): MariaDB killed with `kill -9`, then frozen with SIGSTOP, under load.
//! Row 4 ([`lease`]): a worker frozen past its lease while it holds claimed rows.
//! Row 7 ([`restarts`]): SIGTERM and SIGKILL of two instances in turn, under load.
//! Rows 11, 12 and 13 ([`galera`]): the Galera node HAProxy writes to killed, frozen, cut off.

pub mod db;
pub mod galera;
pub mod lease;
pub mod restarts;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use room_service_fakes::fake_im::FakeIm;

use crate::check;
use crate::galera::Galera;
use crate::load::{LoadPlan, LoadReport};
use crate::mariadb::{MariaDb, Template};
use crate::report::RowResult;
use crate::service::{self, Service, ServiceConfig};
use crate::support::rss_mb;

/// The bound of a SIGTERM: the service's own stop order is bounded by `http.shutdown_timeout`
/// (10 s) and the workers' stop (publish timeout + 5 s), which overlap.
pub const TERM_BOUND: Duration = Duration::from_secs(20);

/// The documented bound of an answer: `http.request_timeout` (10 s; a frozen database makes
/// the edge answer 503 `request_timeout` right at it), plus 2 s for scheduling on a busy
/// 2-core machine. The clients' own timeout (15 s) is what a hang is.
pub const ANSWER_BOUND: Duration = Duration::from_secs(12);

/// What every row gets.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The initialised data directory copied for each row's MariaDB.
    pub template: &'a Template,
    /// Where rows put their data directories and logs.
    pub root: &'a Path,
    /// Small sizes, seconds per row.
    pub smoke: bool,
}

impl Ctx<'_> {
    /// `normal` in a full run, `smoke` with `--smoke`.
    pub fn pick<T>(&self, normal: T, smoke: T) -> T {
        if self.smoke { smoke } else { normal }
    }

    /// The load every row runs against `targets` (ids prefixed with `tag`).
    pub fn plan(&self, tag: &str, targets: Vec<String>) -> LoadPlan {
        LoadPlan {
            tag: tag.into(),
            clients: self.pick(8, 3),
            rooms_per_client: 3,
            pace: Duration::from_millis(40),
            client_timeout: Duration::from_secs(15),
            targets,
        }
    }

    /// How long the commands under way may keep retrying once a load is told to finish.
    pub fn give_up_grace(&self) -> Duration {
        self.pick(Duration::from_secs(20), Duration::from_secs(10))
    }
}

/// A row's database: one private MariaDB, or a Galera cluster behind HAProxy.
#[derive(Debug)]
pub enum Database {
    /// One server.
    One(MariaDb),
    /// Three Galera nodes behind HAProxy.
    Galera(Galera),
}

impl Database {
    /// What the services connect to.
    pub fn url(&self) -> String {
        match self {
            Database::One(db) => db.url(),
            Database::Galera(cluster) => cluster.url(),
        }
    }

    async fn stop(&mut self) {
        match self {
            Database::One(db) => db.stop().await,
            Database::Galera(cluster) => cluster.stop().await,
        }
    }
}

/// A row's processes.
#[derive(Debug)]
pub struct Rig {
    /// The row's private database.
    pub db: Database,
    /// The fake Tencent IM every instance publishes to.
    pub im: FakeIm,
    /// The instances, in the order they were asked for.
    pub services: Vec<Service>,
    logs: Vec<PathBuf>,
    rss: RssSampler,
}

impl Rig {
    /// Starts MariaDB (a copy of the template), the fake IM and one service per `(node_id,
    /// extra environment)`.
    pub async fn start(
        ctx: &Ctx<'_>,
        row: u8,
        nodes: &[(&str, Vec<(String, String)>)],
    ) -> anyhow::Result<Rig> {
        Self::start_on(ctx, row, false, nodes).await
    }

    /// [`Rig::start`] on a Galera cluster (three nodes from the template) behind HAProxy.
    pub async fn start_galera(
        ctx: &Ctx<'_>,
        row: u8,
        nodes: &[(&str, Vec<(String, String)>)],
    ) -> anyhow::Result<Rig> {
        Self::start_on(ctx, row, true, nodes).await
    }

    async fn start_on(
        ctx: &Ctx<'_>,
        row: u8,
        galera: bool,
        nodes: &[(&str, Vec<(String, String)>)],
    ) -> anyhow::Result<Rig> {
        let dir = ctx.root.join(format!("row{row}"));
        std::fs::create_dir_all(&dir)?;
        let db = if galera {
            Database::Galera(Galera::start(ctx.template, &dir.join("galera")).await?)
        } else {
            Database::One(MariaDb::start(ctx.template, dir.join("mariadb")).await?)
        };
        let im = service::fake_im().await?;
        let mut services = Vec::new();
        let mut logs = Vec::new();
        for (node_id, env) in nodes {
            let log = dir.join(format!("service-{node_id}.log"));
            let config = ServiceConfig {
                node_id: (*node_id).into(),
                db_url: db.url(),
                im_url: im.base_url(),
                env: env.clone(),
                log: log.clone(),
            };
            services.push(Service::start(config).await?);
            logs.push(log);
        }
        let rss = RssSampler::start(services.iter().map(Service::pid_cell).collect());
        Ok(Rig { db, im, services, logs, rss })
    }

    /// The public base URLs of every instance.
    pub fn targets(&self) -> Vec<String> {
        self.services.iter().map(Service::base_url).collect()
    }

    /// Ends a row: runs the three-way check over `load` (the services still running, so their
    /// workers can drain), stops the services with SIGTERM, reads their logs for panics and
    /// fills `row`.
    pub async fn finish(mut self, row: &mut RowResult, load: LoadReport) -> anyhow::Result<()> {
        let drain = Duration::from_secs(60);
        let checked = check::check(&self.db.url(), &self.im, &load.acked, drain).await;
        row.load = load;
        for service in &mut self.services {
            match service.terminate(TERM_BOUND).await {
                Ok(Some(_)) => {}
                Ok(None) => row
                    .failures
                    .push(format!("service {} did not stop within {TERM_BOUND:?}", service.node_id())),
                Err(error) => row.failures.push(format!("service {}: {error:#}", service.node_id())),
            }
        }
        row.panics = self.logs.iter().map(|l| service::panics_in(l)).sum();
        row.rss_mb = self.rss.max_mb();
        self.db.stop().await;
        row.check = Some(checked?);
        Ok(())
    }
}

/// Samples the resident memory of the services every 250 ms and keeps the largest figure.
#[derive(Debug)]
struct RssSampler {
    max: Arc<Mutex<f64>>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start(pids: Vec<Arc<AtomicU32>>) -> Self {
        let max = Arc::new(Mutex::new(0.0f64));
        let seen = max.clone();
        let task = tokio::spawn(async move {
            loop {
                for pid in &pids {
                    let pid = pid.load(Ordering::Relaxed);
                    if let Some(mb) = (pid != 0).then(|| rss_mb(pid)).flatten() {
                        let mut max = seen.lock().unwrap_or_else(|e| e.into_inner());
                        *max = max.max(mb);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        Self { max, task }
    }

    fn max_mb(&self) -> f64 {
        *self.max.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The database clock, ms since the epoch (what `updated_at_ms` is written with).
pub async fn db_now_ms(pool: &sqlx::MySqlPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar("SELECT CAST(ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000) AS SIGNED)")
        .fetch_one(pool)
        .await?)
}
