//! Many nodes (SPEC §11.4), as a user runs them: three `room-service` processes with
//! `cluster.enabled` on one MariaDB database and the local Redis, the fake Tencent IM over
//! loopback. The lease TTL is scaled down to 3 s (renewal every 0.9 s, self-fence at 2.1 s)
//! to keep the runs short; every other value is the shipped default.

mod hop;
mod idle;
mod keeper;
mod nodes;
mod quota;

use std::collections::BTreeSet;
use std::time::Duration;

use room_service::cluster::{SHARDS, Shard, preferred_node};
use room_service_fakes::fake_im::{FakeIm, FakeImOptions};
use serde_json::Value;

use crate::delivery::Node;
use crate::outbox::harness::{ADMIN, APP, KEY};
use crate::support::{Spawned, TestDb};

/// `cluster.secret` of the test nodes.
pub const SECRET: &str = "test-cluster-secret-of-at-least-32-bytes";

/// `cluster.lease_ttl` of the test nodes.
pub(crate) const TTL: Duration = Duration::from_secs(3);

/// Three (or more) nodes of one cluster and what they share.
pub(crate) struct Nodes {
    pub db: TestDb,
    pub im: FakeIm,
    pub nodes: Vec<Node>,
    /// The running processes, killed with their process groups when the cluster is dropped.
    children: std::sync::Mutex<Vec<Option<Spawned>>>,
    http: reqwest::Client,
}

impl Nodes {
    /// `count` nodes, started one after another, each serving and the shards settled.
    pub async fn start(count: usize, env: &[(&str, &str)]) -> Self {
        let db = TestDb::mysql().await;
        let im = FakeIm::start(FakeImOptions { require_groups: true, ..FakeImOptions::new(APP, KEY, ADMIN) })
            .await;
        let mut nodes = Vec::new();
        for i in 0..count {
            let mut node = Node::new(db.url(), &im);
            node.node_id = format!("n{i}");
            let url = format!("http://127.0.0.1:{}", node.port);
            let mut all: Vec<(String, String)> = [
                ("ROOM_SERVICE__CLUSTER__ENABLED", "true"),
                ("ROOM_SERVICE__CLUSTER__SECRET", SECRET),
                ("ROOM_SERVICE__CLUSTER__ADVERTISE_URL", url.as_str()),
                ("ROOM_SERVICE__CLUSTER__EXPECTED_NODES", "3"),
                ("ROOM_SERVICE__CLUSTER__LEASE_TTL", "3s"),
                ("ROOM_SERVICE__REDIS__URL", "redis://127.0.0.1:6379/"),
                ("ROOM_SERVICE__HTTP__REQUEST_TIMEOUT", "4s"),
            ]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
            all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
            node.env = all;
            nodes.push(node);
        }
        let http = reqwest::Client::builder().timeout(Duration::from_secs(15)).build().expect("client");
        let children = std::sync::Mutex::new((0..count).map(|_| None).collect());
        let cluster = Self { db, im, children, nodes, http };
        for i in 0..count {
            cluster.spawn(i);
            cluster.wait_ready(i).await;
        }
        cluster.settled(count).await;
        cluster
    }

    fn children(&self) -> std::sync::MutexGuard<'_, Vec<Option<Spawned>>> {
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts node `i` (again).
    pub fn spawn(&self, i: usize) {
        self.children()[i] = Some(self.nodes[i].spawn());
    }

    /// Waits until node `i` answers `/readyz` with 200.
    pub async fn wait_ready(&self, i: usize) {
        let url = format!("http://127.0.0.1:{}/readyz", self.nodes[i].port);
        crate::delivery::eventually(&format!("node {i} ready"), Duration::from_secs(60), || async {
            self.http.get(&url).send().await.is_ok_and(|r| r.status() == 200)
        })
        .await;
    }

    /// Waits until the cluster has stopped moving shards: every shard has a live lease, held by
    /// the node rendezvous hashing prefers among exactly `nodes` owners. (Live leases over
    /// `nodes` owners alone can still be a hand-over under way, whose rooms answer 503
    /// `not_owner` for a moment.)
    pub async fn settled(&self, nodes: usize) {
        let sql = "SELECT shard, owner_node FROM room_shard_lease \
                   WHERE lease_until_ms > UNIX_TIMESTAMP(NOW(3)) * 1000";
        crate::delivery::eventually("shards settled", Duration::from_secs(30), || async {
            let leases: Vec<(i64, String)> =
                sqlx::query_as(sql).fetch_all(self.db.mysql_pool()).await.unwrap_or_default();
            let owners: BTreeSet<&str> = leases.iter().map(|(_, owner)| owner.as_str()).collect();
            let owners: Vec<&str> = owners.into_iter().collect();
            leases.len() == usize::from(SHARDS)
                && owners.len() == nodes
                && leases.iter().all(|(shard, owner)| {
                    Shard::try_from(*shard).is_ok_and(|s| preferred_node(s, &owners) == Some(owner.as_str()))
                })
        })
        .await;
    }

    /// Sends `signal` (`-STOP`, `-CONT`, `-KILL`, `-TERM`) to node `i`.
    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.children()[i].as_ref().expect("node running").id().to_string();
        let status = std::process::Command::new("kill").args([signal, &pid]).status().expect("kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Waits for node `i` to exit (after `-TERM` or `-KILL`), at most 30 s.
    pub async fn wait_exit(&self, i: usize) {
        crate::delivery::eventually(&format!("node {i} exited"), Duration::from_secs(30), || async {
            let mut children = self.children();
            match children[i].as_mut().map(|child| child.try_wait()) {
                Some(Ok(Some(_))) | None => {
                    children[i] = None;
                    true
                }
                _ => false,
            }
        })
        .await;
    }

    /// `POST` to node `i`; status 0 when it did not answer.
    pub async fn post(&self, i: usize, path: &str, body: Value) -> (u16, Value) {
        let url = format!("http://127.0.0.1:{}{path}", self.nodes[i].port);
        answer(self.http.post(url).json(&body).send().await).await
    }

    /// `GET` from node `i`.
    pub async fn get(&self, i: usize, path: &str) -> (u16, Value) {
        let url = format!("http://127.0.0.1:{}{path}", self.nodes[i].port);
        answer(self.http.get(url).send().await).await
    }

    /// The index of the node owning `room`, by `GET /admin/rooms/{room}/owner` on node `via`.
    pub async fn owner(&self, via: usize, room: &str) -> usize {
        let url = format!("http://127.0.0.1:{}/admin/rooms/{room}/owner", self.nodes[via].admin_port);
        let body: Value = self.http.get(url).send().await.expect("owner").json().await.expect("json");
        let node = body["node_id"].as_str().unwrap_or_else(|| panic!("no owner: {body}"));
        self.nodes.iter().position(|n| n.node_id == node).expect("a node of this cluster")
    }

    /// Sum of `room_commands_forwarded_total{result="ok"}` over the running nodes.
    pub async fn forwarded(&self) -> f64 {
        let mut total = 0.0;
        for node in &self.nodes {
            let text = node.metrics().await;
            total +=
                crate::delivery::metric(&text, "room_commands_forwarded_total{result=\"ok\"}").unwrap_or(0.0);
        }
        total
    }

    /// Waits until every outbox row is delivered.
    pub async fn all_delivered(&self, limit: Duration) {
        crate::delivery::eventually("every outbox row delivered", limit, || async {
            crate::delivery::undelivered(&self.db).await == 0
        })
        .await;
    }
}

async fn answer(sent: reqwest::Result<reqwest::Response>) -> (u16, Value) {
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}
