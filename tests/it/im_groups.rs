//! The IM group's lifecycle against the fake IM requiring groups (SPEC §14.2), as real Tencent
//! IM behaves: a message to a group never created, or destroyed, is refused with 10010. With
//! `tencent_im.manage_groups` the service creates the room's group before its first message and
//! destroys it after its close message, and mirrors moderation on the group, each call in room
//! order with the room's messages — whatever `in_flight_per_room`, on the command path and on
//! the outbox worker's.

use std::time::{Duration, Instant};

use room_service_fakes::fake_im::{FakeIm, FakeImOptions, Fault, JournalEntry};
use serde_json::{Value, json};

use crate::support::app::{SDK_APP_ID, SECRET_KEY, TestApp, fake_im, settings};
use crate::support::{TestDb, backends};

/// A fake requiring groups (Tencent's behaviour; the tests' fake always does).
async fn strict_im() -> FakeIm {
    let im = fake_im().await;
    assert!(im.require_groups());
    im
}

async fn post_ok(app: &TestApp, path: &str, body: Value) -> Value {
    let (status, answer) = app.post(path, body).await;
    assert_eq!(status, 200, "{path}: {answer}");
    answer
}

/// A live of room `room`: created, joined, a gift, a mute, mute-all, info, a kick with a ban,
/// an unban, closed — every moderation route, as its owner.
async fn a_live(app: &TestApp, room: &str) {
    let id = |what: &str| format!("{room}-{what}");
    let create = json!({"command_id": id("c"), "room_id": room, "owner_id": "host", "title": "直播间 Live"});
    post_ok(app, "/v1/rooms", create).await;
    let path = |action: &str| format!("/v1/rooms/{room}/{action}");
    for user in ["ann", "bob"] {
        post_ok(app, &path("join"), json!({"command_id": id(&format!("j-{user}")), "user_id": user})).await;
    }
    let gift = json!({"command_id": id("g"), "sender_id": "ann", "receiver_id": "host", "gift_id": "rose",
        "count": 1, "unit_value": 5});
    post_ok(app, &path("gifts"), gift).await;
    let host = |command_id: &str, body: Value| {
        let mut body = body;
        body["command_id"] = format!("{room}-{command_id}").into();
        body["actor_id"] = "host".into();
        body
    };
    post_ok(app, &path("mutes"), host("m", json!({"user_id": "bob", "duration_s": 600}))).await;
    post_ok(app, &path("mute_all"), host("ma", json!({"muted": true}))).await;
    post_ok(app, &path("info"), host("i", json!({"announcement": "公告".repeat(150)}))).await;
    post_ok(app, &path("kicks"), host("k", json!({"user_id": "bob", "ban_s": 300, "reason": "spam"}))).await;
    post_ok(app, &path("unban"), host("u", json!({"user_id": "bob"}))).await;
    post_ok(app, &path("close"), json!({"command_id": id("x"), "actor_id": "host"})).await;
}

/// Waits until the group's journal ends with `destroy_group` (the live's last call).
async fn journal_until_destroyed(im: &FakeIm, group: &str) -> Vec<JournalEntry> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let journal = im.journal_of(group);
        if journal.last().is_some_and(|e| e.api == "destroy_group") && !im.group_exists(group) {
            return journal;
        }
        assert!(Instant::now() < until, "the group was never destroyed: {journal:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The calls as `api` names, with each message's event types (`send_group_msg:RoomUserJoined`),
/// in arrival order; the refused ones kept out.
fn calls(im: &FakeIm, journal: &[JournalEntry], group: &str) -> Vec<String> {
    let types: std::collections::HashMap<String, String> =
        im.messages(group).into_iter().filter_map(|m| Some((m.event_id?, m.desc))).collect();
    journal
        .iter()
        .map(|e| match e.api.as_str() {
            "send_group_msg" => {
                let names: Vec<&str> =
                    e.event_ids.iter().map(|id| types.get(id).map_or("?", String::as_str)).collect();
                format!("send_group_msg:{}", names.join(","))
            }
            api => api.to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn a_lives_group_is_created_first_destroyed_last_and_moderated_in_room_order() {
    for db in backends().await {
        for k in ["1", "4"] {
            let im = strict_im().await;
            let overrides = [("im_batch.in_flight_per_room", k), ("tencent_im.avchatroom_ban", "true")];
            let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
            // One database for both k: a room (and its command ids) of its own each.
            let room = format!("live-{k}");
            a_live(&app, &room).await;
            let journal = journal_until_destroyed(&im, &room).await;
            let calls = calls(&im, &journal, &room);
            assert_eq!(im.stats().rejected, 0, "{db} k={k}: no call was refused: {calls:#?}");
            let admin: Vec<&str> =
                calls.iter().map(String::as_str).filter(|c| !c.starts_with("send_group_msg")).collect();
            assert_eq!(
                admin,
                [
                    "create_group",
                    "forbid_send_msg",
                    "modify_group_base_info",
                    "modify_group_base_info",
                    "ban_group_member",
                    "unban_group_member",
                    "destroy_group"
                ],
                "{db} k={k}"
            );
            assert_eq!(calls.first().map(String::as_str), Some("create_group"), "{db} k={k}: {calls:#?}");
            // Each admin call right after its own event's message, the close's message before
            // the destruction.
            for (call, event) in [
                ("forbid_send_msg", "RoomUserMuted"),
                ("ban_group_member", "RoomUserKicked"),
                ("unban_group_member", "RoomUserUnbanned"),
                ("destroy_group", "RoomClosed"),
            ] {
                let at = calls.iter().position(|c| c == call).expect(call);
                assert!(
                    calls[at - 1].ends_with(event),
                    "{db} k={k}: {call} after {}: {calls:#?}",
                    calls[at - 1]
                );
            }
            let create = journal[0].body.clone().expect("create_group's body");
            assert_eq!(
                (create["Type"].as_str(), create["GroupId"].as_str()),
                (Some("AVChatRoom"), Some(room.as_str()))
            );
            assert!(create["Name"].as_str().unwrap().len() <= 30, "{create}");
            let info = journal.iter().filter(|e| e.api == "modify_group_base_info").nth(1).unwrap();
            let notification = info.body.as_ref().unwrap()["Notification"].as_str().unwrap().to_owned();
            assert!(
                notification.len() <= 300 && "公告".repeat(150).starts_with(&notification),
                "cut, never refused"
            );
            let mute = journal.iter().find(|e| e.api == "forbid_send_msg").unwrap().body.clone().unwrap();
            let mute_time = mute["MuteTime"].as_u64().unwrap();
            assert!((590..=600).contains(&mute_time), "the seconds left: {mute}");
            app.stop().await;
        }
    }
}

#[tokio::test]
async fn without_manage_groups_the_service_assumes_the_groups_exist() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    im.set_require_groups(false);
    let app = TestApp::start(settings(db.url(), Some(&im), &[("tencent_im.manage_groups", "false")])).await;
    a_live(&app, "old").await;
    app.settle().await;
    let apis: Vec<String> = im.journal_of("old").into_iter().map(|e| e.api).collect();
    assert!(!apis.is_empty() && apis.iter().all(|api| api == "send_group_msg"), "{apis:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_creation_the_lane_could_not_make_goes_to_the_worker_which_creates_before_any_message() {
    let db = TestDb::mysql().await;
    let im = strict_im().await;
    // IM fails the creation twice (a server error): the lane hands the room to the worker,
    // whose retries must still create the group before any message of the room.
    im.inject_admin(Fault::ErrorCode(10002), 2);
    let overrides = [
        ("outbox_worker.enabled", "true"),
        ("outbox_worker.poll_interval", "100ms"),
        ("outbox_worker.retry_base", "200ms"),
        ("im_batch.in_flight_per_room", "4"),
    ];
    let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
    post_ok(&app, "/v1/rooms", json!({"command_id": "c", "room_id": "w", "owner_id": "host", "title": "t"}))
        .await;
    for i in 0..20 {
        post_ok(&app, "/v1/rooms/w/join", json!({"command_id": format!("j{i}"), "user_id": format!("u{i}")}))
            .await;
    }
    post_ok(&app, "/v1/rooms/w/close", json!({"command_id": "x", "actor_id": "host"})).await;
    let journal = journal_until_destroyed(&im, "w").await;
    let first_message = journal.iter().position(|e| e.api == "send_group_msg").expect("messages");
    let created = journal.iter().rposition(|e| e.api == "create_group").expect("a creation");
    assert!(created < first_message, "{journal:#?}");
    let refused = im.stats().rejected;
    assert_eq!(refused, 2, "the two creations IM failed, and no message to a missing group");
    let joined: usize = im.messages("w").iter().filter(|m| m.desc == "RoomUserJoined").count();
    assert_eq!(joined, 20);
    app.stop().await;
}

#[tokio::test]
async fn a_full_avchatroom_quota_parks_the_creation_with_its_code_and_the_rooms_messages_as_10010() {
    let db = TestDb::sqlite().await;
    let mut options = FakeImOptions::new(SDK_APP_ID, SECRET_KEY, "administrator");
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    (options.require_groups, options.avchatroom_quota) = (true, Some(0));
    let im = FakeIm::start(options).await;
    let overrides = [("outbox_worker.enabled", "true"), ("outbox_worker.poll_interval", "100ms")];
    let app = TestApp::start(settings(db.url(), Some(&im), &overrides)).await;
    post_ok(&app, "/v1/rooms", json!({"command_id": "c", "room_id": "q", "owner_id": "host", "title": "t"}))
        .await;
    post_ok(&app, "/v1/rooms/q/join", json!({"command_id": "j", "user_id": "ann"})).await;
    let until = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let (_, page) = app.admin_get("/admin/outbox?status=failed").await;
        let rows = page["rows"].as_array().cloned().unwrap_or_default();
        if rows.len() >= 2 {
            break rows;
        }
        assert!(Instant::now() < until, "not parked: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let error_of = |event_type: &str| {
        let row =
            failed.iter().find(|r| r["event_type"] == event_type).unwrap_or_else(|| panic!("{failed:?}"));
        row["last_error"].as_str().unwrap_or_default().to_owned()
    };
    assert!(error_of("RoomCreated").contains("10036"), "{}", error_of("RoomCreated"));
    assert!(error_of("RoomUserJoined").contains("10010"), "{}", error_of("RoomUserJoined"));
    app.stop().await;
}

#[tokio::test]
async fn a_replayed_creation_says_its_group_call_was_delivered_not_skipped() {
    let db = TestDb::sqlite().await;
    let im = strict_im().await;
    let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
    let create = json!({"command_id": "c", "room_id": "rp", "owner_id": "host", "title": "t"});
    let first = post_ok(&app, "/v1/rooms", create.clone()).await;
    assert_eq!(first["events"][0]["delivery"], "delivered", "{first}");
    app.settle().await;
    let again = post_ok(&app, "/v1/rooms", create).await;
    assert_eq!(
        (again["replayed"].as_bool(), &again["events"][0]["delivery"]),
        (Some(true), &json!("delivered"))
    );
    assert!(im.group_exists("rp"));
    app.stop().await;
}

/// Text IM refuses (its sensitive words) in a moderator's announcement costs only that event:
/// the refused `RoomInfoChanged` is parked alone (its group call never made: the message goes
/// first), and the room's later messages and group calls go out in order.
#[tokio::test]
async fn an_announcement_im_refuses_is_parked_alone_and_the_room_goes_on() {
    let db = TestDb::sqlite().await;
    let im = strict_im().await;
    im.set_sensitive_words(vec!["forbidden-word".into()]);
    let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
    post_ok(&app, "/v1/rooms", json!({"command_id": "c", "room_id": "sw", "owner_id": "host", "title": "t"}))
        .await;
    let info = json!({"command_id": "i", "actor_id": "host", "announcement": "a forbidden-word here"});
    let answer = post_ok(&app, "/v1/rooms/sw/info", info).await;
    assert_eq!(answer["events"][0]["delivery"], "pending", "{answer}");
    post_ok(&app, "/v1/rooms/sw/join", json!({"command_id": "j", "user_id": "ann"})).await;
    post_ok(&app, "/v1/rooms/sw/mute_all", json!({"command_id": "m", "actor_id": "host", "muted": true}))
        .await;
    post_ok(&app, "/v1/rooms/sw/close", json!({"command_id": "x", "actor_id": "host"})).await;
    let journal = journal_until_destroyed(&im, "sw").await;
    let delivered: Vec<String> = im.messages("sw").into_iter().map(|m| m.desc).collect();
    assert_eq!(delivered, ["RoomUserJoined", "RoomMuteAllChanged", "RoomClosed"], "{journal:#?}");
    let infos = journal.iter().filter(|e| e.api == "modify_group_base_info").count();
    assert_eq!(infos, 1, "only mute-all's call: the refused info made none");
    app.settle().await;
    let (_, failed) = app.admin_get("/admin/outbox?status=failed").await;
    let parked: Vec<&str> =
        failed["rows"].as_array().unwrap().iter().filter_map(|r| r["event_type"].as_str()).collect();
    assert_eq!(parked, ["RoomInfoChanged"], "{failed}");
    app.stop().await;
}
