//! The command path's two multi-statement transactions, written once over any [`Backend`]:
//! the room commit (its statements in `commit_sql.rs`) and the room load (in `read_sql.rs`).
//! The caller opens the transaction the backend's way (a commit takes SQLite's write lock up
//! front) and hands it here.

use sqlx::Transaction;

use super::rows::{EpochRow, GiftRow, MemberRow, RoomRow, VersionRow};
use super::types::{
    AttributeRow, CommitError, GiftTotalRow, RestrictionRow, RoomCommit, SeatRequestRow, StoredRoom,
};
use super::{commit_sql, read_sql};
use crate::store::backend::Backend;
use crate::store::backend::run::Run;
use crate::store::error::StoreError;

/// True when `err` is the duplicate of a unique key.
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
        let mut fence = commit_sql::fence_epoch::<DB>(c.shard);
        let stored = fence.fetch_optional::<EpochRow>(&mut *tx).await?;
        if stored.map(|r| r.epoch) != Some(epoch as i64) {
            return Err(CommitError::Fenced);
        }
    }
    if let Some(snapshot) = &c.snapshot {
        let written = if c.expected_version == 0 {
            match commit_sql::insert_snapshot::<DB>(room, snapshot, c.fence).execute(&mut *tx).await {
                Err(e) if is_unique_violation(&e) => 0,
                other => other?,
            }
        } else {
            let mut update = commit_sql::update_snapshot::<DB>(room, c.expected_version, snapshot, c.fence);
            update.execute(&mut *tx).await?
        };
        if written != 1 {
            return Err(CommitError::VersionConflict);
        }
    } else {
        // Only no-ops (join of a member, leave of a non-member): no snapshot write, but they
        // were decided on the cell's state, which must still be the committed one.
        let mut check = read_sql::room_version::<DB>(room, true);
        let stored = check.fetch_optional::<VersionRow>(&mut *tx).await?;
        if stored.map(|r| r.version) != Some(c.expected_version as i64) {
            return Err(CommitError::VersionConflict);
        }
    }
    if c.members.cleared {
        commit_sql::delete_all_members::<DB>(room).execute(&mut *tx).await?;
    }
    if !c.members.deleted.is_empty() {
        commit_sql::delete_members::<DB>(room, &c.members.deleted).execute(&mut *tx).await?;
    }
    if !c.members.upserted.is_empty() {
        commit_sql::upsert_members::<DB>(room, &c.members.upserted).execute(&mut *tx).await?;
    }
    if !c.gift_totals.is_empty() {
        commit_sql::upsert_gift_totals::<DB>(room, &c.gift_totals).execute(&mut *tx).await?;
    }
    for (kind, user_id) in &c.restrictions.deleted {
        commit_sql::delete_restriction::<DB>(room, kind, user_id).execute(&mut *tx).await?;
    }
    if !c.attributes.deleted.is_empty() {
        commit_sql::delete_attributes::<DB>(room, &c.attributes.deleted).execute(&mut *tx).await?;
    }
    if !c.attributes.upserted.is_empty() {
        commit_sql::upsert_attributes::<DB>(room, &c.attributes.upserted).execute(&mut *tx).await?;
    }
    if !c.seat_requests.deleted.is_empty() {
        commit_sql::delete_seat_requests::<DB>(room, &c.seat_requests.deleted).execute(&mut *tx).await?;
    }
    if !c.seat_requests.upserted.is_empty() {
        commit_sql::upsert_seat_requests::<DB>(room, &c.seat_requests.upserted).execute(&mut *tx).await?;
    }
    if !c.restrictions.upserted.is_empty() {
        commit_sql::upsert_restrictions::<DB>(room, &c.restrictions.upserted).execute(&mut *tx).await?;
    }
    if !c.commands.is_empty() {
        match commit_sql::insert_command_log::<DB>(c).execute(&mut *tx).await {
            Err(e) if is_unique_violation(&e) => return Err(CommitError::DuplicateCommand),
            other => other?,
        };
    }
    if !c.outbox.is_empty() {
        commit_sql::insert_outbox::<DB>(c).execute(&mut *tx).await?;
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
    let mut snapshot = read_sql::load_snapshot::<DB>(room_id);
    let Some(row) = snapshot.fetch_optional::<RoomRow>(&mut *tx).await? else {
        tx.commit().await?;
        return Ok(None);
    };
    let mut members = read_sql::load_members::<DB>(room_id);
    let members = members.fetch_all::<MemberRow>(&mut *tx).await?;
    let mut gifts = read_sql::load_gift_totals::<DB>(room_id);
    let gift_totals = gifts.fetch_all::<GiftRow>(&mut *tx).await?;
    let mut restrictions = read_sql::load_restrictions::<DB>(room_id);
    let restrictions = restrictions.fetch_all::<RestrictionRow>(&mut *tx).await?;
    let mut attributes = read_sql::load_attributes::<DB>(room_id);
    let attributes = attributes.fetch_all::<AttributeRow>(&mut *tx).await?;
    let mut seat_requests = read_sql::load_seat_requests::<DB>(room_id);
    let seat_requests = seat_requests.fetch_all::<SeatRequestRow>(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(StoredRoom {
        version: row.version.max(0) as u64,
        state: row.state,
        members: members.into_iter().map(|m| (m.user_id, m.joined_at_ms)).collect(),
        gift_totals: gift_totals.into_iter().map(GiftTotalRow::from).collect(),
        restrictions,
        attributes,
        seat_requests,
    }))
}
