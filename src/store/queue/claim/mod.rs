//! The claim by room ([`OutboxQueue::claim_outbox`](super::OutboxQueue::claim_outbox)): its
//! one transaction here, its statements in `sql.rs`, and its decisions apart from them, pure
//! — which rooms a claim looks at and where the next one starts (`window.rs`), which rows of
//! them it reads, takes and keeps once locked (`take.rs`).
//!
//! The rule it keeps: of a room, a claim takes the oldest undelivered rows, from the room's
//! head in id order, up to the first row it cannot take. Rows this worker's earlier claims hold
//! at the head are passed over (they are queued in its memory, published first); a row held
//! elsewhere, a retry not yet due or a young pending row ends the room's rows for this claim.
//! So a claim never holds a row behind an undelivered row it cannot send, and a room whose head
//! is claimable is never passed over for rows due earlier elsewhere.

mod sql;
mod take;
#[cfg(test)]
mod tests;
mod window;

use std::collections::HashMap;

use sqlx::Transaction;

use self::take::{QueuedRow, Taken, keep_locked, reads, take};
use self::window::{ListedRoom, cursor, rooms_listed, window};
use crate::store::backend::Backend;
use crate::store::backend::run::Run;
use crate::store::error::StoreError;
use crate::store::outbox_row::OutboxRow;
use crate::store::queue::types::{Claim, ClaimedBatch};

/// One claim, room by room (see the module docs), in one short transaction, nothing held
/// across an IM call: the rooms after the cursor with their heads (one loose index scan per
/// undelivered status), the chosen rooms' rows from their heads, the rows taken locked
/// (`FOR UPDATE SKIP LOCKED`, the claimable predicate checked again under the lock) and kept
/// per room up to the first one not locked, then marked `delivering` under this claim's
/// `worker_id` and lease, and read back.
pub(super) async fn claim<DB: Backend>(
    mut tx: Transaction<'static, DB>,
    claim: &Claim,
) -> Result<ClaimedBatch, StoreError> {
    let per_list = rooms_listed(claim.limit);
    let mut rooms = sql::claim_rooms::<DB>(claim, per_list);
    let listed = rooms.fetch_all::<ListedRoom>(&mut *tx).await?;
    let window = window(listed, per_list);
    let reads = reads(&window, claim);
    let mut taken = if reads.rooms.is_empty() {
        Taken::default()
    } else {
        let mut read = sql::room_rows::<DB>(claim, &reads.rooms);
        take(&reads, read.fetch_all::<QueuedRow>(&mut *tx).await?, claim)
    };
    let mut rows = Vec::new();
    let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
    if !ids.is_empty() {
        let mut lock = sql::lock_claimable::<DB>(claim, &ids);
        let locked = lock.fetch_all::<(i64,)>(&mut *tx).await?;
        keep_locked(&mut taken, &locked.into_iter().map(|(id,)| id).collect());
        let ids: Vec<i64> = taken.rooms.iter().flatten().copied().collect();
        if !ids.is_empty() {
            sql::claim_rows::<DB>(&claim.worker_id, claim.lease, &ids).execute(&mut *tx).await?;
            let mut back = sql::outbox_rows_by_id::<DB>(&ids);
            rows = in_claim_order(back.fetch_all::<OutboxRow>(&mut *tx).await?, &ids);
        }
    }
    tx.commit().await?;
    let more = taken.more || window.truncated;
    Ok(ClaimedBatch { rows, more, cursor: cursor(&window, taken.unserved, &claim.after_room) })
}

/// Puts rows read back by id into the order of `ids` (the claim order).
fn in_claim_order(rows: Vec<OutboxRow>, ids: &[i64]) -> Vec<OutboxRow> {
    let mut by_id: HashMap<i64, OutboxRow> = rows.into_iter().map(|r| (r.id, r)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}
