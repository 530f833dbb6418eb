//! Unit tests of the admin wire format.

use serde_json::json;

use super::*;
use crate::publish::error::{Classify, ErrorClass};

fn call(api: AdminApi, fields: Value, until_ms: Option<i64>) -> AdminCall {
    let Value::Object(fields) = fields else { panic!("fields must be an object") };
    AdminCall { api, fields, until_ms, after_message: true, share: None }
}

#[test]
fn seconds_left_round_up_and_stop_at_zero() {
    assert_eq!(seconds_left(10_000, 0), 10);
    assert_eq!(seconds_left(10_001, 0), 11);
    assert_eq!(seconds_left(10_000, 9_999), 1);
    assert_eq!(seconds_left(10_000, 10_000), 0);
    assert_eq!(seconds_left(10_000, 99_000), 0);
    assert_eq!(seconds_left(i64::MAX, i64::MIN), u64::try_from(i64::MAX).unwrap().div_ceil(1000));
}

#[test]
fn a_mute_carries_the_seconds_left_when_sent_so_a_retry_never_lengthens_it() {
    let mute = call(AdminApi::ForbidSendMsg, json!({"Members_Account": ["u1"]}), Some(100_000));
    let first = body(&mute, "live_r", 10_000);
    assert_eq!(Value::Object(first), json!({"GroupId": "live_r", "Members_Account": ["u1"], "MuteTime": 90}));
    assert_eq!(body(&mute, "live_r", 40_500)["MuteTime"], 60);
    assert_eq!(body(&mute, "live_r", 200_000)["MuteTime"], 0, "past: lifted");
}

#[test]
fn a_ban_carries_its_duration_and_other_calls_their_fields_only() {
    let ban = call(AdminApi::BanGroupMember, json!({"Members_Account": ["u1"]}), Some(61_000));
    assert_eq!(body(&ban, "g", 1_000)["Duration"], 60);
    let info = call(AdminApi::ModifyGroupBaseInfo, json!({"MuteAllMember": "On"}), Some(61_000));
    assert_eq!(Value::Object(body(&info, "g", 0)), json!({"GroupId": "g", "MuteAllMember": "On"}));
    let typed: ModifyGroupBaseInfo = serde_json::from_slice(&to_bytes(&info, "g", 0).unwrap()).unwrap();
    assert_eq!(typed.mute_all_member.as_deref(), Some("On"));
}

#[test]
fn a_group_id_over_48_bytes_is_refused_before_sending() {
    let create = call(AdminApi::CreateGroup, json!({"Type": "AVChatRoom", "Name": "n"}), None);
    assert!(to_bytes(&create, &"g".repeat(48), 0).is_ok());
    let err = to_bytes(&create, &"g".repeat(49), 0);
    assert!(matches!(err, Err(ImError::GroupIdTooLong { len: 49, limit: 48 })), "{err:?}");
}

#[test]
fn done_already_codes_are_success_and_others_name_the_api_and_the_code() {
    let fail = |code: i64| format!(r#"{{"ActionStatus":"FAIL","ErrorCode":{code},"ErrorInfo":"why"}}"#);
    assert!(interpret(AdminApi::CreateGroup, 200, fail(10025).as_bytes()).is_ok());
    assert!(interpret(AdminApi::CreateGroup, 200, fail(10021).as_bytes()).is_ok());
    assert!(interpret(AdminApi::DestroyGroup, 200, fail(10010).as_bytes()).is_ok());
    assert!(interpret(AdminApi::DestroyGroup, 200, fail(10015).as_bytes()).is_ok());
    let quota = interpret(AdminApi::CreateGroup, 200, fail(10036).as_bytes()).unwrap_err();
    assert_eq!(quota.im_code(), Some(10036));
    assert_eq!(quota.class(), ErrorClass::Permanent);
    assert!(quota.to_string().contains("10036: create_group: why"), "{quota}");
    let gone = interpret(AdminApi::ForbidSendMsg, 200, fail(10010).as_bytes()).unwrap_err();
    assert_eq!(gone.im_code(), Some(10010), "only a destruction is done when the group is gone");
    assert!(interpret(AdminApi::ForbidSendMsg, 200, br#"{"ActionStatus":"OK","ErrorCode":0}"#).is_ok());
    assert_eq!(interpret(AdminApi::CreateGroup, 502, b"<html>").unwrap_err().class(), ErrorClass::Transient);
}

#[test]
fn cut_keeps_what_fits_on_a_character_boundary() {
    assert_eq!(cut("short", 30), "short");
    assert_eq!(cut("abcdef", 3), "abc");
    // "直" is 3 bytes: 4 bytes hold one of them, not a half of the second.
    assert_eq!(cut("直播", 4), "直");
    assert_eq!(cut("直播", 2), "");
}
