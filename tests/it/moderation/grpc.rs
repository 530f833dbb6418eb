//! The moderation methods over gRPC (SPEC §14.2), under `auth.mode: none` with `actor_id`:
//! they answer like their HTTP routes, a member's moderation is PERMISSION_DENIED (`forbidden`),
//! a banned join FAILED_PRECONDITION (`banned`, with `until-ms`), ListModeration pages, and
//! GetRoom shows admins, info and attributes.

use std::collections::HashMap;

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use tonic::Code;
use tonic::transport::Channel;

use super::cid;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

fn metadata<'a>(status: &'a tonic::Status, key: &str) -> &'a str {
    status.metadata().get(key).map_or("", |v| v.to_str().unwrap())
}

fn member(room: &str, user: &str) -> pb::MemberRequest {
    pb::MemberRequest { command_id: cid("j"), room_id: room.into(), user_id: user.into() }
}

fn mute(actor: &str, user: &str, duration_s: u32) -> pb::MuteUserRequest {
    pb::MuteUserRequest {
        command_id: cid("m"),
        room_id: "r1".into(),
        actor_id: actor.into(),
        user_id: user.into(),
        duration_s,
    }
}

fn kick(actor: &str, user: &str, ban_s: Option<u32>) -> pb::KickUserRequest {
    pb::KickUserRequest {
        command_id: cid("k"),
        room_id: "r1".into(),
        actor_id: actor.into(),
        user_id: user.into(),
        ban_s,
        reason: "spam".into(),
    }
}

#[tokio::test]
async fn the_moderation_methods_answer_over_grpc_like_their_routes() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
        let mut rooms = RoomServiceClient::new(channel);
        let create = pb::CreateRoomRequest {
            seats: None,
            command_id: cid("c"),
            room_id: "r1".into(),
            owner_id: "alice".into(),
            title: "t".into(),
        };
        rooms.create_room(create).await.expect("create");
        for user in ["adm", "bob", "carol", "dave"] {
            rooms.join_room(member("r1", user)).await.expect("join");
        }
        let appoint = |actor: &str| pb::SetAdminRequest {
            command_id: cid("a"),
            room_id: "r1".into(),
            actor_id: actor.into(),
            user_id: "adm".into(),
            admin: true,
        };
        let denied = rooms.set_admin(appoint("adm")).await.expect_err("an admin appoints nobody");
        assert_eq!((denied.code(), metadata(&denied, "error-code")), (Code::PermissionDenied, "forbidden"));
        let appointed = rooms.set_admin(appoint("alice")).await.expect("appoint").into_inner();
        assert_eq!(appointed.events[0].event_type, "RoomRoleChanged", "{db}");

        // A member's MuteUser: PERMISSION_DENIED naming the role, nothing written.
        let before = (db.count("room_command_log").await, db.count("room_outbox").await);
        let denied = rooms.mute_user(mute("bob", "carol", 60)).await.expect_err("a member");
        assert_eq!(
            (denied.code(), metadata(&denied, "error-code")),
            (Code::PermissionDenied, "forbidden"),
            "{db}"
        );
        assert!(denied.message().contains("admin"), "{db}: {}", denied.message());
        let bad = rooms.mute_user(mute("adm", "carol", 31 * 24 * 3600)).await.expect_err("over 30 days");
        assert_eq!(bad.code(), Code::InvalidArgument, "{db}");
        assert!(bad.message().starts_with("duration_s"), "{db}: {}", bad.message());
        let none = rooms.mute_user(mute("", "carol", 60)).await.expect_err("no actor under auth none");
        assert_eq!(none.code(), Code::InvalidArgument, "{db}");
        assert!(none.message().starts_with("actor_id"), "{db}: {}", none.message());
        assert_eq!(before, (db.count("room_command_log").await, db.count("room_outbox").await), "{db}");

        // The admin mutes and kicks; the kicked rejoin is FAILED_PRECONDITION with until-ms.
        rooms.mute_user(mute("adm", "carol", 60)).await.expect("mute");
        let kicked = rooms.kick_user(kick("adm", "bob", None)).await.expect("kick").into_inner();
        assert_eq!(kicked.events[0].event_type, "RoomUserKicked", "{db}");
        let banned = rooms.join_room(member("r1", "bob")).await.expect_err("banned");
        assert_eq!(
            (banned.code(), metadata(&banned, "error-code")),
            (Code::FailedPrecondition, "banned"),
            "{db}"
        );
        let until_ms: i64 = metadata(&banned, "until-ms").parse().expect("until-ms");
        let now = db.now_ms().await;
        assert!(
            (now + 50_000..=now + 60_000).contains(&until_ms),
            "{db}: the default 60 s: {until_ms} vs {now}"
        );
        let not_member = rooms.kick_user(kick("adm", "zed", Some(0))).await.expect_err("not a member");
        assert_eq!(metadata(&not_member, "error-code"), "not_member", "{db}");
        rooms.kick_user(kick("adm", "dave", Some(600))).await.expect("kick dave");

        // ListModeration pages: bob's and dave's bans, carol's mute, one user a page.
        let page = |after: &str, kind: &str| pb::ListModerationRequest {
            room_id: "r1".into(),
            kind: kind.into(),
            after: after.into(),
            limit: 1,
        };
        let (mut seen, mut after) = (Vec::new(), String::new());
        loop {
            let got = rooms.list_moderation(page(&after, "")).await.expect("list").into_inner();
            seen.extend(got.entries.iter().map(|e| (e.user_id.clone(), e.kind.clone(), e.by.clone())));
            if got.next_after.is_empty() {
                break;
            }
            after = got.next_after;
        }
        let expected = [("bob", "ban"), ("carol", "mute"), ("dave", "ban")];
        let expected: Vec<_> =
            expected.iter().map(|(u, k)| (u.to_string(), k.to_string(), "adm".to_owned())).collect();
        assert_eq!(seen, expected, "{db}");
        let bans = rooms.list_moderation(page("", "ban")).await.expect("bans").into_inner();
        assert_eq!((bans.entries[0].user_id.as_str(), bans.next_after.as_str()), ("bob", "bob"), "{db}");
        let bad = rooms.list_moderation(page("", "gag")).await.expect_err("bad kind");
        assert_eq!(bad.code(), Code::InvalidArgument, "{db}");
        assert!(bad.message().starts_with("kind"), "{db}: {}", bad.message());

        // UnbanUser lifts it.
        let unban = pb::UnbanUserRequest {
            command_id: cid("u"),
            room_id: "r1".into(),
            actor_id: "adm".into(),
            user_id: "bob".into(),
        };
        rooms.unban_user(unban).await.expect("unban");
        rooms.join_room(member("r1", "bob")).await.expect("unbanned, bob rejoins");

        // MuteAll, UpdateRoomInfo, SetAttributes: GetRoom shows them.
        let all = pb::MuteAllRequest {
            command_id: cid("ma"),
            room_id: "r1".into(),
            actor_id: "adm".into(),
            muted: true,
        };
        rooms.mute_all(all).await.expect("mute all");
        let info = pb::UpdateRoomInfoRequest {
            seat_mode: None,
            command_id: cid("i"),
            room_id: "r1".into(),
            actor_id: "alice".into(),
            title: None,
            announcement: Some("welcome".into()),
            cover_url: Some("https://cdn.test/c.png".into()),
        };
        rooms.update_room_info(info).await.expect("info");
        let write = |set: &[(&str, &str)], expect: &[(&str, u64)]| pb::SetAttributesRequest {
            command_id: cid("at"),
            room_id: "r1".into(),
            actor_id: "adm".into(),
            set: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            delete: vec![],
            expect: expect.iter().map(|(k, v)| (k.to_string(), *v)).collect::<HashMap<_, _>>(),
        };
        let written =
            rooms.set_attributes(write(&[("topic", "music")], &[])).await.expect("attrs").into_inner();
        let conflict =
            rooms.set_attributes(write(&[("topic", "talk")], &[("topic", 1)])).await.expect_err("stale");
        assert_eq!(
            (conflict.code(), metadata(&conflict, "error-code")),
            (Code::FailedPrecondition, "attribute_conflict"),
            "{db}: {conflict:?}"
        );
        let got =
            rooms.get_room(pb::GetRoomRequest { room_id: "r1".into() }).await.expect("get").into_inner();
        assert_eq!(got.admins, ["adm"], "{db}");
        assert!(got.muted_all, "{db}");
        assert_eq!(
            (got.announcement.as_str(), got.cover_url.as_str()),
            ("welcome", "https://cdn.test/c.png")
        );
        let topic = got.attributes.get("topic").expect("topic");
        assert_eq!((topic.value.as_str(), topic.version), ("music", written.room_version), "{db}");
        app.stop().await;
    }
}

/// As a hostile client would over gRPC: the same mute sent 20 times at once is applied once
/// (the rest replay it), a reason past its limit is INVALID_ARGUMENT naming it, an unknown room
/// NOT_FOUND, a member's SetAttributes PERMISSION_DENIED — none of them writes a thing.
#[tokio::test]
async fn hostile_moderation_calls_over_grpc_cost_nothing_but_their_own_answer() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
        let mut rooms = RoomServiceClient::new(channel);
        let create = pb::CreateRoomRequest {
            seats: None,
            command_id: cid("c"),
            room_id: "r1".into(),
            owner_id: "alice".into(),
            title: "t".into(),
        };
        rooms.create_room(create).await.expect("create");
        rooms.join_room(member("r1", "bob")).await.expect("join");
        let same = mute("alice", "bob", 60);
        let answers = futures::future::join_all((0..20).map(|_| {
            let mut rooms = rooms.clone();
            let same = same.clone();
            async move { rooms.mute_user(same).await.map(tonic::Response::into_inner) }
        }))
        .await;
        let applied = answers.iter().filter(|a| a.as_ref().is_ok_and(|o| !o.replayed)).count();
        assert_eq!(applied, 1, "{db}: one mute applied, the copies replayed: {answers:?}");
        assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|o| o.room_version == 3)), "{db}");
        let logged = db.count("room_command_log").await;
        let outbox = db.count("room_outbox").await;
        let mut long = kick("alice", "bob", Some(60));
        long.reason = "x".repeat(201);
        let status = rooms.kick_user(long).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{db}");
        assert!(status.message().starts_with("reason"), "{db}: {}", status.message());
        let mut elsewhere = mute("alice", "bob", 60);
        (elsewhere.room_id, elsewhere.command_id) = ("nowhere".into(), cid("n"));
        assert_eq!(rooms.mute_user(elsewhere).await.unwrap_err().code(), Code::NotFound, "{db}");
        let write = pb::SetAttributesRequest {
            command_id: cid("a"),
            room_id: "r1".into(),
            actor_id: "bob".into(),
            set: HashMap::from([("k".to_owned(), "v".to_owned())]),
            delete: Vec::new(),
            expect: HashMap::new(),
        };
        let status = rooms.set_attributes(write).await.unwrap_err();
        assert_eq!(
            (status.code(), metadata(&status, "error-code")),
            (Code::PermissionDenied, "forbidden"),
            "{db}"
        );
        assert_eq!(
            (db.count("room_command_log").await, db.count("room_outbox").await),
            (logged, outbox),
            "{db}"
        );
        app.stop().await;
    }
}
