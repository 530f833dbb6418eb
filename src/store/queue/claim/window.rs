//! Which rooms a claim looks at — its window: the rooms with undelivered rows after its
//! cursor, in room id order, each with its head and how that head stands for this claim — and
//! where the next claim's round robin starts. Pure; tested in `tests.rs`.

use std::collections::BTreeMap;

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

/// How a room's head stands for one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Head {
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
pub(super) struct Listed {
    pub(super) room_id: String,
    pub(super) head: i64,
    pub(super) state: Head,
}

/// The rooms a claim looks at: the rooms with undelivered rows after its cursor, in room id
/// order, each with its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Window {
    /// By room id.
    pub(super) rooms: Vec<Listed>,
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
