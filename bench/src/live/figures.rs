//! B10's IM figures, from what a load answered, the fake's counters polled during it
//! ([`Sample`]) and the fake's records read after the backlog was gone.
//!
//! Commit → IM of a gift: from its `RoomGiftSent` envelope's `occurred_at_ms` (the service's
//! clock when the command was applied, just before its commit; same machine, same wall clock)
//! to its acceptance: the arrival of the first poll that counted its record (see `watch`), or
//! the gift's own answer when that came first and said `delivered` (IM had taken it in the
//! command's own call by then). A gift IM had not taken when the backlog wait ended counts
//! from its answer to that end: a lower bound of its own figure, so the percentiles are then
//! lower bounds too ([`Im::missing`]).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use room_service_fakes::fake_im::{FakeStats, RecordedMessage};
use serde::Deserialize;

use super::load::Load;
use super::watch::Sample;
use crate::support::Samples;

/// The parts of an event envelope read here.
#[derive(Debug, Deserialize)]
struct Envelope {
    event_type: String,
    command_id: String,
    room_version: u64,
    occurred_at_ms: i64,
}

/// What IM saw of one load.
#[derive(Debug, Clone, Default)]
pub(crate) struct Im {
    /// IM events (every type) accepted per second while the load ran.
    pub(crate) events_per_sec: f64,
    /// Events in each call that carried the load's gifts: p50 and max.
    pub(crate) per_call: (u32, u32),
    /// Calls that carried the load's gifts.
    pub(crate) calls: usize,
    /// Commit → acceptance of each of the load's gifts answered 200 (those not in IM at the
    /// end: answer → end).
    pub(crate) commit_to_im: Samples,
    /// Gifts answered 200 and not in IM at the end: when any, the percentiles are lower
    /// bounds.
    pub(crate) missing: usize,
    /// The load's gifts found in IM, once each.
    pub(crate) delivered: usize,
    /// Gifts whose event IM recorded more than once.
    pub(crate) twice: usize,
    /// Gifts IM first took after a later `room_version` of their room (in acceptance order).
    pub(crate) out_of_order: usize,
    /// The most versions a gift came behind the newest IM had taken of its room (0: in order).
    pub(crate) max_displacement: u64,
    /// Gifts answered `delivered` (taken by IM in the command's own call).
    pub(crate) sync_delivered: usize,
    /// Most calls within one sliding second, from the polls (`calls`, every answer).
    pub(crate) busiest_second: u64,
    /// Most accepted calls with the same `msg_time` (a calendar second).
    pub(crate) busiest_msg_time: usize,
    /// The fake's counters at the end (since the reset after the setup).
    pub(crate) stats: FakeStats,
}

/// The figures of `load` (its gifts found in IM by their envelopes' `command_id`).
pub(crate) fn im(load: &Load, samples: &[Sample], records: &[RecordedMessage]) -> Im {
    // Record `i` was counted by the first poll whose `accepted` exceeds `i`.
    let polled = |i: usize| {
        let k = samples.partition_point(|s| s.stats.accepted <= i as u64);
        samples.get(k).or(samples.last()).map_or(i64::MAX, |s| s.at_ms)
    };
    let mut im = Im::default();
    let mut seen = HashSet::new();
    let mut calls: HashMap<(&str, u64), u32> = HashMap::new();
    let mut newest: HashMap<&str, u64> = HashMap::new();
    for (i, record) in records.iter().enumerate() {
        let Ok(envelope) = serde_json::from_str::<Envelope>(&record.data) else { continue };
        // The load's gifts: its answers are keyed by what their envelopes carry.
        if envelope.event_type != "RoomGiftSent" || !load.answers.contains_key(&envelope.command_id) {
            continue;
        }
        calls.insert((record.group.as_str(), record.msg_seq), record.elements);
        if !seen.insert(envelope.command_id.clone()) {
            im.twice += 1;
            continue;
        }
        im.delivered += 1;
        let room_newest = newest.entry(record.group.as_str()).or_default();
        if envelope.room_version < *room_newest {
            im.out_of_order += 1;
            im.max_displacement = im.max_displacement.max(*room_newest - envelope.room_version);
        }
        *room_newest = (*room_newest).max(envelope.room_version);
        let answered = load.answers.get(&envelope.command_id).filter(|a| a.delivered).map(|a| a.at_ms);
        let accepted = polled(i).min(answered.unwrap_or(i64::MAX));
        let took = (accepted - envelope.occurred_at_ms).max(0);
        im.commit_to_im.push(Duration::from_millis(took as u64));
    }
    // Not in IM when the wait ended: at least from the answer (after the commit) to then.
    let end = samples.last().map_or(load.ended_ms, |s| s.at_ms);
    for (id, answer) in &load.answers {
        if !seen.contains(id) {
            im.missing += 1;
            im.commit_to_im.push(Duration::from_millis((end - answer.at_ms).max(0) as u64));
        }
    }
    let mut sizes: Vec<u32> = calls.into_values().collect();
    sizes.sort_unstable();
    im.per_call = (
        sizes.get(sizes.len().saturating_sub(1) / 2).copied().unwrap_or(0),
        sizes.last().copied().unwrap_or(0),
    );
    im.calls = sizes.len();
    im.sync_delivered = load.answers.values().filter(|a| a.delivered).count();
    im.events_per_sec = events_per_sec(samples, load.started_ms, load.ended_ms);
    im.busiest_second = busiest_second(samples);
    im.busiest_msg_time = busiest_msg_time(records);
    im.stats = samples.last().map(|s| s.stats.clone()).unwrap_or_default();
    im
}

/// Events accepted between the first polls at or after `from` and `to`, per second.
fn events_per_sec(samples: &[Sample], from: i64, to: i64) -> f64 {
    let at = |ms: i64| samples.get(samples.partition_point(|s| s.at_ms < ms)).or(samples.last());
    match (at(from), at(to)) {
        (Some(a), Some(b)) if b.at_ms > a.at_ms => {
            (b.stats.accepted - a.stats.accepted) as f64 * 1000.0 / (b.at_ms - a.at_ms) as f64
        }
        _ => 0.0,
    }
}

/// The most calls counted between a poll and the latest poll at least a second before it: a
/// window of one second plus at most one poll interval, so never an undercount of a sliding
/// second (in the first second, the window is the time since the first poll).
fn busiest_second(samples: &[Sample]) -> u64 {
    let mut most = 0;
    for (j, s) in samples.iter().enumerate() {
        let first = samples[..j].partition_point(|e| e.at_ms <= s.at_ms - 1000).saturating_sub(1);
        if let Some(e) = samples.get(first) {
            most = most.max(s.stats.calls.saturating_sub(e.stats.calls));
        }
    }
    most
}

/// The most accepted calls (messages) sharing one `msg_time`.
fn busiest_msg_time(records: &[RecordedMessage]) -> usize {
    let calls: HashSet<(&str, u64, u64)> =
        records.iter().map(|r| (r.group.as_str(), r.msg_seq, r.msg_time)).collect();
    let mut per_second: HashMap<u64, usize> = HashMap::new();
    for (_, _, second) in calls {
        *per_second.entry(second).or_default() += 1;
    }
    per_second.into_values().max().unwrap_or(0)
}
