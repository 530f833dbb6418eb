//! [`Window`]: how many of one room's messages are in flight — the one window both drivers
//! send through (a room's lane holds one; the worker one per room it publishes).
//!
//! At most `k` (`im_batch.in_flight_per_room`) messages of a room are out at once; with more
//! than one, they may reach IM out of order (clients reorder by `room_version`). A message is
//! *at the permit step* from when its slot opens until its permit is in hand: a lane opens its
//! next message only once none is there ([`Window::may_open`] with `gather`), so a message
//! waiting for its permit gathers the room's events instead of splitting them over messages
//! that each spend a call of the app-wide quota.
//!
//! A message carrying an IM group call (SPEC §14.2: its group created, destroyed, a mute...) is
//! a barrier: it opens only into an empty window, and nothing opens beside it, so the calls
//! keep room order whatever `k` is ([`Window::may_open_for`], [`Window::open_barrier`]).

/// One room's messages in flight; see the module docs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    in_flight: usize,
    at_permit: usize,
    /// A group call is in flight: nothing else may be.
    barrier: bool,
}

impl Window {
    /// True when another message may open under `k` in flight — with `gather`, only when none
    /// is at the permit step.
    pub fn may_open(&self, k: usize, gather: bool) -> bool {
        !self.barrier && self.in_flight < k.max(1) && !(gather && self.at_permit > 0)
    }

    /// [`Self::may_open`] for a message whose first event is `group_call` or not: a group
    /// call opens only into an empty window.
    pub fn may_open_for(&self, k: usize, gather: bool, group_call: bool) -> bool {
        self.may_open(k, gather) && !(group_call && self.in_flight > 0)
    }

    /// The message just opened carries a group call: nothing opens beside it until it closes.
    pub fn open_barrier(&mut self) {
        self.barrier = true;
    }

    /// A message opened: in flight, at the permit step.
    pub fn open(&mut self) {
        self.in_flight += 1;
        self.at_permit += 1;
    }

    /// A message has its permit (or gave up waiting for one).
    pub fn passed(&mut self) {
        self.at_permit = self.at_permit.saturating_sub(1);
    }

    /// A message's send ended.
    pub fn close(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.barrier = false;
        }
    }

    /// Messages in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// True when no message is in flight.
    pub fn is_empty(&self) -> bool {
        self.in_flight == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gathering_window_opens_the_next_message_only_once_none_waits_for_its_permit() {
        let mut window = Window::default();
        assert!(window.may_open(2, true));
        window.open();
        assert!(!window.may_open(2, true), "one waits for its permit");
        assert!(window.may_open(2, false), "the worker does not gather");
        window.passed();
        assert!(window.may_open(2, true));
        window.open();
        window.passed();
        assert!(!window.may_open(2, true) && !window.may_open(2, false), "k in flight");
        window.close();
        assert!(window.may_open(2, true));
        window.close();
        assert!(window.is_empty());
    }

    #[test]
    fn a_group_call_opens_only_into_an_empty_window_and_alone() {
        let mut window = Window::default();
        window.open();
        window.passed();
        assert!(window.may_open_for(4, false, false), "another message may go beside it");
        assert!(!window.may_open_for(4, false, true), "a group call waits for the window to empty");
        window.close();
        assert!(window.may_open_for(4, false, true));
        window.open();
        window.open_barrier();
        window.passed();
        assert!(!window.may_open_for(4, false, false), "nothing beside a group call");
        window.close();
        assert!(window.may_open_for(4, false, false) && window.is_empty());
    }
}
