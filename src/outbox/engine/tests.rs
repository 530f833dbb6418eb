//! The worker's packing: a quarantined sender's row goes alone.

use super::*;
use crate::delivery::Quarantine;
use crate::delivery::pack::PackLimits;

fn held(id: i64, event_type: &str, sender: Option<&str>) -> Held {
    let row = OutboxRow {
        id,
        event_id: format!("e{id}"),
        room_id: "r1".into(),
        event_type: event_type.into(),
        envelope: "{}".into(),
        status: "delivering".into(),
        retry_count: 0,
        last_error: None,
        worker_id: Some("w".into()),
        lock_until_ms: Some(0),
        created_at_ms: 0,
        updated_at_ms: 0,
        delivered_at_ms: None,
        park_reason: None,
        trace_context: None,
    };
    let event = crate::publish::Event {
        event_id: row.event_id.clone(),
        event_type: "RoomGiftSent",
        priority: crate::publish::Priority::High,
        body: "{}".into(),
        sender: sender.map(Into::into),
        seated: Default::default(),
        trace: None,
        admin: None,
    };
    Held { worker_id: "w".into(), row, event: Ok(event) }
}

#[tokio::test(start_paused = true)]
async fn a_quarantined_senders_row_goes_alone() {
    let quarantine = Quarantine::default();
    quarantine.hold("mallory", Path::Worker);
    let mut queue: VecDeque<Held> = [
        held(1, "RoomGiftSent", Some("a")),
        held(2, "RoomGiftSent", Some("b")),
        held(3, "RoomGiftSent", Some("mallory")),
        held(4, "RoomHeatChanged", None),
        held(5, "RoomGiftSent", Some("c")),
    ]
    .into();
    let mut packs = Vec::new();
    while !queue.is_empty() {
        let count = pack::next_pack(PackLimits::default(), &quarantine, Path::Worker, &queue);
        packs.push(queue.drain(..count).map(|h| h.row.id).collect::<Vec<_>>());
    }
    assert_eq!(packs, [vec![1, 2], vec![3, 4], vec![5]], "a skipped row rides along; the next sender waits");
}

#[test]
fn a_held_row_knows_its_sender_from_its_envelope() {
    let envelope = serde_json::json!({
        "event_id": "e1", "event_type": "RoomGiftSent", "room_id": "r1", "room_version": 3,
        "command_id": "c", "request_id": "q", "occurred_at_ms": 1,
        "payload": {"sender_id": "bob", "receiver_id": "alice"}
    });
    let mut row = held(1, "RoomGiftSent", None).row;
    row.envelope = envelope.to_string();
    assert_eq!(Ready::sender(&Held::new("w".into(), row, Groups::NONE)), Some("bob"));
}
