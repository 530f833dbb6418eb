//! B8's services: one node with the cluster off (the default path), or several cluster nodes
//! in this process on one database and the local Redis, each on a loopback port chosen before
//! it starts (its `cluster.advertise_url` must name it), with the shards settled before
//! anything is measured.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::future::join_all;
use room_service::app::{self, RunningApp};
use room_service::cluster::{SHARDS, Shard, preferred_node, shard_of};
use room_service_fakes::fake_im::FakeIm;
use sqlx::mysql::MySqlPool;

use crate::support;

/// The nodes' shared secret of the cluster hop (`cluster.secret`).
const CLUSTER_SECRET: &str = "b8-bench-cluster-secret-of-32-bytes-at-least";

/// The local Redis the cluster's shard directory lives in (its keys are named by the
/// database's cluster id, so a benchmark database never meets the tests' keys).
const REDIS_URL: &str = "redis://127.0.0.1:6379/";

/// Longest wait for every shard to sit at its preferred node.
const SETTLE_PATIENCE: Duration = Duration::from_secs(60);

/// Running services, the node ids in order.
pub(crate) struct Nodes {
    running: Vec<RunningApp>,
    /// Each node's public origin (`http://127.0.0.1:port`).
    pub(crate) bases: Vec<String>,
    /// Each node's `node_id`.
    pub(crate) ids: Vec<String>,
    /// From the first node's start to the last shard at its preferred node (cluster only).
    pub(crate) settled_in: Option<Duration>,
}

impl Nodes {
    /// One node, the cluster off: `overrides` on top of [`support::settings`].
    pub(crate) async fn single(
        db_url: &str,
        im: &FakeIm,
        overrides: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let settings = support::settings(db_url, Some(im), overrides)?;
        let running = app::start(settings.clone(), support::publisher(&settings, None)?).await?;
        let bases = vec![format!("http://{}", running.addr)];
        Ok(Self { running: vec![running], bases, ids: vec![settings.node_id], settled_in: None })
    }

    /// `count` cluster nodes started one after another (default `cluster.lease_ttl`), then
    /// waits until every shard has a live lease held by its rendezvous-preferred node.
    pub(crate) async fn cluster(
        db_url: &str,
        im: &FakeIm,
        count: usize,
        overrides: &[(&str, &str)],
        status: &MySqlPool,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let mut nodes = Self { running: Vec::new(), bases: Vec::new(), ids: Vec::new(), settled_in: None };
        let expected = count.to_string();
        for i in 0..count {
            let port = free_port()?;
            let (id, base) = (format!("b8-n{i}"), format!("http://127.0.0.1:{port}"));
            let listen = format!("127.0.0.1:{port}");
            let mut all: Vec<(&str, &str)> = vec![
                ("node_id", &id),
                ("http.listen", &listen),
                ("cluster.enabled", "true"),
                ("cluster.secret", CLUSTER_SECRET),
                ("cluster.advertise_url", &base),
                ("cluster.expected_nodes", &expected),
                ("redis.url", REDIS_URL),
            ];
            all.extend_from_slice(overrides);
            let settings = support::settings(db_url, Some(im), &all)?;
            let publisher = support::publisher(&settings, None)?;
            match app::start(settings, publisher).await.with_context(|| format!("starting node {id}")) {
                Ok(running) => nodes.running.push(running),
                Err(error) => {
                    nodes.stop().await;
                    return Err(error);
                }
            }
            nodes.bases.push(base);
            nodes.ids.push(id);
        }
        if let Err(error) = settled(status, &nodes.ids).await {
            nodes.stop().await;
            return Err(error);
        }
        nodes.settled_in = Some(started.elapsed());
        Ok(nodes)
    }

    /// Delivery-mark statements the nodes' markers have run so far, together.
    pub(crate) fn mark_statements(&self) -> u64 {
        self.running.iter().map(|r| r.rooms.delivery_marker_stats().statements).sum()
    }

    /// Stops every node at once (each releases its leases); errors are reported on stderr.
    pub(crate) async fn stop(self) {
        for (id, stopped) in
            self.ids.iter().zip(join_all(self.running.into_iter().map(RunningApp::stop)).await)
        {
            if let Err(error) = stopped {
                eprintln!("b8: node {id} did not stop cleanly: {error:#}");
            }
        }
    }
}

/// A loopback port free now: bound on port 0, read and released (the node binds it again
/// right after; another process taking it meanwhile fails the start, it is not retried).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// The live leases, shard → owner node.
async fn live_leases(status: &MySqlPool) -> anyhow::Result<HashMap<Shard, String>> {
    let rows: Vec<(i32, String)> = sqlx::query_as(
        "SELECT shard, owner_node FROM room_shard_lease WHERE lease_until_ms > UNIX_TIMESTAMP(NOW(3)) * 1000",
    )
    .fetch_all(status)
    .await?;
    Ok(rows.into_iter().filter_map(|(shard, owner)| Some((Shard::try_from(shard).ok()?, owner))).collect())
}

/// Waits until all [`SHARDS`] have a live lease, each held by its preferred node among `ids`
/// (so no hand-off is still under way and every node holds its share).
async fn settled(status: &MySqlPool, ids: &[String]) -> anyhow::Result<()> {
    let names: Vec<&str> = ids.iter().map(String::as_str).collect();
    let deadline = Instant::now() + SETTLE_PATIENCE;
    loop {
        let leases = live_leases(status).await?;
        let misplaced = (0..SHARDS)
            .filter(|shard| leases.get(shard).map(String::as_str) != preferred_node(*shard, &names))
            .count();
        if misplaced == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "shards not settled after {SETTLE_PATIENCE:?}: {} live leases, {misplaced} not at their preferred node",
            leases.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The index in `ids` of the node holding each room's shard now.
pub(crate) async fn owners(
    status: &MySqlPool,
    ids: &[String],
    rooms: impl Iterator<Item = String>,
) -> anyhow::Result<HashMap<String, usize>> {
    let leases = live_leases(status).await?;
    rooms
        .map(|room| {
            let shard = shard_of(&room);
            let owner = leases
                .get(&shard)
                .and_then(|node| ids.iter().position(|id| id == node))
                .with_context(|| format!("shard {shard} of room {room} has no live owner among {ids:?}"))?;
            Ok((room, owner))
        })
        .collect()
}
