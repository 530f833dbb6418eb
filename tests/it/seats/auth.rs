//! Seats under `auth.mode: jwt` (SPEC §14.3, §12.3): a user's token acts as its user — naming
//! another on a self action is 403 writing nothing; a service token acts as itself (holding no
//! seat, and over the owner's seat) or for the user it names; and `GET /v1/rooms/{id}/seats`
//! needs a token whatever `public_reads` says, showing the owner and admins every pending
//! request and invitation and a member only its own.

use serde_json::{Value, json};

use super::holders;
use crate::auth::{Made, SERVICE_TOKEN, call, jwt_overrides, make, pairs, post, rs256, serve_jwks};
use crate::moderation::{cid, events_of, room, written};
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

const USERS: [&str; 5] = ["alice", "adm", "bob", "carol", "dan"];

fn tokens() -> Made {
    let jwts: serde_json::Map<String, Value> = USERS.iter().map(|u| (u.to_string(), rs256(u))).collect();
    make(json!({"jwts": jwts}))
}

/// `path` with `body` (a fresh command id) as `token`: status and answer.
async fn as_(app: &TestApp, path: &str, body: Value, token: &str) -> (u16, Value) {
    let mut body = body;
    body["command_id"] = cid("t").into();
    let answer = post(app, path, body, Some(token)).await;
    (answer.status, answer.body)
}

/// As [`as_`], panicking unless it answers 200.
async fn must(app: &TestApp, path: &str, body: Value, token: &str) -> Value {
    let (status, answer) = as_(app, path, body.clone(), token).await;
    assert_eq!(status, 200, "{path} {body}: {answer}");
    answer
}

/// alice's apply-mode room r1 of three seats, everyone in it, adm an admin.
async fn start(db: &TestDb, made: &Made) -> TestApp {
    let overrides = jwt_overrides(&serve_jwks(made.jwks.clone()).await);
    let app =
        TestApp::start(settings(db.url(), None, &pairs(&overrides, &[("auth.public_reads", "true")]))).await;
    let create =
        json!({"room_id": "r1", "owner_id": "alice", "title": "t", "seats": {"count": 3, "mode": "apply"}});
    must(&app, "/v1/rooms", create, made.token("alice")).await;
    for user in USERS {
        must(&app, "/v1/rooms/r1/join", json!({"user_id": user}), made.token(user)).await;
    }
    must(&app, "/v1/rooms/r1/admins", json!({"user_id": "adm", "admin": true}), made.token("alice")).await;
    app
}

/// The pending entries `token` reads: (user, kind).
async fn pending(app: &TestApp, token: Option<&str>) -> Vec<(String, String)> {
    let answer = call(app, "GET", "/v1/rooms/r1/seats", None, token).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let pending = answer.body["pending"].as_array().unwrap_or_else(|| panic!("{answer:?}"));
    let entry =
        |p: &Value| (p["user_id"].as_str().unwrap().to_owned(), p["kind"].as_str().unwrap().to_owned());
    pending.iter().map(entry).collect()
}

fn entries(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(u, k)| (u.to_string(), k.to_string())).collect()
}

#[tokio::test]
async fn a_token_acts_as_its_user_and_the_seat_list_shows_a_member_only_its_own() {
    let made = tokens();
    for db in backends().await {
        let app = start(&db, &made).await;
        let (alice, adm, bob, carol) =
            (made.token("alice"), made.token("adm"), made.token("bob"), made.token("carol"));
        // bob's token acts as bob, with or without naming him.
        must(&app, "/v1/rooms/r1/seats/request", json!({"user_id": "bob", "index": 1}), bob).await;
        let requested = events_of(&app, "r1", "RoomSeatRequested").await;
        assert_eq!(requested[0]["payload"]["user_id"], "bob", "{db}");
        must(&app, "/v1/rooms/r1/seats/request", json!({}), carol).await;
        must(&app, "/v1/rooms/r1/seats/invite", json!({"user_id": "dan"}), adm).await;

        // bob naming another actor: 403 naming actor_id, nothing written.
        let before = written(&db, &app, "r1").await;
        for (action, body) in [
            ("take", json!({"user_id": "carol"})),
            ("cancel_request", json!({"actor_id": "carol"})),
            ("answer_invite", json!({"user_id": "dan", "accept": true})),
            ("kick", json!({"actor_id": "alice", "index": 0})),
        ] {
            let (status, answer) =
                as_(&app, &format!("/v1/rooms/r1/seats/{action}"), body.clone(), bob).await;
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (403, Some("forbidden")),
                "{db}: {action}: {answer}"
            );
            assert!(message.starts_with("actor_id"), "{db}: {action} {body}: {message}");
        }
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");

        // The seat list: never anonymous; every entry for the owner, an admin and a service;
        // a member's own only.
        let anonymous = call(&app, "GET", "/v1/rooms/r1/seats", None, None).await;
        assert_eq!((anonymous.status, anonymous.code()), (401, "unauthenticated"), "{db}: {anonymous:?}");
        let all = entries(&[("bob", "request"), ("carol", "request"), ("dan", "invite")]);
        for token in [alice, adm, SERVICE_TOKEN] {
            assert_eq!(pending(&app, Some(token)).await, all, "{db}");
        }
        assert_eq!(pending(&app, Some(bob)).await, entries(&[("bob", "request")]), "{db}");
        assert_eq!(pending(&app, Some(made.token("dan"))).await, entries(&[("dan", "invite")]), "{db}");
        let view = call(&app, "GET", "/v1/rooms/r1/seats", None, Some(bob)).await.body;
        assert_eq!(
            (view["seat_mode"].as_str(), holders(&view["seats"])),
            (Some("apply"), vec![None; 3]),
            "{db}"
        );

        // A member withdraws its own request with its token; the invitee answers with its own.
        must(&app, "/v1/rooms/r1/seats/cancel_request", json!({}), carol).await;
        must(&app, "/v1/rooms/r1/seats/answer_invite", json!({"accept": true}), made.token("dan")).await;
        assert_eq!(pending(&app, Some(alice)).await, entries(&[("bob", "request")]), "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_service_token_acts_as_itself_over_the_owners_seat_or_for_the_user_it_names() {
    let made = tokens();
    for db in backends().await {
        let app = start(&db, &made).await;
        let (alice, adm) = (made.token("alice"), made.token("adm"));
        must(&app, "/v1/rooms/r1/seats/take", json!({"index": 0}), alice).await;
        must(&app, "/v1/rooms/r1/seats/take", json!({"index": 1}), adm).await;
        // For bob: bob's rights (a member's take in apply mode is 403); for bob, a request.
        let (status, answer) =
            as_(&app, "/v1/rooms/r1/seats/take", json!({"actor_id": "bob"}), SERVICE_TOKEN).await;
        assert_eq!(status, 403, "{db}: {answer}");
        must(&app, "/v1/rooms/r1/seats/request", json!({"user_id": "bob"}), SERVICE_TOKEN).await;
        // As itself it holds no seat.
        let (status, answer) = as_(&app, "/v1/rooms/r1/seats/take", json!({}), SERVICE_TOKEN).await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{db}: {answer}");
        assert!(message.starts_with("actor_id"), "{db}: {message}");

        // An admin acts on no owner's seat; nor on another admin's; the owner on both.
        let before = written(&db, &app, "r1").await;
        for body in [json!({"index": 0, "muted": true}), json!({"index": 0, "locked": true})] {
            let action = if body.get("muted").is_some() { "mute" } else { "lock" };
            let (status, answer) = as_(&app, &format!("/v1/rooms/r1/seats/{action}"), body, adm).await;
            assert_eq!(status, 403, "{db}: {action}: {answer}");
        }
        let (status, answer) = as_(&app, "/v1/rooms/r1/seats/kick", json!({"index": 0}), adm).await;
        assert_eq!(status, 403, "{db}: {answer}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        must(&app, "/v1/rooms/r1/seats/mute", json!({"index": 1, "muted": true}), alice).await;
        // The owner mutes its own seat; a service kicks the owner off it.
        must(&app, "/v1/rooms/r1/seats/mute", json!({"index": 0, "muted": true}), alice).await;
        must(&app, "/v1/rooms/r1/seats/kick", json!({"index": 0}), SERVICE_TOKEN).await;
        let changed = events_of(&app, "r1", "RoomSeatsChanged").await;
        let cause = &changed.last().unwrap()["payload"]["cause"];
        assert_eq!(
            (cause["action"].as_str(), cause["user_id"].as_str(), cause["by"].as_str()),
            (Some("kick"), Some("alice"), Some("svc:gateway")),
            "{db}: {cause}"
        );
        assert_eq!(holders(&room(&app, "r1").await["seats"]), [None, Some("adm".into()), None], "{db}");
        app.stop().await;
    }
}
