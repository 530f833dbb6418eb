//! The claim's decisions, tested without a database: the window, the reads, the rows taken and
//! kept, and the cursor.

use std::collections::HashSet;
use std::time::Duration;

use super::take::{QueuedRow, Taken, keep_locked, reads, take};
use super::window::{Head, ListedRoom, Window, cursor, window};
use crate::store::queue::types::Claim;

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
    let rooms: Vec<ListedRoom> =
        ["a", "b", "c", "d"].iter().zip(1..).map(|(r, id)| listed("pending", r, id, true, false)).collect();
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
    let w =
        window(vec![listed("pending", "old", 1, true, false), listed("pending", "live", 9, true, false)], 10);
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
