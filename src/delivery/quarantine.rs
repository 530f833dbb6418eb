//! Senders in quarantine (SPEC §13.1, "a pack shares no fate over content"): once IM refused
//! an event alone for its content, its sender ([`Event::sender`]) is held here for [`HOLD`],
//! and both packers — a room's lane and the outbox worker — send that sender's events alone
//! ([`Quarantine::take`]). A seated user an event names ([`Event::seated`]: a seat event
//! carries every holder's id, and no actor) is held and looked up like a sender
//! ([`Quarantine::hold_refused`]), so a seat list IM refuses for one holder's id costs one
//! refused call a change, not a bisection of the room's pack. Its next refused event then costs exactly one refused call, and
//! never splits a pack of other senders' events again: the room's other events pay at most
//! the two extra calls of the messages before and after it.
//!
//! One [`Quarantine`] is shared by the lanes and the worker of a process (the app wires it).
//! It is bounded: at most [`CAPACITY`] senders (quick_cache's CLOCK-Pro eviction), so a crowd
//! of bad senders costs a fixed amount of memory; a sender evicted early is only back to
//! being bisected once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use quick_cache::sync::Cache;
use tokio::time::Instant;

use super::pack::PackLimits;
use crate::publish::{Event, Path};
use crate::telemetry::names;

/// How long a sender stays in quarantine after its last event refused alone.
pub const HOLD: Duration = Duration::from_secs(60);

/// Most senders held at once (~150 bytes each: a user id is at most 64 bytes).
pub const CAPACITY: usize = 4_096;

/// The senders whose events go alone; see the module docs.
pub struct Quarantine {
    senders: Cache<Arc<str>, Instant>,
    hold: Duration,
    /// Where [`Instant`]s below are measured from.
    origin: Instant,
    /// Milliseconds after `origin` until which some sender may still be held: past it nobody
    /// is, and the packers skip the lookups.
    held_until_ms: AtomicU64,
}

/// What [`Quarantine::take`] put into the next message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Take {
    /// How many of the ready events, from the front.
    pub events: usize,
    /// True when the message holds one event sent alone because its sender is held.
    pub alone: bool,
}

impl Default for Quarantine {
    fn default() -> Self {
        Self::new(CAPACITY, HOLD)
    }
}

impl std::fmt::Debug for Quarantine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quarantine").field("senders", &self.senders.len()).field("hold", &self.hold).finish()
    }
}

impl Quarantine {
    /// A quarantine of at most `capacity` senders, each held `hold`.
    pub fn new(capacity: usize, hold: Duration) -> Self {
        Self {
            senders: Cache::new(capacity.max(1)),
            hold,
            origin: Instant::now(),
            held_until_ms: AtomicU64::new(0),
        }
    }

    fn ms_since_origin(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }

    /// Holds `sender` for [`HOLD`] from now (again, when it was held already): IM refused one
    /// of its events alone for its content, seen on `path`.
    pub fn hold(&self, sender: &str, path: Path) {
        let until = Instant::now() + self.hold;
        self.senders.insert(Arc::from(sender), until);
        // Rounded up, so the fast path never ends a hold early.
        self.held_until_ms.fetch_max(self.ms_since_origin(until).saturating_add(1), Ordering::AcqRel);
        metrics::counter!(names::IM_SENDER_QUARANTINES_TOTAL, names::LABEL_PATH => path.as_str())
            .increment(1);
    }

    /// True when `sender` is held now.
    pub fn holds(&self, sender: &str) -> bool {
        let now = Instant::now();
        if self.ms_since_origin(now) >= self.held_until_ms.load(Ordering::Acquire) {
            return false;
        }
        let Some(until) = self.senders.get(sender) else { return false };
        if now < until {
            return true;
        }
        // Only if still over: a fresh hold put meanwhile stays.
        self.senders.remove_if(sender, |until| now >= *until);
        false
    }

    /// True when `event`'s sender, or a seated user it names ([`Event::seated`]), is held: the
    /// event goes alone.
    pub fn goes_alone(&self, event: &Event) -> bool {
        ids(event).any(|id| self.holds(id))
    }

    /// IM refused `event` alone for its content, seen on `path`: holds the ids it carries
    /// as [`Self::hold`] does a sender. Those of them held already when one is (the event went
    /// alone for them: the culprit is among them), else every one — its sender and each seated
    /// user it names, for a seat list is content like an actor's id.
    pub fn hold_refused(&self, event: &Event, path: Path) {
        let held: Vec<&str> = ids(event).filter(|id| self.holds(id)).collect();
        let culprits: Vec<&str> = if held.is_empty() { ids(event).collect() } else { held };
        for id in culprits {
            self.hold(id, path);
        }
    }

    /// Senders held (expired ones not yet looked at included).
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// True when no sender is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of the ready events go into the next message: [`PackLimits::take_apart`], the
    /// event of a held sender (or naming a held seated user) alone. `ready`: each ready event's
    /// content bytes and the ids it carries (its sender, then its seated users), in order. The
    /// one packing rule of both packers.
    pub fn take<'a, I: IntoIterator<Item = &'a str>>(
        &self,
        limits: PackLimits,
        ready: impl IntoIterator<Item = (usize, I)>,
    ) -> Take {
        let mut first_alone = None;
        let events = limits.take_apart(ready.into_iter().map(|(bytes, ids)| {
            let alone = ids.into_iter().any(|id| self.holds(id));
            first_alone.get_or_insert(alone);
            (bytes, alone)
        }));
        Take { events, alone: events == 1 && first_alone == Some(true) }
    }

    /// Counts a message of one event sent alone because its sender is held, on `path`.
    pub fn sent_alone(path: Path) {
        metrics::counter!(names::IM_QUARANTINED_EVENTS_TOTAL, names::LABEL_PATH => path.as_str())
            .increment(1);
    }
}

/// The ids `event` carries that IM may refuse it for: its sender, then its seated users.
fn ids(event: &Event) -> impl Iterator<Item = &str> {
    event.sender.as_deref().into_iter().chain(event.seated.iter().map(|id| &**id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(sender: &str) -> Event {
        Event {
            event_id: format!("e-{sender}"),
            event_type: "RoomGiftSent",
            priority: crate::publish::Priority::High,
            body: "{}".into(),
            sender: Some(sender.into()),
            seated: Default::default(),
            trace: None,
            admin: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_sender_is_released_after_the_hold() {
        let quarantine = Quarantine::new(16, Duration::from_secs(60));
        assert!(!quarantine.holds("mallory"));
        quarantine.hold("mallory", Path::Sync);
        assert!(quarantine.holds("mallory") && quarantine.goes_alone(&event("mallory")));
        assert!(!quarantine.holds("bob") && !quarantine.goes_alone(&event("bob")));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(quarantine.holds("mallory"), "still within the hold");
        quarantine.hold("mallory", Path::Worker);
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(quarantine.holds("mallory"), "a second refusal renews the hold");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!quarantine.holds("mallory"), "released once the hold is over");
    }

    fn seat_change(seated: &[&str]) -> Event {
        let seated: Vec<Arc<str>> = seated.iter().map(|id| Arc::from(*id)).collect();
        Event { event_type: "RoomSeatsChanged", sender: None, seated: seated.into(), ..event("x") }
    }

    #[tokio::test(start_paused = true)]
    async fn a_seated_id_is_held_and_looked_up_like_a_sender() {
        let quarantine = Quarantine::default();
        // Refused alone and nobody held: every id it carries is held.
        quarantine.hold_refused(&seat_change(&["mallory", "ann"]), Path::Sync);
        assert!(quarantine.holds("mallory") && quarantine.holds("ann"));
        assert!(quarantine.goes_alone(&seat_change(&["bob", "mallory"])), "a held seated id");
        assert!(!quarantine.goes_alone(&seat_change(&["bob"])) && !quarantine.goes_alone(&event("bob")));
        // With the culprit known (held), only it is held again: the others' holds run out.
        let quarantine = Quarantine::default();
        quarantine.hold("mallory", Path::Sync);
        quarantine.hold_refused(&seat_change(&["ann", "mallory"]), Path::Worker);
        assert!(quarantine.holds("mallory") && !quarantine.holds("ann"));
        let limits = PackLimits { max_events: 32, max_bytes: 11_000 };
        let ready = [(10, vec!["a"]), (10, vec!["b", "mallory"]), (10, vec!["c"])];
        let take = quarantine.take(limits, ready.iter().map(|(bytes, ids)| (*bytes, ids.iter().copied())));
        assert_eq!(take, Take { events: 1, alone: false }, "the pack stops before the seat change");
    }

    #[tokio::test(start_paused = true)]
    async fn a_crowd_of_bad_senders_holds_at_most_the_capacity() {
        let quarantine = Quarantine::new(64, HOLD);
        for i in 0..10_000 {
            quarantine.hold(&format!("bad-{i}"), Path::Sync);
        }
        assert!(quarantine.len() <= 64 * 2, "{} senders held", quarantine.len());
        assert!(quarantine.holds("bad-9999"), "the latest is held");
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_senders_event_goes_alone_and_ends_the_pack_before_it() {
        let quarantine = Quarantine::default();
        quarantine.hold("mallory", Path::Sync);
        let limits = PackLimits { max_events: 32, max_bytes: 11_000 };
        let take = |senders: &[&str]| quarantine.take(limits, senders.iter().map(|s| (10, Some(*s))));
        assert_eq!(take(&["a", "b", "mallory", "c"]), Take { events: 2, alone: false }, "stops before it");
        assert_eq!(take(&["mallory", "a", "b"]), Take { events: 1, alone: true }, "alone at the front");
        assert_eq!(take(&["mallory", "mallory"]), Take { events: 1, alone: true }, "even with its own");
        assert_eq!(take(&["a", "b", "c"]), Take { events: 3, alone: false });
        assert_eq!(take(&["a"]), Take { events: 1, alone: false }, "a lone event of a free sender");
        let none = quarantine.take(limits, [(10, None), (10, None)]);
        assert_eq!(none, Take { events: 2, alone: false }, "events of no sender pack as before");
    }
}
