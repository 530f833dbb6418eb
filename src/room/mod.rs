//! Room cells and the command pipeline.
//!
//! [`RoomService`] owns one cell per room: the room's state in memory behind a lock and a
//! queue of its commands, so the commands of one room run in order while different rooms run
//! concurrently. A command is validated, paid for (gifts), queued on its room's cell, run by
//! the cell's drain task through the pipeline's steps, published in room order, and answered.
//!
//! The folders, in the order a command meets them:
//!
//! - `cells/`: the cells — a room's state and its queue (`cell`), the sharded map of them the
//!   janitor walks (`cell_map`), the rooms found missing lately so reads of unknown rooms
//!   leave nothing behind (`misses`), and the identities of a room's last commits (`recent`).
//! - `command/`: the command pipeline, each step a type of its own with its own data: the
//!   request, payment for gifts (`pay`: a debit before queueing, refunded when nothing was
//!   committed), the drain task and its steps — `Decide` (pure: the domain applies the queued
//!   commands one after another), `Commit` (one transaction for the batch — group commit: each
//!   command's log and outbox rows, one snapshot write, the member and gift rows they changed —
//!   swapped into memory only after commit) — a repeated command id answered from the log
//!   (`Replay`), and the response (`outcome`).
//! - `publish/`: the command path's driver of the delivery core (`src/delivery`):
//!   `SyncPublish` puts the room's IM events onto its lane, which sends them in room order
//!   through the shared publish stack, packed several to a message; the hand-off gives a room
//!   to the outbox worker and back; what went through is marked delivered best-effort by the
//!   [`marker::DeliveryMarker`], which batches the marks of concurrent commands.
//! - [`presence`]: when each member was last seen (`last_seen`), and the background workers:
//!   the presence stale worker, the cell janitor, the refund sweeper.
//! - `history/`: the rooms' event history, read by clients catching up.
//!
//! At the top: the service ([`RoomService`], `service.rs`: submit and its orchestration of
//! the steps; `reads.rs`: the reads and heartbeats, served from the cells), its options
//! ([`RoomOptions`]) and its errors ([`RoomError`]).

mod cells;
mod command;
mod error;
mod history;
mod options;
pub mod presence;
mod publish;
mod reads;
mod service;

pub use command::outcome::{CommandResponse, Delivery, EventReceipt};
pub use command::request::CommandRequest;
pub use error::RoomError;
pub use history::{DEFAULT_EVENTS_LIMIT, EventPage, MAX_EVENTS_LIMIT};
pub use options::{
    CommitStats, DEFAULT_MAX_COMMIT_BATCH, DEFAULT_SYNC_PUBLISH_WAIT, RoomOptions, StillHolds,
};
pub use presence::last_seen::Heartbeats;
pub use publish::marker;
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
        for result in command::outcome::RESULT_LABELS {
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
