//! The multi-statement transactions both backends share, written once over any [`Backend`]:
//! the room commit, the room load, the claim and the batch mark. Each repository
//! opens the transaction its own way (SQLite takes the write lock up front) and hands it here.

use sqlx::Transaction;

use super::backend::{Backend, Run};
use super::claim_plan::{self as plan, ListedRoom, QueuedRow};
use super::lease_sql;
use super::outbox_types::{Claim, ClaimedBatch, Mark, MarkReport, OutboxRow, PublishResult, group_marks};
use super::queue_sql as sql;
use super::room_sql;
use super::rows::{EpochRow, GiftRow, MemberRow, RoomRow, VersionRow};
use super::types::{CommitError, GiftTotalRow, RoomCommit, StoreError, StoredRoom};

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// One room commit (any number of its commands), then commit. The snapshot row is written
/// first: it is the fence, and every writer of a room's rows takes it before the others.
/// Nothing is written on any error but [`CommitError::OutcomeUnknown`] (the COMMIT failed).
pub(super) async fn commit_room<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    c: &RoomCommit,
) -> Result<(), CommitError> {
    let room = c.room_id.as_str();
    if let Some(epoch) = c.fence {
        let mut fence = lease_sql::fence_epoch::<DB>(c.shard);
        let stored = fence.fetch_optional::<EpochRow>(&mut *tx).await?;
        if stored.map(|r| r.epoch) != Some(epoch as i64) {
            return Err(CommitError::Fenced);
        }
    }
    if let Some(snapshot) = &c.snapshot {
        let written = if c.expected_version == 0 {
            match room_sql::insert_snapshot::<DB>(room, snapshot, c.fence).execute(&mut *tx).await {
                Err(e) if is_unique_violation(&e) => 0,
                other => other?,
            }
        } else {
            let mut update = room_sql::update_snapshot::<DB>(room, c.expected_version, snapshot, c.fence);
            update.execute(&mut *tx).await?
        };
        if written != 1 {
            return Err(CommitError::VersionConflict);
        }
    } else {
        // Only no-ops (join of a member, leave of a non-member): no snapshot write, but they
        // were decided on the cell's state, which must still be the committed one.
        let mut check = room_sql::room_version::<DB>(room, true);
        let stored = check.fetch_optional::<VersionRow>(&mut *tx).await?;
        if stored.map(|r| r.version) != Some(c.expected_version as i64) {
            return Err(CommitError::VersionConflict);
        }
    }
    if c.members.cleared {
        room_sql::delete_all_members::<DB>(room).execute(&mut *tx).await?;
    }
    if !c.members.deleted.is_empty() {
        room_sql::delete_members::<DB>(room, &c.members.deleted).execute(&mut *tx).await?;
    }
    if !c.members.upserted.is_empty() {
        room_sql::upsert_members::<DB>(room, &c.members.upserted).execute(&mut *tx).await?;
    }
    if !c.gift_totals.is_empty() {
        room_sql::upsert_gift_totals::<DB>(room, &c.gift_totals).execute(&mut *tx).await?;
    }
    if !c.commands.is_empty() {
        match room_sql::insert_command_log::<DB>(c).execute(&mut *tx).await {
            Err(e) if is_unique_violation(&e) => return Err(CommitError::DuplicateCommand),
            other => other?,
        };
    }
    if !c.outbox.is_empty() {
        room_sql::insert_outbox::<DB>(c).execute(&mut *tx).await?;
    }
    // Every error above rolled back; only the COMMIT's own failure leaves the outcome open.
    tx.commit().await.map_err(|e| CommitError::OutcomeUnknown(e.into()))
}

/// A room's snapshot, members and gift totals as of one version: the snapshot row is read
/// first and kept from writers (or the read transaction's snapshot holds) until the end.
pub(super) async fn load_room<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    room_id: &str,
) -> Result<Option<StoredRoom>, StoreError> {
    let mut snapshot = room_sql::load_snapshot::<DB>(room_id);
    let Some(row) = snapshot.fetch_optional::<RoomRow>(&mut *tx).await? else {
        tx.commit().await?;
        return Ok(None);
    };
    let mut members = room_sql::load_members::<DB>(room_id);
    let members = members.fetch_all::<MemberRow>(&mut *tx).await?;
    let mut gifts = room_sql::load_gift_totals::<DB>(room_id);
    let gift_totals = gifts.fetch_all::<GiftRow>(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(StoredRoom {
        version: row.version.max(0) as u64,
        state: row.state,
        members: members.into_iter().map(|m| (m.user_id, m.joined_at_ms)).collect(),
        gift_totals: gift_totals.into_iter().map(GiftTotalRow::from).collect(),
    }))
}

/// A claimed batch's results in one transaction: one UPDATE per distinct mark (delivered,
/// each error and delay, each park reason, each deferral), every one fenced on this claim's
/// `worker_id`.
pub(super) async fn finish_claimed<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    worker_id: &str,
    results: &[PublishResult],
) -> Result<MarkReport, StoreError> {
    let mut report = MarkReport::default();
    for (mark, ids) in group_marks(results) {
        let mut q = match &mark {
            Mark::Delivered => sql::finish_delivered::<DB>(worker_id, &ids),
            Mark::Retry { error, after } => sql::finish_retryable::<DB>(worker_id, error, *after, &ids),
            Mark::Park { reason, error } => sql::finish_parked::<DB>(worker_id, reason, error, &ids),
            Mark::Defer { after } => sql::finish_deferred::<DB>(worker_id, *after, &ids),
        };
        let changed = q.execute(&mut *tx).await?;
        match mark {
            Mark::Delivered => report.delivered += changed,
            Mark::Retry { .. } => report.retried += changed,
            Mark::Park { .. } => report.parked += changed,
            Mark::Defer { .. } => report.deferred += changed,
        }
    }
    tx.commit().await?;
    let marked = report.delivered + report.retried + report.parked + report.deferred;
    report.lease_lost = results.len() as u64 - marked;
    Ok(report)
}

/// One claim, room by room (see [`claim_plan`](super::claim_plan)), in one short transaction,
/// nothing held across an IM call: the rooms after the cursor with their heads (one loose index
/// scan per undelivered status), the chosen rooms' rows from their heads, the rows taken locked
/// (`FOR UPDATE SKIP LOCKED`, the claimable predicate checked again under the lock) and kept
/// per room up to the first one not locked, then marked `delivering` under this claim's
/// `worker_id` and lease, and read back.
pub(super) async fn claim<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    claim: &Claim,
) -> Result<ClaimedBatch, StoreError> {
    let per_list = plan::rooms_listed(claim.limit);
    let mut rooms = sql::claim_rooms::<DB>(claim, per_list);
    let listed = rooms.fetch_all::<ListedRoom>(&mut *tx).await?;
    let window = plan::window(listed, per_list);
    let reads = plan::reads(&window, claim);
    let mut taken = if reads.rooms.is_empty() {
        plan::Taken::default()
    } else {
        let mut read = sql::room_rows::<DB>(claim, &reads.rooms);
        plan::take(&reads, read.fetch_all::<QueuedRow>(&mut *tx).await?, claim)
    };
    let mut rows = Vec::new();
    let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
    if !ids.is_empty() {
        let mut lock = sql::lock_claimable::<DB>(claim, &ids);
        let locked = lock.fetch_all::<(i64,)>(&mut *tx).await?;
        plan::keep_locked(&mut taken, &locked.into_iter().map(|(id,)| id).collect());
        let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
        if !ids.is_empty() {
            sql::claim_rows::<DB>(&claim.worker_id, claim.lease, &ids).execute(&mut *tx).await?;
            let mut back = sql::outbox_rows_by_id::<DB>(&ids);
            rows = in_claim_order(back.fetch_all::<OutboxRow>(&mut *tx).await?, &ids);
        }
    }
    tx.commit().await?;
    let more = taken.more || window.truncated;
    Ok(ClaimedBatch { rows, more, cursor: plan::cursor(&window, taken.unserved, &claim.after_room) })
}

/// Puts rows read back by id into the order of `ids` (the claim order).
fn in_claim_order(rows: Vec<OutboxRow>, ids: &[i64]) -> Vec<OutboxRow> {
    let mut by_id: std::collections::HashMap<i64, OutboxRow> = rows.into_iter().map(|r| (r.id, r)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}
