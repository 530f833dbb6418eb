//! Fair admission to one admin API's limiter between shares (a room creation's share is its
//! owner: docs/DESIGN.md, "Fair group creation"): start-time fair queuing. Each waiting call
//! gets a tag — one past the larger of the last tag admitted and its share's last tag — and
//! calls are admitted in tag order (ties in arrival order). A share with 400 calls waiting holds
//! tags far ahead; a share arriving with one call gets the next tag, and is admitted after at
//! most one call of every other share waiting. Only the call at the head waits on the limiter;
//! the others wait to become the head.
//!
//! Memory is bounded by the calls waiting: a waiting call is one entry, a share is remembered
//! only while it has one waiting. A call given up (its future dropped: a lane's deadline) leaves
//! the queue, and the next head is woken.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::clock::{self, DirectLimiter};

/// A place in the queue: its tag, then its arrival.
type Place = (u64, u64);

/// The queue of one API's shared calls.
#[derive(Debug, Default)]
pub(super) struct FairGate {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The tag of the last call admitted.
    served: u64,
    /// Arrivals so far (the tie-break).
    arrivals: u64,
    /// The shares with calls waiting: their last tag, and how many wait.
    shares: HashMap<String, (u64, usize)>,
    /// The waiting calls, in admission order, with their share and their wake-up.
    queue: BTreeMap<Place, (String, Arc<Notify>)>,
}

impl State {
    /// Takes `place` out of the queue (admitted or given up); wakes the new head.
    fn leave(&mut self, place: Place) {
        if let Some((share, _)) = self.queue.remove(&place)
            && let Some((_, waiting)) = self.shares.get_mut(&share)
        {
            *waiting -= 1;
            if *waiting == 0 {
                self.shares.remove(&share);
            }
        }
        if let Some((_, (_, wake))) = self.queue.first_key_value() {
            wake.notify_one();
        }
    }
}

/// A call's place, left when dropped (admitted or given up).
struct Ticket<'a> {
    gate: &'a FairGate,
    place: Place,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.gate.lock().leave(self.place);
    }
}

impl FairGate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for `share`'s turn, then for a cell of `limiter`, and takes it.
    pub(super) async fn acquire(&self, limiter: &DirectLimiter, share: &str) {
        let wake = Arc::new(Notify::new());
        let ticket = {
            let mut state = self.lock();
            let served = state.served;
            let (last, waiting) = state.shares.entry(share.to_owned()).or_insert((0, 0));
            let tag = served.max(*last) + 1;
            (*last, *waiting) = (tag, *waiting + 1);
            state.arrivals += 1;
            let place = (tag, state.arrivals);
            state.queue.insert(place, (share.to_owned(), Arc::clone(&wake)));
            Ticket { gate: self, place }
        };
        loop {
            let head = self.lock().queue.first_key_value().map(|(place, _)| *place);
            if head == Some(ticket.place) {
                break;
            }
            // A wake-up sent before this wait is kept (`notify_one` stores one).
            wake.notified().await;
        }
        clock::ready(limiter).await;
        self.lock().served = ticket.place.0;
        drop(ticket);
    }

    /// Calls waiting (tests, and the memory bound).
    #[cfg(test)]
    pub(super) fn waiting(&self) -> (usize, usize) {
        let state = self.lock();
        (state.queue.len(), state.shares.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex as StdMutex;
    use std::time::Duration;

    use super::*;
    use crate::delivery::permits::limits::window_quota;

    #[tokio::test(start_paused = true)]
    async fn a_lone_share_is_admitted_after_one_call_of_a_share_with_many_waiting() {
        let gate = Arc::new(FairGate::default());
        let limiter = Arc::new(clock::direct(window_quota(10, 1)));
        let order = Arc::new(StdMutex::new(Vec::new()));
        let call = |share: &'static str, n: usize| {
            let (gate, limiter, order) = (Arc::clone(&gate), Arc::clone(&limiter), Arc::clone(&order));
            tokio::spawn(async move {
                gate.acquire(&limiter, share).await;
                order.lock().unwrap().push(format!("{share}{n}"));
            })
        };
        let flood: Vec<_> = (0..30).map(|n| call("flood", n)).collect();
        tokio::time::sleep(Duration::from_millis(250)).await;
        let before = order.lock().unwrap().len();
        let honest = call("honest", 0);
        honest.await.unwrap();
        let order = order.lock().unwrap().clone();
        let at = order.iter().position(|c| c == "honest0").unwrap();
        assert!(at <= before + 1, "honest admitted {} calls after it came: {order:?}", at - before);
        for call in flood {
            call.await.unwrap();
        }
        assert_eq!(gate.waiting(), (0, 0), "nothing is remembered once no call waits");
    }

    #[tokio::test(start_paused = true)]
    async fn shares_take_turns_and_a_call_given_up_leaves_its_place() {
        let gate = Arc::new(FairGate::default());
        let limiter = Arc::new(clock::direct(window_quota(10, 1)));
        let order = Arc::new(StdMutex::new(Vec::new()));
        let mut calls = Vec::new();
        for (share, n) in [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0)] {
            let (gate, limiter, order) = (Arc::clone(&gate), Arc::clone(&limiter), Arc::clone(&order));
            calls.push(tokio::spawn(async move {
                gate.acquire(&limiter, share).await;
                order.lock().unwrap().push(format!("{share}{n}"));
            }));
            tokio::task::yield_now().await;
        }
        // One call of c's is given up before its turn: the others go on without it.
        let (g, l) = (Arc::clone(&gate), Arc::clone(&limiter));
        let given_up = tokio::spawn(async move { g.acquire(&l, "c").await });
        tokio::task::yield_now().await;
        given_up.abort();
        for call in calls {
            call.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["a0", "a1", "b0", "c0", "a2", "b1"]);
        assert_eq!(gate.waiting(), (0, 0));
    }
}
