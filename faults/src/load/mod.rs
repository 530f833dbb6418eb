//! The load: `clients` concurrent clients, each on rooms of its own (create, then joins,
//! gifts and leaves with unique command ids `{tag}-{client}-{n}`), one command at a time.
//!
//! Every request has a client timeout: one that runs into it *hung*, a broken promise. A 503,
//! a transport error or a timeout is retried with the same command id (and the same body)
//! after a short backoff, on the next target when there are several, until the command is
//! acknowledged (2xx) or the give-up time passes; 409 `version_conflict` is retried the same
//! way, as documented. Any other answer is recorded as unexpected: a harness bug or a broken
//! contract. The clients record which command ids were acknowledged and the event ids their
//! answers listed, answers by status and the slowest answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod client;

use client::Client;

/// Wait before retrying a refused or failed attempt.
const BACKOFF: Duration = Duration::from_millis(150);

/// How the load runs.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Prefix of room and command ids (unique per load in a row).
    pub tag: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Rooms per client, used in turn (keeps each room well under the per-group IM rate).
    pub rooms_per_client: usize,
    /// Pause between two commands of a client.
    pub pace: Duration,
    /// Bound on one request: beyond it the request hung.
    pub client_timeout: Duration,
    /// Base URLs of the instances; client `i` starts on target `i % len`.
    pub targets: Vec<String>,
}

/// What the load saw.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    /// Acknowledged command ids and the event ids their answers listed.
    pub acked: HashMap<String, Vec<String>>,
    /// When each acknowledgement arrived.
    pub ack_times: Vec<Instant>,
    /// Answers by HTTP status (every attempt).
    pub statuses: BTreeMap<u16, u64>,
    /// 503 answers by `error.code` (`unavailable`, `request_timeout`, `draining`, ...).
    pub unavailable: BTreeMap<String, u64>,
    /// Attempts that failed without an answer (connection refused or reset).
    pub transport_errors: u64,
    /// Attempts that ran into the client timeout: requests that hung.
    pub hung: u64,
    /// The slowest attempt that got an answer or a transport error.
    pub max_latency: Duration,
    /// Commands still unacknowledged at the give-up time.
    pub given_up: u64,
    /// Answers no client expects (status, code, command), at most a few kept.
    pub unexpected: Vec<String>,
    /// How many unexpected answers in all.
    pub unexpected_count: u64,
}

impl LoadReport {
    /// Adds `other` (a later phase of the same row) to this one.
    pub fn merge(&mut self, other: LoadReport) {
        self.acked.extend(other.acked);
        self.ack_times.extend(other.ack_times);
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        for (code, n) in other.unavailable {
            *self.unavailable.entry(code).or_default() += n;
        }
        self.transport_errors += other.transport_errors;
        self.hung += other.hung;
        self.max_latency = self.max_latency.max(other.max_latency);
        self.given_up += other.given_up;
        self.unexpected_count += other.unexpected_count;
        self.unexpected.extend(other.unexpected);
        self.unexpected.truncate(5);
    }

    /// Answers with this status.
    pub fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// 5xx answers other than 503.
    pub fn other_5xx(&self) -> u64 {
        self.statuses.iter().filter(|(s, _)| (500..600).contains(*s) && **s != 503).map(|(_, n)| n).sum()
    }

    /// The first acknowledgement at or after `t`.
    pub fn first_ack_after(&self, t: Instant) -> Option<Instant> {
        self.ack_times.iter().copied().filter(|a| *a >= t).min()
    }

    /// The longest time without any acknowledgement between `from` and `to`.
    pub fn longest_ack_gap(&self, from: Instant, to: Instant) -> Duration {
        let mut times: Vec<Instant> =
            self.ack_times.iter().copied().filter(|t| *t >= from && *t <= to).collect();
        times.sort_unstable();
        let mut previous = from;
        let mut gap = Duration::ZERO;
        for t in times.into_iter().chain([to]) {
            gap = gap.max(t.saturating_duration_since(previous));
            previous = t;
        }
        gap
    }
}

/// A running load.
#[derive(Debug)]
pub struct Load {
    stop: CancellationToken,
    give_up: Arc<Mutex<Option<Instant>>>,
    clients: JoinSet<LoadReport>,
}

impl Load {
    /// Starts the clients.
    pub fn start(plan: &LoadPlan) -> anyhow::Result<Load> {
        anyhow::ensure!(!plan.targets.is_empty(), "a load needs a target");
        let http =
            reqwest::Client::builder().timeout(plan.client_timeout).pool_max_idle_per_host(4).build()?;
        let stop = CancellationToken::new();
        let give_up = Arc::new(Mutex::new(None));
        let mut clients = JoinSet::new();
        for index in 0..plan.clients {
            let client = Client {
                plan: plan.clone(),
                index,
                http: http.clone(),
                stop: stop.clone(),
                give_up: give_up.clone(),
                target: index % plan.targets.len(),
                report: LoadReport::default(),
            };
            clients.spawn(client.run());
        }
        Ok(Load { stop, give_up, clients })
    }

    /// Stops issuing new commands, lets the commands under way retry until `grace` has
    /// passed, and returns what all clients saw.
    pub async fn finish(mut self, grace: Duration) -> LoadReport {
        *self.give_up.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + grace);
        self.stop.cancel();
        let mut report = LoadReport::default();
        while let Some(joined) = self.clients.join_next().await {
            match joined {
                Ok(part) => report.merge(part),
                Err(error) => {
                    report.unexpected_count += 1;
                    report.unexpected.push(format!("a load client ended abnormally: {error}"));
                }
            }
        }
        report
    }
}
