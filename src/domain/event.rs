//! Events produced by commands and the envelope they travel in.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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
    /// An admin was appointed or removed.
    RoomRoleChanged,
    /// A user was muted.
    RoomUserMuted,
    /// A user's mute was lifted.
    RoomUserUnmuted,
    /// A user was removed (and banned).
    RoomUserKicked,
    /// A user's ban was lifted.
    RoomUserUnbanned,
    /// Everyone was muted, or unmuted.
    RoomMuteAllChanged,
    /// The title, announcement or cover changed.
    RoomInfoChanged,
    /// Attributes were set or deleted.
    RoomAttributesChanged,
    /// The mic seats changed: the whole list, and why.
    RoomSeatsChanged,
    /// A member asked for a seat.
    RoomSeatRequested,
    /// A member was invited to a seat.
    RoomSeatInvited,
    /// A request or invitation was cancelled, rejected or declined.
    RoomSeatRequestClosed,
    /// A request or invitation ran out.
    RoomSeatRequestExpired,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 20] = [
        EventType::RoomCreated,
        EventType::RoomUserJoined,
        EventType::RoomUserLeft,
        EventType::RoomGiftSent,
        EventType::RoomHeatChanged,
        EventType::RoomRankChanged,
        EventType::RoomClosed,
        EventType::RoomRoleChanged,
        EventType::RoomUserMuted,
        EventType::RoomUserUnmuted,
        EventType::RoomUserKicked,
        EventType::RoomUserUnbanned,
        EventType::RoomMuteAllChanged,
        EventType::RoomInfoChanged,
        EventType::RoomAttributesChanged,
        EventType::RoomSeatsChanged,
        EventType::RoomSeatRequested,
        EventType::RoomSeatInvited,
        EventType::RoomSeatRequestClosed,
        EventType::RoomSeatRequestExpired,
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
            EventType::RoomRoleChanged => "RoomRoleChanged",
            EventType::RoomUserMuted => "RoomUserMuted",
            EventType::RoomUserUnmuted => "RoomUserUnmuted",
            EventType::RoomUserKicked => "RoomUserKicked",
            EventType::RoomUserUnbanned => "RoomUserUnbanned",
            EventType::RoomMuteAllChanged => "RoomMuteAllChanged",
            EventType::RoomInfoChanged => "RoomInfoChanged",
            EventType::RoomAttributesChanged => "RoomAttributesChanged",
            EventType::RoomSeatsChanged => "RoomSeatsChanged",
            EventType::RoomSeatRequested => "RoomSeatRequested",
            EventType::RoomSeatInvited => "RoomSeatInvited",
            EventType::RoomSeatRequestClosed => "RoomSeatRequestClosed",
            EventType::RoomSeatRequestExpired => "RoomSeatRequestExpired",
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

    /// Gifts, a kick, the seats and the room's close matter most to viewers (a kicked client
    /// leaves the group on it: Tencent cannot remove a member of an AVChatRoom; a seated one
    /// starts or stops publishing its microphone on the seats).
    pub fn is_high_priority(self) -> bool {
        matches!(
            self,
            EventType::RoomGiftSent
                | EventType::RoomClosed
                | EventType::RoomUserKicked
                | EventType::RoomSeatsChanged
        )
    }

    /// The payload field naming the user whose action (and words) the event tells: a gift's
    /// sender, the member who joined or left, the moderator of a moderation event (`by`: a
    /// kick's reason, an announcement, attribute values are theirs); `None` for the events no
    /// member acts in.
    pub fn actor_field(self) -> Option<&'static str> {
        match self {
            EventType::RoomGiftSent => Some("sender_id"),
            EventType::RoomUserJoined | EventType::RoomUserLeft | EventType::RoomSeatRequested => {
                Some("user_id")
            }
            EventType::RoomCreated
            | EventType::RoomHeatChanged
            | EventType::RoomRankChanged
            | EventType::RoomClosed
            | EventType::RoomSeatRequestExpired => None,
            // A seat event tells ids only: its actor is inside `cause` (RoomSeatsChanged) or
            // `by`, which names who closed a request.
            EventType::RoomSeatsChanged => None,
            EventType::RoomSeatInvited | EventType::RoomSeatRequestClosed => Some("by"),
            EventType::RoomRoleChanged
            | EventType::RoomUserMuted
            | EventType::RoomUserUnmuted
            | EventType::RoomUserKicked
            | EventType::RoomUserUnbanned
            | EventType::RoomMuteAllChanged
            | EventType::RoomInfoChanged
            | EventType::RoomAttributesChanged => Some("by"),
        }
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
    /// The command that produced it, as [`envelope_id`] of the caller's `command_id`: never the
    /// caller's own text, which IM's content check would read (the command log keeps it).
    pub command_id: String,
    /// The request that carried the command, as [`envelope_id`] of its `x-request-id`.
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
            command_id: envelope_id(ctx.command_id.as_str()),
            request_id: envelope_id(&ctx.request_id),
            occurred_at_ms: ctx.now_ms,
            payload: event.payload,
        }
    }

    /// The user whose action the event tells ([`EventType::actor_field`]), if any.
    pub fn actor(&self) -> Option<&str> {
        self.payload.get(self.event_type.actor_field()?)?.as_str()
    }

    /// The other user ids its content carries from the mic seats, each once and never the
    /// [actor](Self::actor): every holder of its `seats` list (`RoomSeatsChanged`, and a
    /// departure of a seated member), and the users its `cause` names (`user_id`, `by`,
    /// `displaced`). At most the seats of a room and three; empty for any other event.
    pub fn seated(&self) -> Vec<&str> {
        let holders = self.payload.get("seats").and_then(|s| s.as_array()).into_iter().flatten();
        let holders = holders.filter_map(|seat| seat.get("user_id")?.as_str());
        let cause = self.payload.get("cause");
        let named = ["user_id", "by", "displaced"].into_iter().filter_map(|f| cause?.get(f)?.as_str());
        let mut ids: Vec<&str> = Vec::new();
        for id in holders.chain(named) {
            if Some(id) != self.actor() && !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }

    /// The envelope as JSON, as it is stored and published.
    pub fn to_json(&self) -> String {
        // Cannot fail: serde_json fails only on a map with non-string keys or a `Serialize`
        // impl that errors, and every field here is a string, an integer, the derived
        // `EventType` (a unit variant) or a `serde_json::Value` (string keys only).
        serde_json::to_string(self).expect("an event envelope always serialises")
    }
}

/// Hex digits of [`envelope_id`]: 128 bits of the digest.
pub const ENVELOPE_ID_HEX: usize = 32;

/// What an envelope carries for a caller-chosen id (`command_id`, `x-request-id`): the first
/// [`ENVELOPE_ID_HEX`] lowercase hex digits of SHA-256 over its bytes. The caller can match
/// its own events by hashing its id; IM's content check never reads what a caller wrote there,
/// so no id can get an event refused (SPEC §13.1), and the envelope's size no longer depends on
/// the ids' length.
pub fn envelope_id(caller_id: &str) -> String {
    use std::fmt::Write;
    let digest = Sha256::digest(caller_id.as_bytes());
    digest.iter().take(ENVELOPE_ID_HEX / 2).fold(String::with_capacity(ENVELOPE_ID_HEX), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

/// The most content bytes (envelope JSON + event type name) one event that reaches IM can
/// take, whatever the edge let through: every id at its limit in its worst JSON escaping
/// (`"` and `\` take two bytes), every number at its widest. `im_batch.max_bytes` may not be
/// set below it, so no command that passed the edge makes an event IM cannot take (the test
/// below derives the bound from the id limits).
pub const LARGEST_IM_EVENT_BYTES: usize = 6 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every IM event at its largest: the ids of [`crate::domain::ids`] at their limits and
    /// worst escaping, numbers at their widest, the envelope built as the service builds it.
    #[test]
    fn no_im_event_outgrows_largest_im_event_bytes() {
        let name = "x".repeat(64);
        let printable = "\"".repeat(128);
        // A service's actor: `svc:` and its name (a service token's name, at most 64 bytes).
        let by = format!("svc:{}", "\"".repeat(64));
        let ctx = CommandContext {
            room_id: crate::domain::RoomId::parse(name.clone()).expect("a room id at its limit"),
            command_id: crate::domain::CommandId::parse(printable.clone())
                .expect("a command id at its limit"),
            request_id: crate::domain::RequestId::parse(printable.clone()).expect("a request id").to_string(),
            now_ms: i64::MIN,
            max_admins: crate::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
            idle_close_after_ms: None,
        };
        assert!(crate::domain::UserId::parse(name.clone()).is_ok());
        let payloads = [
            (
                EventType::RoomUserJoined,
                serde_json::json!({"user_id": name, "joined_at_ms": i64::MIN, "member_count": u64::MAX}),
            ),
            (
                EventType::RoomUserLeft,
                serde_json::json!({"user_id": name, "reason": "closed", "member_count": u64::MAX,
                    "seats": worst_seats(&name)}),
            ),
            (
                EventType::RoomGiftSent,
                serde_json::json!({"sender_id": name, "receiver_id": name, "gift_id": name,
                    "count": u32::MAX, "unit_value": u32::MAX, "total_value": u64::MAX}),
            ),
            (
                EventType::RoomClosed,
                serde_json::json!({"members_removed": u64::MAX, "reason": "owner", "by": by,
                    "summary": {"duration_ms": i64::MAX, "peak_members": u64::MAX, "gifts": u64::MAX,
                        "gift_value": i64::MAX, "unique_senders": u64::MAX}}),
            ),
            (EventType::RoomRoleChanged, serde_json::json!({"user_id": name, "role": "member", "by": by})),
            (EventType::RoomUserMuted, serde_json::json!({"user_id": name, "until_ms": i64::MIN, "by": by})),
            (EventType::RoomUserUnmuted, serde_json::json!({"user_id": name, "by": by})),
            (
                EventType::RoomUserKicked,
                serde_json::json!({"user_id": name, "until_ms": i64::MIN, "reason": "\"".repeat(200),
                    "by": by, "member_count": u64::MAX}),
            ),
            (EventType::RoomUserUnbanned, serde_json::json!({"user_id": name, "by": by})),
            (EventType::RoomMuteAllChanged, serde_json::json!({"muted": false, "by": by})),
            (
                EventType::RoomInfoChanged,
                // A title of 64 four-byte characters, every quotable byte quoted.
                serde_json::json!({"title": "😀".repeat(64), "announcement": "\"".repeat(1000),
                    "cover_url": format!("https://{}", "\\".repeat(504)), "by": by}),
            ),
            (EventType::RoomAttributesChanged, worst_attributes(&by)),
            (
                EventType::RoomSeatsChanged,
                serde_json::json!({"seats": worst_seats(&name), "cause": {"action": "answer_request",
                    "user_id": name, "index": u32::MAX, "by": by, "from": u32::MAX, "policy": "cancel",
                    "displaced": name, "locked": false, "muted": false}}),
            ),
            (
                EventType::RoomSeatRequested,
                serde_json::json!({"user_id": name, "index": u32::MAX, "expires_at_ms": i64::MIN}),
            ),
            (
                EventType::RoomSeatInvited,
                serde_json::json!({"user_id": name, "index": u32::MAX, "expires_at_ms": i64::MIN, "by": by}),
            ),
            (
                EventType::RoomSeatRequestClosed,
                serde_json::json!({"user_id": name, "kind": "request", "reason": "cancelled", "by": by}),
            ),
            (
                EventType::RoomSeatRequestExpired,
                serde_json::json!({"user_id": name, "kind": "request", "index": u32::MAX}),
            ),
            // A departure of a seated member carries the seats.
            (
                EventType::RoomUserKicked,
                serde_json::json!({"user_id": name, "until_ms": i64::MIN, "reason": "\"".repeat(200),
                    "by": by, "member_count": u64::MAX, "seats": worst_seats(&name)}),
            ),
        ];
        let mut largest = 0;
        for (event_type, payload) in payloads {
            assert!(event_type.reaches_im());
            let envelope = EventEnvelope::new(Event { event_type, payload }, &ctx, u64::MAX, uuid_like());
            assert!(!envelope.to_json().contains(&printable), "a caller's id reached the envelope");
            let bytes = envelope.to_json().len() + event_type.as_str().len();
            largest = largest.max(bytes);
        }
        assert!(largest <= LARGEST_IM_EVENT_BYTES, "an IM event of {largest} bytes");
        // Tight enough to mean something.
        assert!(largest * 2 > LARGEST_IM_EVENT_BYTES, "{largest}");
        let im_events = EventType::ALL.iter().filter(|t| t.reaches_im()).count();
        assert_eq!(im_events, 17, "a new IM event type needs its worst case above");
    }

    /// Every seat of the largest room held, by ids at their limit.
    fn worst_seats(name: &str) -> serde_json::Value {
        let seat =
            |index| serde_json::json!({"index": index, "user_id": name, "locked": false, "muted": false});
        serde_json::Value::Array((0..crate::domain::MAX_SEATS).map(|_| seat(u32::MAX)).collect())
    }

    /// The largest `RoomAttributesChanged`: the most keys a write names, each at its longest,
    /// with values up to what the event carries.
    fn worst_attributes(by: &str) -> serde_json::Value {
        use crate::domain::apply::attributes::{
            EVENT_ATTRIBUTE_VALUES_BYTES, MAX_ATTRIBUTE_KEY_BYTES, MAX_ATTRIBUTES,
        };
        let key = |i: usize| format!("{i:0>width$}", width = MAX_ATTRIBUTE_KEY_BYTES);
        let versions: serde_json::Map<_, _> =
            (0..MAX_ATTRIBUTES).map(|i| (key(i), u64::MAX.into())).collect();
        let set = serde_json::json!({ key(0): "\"".repeat(EVENT_ATTRIBUTE_VALUES_BYTES / 2) });
        serde_json::json!({"set": set, "deleted": [], "versions": versions, "by": by})
    }

    #[test]
    fn envelope_ids_are_digests_a_caller_can_recompute() {
        let id = envelope_id("gift forbidden-word");
        assert_eq!(id.len(), ENVELOPE_ID_HEX);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{id}");
        assert!(!id.contains("forbidden"));
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
        assert_eq!(envelope_id("abc"), "ba7816bf8f01cfea414140de5dae2223");
    }

    #[test]
    fn the_actor_is_the_sender_or_the_member() {
        let ctx = CommandContext {
            room_id: crate::domain::RoomId::parse("r1".to_owned()).unwrap(),
            command_id: crate::domain::CommandId::parse("c1".to_owned()).unwrap(),
            request_id: "q1".into(),
            now_ms: 1,
            max_admins: crate::domain::DEFAULT_MAX_ADMINS,
            seat_request_ttl_ms: crate::domain::DEFAULT_SEAT_REQUEST_TTL_MS,
            idle_close_after_ms: None,
        };
        let envelope =
            |event_type, payload| EventEnvelope::new(Event { event_type, payload }, &ctx, 2, uuid_like());
        let gift = envelope(
            EventType::RoomGiftSent,
            serde_json::json!({"sender_id": "bob", "receiver_id": "alice"}),
        );
        assert_eq!(gift.actor(), Some("bob"));
        let joined = envelope(EventType::RoomUserJoined, serde_json::json!({"user_id": "carol"}));
        assert_eq!(joined.actor(), Some("carol"));
        let left = envelope(EventType::RoomUserLeft, serde_json::json!({"user_id": "dave"}));
        assert_eq!(left.actor(), Some("dave"));
        let closed = envelope(EventType::RoomClosed, serde_json::json!({"members_removed": 3}));
        assert_eq!(closed.actor(), None);
        assert_eq!(gift.command_id, envelope_id("c1"));
        assert_eq!(gift.request_id, envelope_id("q1"));

        // A seat event names no actor, but every holder and whom its cause names.
        let seats = serde_json::json!([{"index": 0, "user_id": "mallory"}, {"index": 1, "user_id": null},
            {"index": 2, "user_id": "erin"}]);
        let changed = envelope(
            EventType::RoomSeatsChanged,
            serde_json::json!({"seats": seats, "cause": {"action": "move", "user_id": "erin", "by": "alice",
                "displaced": "frank", "index": 2}}),
        );
        assert_eq!((changed.actor(), changed.seated()), (None, vec!["mallory", "erin", "alice", "frank"]));
        let left = envelope(EventType::RoomUserLeft, serde_json::json!({"user_id": "dave", "seats": seats}));
        assert_eq!(left.seated(), ["mallory", "erin"], "the actor is not repeated");
        assert!(gift.seated().is_empty() && joined.seated().is_empty());
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
