//! Which rows a claim takes of its window: how many rows of each room it reads, which of those
//! it takes (from each room's head, up to the first it cannot take), and which it keeps once
//! locked. Pure; tested in `tests.rs`.

use std::collections::{BTreeMap, HashSet};

use super::window::{Head, Window};
use crate::store::queue::types::Claim;

/// A room's row as the claim reads it, from the room's head in id order.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct QueuedRow {
    pub(super) id: i64,
    pub(super) room_id: String,
    /// `None`: delivered or parked since the listing (out of the room's way).
    pub(super) lock_until_ms: Option<i64>,
    /// 1 when this claim may take the row now.
    pub(super) claimable: i64,
    /// 1 when one of the claim's `own` claims holds it.
    pub(super) own: i64,
}

/// The rooms a claim reads rows of: the first `limit` rooms of its window whose head it may take
/// or holds, each with its head and how many rows to read from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reads {
    /// `(room, head id, rows to read)`, in window order.
    pub(super) rooms: Vec<(String, i64, usize)>,
    /// Window positions of `rooms`.
    at: Vec<usize>,
    /// Rows one room may get from this claim: the batch shared by the rooms read.
    share: usize,
    /// Window position of the first room with a head to take that is not read (the batch has
    /// fewer rows than there are such rooms).
    not_read: Option<usize>,
}

/// What to read of `window` for `claim`. A room with a claimable head is read up to its share
/// and one row more (to know whether it has more); a room whose head the worker holds, up to the
/// per-room cap and one more (its held rows come first).
pub(super) fn reads(window: &Window, claim: &Claim) -> Reads {
    let live: Vec<usize> =
        (0..window.rooms.len()).filter(|i| window.rooms[*i].state != Head::Blocked).collect();
    let n = live.len().min(claim.limit);
    let share = if n == 0 { 0 } else { claim.limit.div_ceil(n) };
    let rooms = live[..n]
        .iter()
        .map(|i| {
            let room = &window.rooms[*i];
            let rows = match room.state {
                Head::Own => claim.per_room.saturating_add(1),
                _ => share.min(claim.per_room).saturating_add(1),
            };
            (room.room_id.clone(), room.head, rows)
        })
        .collect();
    Reads { rooms, at: live[..n].to_vec(), share, not_read: live.get(n).copied() }
}

/// The rows a claim takes: per room, in claim order, the ids it will lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Taken {
    /// Each room's ids, in id order; rooms in the order their first row fell due.
    pub(super) rooms: Vec<Vec<i64>>,
    /// It left claimable rows it saw (beyond a room's share, the cap, the batch, or its read).
    pub(super) more: bool,
    /// Window position of the first room with a head to take that got nothing because the batch
    /// was full: the next claim starts there.
    pub(super) unserved: Option<usize>,
}

/// Takes `rows` (read per `reads`) for `claim`: of each room, after the rows the worker holds at
/// its head, its claimable rows in id order up to the first it cannot take, at most its share,
/// the cap less what the worker holds, and what is left of the batch.
pub(super) fn take(reads: &Reads, rows: Vec<QueuedRow>, claim: &Claim) -> Taken {
    let mut by_room: BTreeMap<String, Vec<QueuedRow>> = BTreeMap::new();
    for row in rows {
        by_room.entry(row.room_id.clone()).or_default().push(row);
    }
    let mut taken = Taken { unserved: reads.not_read, more: reads.not_read.is_some(), ..Taken::default() };
    let mut rooms: Vec<(i64, i64, Vec<i64>)> = Vec::new();
    let mut total = 0;
    for ((room, _, read), at) in reads.rooms.iter().zip(&reads.at) {
        let left = claim.limit - total;
        if left == 0 {
            taken.unserved = Some(taken.unserved.map_or(*at, |u| u.min(*at)));
            taken.more = true;
            continue;
        }
        let mut rows = by_room.remove(room).unwrap_or_default();
        rows.sort_by_key(|r| r.id);
        let read_all = rows.len() < *read;
        let mut rows = rows.into_iter().filter(|r| r.lock_until_ms.is_some()).peekable();
        let mut held = 0;
        while rows.next_if(|r| r.own == 1).is_some() {
            held += 1;
        }
        let room_left = reads.share.min(claim.per_room.saturating_sub(held)).min(left);
        let mut ids = Vec::new();
        let mut first_due = None;
        let mut ended = false;
        for row in rows {
            if row.claimable != 1 {
                // Held elsewhere (or by this worker behind rows it took), not yet due: the room's
                // rows end here for this claim.
                ended = true;
                break;
            }
            if ids.len() == room_left {
                taken.more = true;
                ended = true;
                break;
            }
            first_due = first_due.or(Some((row.lock_until_ms.unwrap_or(0), row.id)));
            ids.push(row.id);
        }
        if !ended && !read_all {
            // Every row read was taken: the room may have more after them.
            taken.more = true;
        }
        total += ids.len();
        if let Some((due, id)) = first_due {
            rooms.push((due, id, ids));
        }
    }
    rooms.sort_by_key(|(due, id, _)| (*due, *id));
    taken.rooms = rooms.into_iter().map(|(_, _, ids)| ids).collect();
    taken
}

/// Keeps of each room's taken ids the ones locked, from the first up to the first one not
/// locked (another claim, or a writer, holds it): a row is never claimed behind one it skipped.
pub(super) fn keep_locked(taken: &mut Taken, locked: &HashSet<i64>) {
    for ids in &mut taken.rooms {
        if let Some(cut) = ids.iter().position(|id| !locked.contains(id)) {
            if cut > 0 {
                taken.more = true;
            }
            ids.truncate(cut);
        }
    }
    taken.rooms.retain(|ids| !ids.is_empty());
}
