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
pub use command::transport::{Transport, register_zero_series};
pub use error::RoomError;
pub use history::{DEFAULT_EVENTS_LIMIT, EventPage, MAX_EVENTS_LIMIT};
pub use options::{
    Clock, CommitStats, DEFAULT_MAX_COMMIT_BATCH, DEFAULT_SEAT_REQUEST_TTL, DEFAULT_SYNC_PUBLISH_WAIT,
    RoomOptions, StillHolds, system_clock,
};
pub use presence::last_seen::Heartbeats;
pub use publish::marker;
pub use service::RoomService;
