//! [`HighWater`]: how far a consumer may pass in `room_outbox`, given that ids are not commit
//! order.
//!
//! On MySQL/MariaDB an auto-increment id is handed out when a row is inserted, not when its
//! transaction commits: a command transaction holding id N can commit after N+1 was read, and a
//! cursor that moved past N would never see it. So the position only moves over ids that are
//! certainly committed (read) or certainly never will be:
//!
//! - a missing id is first *marked* with the time it was seen missing ([`GapMark`]); every id
//!   below the row that revealed it belongs to that mark;
//! - the mark is *settled* when the database proves that no transaction that was open at that
//!   time is still open ([`ConsumerRepository::open_writers_since`]), so a read taken after the
//!   proof shows every id of the mark that will ever exist — the missing ones were rolled back;
//! - when the database cannot answer at all (no privilege to ask), after a grace window: a
//!   command transaction open longer than that is taken as gone. While the database answers
//!   that a writer is still open, the mark waits, however long (a stalled commit must not lose
//!   its event; the lag alert tells).
//!
//! This is the high-water mark of event stores that read an auto-increment log (Marten's
//! "stale sequence threshold", EventStore's checkpoint over committed positions). On SQLite the
//! proof always holds at once: ids are handed out under its one write lock.
//!
//! [`ConsumerRepository::open_writers_since`]: crate::store::ConsumerRepository::open_writers_since

use std::time::Duration;

use tokio::time::Instant;

use crate::store::EventRow;

/// Ids below `below` that are still missing have been missing since `seen_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapMark {
    /// The first id read above the gap when it was seen.
    pub below: i64,
    /// When the gap was seen (monotonic: the grace window).
    pub seen_at: Instant,
    /// The database clock right after the read that revealed the gap (ms): the proof asks
    /// whether any transaction begun by then is still open. `None` until it was read.
    pub db_ms: Option<i64>,
    /// Proven: a read after the proof shows every id below `below` that will ever exist.
    pub settled: bool,
    /// The database could not tell (no privilege): the grace window applies.
    pub unprovable: bool,
    /// A warning that the gap is held longer than the grace window was logged.
    pub reported: bool,
}

/// What [`HighWater::walk`] found in one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// How many of the events read (from the first) may be delivered now.
    pub ready: usize,
    /// The mark (an index into [`HighWater::marks`]) of the gap that stopped the walk: neither
    /// settled nor, unprovable, past its grace.
    pub blocked: Option<usize>,
}

/// The position of a consumer and the gaps it is waiting on; see the module docs.
#[derive(Debug, Clone)]
pub struct HighWater {
    position: i64,
    grace: Duration,
    /// By ascending `below` (and `seen_at`): a gap seen later lies above those seen before.
    marks: Vec<GapMark>,
}

impl HighWater {
    /// Starts after `position`; missing ids are waited on for at most `grace`.
    pub fn new(position: i64, grace: Duration) -> Self {
        Self { position, grace, marks: Vec::new() }
    }

    /// Every id up to this one was delivered or is certainly gone.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The marks still waited on.
    pub fn marks(&self) -> &[GapMark] {
        &self.marks
    }

    /// The mark at `index` (the one a [`Walk`] was blocked by), for the caller to ask the
    /// database about: it fills `db_ms` first, then sets `settled` on a proof (or `unprovable`).
    pub fn mark_mut(&mut self, index: usize) -> Option<&mut GapMark> {
        self.marks.get_mut(index)
    }

    /// Walks `events` (ids above the position, ascending, as read at `now`): every event is ready
    /// until the first gap whose mark is neither settled nor past the grace window. A gap seen
    /// for the first time gets a mark and stops the walk.
    pub fn walk(&mut self, events: &[EventRow], now: Instant) -> Walk {
        let mut expected = self.position + 1;
        for (index, event) in events.iter().enumerate() {
            while expected < event.id {
                // The mark covering `expected`: the first one with `below` above it.
                match self.marks.iter().position(|m| m.below > expected) {
                    Some(i) if self.passable(&self.marks[i], now) => {
                        expected = self.marks[i].below.min(event.id);
                    }
                    Some(i) => return Walk { ready: index, blocked: Some(i) },
                    None => {
                        self.marks.push(GapMark {
                            below: event.id,
                            seen_at: now,
                            db_ms: None,
                            settled: false,
                            unprovable: false,
                            reported: false,
                        });
                        return Walk { ready: index, blocked: Some(self.marks.len() - 1) };
                    }
                }
            }
            expected = event.id + 1;
        }
        Walk { ready: events.len(), blocked: None }
    }

    /// The grace window.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Settled, or past the grace window while the database cannot tell.
    fn passable(&self, mark: &GapMark, now: Instant) -> bool {
        mark.settled || (mark.unprovable && now.duration_since(mark.seen_at) >= self.grace)
    }

    /// Records that every event up to `id` (one returned ready by [`HighWater::walk`]) has been
    /// passed, and forgets the marks below it.
    pub fn pass(&mut self, id: i64) {
        if id > self.position {
            self.position = id;
            self.marks.retain(|m| m.below > id + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(60);

    fn rows(ids: &[i64]) -> Vec<EventRow> {
        ids.iter()
            .map(|id| EventRow {
                id: *id,
                event_id: format!("e{id}"),
                event_type: "RoomUserJoined".into(),
                room_id: "r".into(),
                envelope: "{}".into(),
                created_at_ms: 0,
                trace_context: None,
            })
            .collect()
    }

    /// At position 4, with 5 and 6 missing below 7: the walk has marked the gap at `start`.
    fn gap_below_7(start: Instant) -> HighWater {
        let mut hw = HighWater::new(4, GRACE);
        assert_eq!(hw.walk(&rows(&[7]), start), Walk { ready: 0, blocked: Some(0) });
        hw
    }

    #[test]
    fn contiguous_ids_are_all_ready() {
        let mut hw = HighWater::new(4, GRACE);
        let walk = hw.walk(&rows(&[5, 6, 7]), Instant::now());
        assert_eq!(walk, Walk { ready: 3, blocked: None });
        assert!(hw.marks().is_empty());
    }

    #[test]
    fn a_missing_id_stops_the_walk_and_is_marked() {
        let mut hw = HighWater::new(4, GRACE);
        let walk = hw.walk(&rows(&[5, 7, 8]), Instant::now());
        assert_eq!(walk, Walk { ready: 1, blocked: Some(0) });
        assert_eq!(hw.marks().len(), 1);
        assert_eq!(hw.marks()[0].below, 7);
    }

    #[test]
    fn a_late_commit_inside_the_gap_is_delivered_in_order() {
        let now = Instant::now();
        let mut hw = HighWater::new(4, GRACE);
        hw.walk(&rows(&[5, 7]), now);
        hw.pass(5);
        // 6 committed late: read again, nothing is missing any more.
        let walk = hw.walk(&rows(&[6, 7, 8]), now);
        assert_eq!(walk, Walk { ready: 3, blocked: None });
        hw.pass(8);
        assert!(hw.marks().is_empty(), "marks below the position are forgotten");
    }

    #[test]
    fn a_settled_mark_lets_the_walk_skip_its_missing_ids() {
        let now = Instant::now();
        let mut hw = HighWater::new(4, GRACE);
        let walk = hw.walk(&rows(&[7, 8]), now);
        let mark = hw.mark_mut(walk.blocked.expect("blocked")).expect("a mark to prove");
        mark.db_ms = Some(1);
        mark.settled = true;
        assert_eq!(hw.walk(&rows(&[7, 8]), now), Walk { ready: 2, blocked: None });
    }

    #[test]
    fn a_gap_the_database_cannot_judge_is_passed_only_after_the_grace_window() {
        let start = Instant::now();
        let mut hw = gap_below_7(start);
        hw.mark_mut(0).expect("mark").unprovable = true;
        assert_eq!(hw.walk(&rows(&[7]), start + GRACE / 2), Walk { ready: 0, blocked: Some(0) });
        assert_eq!(hw.walk(&rows(&[7]), start + GRACE), Walk { ready: 1, blocked: None });
    }

    #[test]
    fn a_gap_behind_a_writer_the_database_sees_open_waits_past_the_grace_window() {
        let start = Instant::now();
        let mut hw = gap_below_7(start);
        // Neither settled nor unprovable: the database answered "a writer is still open".
        assert_eq!(hw.walk(&rows(&[7]), start + GRACE * 10), Walk { ready: 0, blocked: Some(0) });
    }

    #[test]
    fn a_newer_gap_above_a_settled_one_waits_for_its_own_mark() {
        let start = Instant::now();
        let mut hw = gap_below_7(start);
        hw.mark_mut(0).expect("mark").settled = true;
        // 6 stays missing (settled); 8 and 9 go missing after the proof, revealed by 10.
        let walk = hw.walk(&rows(&[7, 10]), start);
        assert_eq!(walk, Walk { ready: 1, blocked: Some(1) }, "blocked by the new mark, not the old");
        assert_eq!(hw.marks().iter().map(|m| m.below).collect::<Vec<_>>(), vec![7, 10]);
        assert!(!hw.marks()[1].settled);
        hw.pass(7);
        assert_eq!(hw.marks().len(), 1, "the settled mark below the position is gone");
        hw.mark_mut(0).expect("mark").settled = true;
        assert_eq!(hw.walk(&rows(&[10]), start), Walk { ready: 1, blocked: None });
    }

    #[test]
    fn pass_never_moves_backwards() {
        let mut hw = HighWater::new(10, GRACE);
        hw.pass(3);
        assert_eq!(hw.position(), 10);
    }
}
