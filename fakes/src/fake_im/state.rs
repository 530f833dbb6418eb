//! What the fake IM server remembers: recorded messages, the `(GroupId, Random)` dedup window,
//! the per-group and global rate windows, queued faults, counters and sends per event. All of it sits behind
//! one short-held mutex; nothing awaits while holding it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::time::Instant;

use super::FakeImOptions;
use super::fault::{Fault, FaultQueue};
use super::groups::AdminBook;
pub use super::records::{EventSends, FakeStats, RecordedMessage};
pub(crate) use super::send::{Admission, Candidate, Element};

/// How long Tencent drops a repeated `(GroupId, Random)`.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Width of the rate-limit windows.
const RATE_WINDOW: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Book {
    messages: Vec<RecordedMessage>,
    seen: HashMap<(String, u32), u64>,
    seen_order: VecDeque<(Instant, (String, u32))>,
    group_windows: HashMap<String, VecDeque<Instant>>,
    global_window: VecDeque<Instant>,
    seqs: HashMap<String, u64>,
    faults: FaultQueue,
    /// The group admin calls' own faults.
    admin_faults: FaultQueue,
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
    /// Groups, the journal and the admin APIs' rate windows ([`super::groups`]).
    admin: Mutex<AdminBook>,
    /// Refuse (10010) a message to a group that does not exist.
    pub(crate) require_groups: AtomicBool,
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
            sensitive: Mutex::new(Vec::new()),
            book: Mutex::new(Book::default()),
            admin: Mutex::new(AdminBook::default()),
            require_groups: AtomicBool::new(options.require_groups),
            options,
        }
    }

    /// The admin side of the state ([`super::groups`]).
    pub(crate) fn admin_book(&self) -> std::sync::MutexGuard<'_, AdminBook> {
        self.admin.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Serves `fault` to the next `count` messages (`send_group_msg`, after faults already
    /// queued).
    pub fn inject(&self, fault: Fault, count: u32) {
        self.book().faults.push(fault, count);
    }

    /// Serves `fault` to the next `count` group admin calls.
    pub fn inject_admin(&self, fault: Fault, count: u32) {
        self.book().admin_faults.push(fault, count);
    }

    pub(crate) fn count_rejection(&self) {
        self.book().stats.rejected += 1;
    }

    /// Counts a message refused for its content's size (also a rejection).
    pub(crate) fn count_too_large(&self) {
        self.book().stats.too_large += 1;
    }

    /// Takes a slot of the global (per SDKAppID) call limit of `send_group_msg`.
    pub(crate) fn take_global_slot(&self, now: Instant) -> bool {
        let limit = self.options.global_limit_per_sec;
        let mut book = self.book();
        let taken = take_slot(&mut book.global_window, now, limit);
        if !taken {
            book.stats.rate_limited += 1;
        }
        taken
    }

    /// Takes a slot of `api`'s own app-wide call limit (Tencent counts each API apart, at
    /// the same rate as `send_group_msg`); `send_group_msg` takes [`Self::take_global_slot`].
    pub(crate) fn take_api_slot(&self, api: &'static str, now: Instant) -> bool {
        if api == "send_group_msg" {
            return self.take_global_slot(now);
        }
        let limit = self.options.global_limit_per_sec;
        let taken = take_slot(self.admin_book().windows.entry(api).or_default(), now, limit);
        if !taken {
            self.book().stats.rate_limited += 1;
        }
        taken
    }

    /// Hands out the fault an admin call must be served, if any (the admin calls' own queue:
    /// a fault meant for a message is never spent on a group's creation).
    pub(crate) fn begin_admin_call(&self) -> Option<Fault> {
        let mut book = self.book();
        let fault = book.admin_faults.next();
        if fault.is_some() {
            book.stats.faults_served += 1;
        }
        fault
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

    /// Forgets messages, dedup and rate windows, faults and counters and the journal, and sets
    /// `require_groups` back to its option; keeps the latency and the groups (a group outlives
    /// what the fake recorded of it, as at Tencent: a test that clears the records mid-way
    /// still sends into the groups its rooms created).
    pub fn clear(&self) {
        *self.book() = Book::default();
        self.admin_book().forget_records();
        self.set_require_groups(self.options.require_groups);
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
