//! Unit tests of the wire format.

use super::*;
use crate::publish::error::{Classify, ErrorClass};
use crate::publish::{Event, Path};

fn event(id: &str, event_type: &'static str, priority: Priority, body: &str) -> Event {
    Event {
        event_id: id.into(),
        event_type,
        priority,
        body: body.into(),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: None,
    }
}

fn message(body: &str) -> Message {
    let gift = event("0190a1b2-0000-7000-8000-000000000001", "RoomGiftSent", Priority::High, body);
    Message::new("room-1".into(), Path::Sync, vec![gift])
}

const MAX: usize = crate::publish::DEFAULT_MAX_BYTES;

#[test]
fn body_has_the_tencent_shape() {
    let msg = SendGroupMsg::for_message("live_", &message(r#"{"a":1}"#));
    let json: serde_json::Value = serde_json::from_slice(&msg.to_bytes(MAX).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "GroupId": "live_room-1",
            "Random": random_for("0190a1b2-0000-7000-8000-000000000001"),
            "MsgBody": [{"MsgType": "TIMCustomElem",
                         "MsgContent": {"Data": "{\"a\":1}", "Desc": "RoomGiftSent"}}],
            "CloudCustomData": "{\"event_ids\":[\"0190a1b2-0000-7000-8000-000000000001\"]}",
            "MsgPriority": "High",
        })
    );
}

#[test]
fn a_pack_carries_one_element_per_event_in_order_at_its_highest_priority() {
    let events = vec![
        event("e1", "RoomUserJoined", Priority::Normal, r#"{"v":1}"#),
        event("e2", "RoomGiftSent", Priority::High, r#"{"v":2}"#),
        event("e3", "RoomUserLeft", Priority::Normal, r#"{"v":3}"#),
    ];
    let msg = SendGroupMsg::for_message("", &Message::new("r".into(), Path::Worker, events));
    let json: serde_json::Value = serde_json::from_slice(&msg.to_bytes(MAX).unwrap()).unwrap();
    let elements: Vec<(&str, &str)> = json["MsgBody"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["MsgContent"]["Data"].as_str().unwrap(), e["MsgContent"]["Desc"].as_str().unwrap()))
        .collect();
    assert_eq!(
        elements,
        [(r#"{"v":1}"#, "RoomUserJoined"), (r#"{"v":2}"#, "RoomGiftSent"), (r#"{"v":3}"#, "RoomUserLeft")]
    );
    assert_eq!(json["MsgPriority"], "High");
    assert_eq!(json["Random"], random_for_pack(["e1", "e2", "e3"]));
    let custom: CloudCustomData = serde_json::from_str(json["CloudCustomData"].as_str().unwrap()).unwrap();
    assert_eq!(custom.ids(), ["e1", "e2", "e3"]);
    assert_eq!(
        msg.content_bytes(),
        7 * 3 + "RoomUserJoined".len() + "RoomGiftSent".len() + "RoomUserLeft".len()
    );
}

#[test]
fn a_pack_random_depends_on_its_ids_and_their_order() {
    assert_eq!(random_for_pack(["e1", "e2"]), random_for_pack(["e1", "e2"]));
    assert_ne!(random_for_pack(["e1", "e2"]), random_for_pack(["e2", "e1"]));
    assert_ne!(random_for_pack(["e1", "e2"]), random_for_pack(["e1"]));
    assert_eq!(random_for_pack(["e1"]), random_for("e1"), "one event keeps its own Random");
}

#[test]
fn random_is_deterministic_per_event() {
    assert_eq!(random_for("e1"), random_for("e1"));
    assert_ne!(random_for("e1"), random_for("e2"));
    // First 4 bytes of SHA-256("abc") = ba7816bf.
    assert_eq!(random_for("abc"), 0xba78_16bf);
}

#[test]
fn normal_priority_is_spelled_normal() {
    let mut m = message("{}");
    m.events[0].priority = Priority::Normal;
    assert_eq!(SendGroupMsg::for_message("", &m).msg_priority, "Normal");
}

#[test]
fn content_over_the_limit_is_refused() {
    let fits = message(&"x".repeat(MAX - "RoomGiftSent".len()));
    assert!(SendGroupMsg::for_message("", &fits).to_bytes(MAX).is_ok(), "exactly the limit fits");
    let over = message(&"x".repeat(MAX - "RoomGiftSent".len() + 1));
    let err = SendGroupMsg::for_message("", &over).to_bytes(MAX);
    assert!(matches!(err, Err(ImError::TooLarge { limit: MAX, .. })), "{err:?}");
}

#[test]
fn a_message_without_events_is_refused() {
    let err = SendGroupMsg::for_message("", &Message::new("r".into(), Path::Sync, vec![])).to_bytes(MAX);
    assert!(matches!(err, Err(ImError::Undecodable(_))), "{err:?}");
}

#[test]
fn ok_answer_is_success_even_without_error_info_and_with_unknown_fields() {
    assert!(interpret(200, br#"{"ActionStatus":"OK","ErrorCode":0,"Extra":[1]}"#).is_ok());
    let ok = serde_json::to_vec(&Answer::ok(1, 2)).unwrap();
    assert!(interpret(200, &ok).is_ok());
}

#[test]
fn failures_are_errors() {
    let class = |status, body: &[u8]| interpret(status, body).unwrap_err().class();
    assert_eq!(class(502, b"<html>bad gateway</html>"), ErrorClass::Transient);
    assert_eq!(class(200, b"<html>"), ErrorClass::Transient);
    assert_eq!(class(200, br#"{"ActionStatus":"OK"}"#), ErrorClass::Transient);
    assert_eq!(
        class(200, br#"{"ActionStatus":"FAIL","ErrorCode":70001,"ErrorInfo":"expired"}"#),
        ErrorClass::AuthRefresh
    );
    assert_eq!(class(200, br#"{"ActionStatus":"FAIL","ErrorCode":10004}"#), ErrorClass::Permanent);
    assert_eq!(
        class(200, br#"{"ActionStatus":"OK","ErrorCode":0,"MsgDropReason":"MsgFreqCtrl"}"#),
        ErrorClass::RateLimited
    );
}

#[test]
fn empty_drop_reason_is_success() {
    assert!(interpret(200, br#"{"ActionStatus":"OK","ErrorCode":0,"MsgDropReason":""}"#).is_ok());
}

#[test]
fn group_ids_over_48_bytes_are_refused_before_sending() {
    let joined = event("e", "RoomUserJoined", Priority::Normal, "{}");
    let message = Message::new("r".repeat(44), Path::Sync, vec![joined]);
    assert!(SendGroupMsg::for_message("live", &message).to_bytes(MAX).is_ok(), "48 bytes is fine");
    let err = SendGroupMsg::for_message("live_", &message).to_bytes(MAX);
    assert!(matches!(err, Err(ImError::GroupIdTooLong { len: 49, limit: 48 })), "{err:?}");
}
