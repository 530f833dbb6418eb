//! [`Turn`]: the terms on which a message waits its turn at the rate limit — the one request
//! field a room lane adds to a [`Message`](super::Message) (SPEC §12.1).
//!
//! Without a turn, a message of path `sync` that finds no permit now fails at once
//! ([`Throttled`](super::rate_limit::Throttled)). With one, the rate limit:
//! 1. tells the source that the message must wait ([`Turn::must_wait`]: the lane answers the
//!    commands waiting on it `pending` instead of holding them);
//! 2. waits for the permit;
//! 3. hands the message back to the turn ([`Turn::permit_came`]), which refuses it when the
//!    permit came after `call_by` ([`TooLate`]: a process frozen while it waited must not send
//!    rows the worker of another node may have taken meanwhile), and otherwise appends what the
//!    source has ready by then, so a room's turn carries whatever of the room is ready at it;
//! 4. tells the source when the message passes it, permit in hand, with or without a wait
//!    ([`Turn::passed`]): a lane with several messages of a room in flight opens the next one
//!    only once none waits at the limit, so a waiting message gathers the room's events
//!    instead of splitting them over messages that each spend a call of the app-wide quota.
//!
//! The layers above the rate limit keep a clone of the turn and read, once the call ends, what
//! it added ([`Turn::added`]): the metrics count those events, the trace records how many went.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Event;
pub use super::error::TooLate;

/// The function that appends a source's ready events to a message.
type RefillFn = dyn Fn(&mut Vec<Event>) + Send + Sync;
/// The function told that the message passed the rate limit.
type PassedFn = dyn Fn() + Send + Sync;

/// How a message waits for its rate-limit permit (see the module docs). Cheap to clone; the
/// clones share what the refill added.
#[derive(Clone)]
pub struct Turn {
    inner: Arc<Terms>,
}

struct Terms {
    notice: Arc<Notify>,
    call_by: Instant,
    refill: Box<RefillFn>,
    passed: Box<PassedFn>,
    /// The types of the events the refill added, in order.
    added: Mutex<Vec<&'static str>>,
}

impl Turn {
    /// A turn that tells `notice` when the message must wait, may be called until `call_by`,
    /// takes on what `refill` appends when its permit comes after a wait (given the events so
    /// far, it appends the next ones in order, within the source's pack limits), and calls
    /// `passed` when the message passes the rate limit.
    pub fn new(
        notice: Arc<Notify>,
        call_by: Instant,
        refill: impl Fn(&mut Vec<Event>) + Send + Sync + 'static,
        passed: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        let terms = Terms {
            notice,
            call_by,
            refill: Box::new(refill),
            passed: Box::new(passed),
            added: Mutex::new(Vec::new()),
        };
        Self { inner: Arc::new(terms) }
    }

    /// Tells the source that its message must wait for a permit.
    pub fn must_wait(&self) {
        self.inner.notice.notify_one();
    }

    /// The message's permit came after a wait: [`TooLate`] past `call_by`, else `events` takes
    /// on what the source has ready now.
    pub fn permit_came(&self, events: &mut Vec<Event>) -> Result<(), TooLate> {
        if Instant::now() > self.inner.call_by {
            return Err(TooLate);
        }
        let before = events.len();
        (self.inner.refill)(events);
        let mut added = self.inner.added.lock().unwrap_or_else(|e| e.into_inner());
        added.extend(events.iter().skip(before).map(|e| e.event_type));
        Ok(())
    }

    /// The message passed the rate limit (its permit in hand, after a wait or not): its call
    /// begins.
    pub fn passed(&self) {
        (self.inner.passed)();
    }

    /// The types of the events the refill added (none before the permit came after a wait).
    pub fn added(&self) -> Vec<&'static str> {
        self.inner.added.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("call_by", &self.inner.call_by).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::publish::Priority;

    fn event(id: &str, event_type: &'static str) -> Event {
        Event {
            event_id: id.into(),
            event_type,
            priority: Priority::Normal,
            body: "{}".into(),
            sender: None,
            trace: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_in_time_takes_on_the_refill_and_records_what_it_added() {
        let turn = Turn::new(
            Arc::new(Notify::new()),
            Instant::now() + Duration::from_secs(1),
            |events| {
                events.push(event("b", "RoomGiftSent"));
            },
            || {},
        );
        let mut events = vec![event("a", "RoomUserJoined")];
        assert_eq!(turn.clone().permit_came(&mut events), Ok(()));
        assert_eq!(events.len(), 2);
        assert_eq!(turn.added(), ["RoomGiftSent"], "a clone sees what the refill added");
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_after_call_by_is_too_late_and_adds_nothing() {
        let turn = Turn::new(
            Arc::new(Notify::new()),
            Instant::now() + Duration::from_millis(10),
            |events| {
                events.push(event("b", "RoomGiftSent"));
            },
            || {},
        );
        tokio::time::advance(Duration::from_millis(11)).await;
        let mut events = vec![event("a", "RoomUserJoined")];
        assert_eq!(turn.permit_came(&mut events), Err(TooLate));
        assert_eq!(events.len(), 1);
        assert!(turn.added().is_empty());
    }
}
