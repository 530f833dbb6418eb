//! The claim's decisions, apart from its statements ([`flows::claim`](super::flows::claim)
//! runs those): which rooms a claim looks at, how many rows of each it reads, which it takes,
//! which of those it keeps once locked, and where the next claim's round robin starts. Pure,
//! so unit-tested here.
//!
//! The rule it keeps: of a room, a claim takes the oldest undelivered rows, from the room's
//! head in id order, up to the first row it cannot take. Rows this worker's earlier claims hold
//! at the head are passed over (they are queued in its memory, published first); a row held
//! elsewhere, a retry not yet due or a young pending row ends the room's rows for this claim.
//! So a claim never holds a row behind an undelivered row it cannot send, and a room whose head
//! is claimable is never passed over for rows due earlier elsewhere.

use std::collections::{BTreeMap, HashSet};

use super::outbox_types::Claim;

/// Rooms each status's list holds at most (see [`window`]): the batch size, and never fewer
/// than this, so a small batch still sees past a few rooms whose heads it cannot take.
const MIN_ROOMS_LISTED: usize = 64;

/// How many rooms per status the room listing asks for.
pub(super) fn rooms_listed(limit: usize) -> usize {
    limit.max(MIN_ROOMS_LISTED)
}

/// One undelivered status's oldest row of a room, as the room listing found it (a room comes
/// once per status it has rows in; its head is the oldest of them).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(super) struct ListedRoom {
    pub(super) status: String,
    pub(super) room_id: String,
    /// The room's smallest id in that status.
    pub(super) head: i64,
    /// 1 when this claim may take that row now.
    pub(super) claimable: i64,
    /// 1 when one of the claim's `own` claims holds that row.
    pub(super) own: i64,
}

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

/// How a room's head stands for one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// The claim may take it: the room's rows are claimed from it.
    Claimable,
    /// One of the worker's claims holds it: the room's next rows may be claimed behind.
    Own,
    /// Held elsewhere, a retry not yet due, a young pending row, another node's shard: the
    /// room gets nothing from this claim.
    Blocked,
}

/// A room the claim looked at: its id, its head's id, how the head stands.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    room_id: String,
    head: i64,
    state: Head,
}

/// The rooms a claim looks at: the rooms with undelivered rows after its cursor, in room id
/// order, each with its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Window {
    rooms: Vec<Listed>,
    /// Rooms after the last of these were left out (a status's list came back full).
    pub(super) truncated: bool,
}

/// The window of `listed`, lists of at most `per_list` rooms per status: a room whose every
/// status was listed, with the oldest of its rows as head. Past the last room of a full list
/// that list may have left rooms out, so the window ends at the smallest such room.
pub(super) fn window(listed: Vec<ListedRoom>, per_list: usize) -> Window {
    let mut lists: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    for row in &listed {
        let (count, last) = lists.entry(row.status.as_str()).or_insert((0, ""));
        *count += 1;
        *last = (*last).max(row.room_id.as_str());
    }
    let end: Option<String> =
        lists.values().filter(|(count, _)| *count >= per_list).map(|(_, last)| (*last).to_owned()).min();
    let mut heads: BTreeMap<String, &ListedRoom> = BTreeMap::new();
    for row in &listed {
        if end.as_ref().is_some_and(|end| row.room_id > *end) {
            continue;
        }
        let head = heads.entry(row.room_id.clone()).or_insert(row);
        if row.head < head.head {
            *head = row;
        }
    }
    let rooms = heads
        .into_iter()
        .map(|(room_id, row)| {
            let state = if row.own == 1 {
                Head::Own
            } else if row.claimable == 1 {
                Head::Claimable
            } else {
                Head::Blocked
            };
            Listed { room_id, head: row.head, state }
        })
        .collect();
    Window { rooms, truncated: end.is_some() }
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

/// Where the next claim's round robin starts: just before the first room that got nothing
/// because the batch was full, else after the window (from the first room again when the
/// window reached the last room).
pub(super) fn cursor(window: &Window, unserved: Option<usize>, after_room: &str) -> String {
    match unserved {
        Some(0) => after_room.to_owned(),
        Some(at) => window.rooms[at - 1].room_id.clone(),
        None if window.truncated => window.rooms.last().map_or(after_room, |r| &r.room_id).to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn listed(status: &str, room: &str, head: i64, claimable: bool, own: bool) -> ListedRoom {
        ListedRoom {
            status: status.into(),
            room_id: room.into(),
            head,
            claimable: i64::from(claimable),
            own: i64::from(own),
        }
    }

    fn row(id: i64, room: &str, due: Option<i64>, claimable: bool, own: bool) -> QueuedRow {
        QueuedRow {
            id,
            room_id: room.into(),
            lock_until_ms: due,
            claimable: i64::from(claimable),
            own: i64::from(own),
        }
    }

    fn claim(limit: usize, per_room: usize) -> Claim {
        Claim { per_room, ..Claim::new("w-1", limit, Duration::from_secs(30)) }
    }

    fn ids(window: &Window) -> Vec<(&str, i64, Head)> {
        window.rooms.iter().map(|r| (r.room_id.as_str(), r.head, r.state)).collect()
    }

    #[test]
    fn a_rooms_head_is_its_oldest_row_of_any_undelivered_status() {
        let w = window(
            vec![
                listed("pending", "a", 7, true, false),
                listed("retryable", "a", 3, false, false),
                listed("pending", "b", 4, true, false),
                listed("delivering", "c", 5, false, true),
                listed("pending", "c", 9, true, false),
            ],
            10,
        );
        assert_eq!(ids(&w), [("a", 3, Head::Blocked), ("b", 4, Head::Claimable), ("c", 5, Head::Own)]);
        assert!(!w.truncated);
    }

    #[test]
    fn the_window_ends_where_a_full_list_may_have_left_rooms_out() {
        // Two rooms per list: the pending list is full at "b"; room "c" might have a pending
        // row older than its retryable one, so the window stops at "b".
        let w = window(
            vec![
                listed("pending", "a", 1, true, false),
                listed("pending", "b", 2, true, false),
                listed("retryable", "c", 3, true, false),
            ],
            2,
        );
        assert_eq!(ids(&w), [("a", 1, Head::Claimable), ("b", 2, Head::Claimable)]);
        assert!(w.truncated);
        assert_eq!(cursor(&w, None, ""), "b");
    }

    #[test]
    fn rooms_share_the_batch_and_a_blocked_room_gets_nothing() {
        let w = window(
            vec![
                listed("pending", "big", 1, true, false),
                listed("delivering", "held", 2, false, false),
                listed("pending", "small", 3, true, false),
            ],
            10,
        );
        let c = claim(4, 100);
        let r = reads(&w, &c);
        assert_eq!(r.rooms, [("big".into(), 1, 3), ("small".into(), 3, 3)]);
        let rows = vec![
            row(1, "big", Some(0), true, false),
            row(10, "big", Some(0), true, false),
            row(11, "big", Some(0), true, false),
            row(3, "small", Some(5), true, false),
        ];
        let t = take(&r, rows, &c);
        assert_eq!(t.rooms, [vec![1, 10], vec![3]], "big stops at its share of 2");
        assert!(t.more, "big has more");
        assert_eq!(cursor(&w, t.unserved, ""), "");
    }

    #[test]
    fn a_room_stops_at_the_first_row_it_cannot_take() {
        let w = window(vec![listed("retryable", "r", 5, true, false)], 10);
        let c = claim(10, 10);
        let rows = vec![
            row(5, "r", Some(100), true, false),
            row(6, "r", None, false, false), // delivered since: out of the way
            row(7, "r", Some(0), true, false),
            row(8, "r", Some(9_999), false, false), // young pending
            row(9, "r", Some(0), true, false),
        ];
        let t = take(&reads(&w, &c), rows, &c);
        assert_eq!(t.rooms, [vec![5, 7]]);
        assert!(!t.more);
    }

    #[test]
    fn rows_held_at_the_head_are_passed_over_up_to_the_cap() {
        let w = window(vec![listed("delivering", "hot", 1, false, true)], 10);
        let c = claim(100, 4);
        let r = reads(&w, &c);
        assert_eq!(r.rooms, [("hot".into(), 1, 5)], "the cap, and one more");
        let rows = vec![
            row(1, "hot", Some(50), false, true),
            row(2, "hot", Some(50), false, true),
            row(3, "hot", Some(0), true, false),
            row(4, "hot", Some(0), true, false),
            row(5, "hot", Some(0), true, false),
        ];
        let t = take(&r, rows, &c);
        assert_eq!(t.rooms, [vec![3, 4]], "two held, two more up to the cap of four");
        assert!(t.more);
    }

    #[test]
    fn a_row_held_here_behind_rows_taken_ends_the_room() {
        let w = window(vec![listed("pending", "r", 1, true, false)], 10);
        let c = claim(10, 10);
        let rows = vec![row(1, "r", Some(0), true, false), row(2, "r", Some(50), false, true)];
        assert_eq!(take(&reads(&w, &c), rows, &c).rooms, [vec![1]]);
    }

    #[test]
    fn a_full_batch_leaves_the_next_rooms_to_the_next_claim_which_starts_there() {
        let rooms: Vec<ListedRoom> = ["a", "b", "c", "d"]
            .iter()
            .zip(1..)
            .map(|(r, id)| listed("pending", r, id, true, false))
            .collect();
        let w = window(rooms, 10);
        let c = claim(2, 10);
        let r = reads(&w, &c);
        assert_eq!(r.rooms.len(), 2, "a batch of two reads two rooms");
        let rows = vec![row(1, "a", Some(0), true, false), row(2, "b", Some(0), true, false)];
        let t = take(&r, rows, &c);
        assert_eq!((t.rooms.clone(), t.more, t.unserved), (vec![vec![1], vec![2]], true, Some(2)));
        assert_eq!(cursor(&w, t.unserved, ""), "b", "c is first next time");
        assert_eq!(cursor(&w, Some(0), "x"), "x");
    }

    #[test]
    fn rooms_come_back_in_the_order_their_first_row_fell_due() {
        let w = window(
            vec![listed("pending", "old", 1, true, false), listed("pending", "live", 9, true, false)],
            10,
        );
        let c = claim(10, 10);
        let rows = vec![row(1, "old", Some(500), true, false), row(9, "live", Some(0), true, false)];
        assert_eq!(take(&reads(&w, &c), rows, &c).rooms, [vec![9], vec![1]]);
    }

    #[test]
    fn a_room_keeps_its_locked_rows_up_to_the_first_it_could_not_lock() {
        let mut t = Taken { rooms: vec![vec![1, 2, 3], vec![7, 8]], ..Taken::default() };
        keep_locked(&mut t, &HashSet::from([1, 3, 8]));
        assert_eq!(t.rooms, [vec![1]], "3 stays behind 2; the second room lost its head");
        assert!(t.more);
    }
}
