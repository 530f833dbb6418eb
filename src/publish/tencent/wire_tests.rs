//! Unit tests of the wire format.

use super::*;
use crate::publish::Path;
use crate::publish::error::{Classify, ErrorClass};

fn message(body: &str) -> Message {
    Message {
        event_id: "0190a1b2-0000-7000-8000-000000000001".into(),
        event_type: "RoomGiftSent",
        group: "room-1".into(),
        priority: Priority::High,
        body: body.into(),
        path: Path::Sync,
    }
}

#[test]
fn body_has_the_tencent_shape() {
    let msg = SendGroupMsg::for_message("live_", &message(r#"{"a":1}"#));
    let json: serde_json::Value = serde_json::from_slice(&msg.to_bytes().unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "GroupId": "live_room-1",
            "Random": random_for("0190a1b2-0000-7000-8000-000000000001"),
            "MsgBody": [{"MsgType": "TIMCustomElem",
                         "MsgContent": {"Data": "{\"a\":1}", "Desc": "RoomGiftSent"}}],
            "CloudCustomData": "{\"event_id\":\"0190a1b2-0000-7000-8000-000000000001\"}",
            "MsgPriority": "High",
        })
    );
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
    m.priority = Priority::Normal;
    assert_eq!(SendGroupMsg::for_message("", &m).msg_priority, "Normal");
}

#[test]
fn oversized_body_is_refused() {
    let err = SendGroupMsg::for_message("", &message(&"x".repeat(MAX_BODY_BYTES))).to_bytes();
    assert!(matches!(err, Err(ImError::TooLarge { limit: MAX_BODY_BYTES, .. })), "{err:?}");
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
    let message = crate::publish::Message {
        event_id: "e".into(),
        event_type: "RoomUserJoined",
        group: "r".repeat(44),
        priority: crate::publish::Priority::Normal,
        body: "{}".into(),
        path: crate::publish::Path::Sync,
    };
    assert!(SendGroupMsg::for_message("live", &message).to_bytes().is_ok(), "48 bytes is fine");
    let err = SendGroupMsg::for_message("live_", &message).to_bytes();
    assert!(matches!(err, Err(ImError::GroupIdTooLong { len: 49, limit: 48 })), "{err:?}");
}
