//! Who lifts a sanction (docs/API.md, "Roles and who acts"), as a hostile admin would try it,
//! over HTTP and gRPC on both backends: a mute or ban is lifted only by a rank above the one who
//! set it; an admin may mute or kick itself but never lift either; a banned admin neither
//! unbans itself nor rejoins, and moderates nothing while banned; the owner lifts both. Every
//! refusal is 403 `forbidden` (`PERMISSION_DENIED`) naming the rule and writes nothing.

use room_service::grpc::pb;
use room_service::grpc::pb::room_service_client::RoomServiceClient;
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;

use super::*;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// Asserts `actor`'s `route` is 403 `forbidden` with a message holding `says`, and that it wrote
/// nothing (no command-log or outbox row, the room's version as it was).
async fn refused(db: &TestDb, app: &TestApp, actor: &str, route: &str, body: Value, says: &str) {
    let before = written(db, app, "r1").await;
    let (status, answer) = act(app, "r1", route, actor, body.clone()).await;
    let (code, message) = error(&answer);
    assert_eq!((status, code), (403, "forbidden"), "{db}: {actor} {route} {body}: {answer}");
    assert!(message.contains(says), "{db}: {actor} {route}: the 403 says {says:?}: {message}");
    assert_eq!(written(db, app, "r1").await, before, "{db}: {actor} {route}: a refusal writes nothing");
}

/// Room `r1` of `alice` with admin `adm` and member `mem`.
async fn start(app: &TestApp) {
    create(app, "r1", "alice").await;
    join_all(app, "r1", &["adm", "mem"]).await;
    ok(app, "r1", "admins", "alice", json!({"user_id": "adm", "admin": true})).await;
}

#[tokio::test]
async fn a_banned_admin_neither_unbans_itself_nor_rejoins_nor_kicks_nor_retitles_until_the_owner_lifts_it() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        start(&app).await;
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "adm", "ban_s": 600})).await;

        let banned = "banned from the room until";
        refused(&db, &app, "adm", "unban", json!({"user_id": "adm"}), banned).await;
        refused(&db, &app, "adm", "kicks", json!({"user_id": "mem", "ban_s": 0}), banned).await;
        refused(&db, &app, "adm", "info", json!({"title": "mine now"}), banned).await;
        refused(&db, &app, "adm", "mutes", json!({"user_id": "mem", "duration_s": 60}), banned).await;
        let before = written(&db, &app, "r1").await;
        let (status, answer) = join(&app, "r1", "adm").await;
        assert_eq!((status, error(&answer).0), (409, "banned"), "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: the refused rejoin wrote nothing");
        assert_eq!(members(&app, "r1").await, ["mem"], "{db}: mem was not kicked");
        assert_eq!(room(&app, "r1").await["title"], "t", "{db}: the title is the owner's");

        ok(&app, "r1", "unban", "alice", json!({"user_id": "adm"})).await;
        let (status, answer) = join(&app, "r1", "adm").await;
        assert_eq!((status, &answer["applied"]), (200, &json!(true)), "{db}: unbanned: {answer}");
        ok(&app, "r1", "info", "adm", json!({"title": "adm's title"})).await;
        assert_eq!(events_of(&app, "r1", "RoomUserUnbanned").await[0]["payload"]["by"], "alice", "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_muted_admin_never_unmutes_itself_nor_cuts_its_mute_short_and_the_owner_lifts_it() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        start(&app).await;
        ok(&app, "r1", "mutes", "alice", json!({"user_id": "adm", "duration_s": 600})).await;
        let rule = "set by the room's owner: lifting it needs the room's service role";
        refused(&db, &app, "adm", "mutes", json!({"user_id": "adm", "duration_s": 0}), rule).await;
        refused(&db, &app, "adm", "mutes", json!({"user_id": "adm", "duration_s": 1}), rule).await;
        ok(&app, "r1", "mutes", "alice", json!({"user_id": "adm", "duration_s": 0})).await;
        assert_eq!(events_of(&app, "r1", "RoomUserUnmuted").await[0]["payload"]["by"], "alice", "{db}");

        // Its own mute (and its own kick) an admin may set, but only the owner lifts.
        ok(&app, "r1", "mutes", "adm", json!({"user_id": "adm", "duration_s": 600})).await;
        let own = "set by the room's admin: lifting it needs the room's owner role";
        refused(&db, &app, "adm", "mutes", json!({"user_id": "adm", "duration_s": 0}), own).await;
        ok(&app, "r1", "mutes", "alice", json!({"user_id": "adm", "duration_s": 0})).await;
        ok(&app, "r1", "kicks", "adm", json!({"user_id": "adm", "ban_s": 600})).await;
        refused(&db, &app, "adm", "unban", json!({"user_id": "adm"}), "banned from the room until").await;
        ok(&app, "r1", "unban", "alice", json!({"user_id": "adm"})).await;
        app.stop().await;
    }
}

fn metadata<'a>(status: &'a tonic::Status, key: &str) -> &'a str {
    status.metadata().get(key).map_or("", |v| v.to_str().unwrap())
}

/// Asserts a gRPC call was PERMISSION_DENIED (`forbidden`) saying `says`.
fn denied<T: std::fmt::Debug>(result: Result<T, tonic::Status>, says: &str) {
    let status = result.expect_err("refused");
    assert_eq!((status.code(), metadata(&status, "error-code")), (Code::PermissionDenied, "forbidden"));
    assert!(status.message().contains(says), "says {says:?}: {}", status.message());
}

#[tokio::test]
async fn over_grpc_a_banned_or_muted_admin_lifts_nothing_and_moderates_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        start(&app).await;
        let channel = Channel::from_shared(format!("http://{}", app.app.grpc_addr)).unwrap().connect_lazy();
        let mut rooms = RoomServiceClient::new(channel);
        let mute = |actor: &str, duration_s: u32| pb::MuteUserRequest {
            command_id: cid("m"),
            room_id: "r1".into(),
            actor_id: actor.into(),
            user_id: "adm".into(),
            duration_s,
        };
        let unban = |actor: &str| pb::UnbanUserRequest {
            command_id: cid("u"),
            room_id: "r1".into(),
            actor_id: actor.into(),
            user_id: "adm".into(),
        };
        let kick = |actor: &str, user: &str, ban_s: u32| pb::KickUserRequest {
            command_id: cid("k"),
            room_id: "r1".into(),
            actor_id: actor.into(),
            user_id: user.into(),
            ban_s: Some(ban_s),
            reason: String::new(),
        };
        let info = || pb::UpdateRoomInfoRequest {
            seat_mode: None,
            command_id: cid("i"),
            room_id: "r1".into(),
            actor_id: "adm".into(),
            title: Some("mine now".into()),
            announcement: None,
            cover_url: None,
        };
        let join = || pb::MemberRequest { command_id: cid("j"), room_id: "r1".into(), user_id: "adm".into() };

        rooms.mute_user(mute("alice", 600)).await.expect("the owner mutes adm");
        let before = written(&db, &app, "r1").await;
        denied(rooms.mute_user(mute("adm", 0)).await, "lifting it needs the room's service role");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: the refused unmute wrote nothing");
        rooms.mute_user(mute("alice", 0)).await.expect("the owner unmutes adm");

        rooms.kick_user(kick("alice", "adm", 600)).await.expect("the owner bans adm");
        let before = written(&db, &app, "r1").await;
        let banned = "banned from the room until";
        denied(rooms.unban_user(unban("adm")).await, banned);
        denied(rooms.kick_user(kick("adm", "mem", 0)).await, banned);
        denied(rooms.update_room_info(info()).await, banned);
        let rejoin = rooms.join_room(join()).await.expect_err("banned");
        assert_eq!((rejoin.code(), metadata(&rejoin, "error-code")), (Code::FailedPrecondition, "banned"));
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: no refusal wrote a thing");

        rooms.unban_user(unban("alice")).await.expect("the owner unbans adm");
        rooms.join_room(join()).await.expect("unbanned, adm rejoins");
        rooms.update_room_info(info()).await.expect("an admin again");
        app.stop().await;
    }
}
