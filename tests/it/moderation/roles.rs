//! The role matrix over HTTP under `auth.mode: none` (the body's `actor_id` acts): the owner
//! appoints admins and closes; owner and admins moderate members; nobody moderates the owner;
//! an admin no other admin; every refusal is 403 naming the role it needs and writes nothing.

use serde_json::{Value, json};

use super::*;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// Every moderation route with a body acting on `target`.
fn routes(target: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("admins", json!({"user_id": target, "admin": true})),
        ("mutes", json!({"user_id": target, "duration_s": 60})),
        ("kicks", json!({"user_id": target, "ban_s": 60, "reason": "spam"})),
        ("unban", json!({"user_id": target})),
        ("mute_all", json!({"muted": true})),
        ("info", json!({"title": "new title"})),
        ("attributes", json!({"set": {"topic": "music"}})),
    ]
}

/// The role each route needs of someone moderating a member.
fn needs(route: &str) -> &'static str {
    if route == "admins" { "owner" } else { "admin" }
}

/// Asserts `actor`'s `route` is refused with 403 naming `role`, and that nothing is written.
async fn refused(db: &TestDb, app: &TestApp, actor: &str, route: &str, body: Value, role: &str) {
    let before = written(db, app, "r1").await;
    let (status, answer) = act(app, "r1", route, actor, body.clone()).await;
    let (code, message) = error(&answer);
    assert_eq!((status, code), (403, "forbidden"), "{db}: {actor} {route} {body}: {answer}");
    assert!(
        message.contains(&format!("needs the room's {role} role")),
        "{db}: {actor} {route}: the 403 names {role}: {message}"
    );
    assert_eq!(written(db, app, "r1").await, before, "{db}: {actor} {route}: a refusal writes nothing");
}

#[tokio::test]
async fn each_route_answers_the_role_matrix_and_a_refusal_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["adm", "adm2", "mem", "t1", "t2", "t3"]).await;
        ok(&app, "r1", "admins", "alice", json!({"user_id": "adm", "admin": true})).await;
        ok(&app, "r1", "admins", "alice", json!({"user_id": "adm2", "admin": true})).await;

        // A member and a stranger (no member, no role) may do none of it.
        for actor in ["mem", "zed"] {
            for (route, body) in routes("t1") {
                refused(&db, &app, actor, route, body, needs(route)).await;
            }
        }
        // An admin moderates members but appoints nobody.
        refused(&db, &app, "adm", "admins", json!({"user_id": "t1", "admin": true}), "owner").await;
        for (route, body) in routes("t1").into_iter().filter(|(r, _)| *r != "admins") {
            ok(&app, "r1", route, "adm", body).await;
        }
        // The owner does everything (another target: t1 is out).
        for (route, body) in routes("t2") {
            let body = match route {
                "mute_all" => json!({"muted": false}),
                "info" => json!({"title": "the owner's title"}),
                "attributes" => json!({"set": {"topic": "talk"}}),
                _ => body,
            };
            ok(&app, "r1", route, "alice", body).await;
        }
        let view = room(&app, "r1").await;
        assert_eq!(view["admins"], json!(["adm", "adm2", "t2"]), "{db}: {view}");
        assert_eq!(view["title"], "the owner's title", "{db}");
        assert_eq!(view["attributes"]["topic"]["value"], "talk", "{db}");

        // Nobody moderates the owner; an admin moderates no other admin, the owner does.
        for actor in ["adm", "alice"] {
            refused(&db, &app, actor, "mutes", json!({"user_id": "alice", "duration_s": 60}), "service")
                .await;
            refused(&db, &app, actor, "kicks", json!({"user_id": "alice"}), "service").await;
        }
        refused(&db, &app, "adm", "mutes", json!({"user_id": "adm2", "duration_s": 60}), "owner").await;
        refused(&db, &app, "adm", "kicks", json!({"user_id": "adm2"}), "owner").await;
        refused(&db, &app, "adm", "admins", json!({"user_id": "adm2", "admin": false}), "owner").await;
        ok(&app, "r1", "mutes", "alice", json!({"user_id": "adm2", "duration_s": 60})).await;

        // Only the owner closes.
        for actor in ["adm", "mem", "zed"] {
            refused(&db, &app, actor, "close", json!({}), "owner").await;
        }
        let closed = ok(&app, "r1", "close", "alice", json!({})).await;
        assert_eq!(closed["room"]["status"], "closed", "{db}: {closed}");
        app.stop().await;
    }
}

#[tokio::test]
async fn one_admin_more_than_max_admins_is_409_and_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        for n in 0..5 {
            ok(&app, "r1", "admins", "alice", json!({"user_id": format!("a{n}"), "admin": true})).await;
        }
        let before = written(&db, &app, "r1").await;
        let (status, answer) =
            act(&app, "r1", "admins", "alice", json!({"user_id": "a5", "admin": true})).await;
        assert_eq!((status, error(&answer).0), (409, "too_many_admins"), "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        // Removing one makes room for another.
        ok(&app, "r1", "admins", "alice", json!({"user_id": "a0", "admin": false})).await;
        ok(&app, "r1", "admins", "alice", json!({"user_id": "a5", "admin": true})).await;
        assert_eq!(room(&app, "r1").await["admins"], json!(["a1", "a2", "a3", "a4", "a5"]), "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_non_member_may_be_muted_and_banned_but_not_kicked_without_a_ban() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        ok(&app, "r1", "mutes", "alice", json!({"user_id": "zed", "duration_s": 60})).await;
        let banned = ok(&app, "r1", "kicks", "alice", json!({"user_id": "zed", "ban_s": 60})).await;
        assert_eq!(banned["applied"], true, "{db}: {banned}");
        let (status, answer) = join(&app, "r1", "zed").await;
        assert_eq!((status, error(&answer).0), (409, "banned"), "{db}: banned before arriving: {answer}");

        let before = written(&db, &app, "r1").await;
        let (status, answer) = act(&app, "r1", "kicks", "alice", json!({"user_id": "yan", "ban_s": 0})).await;
        assert_eq!((status, error(&answer).0), (409, "not_member"), "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_moderation_command_without_actor_id_under_auth_none_is_400_naming_actor_id() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob"]).await;
        let before = written(&db, &app, "r1").await;
        for (route, mut body) in routes("bob") {
            body["command_id"] = cid(route).into();
            let (status, answer) = app.post(&format!("/v1/rooms/r1/{route}"), body).await;
            let (code, message) = error(&answer);
            assert_eq!((status, code), (400, "invalid_argument"), "{db}: {route}: {answer}");
            assert!(message.starts_with("actor_id"), "{db}: {route}: {message}");
        }
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        app.stop().await;
    }
}
