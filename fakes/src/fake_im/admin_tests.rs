//! The fake's group admin APIs over real loopback HTTP with a bare reqwest client: each API's
//! answers and the state it leaves, `require_groups` mode, the journal, per-API limits.

use serde_json::{Value, json};

use super::super::{FakeIm, FakeImOptions, Fault, SEND_GROUP_MSG_PATH};
use super::*;
use room_service::publish::tencent::usersig::{generate, system_now_secs};
use room_service::publish::tencent::wire::random_for;

const APP: u64 = 1_400_000_002;
const KEY: &str = "fake-admin-secret";
const ADMIN: &str = "administrator";

/// Options under which a message needs no group (the tests of `require_groups` set it).
fn options() -> FakeImOptions {
    FakeImOptions { require_groups: false, ..FakeImOptions::new(APP, KEY, ADMIN) }
}

async fn post(fake: &FakeIm, path: &str, body: &Value) -> Answer {
    let sig = generate(KEY, APP, ADMIN, 3600, system_now_secs());
    let url = format!(
        "{}{path}?sdkappid={APP}&identifier={ADMIN}&usersig={sig}&random=7&contenttype=json",
        fake.base_url()
    );
    let resp = reqwest::Client::new().post(url).json(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// Calls `api` with `body` and answers its `ErrorCode`.
async fn code(fake: &FakeIm, api: AdminApi, body: Value) -> i64 {
    post(fake, &api.path(), &body).await.error_code.unwrap()
}

/// Sends a message of one event `event_id` to `group` and answers its `ErrorCode`.
async fn send(fake: &FakeIm, group: &str, event_id: &str) -> i64 {
    let body = json!({
        "GroupId": group, "Random": random_for(event_id),
        "MsgBody": [{"MsgType": "TIMCustomElem", "MsgContent": {"Data": "{}", "Desc": "T"}}],
        "CloudCustomData": json!({"event_ids": [event_id]}).to_string(),
    });
    post(fake, SEND_GROUP_MSG_PATH, &body).await.error_code.unwrap()
}

fn create(group: &str) -> Value {
    json!({"Type": "AVChatRoom", "GroupId": group, "Name": "Live"})
}

#[tokio::test]
async fn create_group_checks_its_body_and_answers_10025_for_a_group_that_exists() {
    let fake = FakeIm::start(options()).await;
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("live_r1")).await, 0);
    let group = fake.group("live_r1").expect("created");
    assert!(group.exists && !group.destroyed);
    assert_eq!((group.group_type.as_str(), group.name.as_deref()), ("AVChatRoom", Some("Live")));
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("live_r1")).await, 10025);
    let bad = [
        json!({"Type": "Public", "GroupId": "g", "Name": "n"}),
        create("@TGS#abc"),
        create(&"g".repeat(49)),
        create("a b"),
        json!({"Type": "AVChatRoom", "GroupId": "g", "Name": "n".repeat(31)}),
        json!({"Type": "AVChatRoom", "Name": "n"}),
    ];
    for body in bad {
        assert_eq!(code(&fake, AdminApi::CreateGroup, body.clone()).await, 10004, "{body}");
    }
    assert_eq!(code(&fake, AdminApi::CreateGroup, create(&"g".repeat(48))).await, 0);
}

#[tokio::test]
async fn the_avchatroom_quota_counts_live_groups() {
    let fake = FakeIm::start(FakeImOptions { avchatroom_quota: Some(1), ..options() }).await;
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("a")).await, 0);
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("b")).await, 10036);
    assert_eq!(code(&fake, AdminApi::DestroyGroup, json!({"GroupId": "a"})).await, 0);
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("b")).await, 0);
    let none = FakeIm::start(FakeImOptions { avchatroom_quota: Some(0), ..options() }).await;
    let answer = post(&none, &AdminApi::CreateGroup.path(), &create("c")).await;
    assert_eq!(answer.error_code, Some(10036));
    assert!(answer.error_info.unwrap().contains("quota"));
}

#[tokio::test]
async fn destroy_group_answers_10010_for_a_group_never_created_or_gone() {
    let fake = FakeIm::start(options()).await;
    let destroy = || json!({"GroupId": "live_r1"});
    assert_eq!(code(&fake, AdminApi::DestroyGroup, destroy()).await, 10010);
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("live_r1")).await, 0);
    assert_eq!(code(&fake, AdminApi::DestroyGroup, destroy()).await, 0);
    let group = fake.group("live_r1").unwrap();
    assert!(!group.exists && group.destroyed);
    assert_eq!(code(&fake, AdminApi::DestroyGroup, destroy()).await, 10010);
    // Created again, it is live again.
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("live_r1")).await, 0);
    assert_eq!(fake.group("live_r1").map(|g| (g.exists, g.created)), Some((true, 2)));
}

#[tokio::test]
async fn forbid_send_msg_records_each_mute_end_and_0_lifts_it() {
    let fake = FakeIm::start(options()).await;
    let mute = |secs: u64| json!({"GroupId": "g", "Members_Account": ["u1", "u2"], "MuteTime": secs});
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, mute(60)).await, 10010, "no group yet");
    fake.seed_group("g");
    let before = system_now_secs();
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, mute(60)).await, 0);
    let muted = fake.group("g").unwrap().muted;
    assert_eq!(muted.len(), 2);
    assert!(muted.values().all(|end| (before + 60..=system_now_secs() + 60).contains(end)), "{muted:?}");
    let lift = json!({"GroupId": "g", "Members_Account": ["u1"], "MuteTime": 0});
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, lift).await, 0);
    assert_eq!(fake.group("g").unwrap().muted.keys().collect::<Vec<_>>(), ["u2"]);
    let too_many: Vec<String> = (0..501).map(|i| format!("u{i}")).collect();
    let over = json!({"GroupId": "g", "Members_Account": too_many, "MuteTime": 5});
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, over).await, 10004);
    let none = json!({"GroupId": "g", "Members_Account": [], "MuteTime": 5});
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, none).await, 10004);
}

#[tokio::test]
async fn modify_group_base_info_records_what_it_sets_and_refuses_values_over_the_sdk_lengths() {
    let fake = FakeIm::start(options()).await;
    let info = json!({"GroupId": "g", "MuteAllMember": "On", "Notification": "n", "FaceUrl": "https://f"});
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, info.clone()).await, 10010);
    fake.seed_group("g");
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, info).await, 0);
    let rename = json!({"GroupId": "g", "Name": "直播间"});
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, rename).await, 0);
    let group = fake.group("g").unwrap();
    assert!(group.mute_all);
    assert_eq!(group.name.as_deref(), Some("直播间"));
    assert_eq!(group.notification.as_deref(), Some("n"), "a field not named is kept");
    assert_eq!(group.face_url.as_deref(), Some("https://f"));
    let off = json!({"GroupId": "g", "MuteAllMember": "Off"});
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, off).await, 0);
    assert!(!fake.group("g").unwrap().mute_all);
    for (field, len) in [("Name", 31), ("Notification", 301), ("FaceUrl", 101), ("Introduction", 241)] {
        let body = json!({"GroupId": "g", field: "x".repeat(len)});
        assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, body).await, 10004, "{field}");
    }
    // Eleven 3-byte characters are 33 bytes: over the Name's 30 although 11 characters.
    let long = json!({"GroupId": "g", "Name": "直".repeat(11)});
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, long).await, 10004);
    let maybe = json!({"GroupId": "g", "MuteAllMember": "Maybe"});
    assert_eq!(code(&fake, AdminApi::ModifyGroupBaseInfo, maybe).await, 10004);
}

#[tokio::test]
async fn ban_and_unban_take_20_accounts_and_need_the_paid_edition() {
    let fake = FakeIm::start(options()).await;
    let ban = json!({"GroupId": "g", "Members_Account": ["u1"], "Duration": 600, "Description": "spam"});
    assert_eq!(code(&fake, AdminApi::BanGroupMember, ban.clone()).await, 10010);
    fake.seed_group("g");
    assert_eq!(code(&fake, AdminApi::BanGroupMember, ban.clone()).await, 0);
    let end = fake.group("g").unwrap().banned["u1"];
    assert!(end >= system_now_secs() + 599, "{end}");
    let too_many: Vec<String> = (0..21).map(|i| format!("u{i}")).collect();
    let over = json!({"GroupId": "g", "Members_Account": too_many, "Duration": 5});
    assert_eq!(code(&fake, AdminApi::BanGroupMember, over).await, 10004);
    let unban = json!({"GroupId": "g", "Members_Account": ["u1"]});
    assert_eq!(code(&fake, AdminApi::UnbanGroupMember, unban.clone()).await, 0);
    assert!(fake.group("g").unwrap().banned.is_empty());

    let unpaid = FakeIm::start(FakeImOptions { ban_enabled: false, ..options() }).await;
    unpaid.seed_group("g");
    assert_eq!(code(&unpaid, AdminApi::BanGroupMember, ban).await, 10007);
    assert_eq!(code(&unpaid, AdminApi::UnbanGroupMember, unban).await, 10007);
}

#[tokio::test]
async fn in_require_groups_mode_a_message_needs_its_group_to_exist() {
    assert!(FakeImOptions::new(APP, KEY, ADMIN).require_groups, "on by default, as Tencent");
    let fake = FakeIm::start(options()).await;
    assert_eq!(send(&fake, "g", "e0").await, 0, "off in these options: every group exists");
    let switch = reqwest::Client::new().post(format!("{}/fake/require_groups", fake.base_url()));
    assert_eq!(switch.json(&json!({"on": true})).send().await.unwrap().status(), 204);
    assert!(fake.require_groups());
    assert_eq!(send(&fake, "g", "e1").await, 10010, "never created");
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("g")).await, 0);
    assert_eq!(send(&fake, "g", "e2").await, 0);
    assert_eq!(code(&fake, AdminApi::DestroyGroup, json!({"GroupId": "g"})).await, 0);
    assert_eq!(send(&fake, "g", "e3").await, 10010, "destroyed");
    let recorded: Vec<_> = fake.messages("g").into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(recorded, ["e0", "e2"]);

    let on = FakeIm::start(FakeImOptions { require_groups: true, ..options() }).await;
    assert_eq!(send(&on, "g", "e1").await, 10010);
    on.clear();
    assert!(on.require_groups(), "a reset goes back to the option");
}

#[tokio::test]
async fn the_journal_keeps_every_call_in_arrival_order_until_a_reset() {
    let fake = FakeIm::start(options()).await;
    fake.inject_admin(Fault::ErrorCode(10002), 1);
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("g")).await, 10002, "admin calls have their faults");
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("g")).await, 0);
    assert_eq!(send(&fake, "g", "e1").await, 0);
    assert_eq!(send(&fake, "other", "e2").await, 0);
    let mute = json!({"GroupId": "g", "Members_Account": ["u1"], "MuteTime": 30});
    assert_eq!(code(&fake, AdminApi::ForbidSendMsg, mute.clone()).await, 0);
    let apis: Vec<String> = fake.journal_of("g").into_iter().map(|e| e.api).collect();
    assert_eq!(apis, ["create_group", "create_group", "send_group_msg", "forbid_send_msg"]);
    let journal = fake.journal();
    assert_eq!(journal.len(), 5);
    assert_eq!(journal[2].event_ids, ["e1"]);
    assert_eq!(journal[4].body, Some(mute));
    let url = format!("{}/fake/journal?group=g", fake.base_url());
    let over_http: Vec<JournalEntry> = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(over_http, fake.journal_of("g"));
    let groups: serde_json::Map<String, Value> =
        reqwest::get(format!("{}/fake/groups", fake.base_url())).await.unwrap().json().await.unwrap();
    assert_eq!(groups["g"]["exists"], true);
    fake.inject(Fault::ErrorCode(10002), 1);
    assert_eq!(
        code(&fake, AdminApi::CreateGroup, create("h")).await,
        0,
        "a message's fault is no admin call's"
    );
    assert_eq!(send(&fake, "h", "e3").await, 10002);
    fake.clear();
    assert!(fake.journal().is_empty(), "the records go");
    assert!(fake.group_exists("g"), "the groups stay");
}

#[tokio::test]
async fn each_api_has_its_own_call_limit() {
    let fake = FakeIm::start(FakeImOptions { global_limit_per_sec: Some(1), ..options() }).await;
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("a")).await, 0);
    assert_eq!(code(&fake, AdminApi::CreateGroup, create("b")).await, 60007);
    assert_eq!(code(&fake, AdminApi::DestroyGroup, json!({"GroupId": "a"})).await, 0);
    assert_eq!(send(&fake, "a", "e1").await, 0, "send_group_msg counts apart");
    assert_eq!(send(&fake, "a", "e2").await, 60007);
}
