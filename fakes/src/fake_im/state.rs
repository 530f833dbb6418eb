//! What the fake IM server remembers: recorded messages, the `(GroupId, Random)` dedup window,
//! the per-group and global rate windows, queued faults, counters and sends per event. All of it sits behind
//! one short-held mutex; nothing awaits while holding it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::FakeImOptions;
use super::fault::{Fault, FaultQueue};

/// How long Tencent drops a repeated `(GroupId, Random)`.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Width of the rate-limit windows.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One element (one event) of a message the fake accepted; a message of N elements is
/// recorded as N of these, in element order, sharing its `random`, `msg_seq` and `elements`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedMessage {
    /// The full IM `GroupId` (prefix included).
    pub group: String,
    /// The `Random` its message was sent with.
    pub random: u32,
    /// Its `event_id`, from `CloudCustomData` (`event_ids[i]`, or `event_id` for one element).
    pub event_id: Option<String>,
    /// `MsgContent.Data` of the custom element (the envelope).
    pub data: String,
    /// `MsgContent.Desc` of the custom element (the event type).
    pub desc: String,
    /// Custom elements in its message (1 for a message of one event).
    #[serde(default = "one")]
    pub elements: u32,
    /// Its place in its message, from 0.
    #[serde(default)]
    pub index: u32,
    /// `MsgPriority`, when given.
    pub priority: Option<String>,
    /// Sequence number in its group, from 1.
    pub msg_seq: u64,
    /// Unix seconds when it was accepted.
    pub msg_time: u64,
    /// When it was accepted (process clock; not serialised).
    #[serde(skip, default = "Instant::now")]
    pub accepted_at: Instant,
}

fn one() -> u32 {
    1
}

/// Counters since start or the last reset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeStats {
    /// Every `send_group_msg` call, whatever its answer.
    pub calls: u64,
    /// Events recorded: every element of the messages recorded.
    pub accepted: u64,
    /// Messages (calls) recorded; `accepted / messages` is the mean events per call.
    #[serde(default)]
    pub messages: u64,
    /// Repeats of a `(GroupId, Random)` seen within 5 minutes: answered OK, not recorded.
    pub duplicates: u64,
    /// Messages over the per-group limit: answered OK with `MsgDropReason`, not recorded.
    pub dropped: u64,
    /// Messages refused with 80002 because their content (every element's Data and Desc)
    /// passed 12 KB.
    #[serde(default)]
    pub too_large: u64,
    /// Calls over the global (per SDKAppID) limit: refused with 60007. With `dropped`, what a
    /// well-behaved client keeps at zero.
    pub rate_limited: u64,
    /// Calls answered `ActionStatus: FAIL` (injected codes included).
    pub rejected: u64,
    /// Calls that were served an injected fault.
    pub faults_served: u64,
    /// Calls that will still be served a queued fault.
    pub faults_pending: u64,
}

/// How often one `event_id` was sent: every `send_group_msg` call that carried it in its
/// `CloudCustomData`, and those of them IM took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSends {
    /// Every call that carried the event, whatever its answer (accepted, answered as a
    /// duplicate, served an injected fault, refused, dropped over the per-group limit).
    pub calls: u32,
    /// The calls IM took: the one recorded plus the repeats answered OK as duplicates. Above 1,
    /// the event reached IM more than once (clients would see it again after 5 minutes).
    pub received: u32,
}

/// A message that passed validation, about to be deduped, rate-limited and recorded.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) group: String,
    pub(crate) random: u32,
    /// Its custom elements, in order.
    pub(crate) elements: Vec<Element>,
    pub(crate) priority: Option<String>,
}

/// One custom element of a [`Candidate`].
#[derive(Clone, Debug)]
pub(crate) struct Element {
    pub(crate) event_id: Option<String>,
    pub(crate) data: String,
    pub(crate) desc: String,
}

/// What happened to a [`Candidate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Recorded with this sequence number.
    Recorded { msg_seq: u64 },
    /// A repeat; the original sequence number.
    Duplicate { msg_seq: u64 },
    /// Over the per-group limit.
    Dropped,
}

#[derive(Debug, Default)]
struct Book {
    messages: Vec<RecordedMessage>,
    seen: HashMap<(String, u32), u64>,
    seen_order: VecDeque<(Instant, (String, u32))>,
    group_windows: HashMap<String, VecDeque<Instant>>,
    global_window: VecDeque<Instant>,
    seqs: HashMap<String, u64>,
    faults: FaultQueue,
    stats: FakeStats,
    /// When each call arrived, oldest first (at most [`CALL_LOG`]).
    call_times: VecDeque<Instant>,
    /// Sends per `event_id`.
    sends: HashMap<String, EventSends>,
}

/// Calls whose arrival time is kept.
const CALL_LOG: usize = 100_000;

/// Shared state of one fake server.
#[derive(Debug)]
pub struct FakeState {
    pub(crate) options: FakeImOptions,
    latency: Mutex<Duration>,
    /// Up to this much more, drawn anew for each call: calls in flight together reach the
    /// group out of the order they were sent.
    jitter: Mutex<Duration>,
    /// Words whose presence in any element refuses the whole message with 80001, like
    /// Tencent's content moderation.
    sensitive: Mutex<Vec<String>>,
    book: Mutex<Book>,
}

impl Book {
    /// Counts a call IM took (recorded, or answered as a duplicate) for each of its events.
    fn count_received(&mut self, elements: &[Element]) {
        for event_id in elements.iter().filter_map(|e| e.event_id.as_deref()) {
            self.sends.entry(event_id.to_owned()).or_default().received += 1;
        }
    }
}

/// Takes a slot in a sliding one-second window, or says the window is full.
fn take_slot(window: &mut VecDeque<Instant>, now: Instant, limit: Option<u32>) -> bool {
    let Some(limit) = limit else { return true };
    while window.front().is_some_and(|t| now.saturating_duration_since(*t) >= RATE_WINDOW) {
        window.pop_front();
    }
    if window.len() >= limit as usize {
        return false;
    }
    window.push_back(now);
    true
}

impl FakeState {
    pub(crate) fn new(options: FakeImOptions) -> Self {
        Self {
            latency: Mutex::new(options.latency),
            jitter: Mutex::new(Duration::ZERO),
            options,
            sensitive: Mutex::new(Vec::new()),
            book: Mutex::new(Book::default()),
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The latency added to a `send_group_msg` call: the set latency and a draw of the jitter.
    pub(crate) fn latency(&self) -> Duration {
        let latency = *self.latency.lock().unwrap_or_else(|e| e.into_inner());
        let jitter = *self.jitter.lock().unwrap_or_else(|e| e.into_inner());
        if jitter.is_zero() {
            return latency;
        }
        latency + jitter.mul_f64(rand::random::<f64>())
    }

    /// Adds up to `jitter` to the latency of every later call, drawn anew for each.
    pub fn set_jitter(&self, jitter: Duration) {
        *self.jitter.lock().unwrap_or_else(|e| e.into_inner()) = jitter;
    }

    /// Sets the latency of every later call.
    pub fn set_latency(&self, latency: Duration) {
        *self.latency.lock().unwrap_or_else(|e| e.into_inner()) = latency;
    }

    /// Refuses (80001) every later message any element of which contains one of `words`;
    /// none: moderation off. Kept across [`FakeState::clear`], like the latency.
    pub fn set_sensitive_words(&self, words: Vec<String>) {
        *self.sensitive.lock().unwrap_or_else(|e| e.into_inner()) = words;
    }

    /// True when an element's data holds a sensitive word.
    pub(crate) fn is_sensitive(&self, elements: &[Element]) -> bool {
        let words = self.sensitive.lock().unwrap_or_else(|e| e.into_inner());
        elements.iter().any(|e| words.iter().any(|w| e.data.contains(w.as_str())))
    }

    /// Counts a call (and a send of each of `event_ids`, the events the body carried) and
    /// hands out the fault it must be served, if any.
    pub(crate) fn begin_call(&self, event_ids: &[String]) -> Option<Fault> {
        let mut book = self.book();
        book.stats.calls += 1;
        for event_id in event_ids {
            book.sends.entry(event_id.clone()).or_default().calls += 1;
        }
        if book.call_times.len() == CALL_LOG {
            book.call_times.pop_front();
        }
        book.call_times.push_back(Instant::now());
        let fault = book.faults.next();
        if fault.is_some() {
            book.stats.faults_served += 1;
        }
        fault
    }

    /// Serves `fault` to the next `count` calls (after faults already queued).
    pub fn inject(&self, fault: Fault, count: u32) {
        self.book().faults.push(fault, count);
    }

    pub(crate) fn count_rejection(&self) {
        self.book().stats.rejected += 1;
    }

    /// Counts a message refused for its content's size (also a rejection).
    pub(crate) fn count_too_large(&self) {
        self.book().stats.too_large += 1;
    }

    /// Takes a slot of the global (per SDKAppID) call limit.
    pub(crate) fn take_global_slot(&self, now: Instant) -> bool {
        let limit = self.options.global_limit_per_sec;
        let mut book = self.book();
        let taken = take_slot(&mut book.global_window, now, limit);
        if !taken {
            book.stats.rate_limited += 1;
        }
        taken
    }

    /// Dedups, rate-limits per group and records.
    pub(crate) fn admit(&self, now: Instant, msg_time: u64, c: Candidate) -> Admission {
        let mut book = self.book();
        while book.seen_order.front().is_some_and(|(t, _)| now.saturating_duration_since(*t) >= DEDUP_WINDOW)
        {
            if let Some((_, key)) = book.seen_order.pop_front() {
                book.seen.remove(&key);
            }
        }
        let key = (c.group.clone(), c.random);
        if let Some(msg_seq) = book.seen.get(&key).copied() {
            book.stats.duplicates += 1;
            book.count_received(&c.elements);
            return Admission::Duplicate { msg_seq };
        }
        let limit = self.options.per_group_limit_per_sec;
        let window = book.group_windows.entry(c.group.clone()).or_default();
        if !take_slot(window, now, limit) {
            book.stats.dropped += 1;
            return Admission::Dropped;
        }
        let seq = book.seqs.entry(c.group.clone()).or_insert(0);
        *seq += 1;
        let msg_seq = *seq;
        book.seen.insert(key.clone(), msg_seq);
        book.seen_order.push_back((now, key));
        book.stats.messages += 1;
        book.stats.accepted += c.elements.len() as u64;
        book.count_received(&c.elements);
        let elements = u32::try_from(c.elements.len()).unwrap_or(u32::MAX);
        for (index, element) in (0u32..).zip(c.elements) {
            book.messages.push(RecordedMessage {
                group: c.group.clone(),
                random: c.random,
                event_id: element.event_id,
                data: element.data,
                desc: element.desc,
                elements,
                index,
                priority: c.priority.clone(),
                msg_seq,
                accepted_at: now,
                msg_time,
            });
        }
        Admission::Recorded { msg_seq }
    }

    /// Recorded messages of one group (all groups with `None`), oldest first.
    pub(crate) fn recorded(&self, group: Option<&str>) -> Vec<RecordedMessage> {
        let book = self.book();
        book.messages.iter().filter(|m| group.is_none_or(|g| m.group == g)).cloned().collect()
    }

    /// How often each `event_id` was sent since start or the last [`FakeState::clear`]: every
    /// `send_group_msg` call that carried it (accepted, deduplicated, faulted or refused) and
    /// those IM took ([`EventSends`]).
    pub fn sends_by_event(&self) -> HashMap<String, EventSends> {
        self.book().sends.clone()
    }

    /// When each `send_group_msg` call arrived (whatever its answer), oldest first.
    pub fn call_times(&self) -> Vec<Instant> {
        self.book().call_times.iter().copied().collect()
    }

    /// Counters since start or the last [`FakeState::clear`].
    pub fn stats(&self) -> FakeStats {
        let book = self.book();
        FakeStats { faults_pending: book.faults.remaining(), ..book.stats.clone() }
    }

    /// Forgets messages, dedup and rate windows, faults and counters; keeps the latency.
    pub fn clear(&self) {
        *self.book() = Book::default();
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
