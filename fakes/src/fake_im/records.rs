//! What the fake IM shows of what it accepted: the messages it recorded, its counters, and how
//! often each event was sent.

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

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
