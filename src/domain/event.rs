//! Events produced by commands and the envelope they travel in.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::command::CommandContext;

/// The closed set of event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// A room was created.
    RoomCreated,
    /// A user joined.
    RoomUserJoined,
    /// A user left.
    RoomUserLeft,
    /// A gift was sent.
    RoomGiftSent,
    /// The room's heat changed.
    RoomHeatChanged,
    /// The top-10 gift rank changed order.
    RoomRankChanged,
    /// The room was closed.
    RoomClosed,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 7] = [
        EventType::RoomCreated,
        EventType::RoomUserJoined,
        EventType::RoomUserLeft,
        EventType::RoomGiftSent,
        EventType::RoomHeatChanged,
        EventType::RoomRankChanged,
        EventType::RoomClosed,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::RoomCreated => "RoomCreated",
            EventType::RoomUserJoined => "RoomUserJoined",
            EventType::RoomUserLeft => "RoomUserLeft",
            EventType::RoomGiftSent => "RoomGiftSent",
            EventType::RoomHeatChanged => "RoomHeatChanged",
            EventType::RoomRankChanged => "RoomRankChanged",
            EventType::RoomClosed => "RoomClosed",
        }
    }

    /// False for the event types that go through the publish stack but never reach Tencent IM
    /// (SPEC §2): the IM stack answers them `Skipped`, and they are marked delivered.
    pub fn reaches_im(self) -> bool {
        !matches!(self, EventType::RoomCreated | EventType::RoomHeatChanged | EventType::RoomRankChanged)
    }

    /// The wire names of the event types that do not [reach IM](Self::reaches_im): what the
    /// IM stack's event filter skips.
    pub fn im_skipped() -> Vec<&'static str> {
        Self::ALL.into_iter().filter(|t| !t.reaches_im()).map(Self::as_str).collect()
    }

    /// Gifts and room close matter most to viewers.
    pub fn is_high_priority(self) -> bool {
        matches!(self, EventType::RoomGiftSent | EventType::RoomClosed)
    }
}

impl FromStr for EventType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        EventType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown event type {s:?}"))
    }
}

/// An event as produced by `apply`: its type and payload, before it gets an id.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The type.
    pub event_type: EventType,
    /// Event-specific fields.
    pub payload: serde_json::Value,
}

/// The envelope stored in the outbox and sent to IM inside the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    /// UUIDv7, the dedup key of events.
    pub event_id: String,
    /// Event type name.
    pub event_type: EventType,
    /// The room.
    pub room_id: String,
    /// Room version after the command.
    pub room_version: u64,
    /// The command that produced it.
    pub command_id: String,
    /// Tracing id of the request.
    pub request_id: String,
    /// When the command was applied (ms since the epoch).
    pub occurred_at_ms: i64,
    /// Event-specific fields.
    pub payload: serde_json::Value,
}

impl EventEnvelope {
    /// Wraps an event of the command described by `ctx`, at `room_version`, under `event_id`.
    pub fn new(event: Event, ctx: &CommandContext, room_version: u64, event_id: String) -> Self {
        EventEnvelope {
            event_id,
            event_type: event.event_type,
            room_id: ctx.room_id.to_string(),
            room_version,
            command_id: ctx.command_id.to_string(),
            request_id: ctx.request_id.clone(),
            occurred_at_ms: ctx.now_ms,
            payload: event.payload,
        }
    }

    /// The envelope as JSON, as it is stored and published.
    pub fn to_json(&self) -> String {
        // Cannot fail: serde_json fails only on a map with non-string keys or a `Serialize`
        // impl that errors, and every field here is a string, an integer, the derived
        // `EventType` (a unit variant) or a `serde_json::Value` (string keys only).
        serde_json::to_string(self).expect("an event envelope always serialises")
    }
}

/// The most content bytes (envelope JSON + event type name) one event that reaches IM can
/// take, whatever the edge let through: every id at its limit in its worst JSON escaping
/// (`"` and `\` take two bytes), every number at its widest. `im_batch.max_bytes` may not be
/// set below it, so no command that passed the edge makes an event IM cannot take (the test
/// below derives the bound from the id limits).
pub const LARGEST_IM_EVENT_BYTES: usize = 1536;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every IM event at its largest: the ids of [`crate::domain::ids`] at their limits and
    /// worst escaping, numbers at their widest.
    #[test]
    fn no_im_event_outgrows_largest_im_event_bytes() {
        let name = "x".repeat(64);
        let printable = "\"".repeat(128);
        assert!(crate::domain::RoomId::parse(name.clone()).is_ok());
        assert!(crate::domain::UserId::parse(name.clone()).is_ok());
        assert!(crate::domain::CommandId::parse(printable.clone()).is_ok());
        assert!(crate::domain::RequestId::parse(printable.clone()).is_ok());
        let payloads = [
            (
                EventType::RoomUserJoined,
                serde_json::json!({"user_id": name, "joined_at_ms": i64::MIN, "member_count": u64::MAX}),
            ),
            (
                EventType::RoomUserLeft,
                serde_json::json!({"user_id": name, "reason": "closed", "member_count": u64::MAX}),
            ),
            (
                EventType::RoomGiftSent,
                serde_json::json!({"sender_id": name, "receiver_id": name, "gift_id": name,
                    "count": u32::MAX, "unit_value": u32::MAX, "total_value": u64::MAX}),
            ),
            (EventType::RoomClosed, serde_json::json!({"members_removed": u64::MAX})),
        ];
        let mut largest = 0;
        for (event_type, payload) in payloads {
            assert!(event_type.reaches_im());
            let envelope = EventEnvelope {
                event_id: uuid_like(),
                event_type,
                room_id: name.clone(),
                room_version: u64::MAX,
                command_id: printable.clone(),
                request_id: printable.clone(),
                occurred_at_ms: i64::MIN,
                payload,
            };
            let bytes = envelope.to_json().len() + event_type.as_str().len();
            largest = largest.max(bytes);
        }
        assert!(largest <= LARGEST_IM_EVENT_BYTES, "an IM event of {largest} bytes");
        // Tight enough to mean something.
        assert!(largest * 2 > LARGEST_IM_EVENT_BYTES, "{largest}");
        let im_events = EventType::ALL.iter().filter(|t| t.reaches_im()).count();
        assert_eq!(im_events, 4, "a new IM event type needs its worst case above");
    }

    fn uuid_like() -> String {
        "01234567-89ab-7def-8123-456789abcdef".to_owned()
    }

    #[test]
    fn event_type_names_round_trip() {
        for t in EventType::ALL {
            assert_eq!(t.as_str().parse::<EventType>(), Ok(t));
            assert_eq!(serde_json::to_value(t).unwrap(), serde_json::json!(t.as_str()));
        }
        assert!("Nope".parse::<EventType>().is_err());
    }

    #[test]
    fn created_heat_and_rank_never_reach_im() {
        assert_eq!(EventType::im_skipped(), ["RoomCreated", "RoomHeatChanged", "RoomRankChanged"]);
        assert!(EventType::RoomGiftSent.reaches_im() && EventType::RoomUserLeft.reaches_im());
    }
}
