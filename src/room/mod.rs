//! Room Cells and the command pipeline.
//!
//! [`RoomService`] owns one cell per room: the room's state in memory behind a lock and a
//! queue of its commands, so the commands of one room run in order while different rooms run
//! concurrently. A cell loads lazily from the database; the cells live in a sharded map
//! (`cell_map`) that the janitor walks one shard at a time. Reads and heartbeats (`reads`)
//! of a room that does not exist leave no cell behind, and such misses are remembered briefly
//! in a bounded cache (`misses`).
//!
//! Queued commands go through explicit steps, each a type of its own with its own data:
//! `Decide` (pure: the domain applies them one after another), `Commit` (one transaction for the batch — group commit: each command's
//! log and outbox rows, one snapshot write, the member and gift rows they changed — swapped
//! into memory only after commit) and `SyncPublish` (the room's IM events onto its lane, which
//! sends them in room order through the shared publish stack, packed several to a message;
//! marked delivered best-effort by the [`marker::DeliveryMarker`], which batches the marks of
//! concurrent commands). A repeated command id is answered from the log (`Replay`).
//! With a wallet configured, a gift is paid for before it is queued and its debit refunded
//! when nothing was committed (`Payments`). [`RoomService`] orchestrates them.

mod cell_map;
mod cells;
mod commit;
mod decide;
mod drain;
mod error;
mod handoff;
mod history;
mod lane;
mod last_seen;
pub mod marker;
mod misses;
mod options;
mod outcome;
mod pay;
pub mod presence;
mod reads;
mod recent;
mod replay;
mod request;
mod service;
mod steps;
mod sync_publish;
mod waiting;

pub use error::RoomError;
pub use history::{DEFAULT_EVENTS_LIMIT, EventPage, MAX_EVENTS_LIMIT};
pub use last_seen::Heartbeats;
pub use options::{
    CommitStats, DEFAULT_MAX_COMMIT_BATCH, DEFAULT_SYNC_PUBLISH_WAIT, RoomOptions, StillHolds,
};
pub use outcome::{CommandResponse, Delivery, EventReceipt};
pub use request::CommandRequest;
pub use service::RoomService;

use std::sync::Arc;

/// Where a command came from: the `transport` label of `room_commands_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The HTTP API (`/v1/rooms...`).
    Http,
    /// The gRPC API (`room.v1.RoomService`).
    Grpc,
    /// Issued by the service itself (the presence worker's evictions) or called in-process.
    Internal,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Transport; 3] = [Transport::Http, Transport::Grpc, Transport::Internal];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Grpc => "grpc",
            Transport::Internal => "internal",
        }
    }
}

/// Exports `room_commands_total` at 0 for every command, result and one of `transports`, and
/// an empty `room_command_latency_seconds` for every command, before the first command: the
/// dashboard's command panels read 0 rather than "No data".
pub fn register_zero_series(transports: &[Transport]) {
    use crate::domain::Command;
    use crate::telemetry::names::{
        COMMAND_LATENCY_SECONDS, COMMANDS_TOTAL, LABEL_COMMAND, LABEL_RESULT, LABEL_TRANSPORT,
    };
    for command in Command::NAMES {
        for result in outcome::RESULT_LABELS {
            for transport in transports {
                metrics::counter!(COMMANDS_TOTAL, LABEL_COMMAND => command, LABEL_RESULT => result, LABEL_TRANSPORT => transport.as_str())
                    .increment(0);
            }
        }
        let _ = metrics::histogram!(COMMAND_LATENCY_SECONDS, LABEL_COMMAND => command);
    }
}

/// Wall clock in milliseconds since the epoch; injectable so presence tests control time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}
