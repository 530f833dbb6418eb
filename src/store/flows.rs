//! The multi-statement transactions both backends share, written once over any [`Dialect`]:
//! the room commit, the room load, the claim and the batch mark. Each repository
//! opens the transaction its own way (SQLite takes the write lock up front) and hands it here.

use sqlx::{Executor, FromRow, IntoArguments, Transaction};

use super::claim_plan::{self as plan, ListedRoom, QueuedRow};
use super::lease_sql;
use super::outbox_types::{Claim, ClaimedBatch, Mark, MarkReport, OutboxRow, PublishResult, group_marks};
use super::queue_sql as sql;
use super::room_sql;
use super::rows::{EpochRow, GiftRow, MemberRow, RoomRow, VersionRow};
use super::sql::Dialect;
use super::types::{CommitError, GiftTotalRow, RoomCommit, StoreError, StoredRoom};

fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// One room commit (any number of its commands), then commit. The snapshot row is written
/// first: it is the fence, and every writer of a room's rows takes it before the others.
/// Nothing is written on any error but [`CommitError::OutcomeUnknown`] (the COMMIT failed).
pub(super) async fn commit_room<DB>(
    mut tx: Transaction<'static, DB>,
    c: &RoomCommit,
) -> Result<(), CommitError>
where
    DB: Dialect,
    for<'r> VersionRow: FromRow<'r, DB::Row>,
    for<'r> EpochRow: FromRow<'r, DB::Row>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let room = c.room_id.as_str();
    if let Some(epoch) = c.fence {
        let mut fence = lease_sql::fence_epoch::<DB>(c.shard);
        let stored = fence.build_query_as::<EpochRow>().fetch_optional(&mut *tx).await?;
        if stored.map(|r| r.epoch) != Some(epoch as i64) {
            return Err(CommitError::Fenced);
        }
    }
    if let Some(snapshot) = &c.snapshot {
        let written = if c.expected_version == 0 {
            match room_sql::insert_snapshot::<DB>(room, snapshot, c.fence).build().execute(&mut *tx).await {
                Err(e) if is_unique_violation(&e) => 0,
                other => DB::rows_affected(&other?),
            }
        } else {
            let mut update = room_sql::update_snapshot::<DB>(room, c.expected_version, snapshot, c.fence);
            DB::rows_affected(&update.build().execute(&mut *tx).await?)
        };
        if written != 1 {
            return Err(CommitError::VersionConflict);
        }
    } else {
        // Only no-ops (join of a member, leave of a non-member): no snapshot write, but they
        // were decided on the cell's state, which must still be the committed one.
        let mut check = room_sql::room_version::<DB>(room, true);
        let stored = check.build_query_as::<VersionRow>().fetch_optional(&mut *tx).await?;
        if stored.map(|r| r.version) != Some(c.expected_version as i64) {
            return Err(CommitError::VersionConflict);
        }
    }
    if c.members.cleared {
        room_sql::delete_all_members::<DB>(room).build().execute(&mut *tx).await?;
    }
    if !c.members.deleted.is_empty() {
        room_sql::delete_members::<DB>(room, &c.members.deleted).build().execute(&mut *tx).await?;
    }
    if !c.members.upserted.is_empty() {
        room_sql::upsert_members::<DB>(room, &c.members.upserted).build().execute(&mut *tx).await?;
    }
    if !c.gift_totals.is_empty() {
        room_sql::upsert_gift_totals::<DB>(room, &c.gift_totals).build().execute(&mut *tx).await?;
    }
    if !c.commands.is_empty() {
        match room_sql::insert_command_log::<DB>(c).build().execute(&mut *tx).await {
            Err(e) if is_unique_violation(&e) => return Err(CommitError::DuplicateCommand),
            other => other?,
        };
    }
    if !c.outbox.is_empty() {
        room_sql::insert_outbox::<DB>(c).build().execute(&mut *tx).await?;
    }
    // Every error above rolled back; only the COMMIT's own failure leaves the outcome open.
    tx.commit().await.map_err(|e| CommitError::OutcomeUnknown(e.into()))
}

/// A room's snapshot, members and gift totals as of one version: the snapshot row is read
/// first and kept from writers (or the read transaction's snapshot holds) until the end.
pub(super) async fn load_room<DB>(
    mut tx: Transaction<'static, DB>,
    room_id: &str,
) -> Result<Option<StoredRoom>, StoreError>
where
    DB: Dialect,
    for<'r> RoomRow: FromRow<'r, DB::Row>,
    for<'r> MemberRow: FromRow<'r, DB::Row>,
    for<'r> GiftRow: FromRow<'r, DB::Row>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let mut snapshot = room_sql::load_snapshot::<DB>(room_id);
    let Some(row) = snapshot.build_query_as::<RoomRow>().fetch_optional(&mut *tx).await? else {
        tx.commit().await?;
        return Ok(None);
    };
    let mut members = room_sql::load_members::<DB>(room_id);
    let members = members.build_query_as::<MemberRow>().fetch_all(&mut *tx).await?;
    let mut gifts = room_sql::load_gift_totals::<DB>(room_id);
    let gift_totals = gifts.build_query_as::<GiftRow>().fetch_all(&mut *tx).await?;
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
pub(super) async fn finish_claimed<DB>(
    mut tx: Transaction<'static, DB>,
    worker_id: &str,
    results: &[PublishResult],
) -> Result<MarkReport, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let mut report = MarkReport::default();
    for (mark, ids) in group_marks(results) {
        let mut q = match &mark {
            Mark::Delivered => sql::finish_delivered::<DB>(worker_id, &ids),
            Mark::Retry { error, after } => sql::finish_retryable::<DB>(worker_id, error, *after, &ids),
            Mark::Park { reason, error } => sql::finish_parked::<DB>(worker_id, reason, error, &ids),
            Mark::Defer { after } => sql::finish_deferred::<DB>(worker_id, *after, &ids),
        };
        let changed = DB::rows_affected(&q.build().execute(&mut *tx).await?);
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
pub(super) async fn claim<DB>(
    mut tx: Transaction<'static, DB>,
    claim: &Claim,
) -> Result<ClaimedBatch, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> OutboxRow: FromRow<'r, DB::Row>,
    for<'r> ListedRoom: FromRow<'r, DB::Row>,
    for<'r> QueuedRow: FromRow<'r, DB::Row>,
    i64: for<'r> sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
{
    let per_list = plan::rooms_listed(claim.limit);
    let mut rooms = sql::claim_rooms::<DB>(claim, per_list);
    let listed = rooms.build_query_as::<ListedRoom>().fetch_all(&mut *tx).await?;
    let window = plan::window(listed, per_list);
    let reads = plan::reads(&window, claim);
    let mut taken = if reads.rooms.is_empty() {
        plan::Taken::default()
    } else {
        let mut read = sql::room_rows::<DB>(claim, &reads.rooms);
        plan::take(&reads, read.build_query_as::<QueuedRow>().fetch_all(&mut *tx).await?, claim)
    };
    let mut rows = Vec::new();
    let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
    if !ids.is_empty() {
        let mut lock = sql::lock_claimable::<DB>(claim, &ids);
        let locked: Vec<i64> = lock.build_query_scalar().fetch_all(&mut *tx).await?;
        plan::keep_locked(&mut taken, &locked.into_iter().collect());
        let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
        if !ids.is_empty() {
            sql::claim_rows::<DB>(&claim.worker_id, claim.lease, &ids).build().execute(&mut *tx).await?;
            let mut back = sql::outbox_rows_by_id::<DB>(&ids);
            rows = in_claim_order(back.build_query_as::<OutboxRow>().fetch_all(&mut *tx).await?, &ids);
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
