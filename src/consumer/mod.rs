//! Consumers of the room events besides IM (SPEC §11.6): the activity webhook and the audit
//! log. Each reads the committed events of `room_outbox` in commit order past its own position
//! (`room_event_consumer`; never the IM columns of the outbox), publishes them through the same
//! layers as IM — trace, metrics, an event filter of its own, a rate limit of its own, timeout —
//! around its own leaf, and advances its position only once the leaf acknowledged them.
//!
//! ```text
//! room_outbox ──▶ HighWater (ids certainly committed or certainly gone) ──▶ Consumer
//!   ──▶ Trace → Metrics → EventFilter → RateLimit → Timeout → Batcher ──▶ WebhookSink | AuditSink
//! ```
//!
//! One instance per consumer at a time (a lease on its row, database clock); at least once, in
//! order, resumable after a crash with at most one batch sent again. The pieces:
//! [`high_water`] (the commit-order trap), [`batch`] (one delivery per round through per-event
//! layers), [`run`] (the loop), [`webhook`] and [`audit`] (the sinks), [`stack`] (composition).

pub mod audit;
pub mod batch;
pub mod high_water;
mod progress;
pub mod run;
pub mod stack;
pub mod webhook;

pub use run::Consumer;

use std::time::Duration;

use tower::util::BoxService;

use crate::config::OutboxWorkerSettings;
use crate::publish::{BoxError, Message, Outcome, Path};

/// The consumers this service has (a closed set: their names are metric labels and rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerName {
    /// The activity webhook.
    Webhook,
    /// The audit log.
    Audit,
}

impl ConsumerName {
    /// Every consumer.
    pub const ALL: [ConsumerName; 2] = [ConsumerName::Webhook, ConsumerName::Audit];

    /// Its row name and label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerName::Webhook => "webhook",
            ConsumerName::Audit => "audit",
        }
    }

    /// The publish path its stack labels spans and metrics with.
    pub fn path(self) -> Path {
        match self {
            ConsumerName::Webhook => Path::Webhook,
            ConsumerName::Audit => Path::Audit,
        }
    }
}

impl std::str::FromStr for ConsumerName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ConsumerName::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown consumer {s:?} (expected webhook or audit)"))
    }
}

/// A consumer's publish stack: the shared layers around its [`Batcher`](batch::Batcher).
pub type ConsumerStack = BoxService<Message, Outcome, BoxError>;

/// How a consumer runs.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Which consumer.
    pub name: ConsumerName,
    /// This instance, for the lease owner and the log lines.
    pub node_id: String,
    /// Events read, delivered and acknowledged per round.
    pub batch_size: usize,
    /// Sleep of an idle round.
    pub poll_interval: Duration,
    /// Longest wait for a missing id the database cannot prove gone.
    pub gap_grace: Duration,
    /// Lifetime of the lease on the consumer's row.
    pub lease_ttl: Duration,
    /// The delivery policy whose backoff spaces the retries of a failed batch.
    pub backoff: OutboxWorkerSettings,
}
