//! The commit step: a decided batch written as ONE [`RoomCommit`] — each logged command's log
//! row and outbox rows, one snapshot write fenced on the version the batch was decided on, and
//! the net member and gift-total rows — and the room read back from its snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::decide::{Committed, Plan, Queued};
use super::outcome::{LoggedEvent, LoggedOutcome};
use crate::cluster::shard_of;
use crate::delivery::codec;
use crate::domain::{
    Attribute, Change, MemberChange, PendingKind, PendingSeat, Restriction, RestrictionKind, RoomId,
    RoomSnapshot, RoomState, SenderTotal, StoredRestriction, UserId,
};
use crate::room::error::RoomError;
use crate::room::options::CommitStats;
use crate::store::{
    AttributeChanges, AttributeRow, CommitError, GiftTotalRow, LoggedCommand, MemberChanges, NewOutboxRow,
    RestrictionChanges, RestrictionRow, RoomCommit, SeatRequestChanges, SeatRequestRow, SharedCommandStore,
    SnapshotWrite, StoreError, StoredCommand,
};
use crate::telemetry::traces::Traced;

/// What became of a batch's write.
pub(in crate::room) enum Written {
    /// Committed.
    Committed,
    /// Nothing was written: these command ids of the batch are logged already (retries).
    Repeats(Vec<StoredCommand>),
    /// Nothing was written: the room changed on another node since the cell loaded it.
    Moved,
    /// Every command of the batch fails with `error`; `unload`: the cell may be behind the
    /// database (the commit may have landed, or another node owns the room now).
    Failed {
        /// The answer of every command.
        error: RoomError,
        /// The cell must reload.
        unload: bool,
    },
}

impl Written {
    /// The answer when the room moved on again after a reload.
    pub(in crate::room) fn moved_twice() -> RoomError {
        RoomError::VersionConflict("room was changed concurrently by another node; retry the command".into())
    }
}

/// Writes decided batches and loads rooms; counts the transactions.
pub(in crate::room) struct Commit {
    repo: SharedCommandStore,
    transactions: AtomicU64,
    commands: AtomicU64,
}

impl Commit {
    /// The store it writes to.
    pub(in crate::room) fn repo(&self) -> &SharedCommandStore {
        &self.repo
    }

    /// Commits through `repo`.
    pub(in crate::room) fn new(repo: SharedCommandStore) -> Self {
        Self { repo, transactions: AtomicU64::new(0), commands: AtomicU64::new(0) }
    }

    /// Room transactions committed and the commands they logged.
    pub(in crate::room) fn stats(&self) -> CommitStats {
        CommitStats {
            transactions: self.transactions.load(Ordering::Relaxed),
            commands: self.commands.load(Ordering::Relaxed),
        }
    }

    /// Writes `plan` (decided on `items`) in one transaction fenced on `fence`, its outbox rows
    /// not claimable by the worker before `claim_after` has passed.
    pub(in crate::room) async fn write(
        &self,
        room_id: &RoomId,
        items: &[Queued],
        plan: &Plan,
        fence: Option<u64>,
        claim_after: Duration,
    ) -> Written {
        let commit = room_commit(room_id, items, plan, fence, claim_after);
        let error = match self.repo.commit_room(&commit).await {
            Ok(()) => {
                self.transactions.fetch_add(1, Ordering::Relaxed);
                self.commands.fetch_add(commit.commands.len() as u64, Ordering::Relaxed);
                return Written::Committed;
            }
            Err(error) => error,
        };
        let failed = |error, unload| Written::Failed { error, unload };
        match error {
            CommitError::DuplicateCommand => {
                // Some command is logged already (a retried command), or two of the batch are the
                // same command.
                let ids: Vec<String> = items.iter().map(|q| q.command_id.to_string()).collect();
                match self.repo.find_commands(&ids).await {
                    Ok(logged) => {
                        let ours: Vec<StoredCommand> = logged
                            .into_iter()
                            .filter(|row| items.iter().any(|q| row.belongs_to(&q.key(), &q.fingerprint)))
                            .collect();
                        if ours.is_empty() {
                            failed(
                                RoomError::VersionConflict(
                                    "command id is being used concurrently; retry".into(),
                                ),
                                false,
                            )
                        } else {
                            Written::Repeats(ours)
                        }
                    }
                    Err(e) => failed(e.into(), false),
                }
            }
            CommitError::VersionConflict => Written::Moved,
            CommitError::Fenced => {
                // Another node took the shard over: nothing was written, and the cell's state
                // may be behind the new owner's.
                tracing::warn!(room_id = %room_id, "Shard lease lost; the command was not committed");
                failed(RoomError::NotOwner, true)
            }
            // Rolled back before the COMMIT: nothing landed, the cell still holds the room.
            CommitError::Store(e) => failed(RoomError::NotCommitted(Arc::new(e)), false),
            // The commit may or may not have landed: the cell reloads on the next command.
            CommitError::OutcomeUnknown(e) => failed(e.into(), true),
        }
    }

    /// True when the stored room is not at `cell_version` (`None`: no room).
    pub(in crate::room) async fn is_stale(
        &self,
        room_id: &RoomId,
        cell_version: Option<u64>,
    ) -> Result<bool, StoreError> {
        Ok(self.repo.room_version(room_id.as_str()).await? != cell_version)
    }

    /// The room as committed (`None`: it does not exist).
    pub(in crate::room) async fn load(&self, room_id: &RoomId) -> Result<Option<RoomState>, RoomError> {
        let Some(stored) = self.repo.load_room(room_id.as_str()).await? else {
            return Ok(None);
        };
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            RoomError::Corrupt(format!("{what} of room {room_id}: {e}"))
        };
        let mut snapshot: RoomSnapshot =
            serde_json::from_str(&stored.state).map_err(|e| corrupt("snapshot", &e))?;
        snapshot.attributes = Some(
            stored
                .attributes
                .into_iter()
                .map(|r| (r.attr_key, Attribute { value: r.value, version: r.version.max(0) as u64 }))
                .collect(),
        );
        let members = stored
            .members
            .into_iter()
            .map(|(id, joined)| UserId::parse(id).map(|id| (id, joined)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a member", &e))?;
        let senders = stored
            .gift_totals
            .into_iter()
            .map(|t| {
                let total = SenderTotal { total_value: t.total_value, first_version: t.first_version };
                UserId::parse(t.user_id).map(|id| (id, total))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a gift total", &e))?;
        let restrictions = stored
            .restrictions
            .into_iter()
            .map(restriction_of)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a mute or ban", &e))?;
        let seat_pending = stored
            .seat_requests
            .into_iter()
            .map(seat_request_of)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| corrupt("a seat request", &e))?;
        Ok(Some(RoomState::restore(snapshot, members, senders, restrictions, seat_pending)))
    }
}

/// The transaction of a plan: what its logged commands wrote, net.
fn room_commit(
    room_id: &RoomId,
    items: &[Queued],
    plan: &Plan,
    fence: Option<u64>,
    claim_after: Duration,
) -> RoomCommit {
    let mut commands = Vec::with_capacity(plan.logged.len());
    let mut outbox = Vec::new();
    for &index in &plan.logged {
        let (Some(item), Some(committed)) = (items.get(index), plan.committed(index)) else { continue };
        commands.push(logged_command(item, committed));
        outbox.extend(committed.envelopes.iter().map(|(e, json)| NewOutboxRow {
            event_id: e.event_id.clone(),
            event_type: e.event_type.as_str(),
            envelope: json.to_string(),
            room_version: codec::reaches_im(e.event_type.as_str()).then_some(e.room_version),
            trace_context: item.trace.as_ref().map(Traced::traceparent),
        }));
    }
    let mut members = NetMembers::default();
    let mut senders: BTreeMap<UserId, SenderTotal> = BTreeMap::new();
    let mut restrictions: BTreeMap<(RestrictionKind, UserId), Option<Restriction>> = BTreeMap::new();
    let mut attributes: BTreeMap<&str, Option<&Attribute>> = BTreeMap::new();
    let mut seat_requests: BTreeMap<&UserId, Option<&PendingSeat>> = BTreeMap::new();
    for change in &plan.changes {
        match change {
            Change::SeatPendingSet { user_id, pending } => {
                seat_requests.insert(user_id, Some(pending));
            }
            Change::SeatPendingDropped { user_id } => {
                seat_requests.insert(user_id, None);
            }
            Change::AttributeSet { key, attribute } => {
                attributes.insert(key, Some(attribute));
            }
            Change::AttributeDeleted { key } => {
                attributes.insert(key, None);
            }
            Change::SenderTotal { user_id, total } => {
                senders.insert(user_id.clone(), *total);
            }
            Change::Restricted { kind, user_id, restriction } => {
                restrictions.insert((*kind, user_id.clone()), Some(restriction.clone()));
            }
            Change::Lifted { kind, user_id } => {
                restrictions.insert((*kind, user_id.clone()), None);
            }
            other => members.record(other),
        }
    }
    RoomCommit {
        room_id: room_id.to_string(),
        expected_version: plan.expected_version,
        snapshot: plan.changed.then(|| plan.state.as_ref().map(snapshot_write)).flatten(),
        commands,
        outbox,
        members: members.into_changes(),
        gift_totals: senders
            .into_iter()
            .map(|(user_id, t)| GiftTotalRow {
                user_id: user_id.to_string(),
                total_value: t.total_value,
                first_version: t.first_version,
            })
            .collect(),
        restrictions: restriction_changes(restrictions),
        attributes: attribute_changes(attributes),
        seat_requests: seat_request_changes(seat_requests),
        claim_after,
        shard: shard_of(room_id.as_str()),
        fence,
    }
}

/// The command's log row, with the outcome replayed for a repeated command id.
fn logged_command(item: &Queued, committed: &Committed) -> LoggedCommand {
    let response = &committed.response;
    let logged = LoggedOutcome {
        applied: response.applied,
        room_version: response.room_version,
        events: committed
            .envelopes
            .iter()
            .map(|(e, _)| LoggedEvent {
                event_id: e.event_id.clone(),
                event_type: e.event_type.as_str().into(),
            })
            .collect(),
    };
    LoggedCommand {
        command_id: item.command_id.to_string(),
        caller: item.caller.clone(),
        command_type: item.command.name(),
        fingerprint: item.fingerprint.clone(),
        request_id: item.request_id.clone(),
        applied: response.applied,
        room_version: response.room_version,
        // Cannot fail: a bool, an integer and a Vec of two-string structs, all derived.
        outcome: serde_json::to_string(&logged).expect("a logged outcome always serialises"),
    }
}

fn snapshot_write(state: &RoomState) -> SnapshotWrite {
    SnapshotWrite {
        version: state.version,
        status: state.status.as_str(),
        state: state.snapshot_json(),
        owner_id: state.owner_id.to_string(),
    }
}

/// A stored mute or ban as the domain keeps it.
fn restriction_of(row: RestrictionRow) -> Result<StoredRestriction, String> {
    let kind = match row.kind.as_str() {
        "mute" => RestrictionKind::Mute,
        "ban" => RestrictionKind::Ban,
        other => return Err(format!("unknown kind {other:?}")),
    };
    let user = UserId::parse(row.user_id).map_err(|e| e.to_string())?;
    Ok((kind, user, Restriction { until_ms: row.until_ms, reason: row.reason, by: row.by_actor }))
}

/// The rows of a batch's net attribute changes.
fn attribute_changes(net: BTreeMap<&str, Option<&Attribute>>) -> AttributeChanges {
    let mut changes = AttributeChanges::default();
    for (key, attribute) in net {
        match attribute {
            Some(a) => changes.upserted.push(AttributeRow {
                attr_key: key.to_owned(),
                value: a.value.clone(),
                version: i64::try_from(a.version).unwrap_or(i64::MAX),
            }),
            None => changes.deleted.push(key.to_owned()),
        }
    }
    changes
}

/// The rows of a batch's net seat request changes.
fn seat_request_changes(net: BTreeMap<&UserId, Option<&PendingSeat>>) -> SeatRequestChanges {
    let mut changes = SeatRequestChanges::default();
    for (user_id, pending) in net {
        match pending {
            Some(p) => changes.upserted.push(SeatRequestRow {
                user_id: user_id.to_string(),
                kind: p.kind.as_str().to_owned(),
                seat_index: p.index.map(i64::from),
                expires_at_ms: p.expires_at_ms,
                by_actor: p.by.clone(),
            }),
            None => changes.deleted.push(user_id.to_string()),
        }
    }
    changes
}

/// A stored seat request as the domain keeps it.
fn seat_request_of(row: SeatRequestRow) -> Result<(UserId, PendingSeat), String> {
    let kind = PendingKind::parse(&row.kind).ok_or_else(|| format!("unknown kind {:?}", row.kind))?;
    let index = row.seat_index.map(u32::try_from).transpose().map_err(|e| e.to_string())?;
    let user = UserId::parse(row.user_id).map_err(|e| e.to_string())?;
    Ok((user, PendingSeat { kind, index, expires_at_ms: row.expires_at_ms, by: row.by_actor }))
}

/// The rows of a batch's net mute and ban changes.
fn restriction_changes(net: BTreeMap<(RestrictionKind, UserId), Option<Restriction>>) -> RestrictionChanges {
    let mut changes = RestrictionChanges::default();
    for ((kind, user_id), restriction) in net {
        match restriction {
            Some(r) => changes.upserted.push(RestrictionRow {
                kind: kind.as_str().to_owned(),
                user_id: user_id.to_string(),
                until_ms: r.until_ms,
                reason: r.reason,
                by_actor: r.by,
            }),
            None => changes.deleted.push((kind.as_str().to_owned(), user_id.to_string())),
        }
    }
    changes
}

/// The net effect of a batch's member changes: the last word on each member, and whether the
/// room was cleared first.
#[derive(Debug, Default)]
struct NetMembers {
    cleared: bool,
    last: BTreeMap<UserId, Option<i64>>,
}

impl NetMembers {
    fn record(&mut self, change: &Change) {
        match change.member() {
            Some(MemberChange::Joined(user_id, joined_at_ms)) => {
                self.last.insert(user_id.clone(), Some(joined_at_ms));
            }
            Some(MemberChange::Left(user_id)) => {
                self.last.insert(user_id.clone(), None);
            }
            Some(MemberChange::Cleared) => {
                self.cleared = true;
                self.last.clear();
            }
            None => {}
        }
    }

    fn into_changes(self) -> MemberChanges {
        let mut changes = MemberChanges { cleared: self.cleared, ..MemberChanges::default() };
        for (user_id, joined) in self.last {
            match joined {
                Some(joined_at_ms) => changes.upserted.push((user_id.to_string(), joined_at_ms)),
                None => changes.deleted.push(user_id.to_string()),
            }
        }
        changes
    }
}
