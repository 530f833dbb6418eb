//! `TencentImService` with group admin calls (SPEC §14.2) against the fake IM over loopback
//! HTTP, the fake requiring groups: a message before its group's creation and after its
//! destruction is refused 10010 (permanent), done-already answers count as done, a mute is
//! sent as the seconds left, the AVChatRoom quota parks the creation naming its code.

use std::sync::Arc;

use room_service::publish::tencent::TencentImService;
use room_service::publish::{AdminApi, AdminCall, BoxError, ErrorClass, Event, Message, Outcome, Path};
use room_service::publish::{Priority, classify};
use room_service_fakes::fake_im::{FakeIm, FakeImOptions, Fault};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::tencent_im::{ADMIN, APP, KEY, options};

const GROUP: &str = "live_room-1";

async fn fake_requiring_groups(quota: Option<usize>) -> (FakeIm, TencentImService) {
    let opts = FakeImOptions {
        require_groups: true,
        avchatroom_quota: quota,
        ..FakeImOptions::new(APP, KEY, ADMIN)
    };
    let fake = FakeIm::start(opts).await;
    let leaf = TencentImService::new(&options(&fake)).expect("valid options");
    (fake, leaf)
}

fn event(id: &str, event_type: &'static str, admin: Option<AdminCall>) -> Event {
    Event {
        event_id: id.into(),
        event_type,
        priority: Priority::Normal,
        body: format!(r#"{{"event_id":"{id}"}}"#).into(),
        sender: None,
        seated: Default::default(),
        trace: None,
        admin: admin.map(Arc::new),
    }
}

fn call(api: AdminApi, fields: Value, until_ms: Option<i64>, after_message: bool) -> AdminCall {
    let Value::Object(fields) = fields else { panic!("fields must be an object") };
    AdminCall { api, fields, until_ms, after_message, share: None }
}

fn one(event: Event) -> Message {
    Message::new("room-1".into(), Path::Worker, vec![event])
}

fn created(id: &str) -> Message {
    let create = call(AdminApi::CreateGroup, json!({"Type": "AVChatRoom", "Name": "Room one"}), None, false);
    one(event(id, "RoomCreated", Some(create)))
}

fn closed(id: &str) -> Message {
    one(event(id, "RoomClosed", Some(call(AdminApi::DestroyGroup, json!({}), None, true))))
}

fn joined(id: &str) -> Message {
    one(event(id, "RoomUserJoined", None))
}

async fn publish(leaf: &TencentImService, message: Message) -> Result<Outcome, BoxError> {
    leaf.clone().oneshot(message).await
}

/// Publishes, expects a failure, answers its class and text (which never holds the usersig).
async fn fail(leaf: &TencentImService, message: Message) -> (ErrorClass, String) {
    let error = publish(leaf, message).await.expect_err("refused");
    let text = error.to_string();
    assert!(!text.contains("usersig") && !text.contains("sdkappid"), "{text}");
    (classify(error.as_ref()), text)
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

#[tokio::test]
async fn a_rooms_messages_reach_its_group_only_between_its_creation_and_its_destruction() {
    let (fake, leaf) = fake_requiring_groups(None).await;
    let (class, text) = fail(&leaf, joined("e0")).await;
    assert_eq!(class, ErrorClass::Permanent, "{text}");
    assert!(text.contains("10010"), "{text}");

    assert_eq!(publish(&leaf, created("e1")).await.unwrap(), Outcome::Delivered);
    assert_eq!(publish(&leaf, joined("e2")).await.unwrap(), Outcome::Delivered);
    assert_eq!(publish(&leaf, closed("e3")).await.unwrap(), Outcome::Delivered);
    let (class, text) = fail(&leaf, joined("e4")).await;
    assert_eq!(class, ErrorClass::Permanent, "{text}");
    assert!(text.contains("10010"), "{text}");

    let calls: Vec<String> = fake.journal_of(GROUP).into_iter().map(|e| e.api).collect();
    assert_eq!(
        calls,
        [
            "send_group_msg",
            "create_group",
            "send_group_msg",
            "send_group_msg",
            "destroy_group",
            "send_group_msg"
        ]
    );
    let create = fake.journal_of(GROUP)[1].body.clone().expect("the body");
    assert_eq!(create, json!({"Type": "AVChatRoom", "Name": "Room one", "GroupId": GROUP}));
    let recorded: Vec<_> = fake.messages(GROUP).into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(recorded, ["e2", "e3"], "the close message before the destruction; RoomCreated sent none");
    let group = fake.group(GROUP).expect("created once");
    assert!(group.destroyed && !group.exists);
}

#[tokio::test]
async fn a_second_creation_and_the_destruction_of_a_gone_group_count_as_done() {
    let (fake, leaf) = fake_requiring_groups(None).await;
    assert_eq!(publish(&leaf, created("e1")).await.unwrap(), Outcome::Delivered);
    assert_eq!(publish(&leaf, created("e1")).await.unwrap(), Outcome::Delivered, "10025: ours already");
    let destroy_alone =
        || one(event("e9", "RoomClosed", Some(call(AdminApi::DestroyGroup, json!({}), None, false))));
    assert_eq!(publish(&leaf, destroy_alone()).await.unwrap(), Outcome::Delivered);
    assert_eq!(publish(&leaf, destroy_alone()).await.unwrap(), Outcome::Delivered, "10010: gone already");
    let stats = fake.stats();
    assert_eq!(stats.rejected, 2, "Tencent refused both repeats: {stats:?}");
    assert_eq!(fake.group(GROUP).map(|g| g.created), Some(1));
}

#[tokio::test]
async fn a_mute_is_sent_as_the_seconds_left_so_a_late_one_lifts_it() {
    let (fake, leaf) = fake_requiring_groups(None).await;
    fake.seed_group(GROUP);
    let mute =
        |until_ms| call(AdminApi::ForbidSendMsg, json!({"Members_Account": ["u1"]}), Some(until_ms), true);
    let muted = one(event("m1", "RoomUserMuted", Some(mute(now_ms() + 90_000))));
    assert_eq!(publish(&leaf, muted).await.unwrap(), Outcome::Delivered);
    let late = one(event("m2", "RoomUserMuted", Some(mute(now_ms() - 5_000))));
    assert_eq!(publish(&leaf, late).await.unwrap(), Outcome::Delivered);

    let sent: Vec<Value> = fake
        .journal_of(GROUP)
        .into_iter()
        .filter(|e| e.api == "forbid_send_msg")
        .filter_map(|e| e.body)
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], json!({"GroupId": GROUP, "Members_Account": ["u1"], "MuteTime": 90}));
    assert_eq!(sent[1]["MuteTime"], 0, "past its end: lifted, never lengthened");
    assert!(fake.group(GROUP).unwrap().muted.is_empty());
    let elements: Vec<_> = fake.messages(GROUP).into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(elements, ["m1", "m2"], "each mute's message went first");
}

#[tokio::test]
async fn the_avchatroom_quota_parks_the_creation_naming_its_code() {
    let (fake, leaf) = fake_requiring_groups(Some(0)).await;
    let (class, text) = fail(&leaf, created("e1")).await;
    assert_eq!(class, ErrorClass::Permanent, "{text}");
    assert!(text.contains("10036") && text.contains("quota") && text.contains("create_group"), "{text}");
    assert!(fake.group(GROUP).is_none());
}

#[tokio::test]
async fn an_admin_call_refused_for_its_usersig_is_sent_again_with_a_fresh_one() {
    let (fake, leaf) = fake_requiring_groups(None).await;
    fake.inject_admin(Fault::ErrorCode(70001), 1);
    leaf.usersig_cache().get();
    assert_eq!(leaf.usersig_cache().generations(), 1);
    assert_eq!(publish(&leaf, created("e1")).await.unwrap(), Outcome::Delivered);
    assert_eq!(leaf.usersig_cache().generations(), 2, "regenerated once");
    let calls: Vec<String> = fake.journal_of(GROUP).into_iter().map(|e| e.api).collect();
    assert_eq!(calls, ["create_group", "create_group"]);
    assert!(fake.group_exists(GROUP));
}

#[tokio::test]
async fn a_pack_with_admin_calls_sends_its_message_then_each_call_in_order() {
    let (fake, leaf) = fake_requiring_groups(None).await;
    fake.seed_group(GROUP);
    let until = now_ms() + 60_000;
    let mute = call(AdminApi::ForbidSendMsg, json!({"Members_Account": ["u1"]}), Some(until), true);
    let mute_all = call(AdminApi::ModifyGroupBaseInfo, json!({"MuteAllMember": "On"}), None, false);
    let events = vec![
        event("p1", "RoomUserMuted", Some(mute)),
        event("p2", "RoomUserJoined", None),
        event("p3", "RoomMuteAllChanged", Some(mute_all)),
    ];
    let pack = Message::new("room-1".into(), Path::Worker, events);
    assert_eq!(publish(&leaf, pack).await.unwrap(), Outcome::Delivered);
    let calls: Vec<String> = fake.journal_of(GROUP).into_iter().map(|e| e.api).collect();
    assert_eq!(calls, ["send_group_msg", "forbid_send_msg", "modify_group_base_info"]);
    let elements: Vec<_> = fake.messages(GROUP).into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(elements, ["p1", "p2"], "the call that goes alone sends no element");
    let group = fake.group(GROUP).unwrap();
    assert!(group.mute_all && group.muted.contains_key("u1"));
}
