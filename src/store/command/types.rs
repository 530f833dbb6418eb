//! Values of the command path passed to and from the [`CommandStore`](super::CommandStore),
//! and why a commit did not happen ([`CommitError`]).

use std::time::Duration;

use crate::store::error::StoreError;

/// A persisted room: the snapshot row and the rows of its members and gift senders, read in
/// one consistent view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoom {
    /// Room version it holds.
    pub version: u64,
    /// The serialised snapshot (`RoomSnapshot`: the small state, without members).
    pub state: String,
    /// `(user_id, joined_at_ms)`, by user id.
    pub members: Vec<(String, i64)>,
    /// Gift totals by sender.
    pub gift_totals: Vec<GiftTotalRow>,
    /// Mutes and bans in force, on the database clock.
    pub restrictions: Vec<RestrictionRow>,
    /// Attributes, by key.
    pub attributes: Vec<AttributeRow>,
    /// Pending seat requests and invitations.
    pub seat_requests: Vec<SeatRequestRow>,
}

/// A pending seat request or invitation (`room_seat_request`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SeatRequestRow {
    /// Whose.
    pub user_id: String,
    /// `request` or `invite`.
    pub kind: String,
    /// The seat named, if any.
    pub seat_index: Option<i64>,
    /// When it runs out (ms since the epoch).
    pub expires_at_ms: i64,
    /// Who made it.
    pub by_actor: String,
}

/// The seat request rows a commit changes, as the net effect of its commands.
#[derive(Debug, Clone, Default)]
pub struct SeatRequestChanges {
    /// Rows to insert or overwrite.
    pub upserted: Vec<SeatRequestRow>,
    /// Users whose row goes.
    pub deleted: Vec<String>,
}

/// A due seat request or invitation of some room: what the expiry scan reads.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DueSeatRequest {
    /// The room.
    pub room_id: String,
    /// Whose.
    pub user_id: String,
    /// `request` or `invite`.
    pub kind: String,
    /// When it ran out.
    pub expires_at_ms: i64,
}

/// One of a room's attributes (`room_attribute`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AttributeRow {
    /// The key.
    pub attr_key: String,
    /// The value.
    pub value: String,
    /// The room version that wrote it.
    pub version: i64,
}

/// The attribute rows a commit changes, as the net effect of its commands.
#[derive(Debug, Clone, Default)]
pub struct AttributeChanges {
    /// Rows to insert or overwrite.
    pub upserted: Vec<AttributeRow>,
    /// Keys to delete.
    pub deleted: Vec<String>,
}

/// A mute or a ban (`room_restriction`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RestrictionRow {
    /// `mute` or `ban`.
    pub kind: String,
    /// Who.
    pub user_id: String,
    /// When it ends (ms since the epoch).
    pub until_ms: i64,
    /// A ban's reason.
    pub reason: String,
    /// Who imposed it.
    pub by_actor: String,
}

/// The restriction rows a commit changes, as the net effect of its commands.
#[derive(Debug, Clone, Default)]
pub struct RestrictionChanges {
    /// Rows to insert or overwrite.
    pub upserted: Vec<RestrictionRow>,
    /// `(kind, user_id)` rows to delete.
    pub deleted: Vec<(String, String)>,
}

/// A command's identity (SPEC §13.1): who sent it and its `command_id`. Two callers' equal
/// command ids are two commands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommandKey {
    /// The principal: `user:<id>`, `service:<name>`, under `auth.mode: none` the user the
    /// command names; empty for a command naming nobody.
    pub caller: String,
    /// The client's idempotency key.
    pub command_id: String,
}

impl CommandKey {
    /// The key of `command_id` sent by `caller`.
    pub fn new(caller: impl Into<String>, command_id: impl Into<String>) -> Self {
        Self { caller: caller.into(), command_id: command_id.into() }
    }
}

/// A logged command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCommand {
    /// Its idempotency key.
    pub command_id: String,
    /// Its caller (`''`: logged before commands had callers, or naming nobody).
    pub caller: String,
    /// The room it targeted.
    pub room_id: String,
    /// SHA-256 of its body.
    pub fingerprint: String,
    /// Whether it changed the room.
    pub applied: bool,
    /// Room version after it.
    pub room_version: u64,
    /// Its serialised outcome.
    pub outcome: String,
}

impl StoredCommand {
    /// True when this row is the command `key` with body `fingerprint` names, or another body
    /// under the same key (409): its own caller's row, or a row logged before commands had
    /// callers whose fingerprint (which covered the caller) matches. A caller-less row of
    /// another body is another caller's command, unless the key names nobody either.
    pub fn belongs_to(&self, key: &CommandKey, fingerprint: &str) -> bool {
        self.command_id == key.command_id
            && (self.caller == key.caller || (self.caller.is_empty() && self.fingerprint == fingerprint))
    }
}

/// One IM event of a room's history (the events API).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEvent {
    /// Its room version.
    pub room_version: u64,
    /// The envelope, as IM received it.
    pub envelope: String,
    /// How long ago it was committed, on the database clock.
    pub age: std::time::Duration,
}

/// One outbox row to insert with a command.
#[derive(Debug, Clone)]
pub struct NewOutboxRow {
    /// UUIDv7.
    pub event_id: String,
    /// Event type name.
    pub event_type: &'static str,
    /// Envelope JSON.
    pub envelope: String,
    /// The event's `room_version` when it reaches IM (the room's event history serves it);
    /// `None` for the events that never do.
    pub room_version: Option<u64>,
    /// The command's `traceparent` when its trace is sampled (SPEC §13.4).
    pub trace_context: Option<String>,
}

/// One command's row in `room_command_log`.
#[derive(Debug, Clone)]
pub struct LoggedCommand {
    /// Idempotency key.
    pub command_id: String,
    /// Who sent it ([`CommandKey::caller`]).
    pub caller: String,
    /// Bounded command name.
    pub command_type: &'static str,
    /// SHA-256 of the command body.
    pub fingerprint: String,
    /// Tracing id.
    pub request_id: String,
    /// Whether the command changed the room.
    pub applied: bool,
    /// Room version after the command.
    pub room_version: u64,
    /// Serialised outcome, replayed for a repeated command id.
    pub outcome: String,
}

/// The snapshot row a commit writes.
#[derive(Debug, Clone)]
pub struct SnapshotWrite {
    /// Room version after the last command of the commit.
    pub version: u64,
    /// `open` or `closed`.
    pub status: &'static str,
    /// The serialised `RoomSnapshot`.
    pub state: String,
    /// The room's owner (its column: the open rooms of an owner are counted on it).
    pub owner_id: String,
}

/// A sender's running gift total (`room_gift_total`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiftTotalRow {
    /// The sender.
    pub user_id: String,
    /// Sum of their gifts.
    pub total_value: u64,
    /// Room version of their first gift.
    pub first_version: u64,
}

/// The member rows a commit changes, as the net effect of its commands.
#[derive(Debug, Clone, Default)]
pub struct MemberChanges {
    /// Delete every member row of the room first (the room closed).
    pub cleared: bool,
    /// `(user_id, joined_at_ms)` rows to insert or overwrite.
    pub upserted: Vec<(String, i64)>,
    /// Members to delete.
    pub deleted: Vec<String>,
}

impl MemberChanges {
    /// True when no member row changes.
    pub fn is_empty(&self) -> bool {
        !self.cleared && self.upserted.is_empty() && self.deleted.is_empty()
    }
}

/// Everything one commit of a room writes, in one transaction: one or more commands decided
/// in order on the room at `expected_version` (group commit), each with its command log row and
/// outbox rows, and what they changed — one snapshot write, member rows, gift totals.
#[derive(Debug, Clone)]
pub struct RoomCommit {
    /// The room.
    pub room_id: String,
    /// The version the commands were decided on (0: the room did not exist). The snapshot
    /// write is fenced on it; without one, the stored version is checked against it.
    pub expected_version: u64,
    /// The new snapshot, when any command changed the room.
    pub snapshot: Option<SnapshotWrite>,
    /// Command log rows, in order.
    pub commands: Vec<LoggedCommand>,
    /// Outbox rows, in room order.
    pub outbox: Vec<NewOutboxRow>,
    /// Member rows.
    pub members: MemberChanges,
    /// Gift totals to insert or overwrite.
    pub gift_totals: Vec<GiftTotalRow>,
    /// Mutes and bans.
    pub restrictions: RestrictionChanges,
    /// Attributes.
    pub attributes: AttributeChanges,
    /// Pending seat requests and invitations.
    pub seat_requests: SeatRequestChanges,
    /// The rows are not claimable by a worker before this much time has passed.
    pub claim_after: Duration,
    /// The room's shard (stored on its outbox rows: an owner relays its own shards first).
    pub shard: u16,
    /// The epoch of the shard lease this node committed under (`None`: no cluster, no fence).
    /// The commit fails with [`CommitError::Fenced`] when the shard's epoch is another.
    pub fence: Option<u64>,
}

/// Why a command commit did not happen. Nothing was written in every case but
/// [`CommitError::OutcomeUnknown`].
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The command id is already in the log.
    #[error("command id already logged")]
    DuplicateCommand,
    /// Another writer committed this room's next version first.
    #[error("room version conflict")]
    VersionConflict,
    /// The shard's lease was taken over (its epoch moved on): this node no longer owns it.
    #[error("shard lease lost: another node owns the room now")]
    Fenced,
    /// The database failed before the COMMIT: the transaction rolled back, nothing was written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The COMMIT itself failed (the connection broke, the server did not answer): the
    /// transaction may or may not have landed.
    #[error("commit outcome unknown: {0}")]
    OutcomeUnknown(#[source] StoreError),
}

impl From<sqlx::Error> for CommitError {
    fn from(e: sqlx::Error) -> Self {
        CommitError::Store(e.into())
    }
}
