//! Moderation under `auth.mode: jwt` (SPEC §14.2, §12.3): the actor is the token's user (a
//! body `actor_id` naming another is 403 naming `actor_id`, nothing written); a service token
//! acts as `svc:<name>` (its close is reason `admin`) or for the user `actor_id` names; the
//! moderation list needs a token whatever `public_reads` says, and an admin's role.

use serde_json::{Value, json};

use super::{Written, cid, events_of, written};
use crate::auth::{Made, SERVICE_TOKEN, call, jwt_overrides, make, pairs, post, rs256, serve_jwks};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

fn tokens() -> Made {
    make(json!({"jwts": {"alice": rs256("alice"), "bob": rs256("bob"), "carol": rs256("carol")}}))
}

/// alice's room r1 with bob and carol in it, every command with its user's own token.
async fn start(db: &crate::support::TestDb, made: &Made) -> TestApp {
    let overrides = jwt_overrides(&serve_jwks(made.jwks.clone()).await);
    let app =
        TestApp::start(settings(db.url(), None, &pairs(&overrides, &[("auth.public_reads", "true")]))).await;
    let body = json!({"command_id": "c1", "room_id": "r1", "owner_id": "alice", "title": "t"});
    assert_eq!(post(&app, "/v1/rooms", body, Some(made.token("alice"))).await.status, 200);
    for user in ["bob", "carol"] {
        let body = json!({"command_id": cid("j"), "user_id": user});
        assert_eq!(post(&app, "/v1/rooms/r1/join", body, Some(made.token(user))).await.status, 200);
    }
    app
}

/// `body` with a fresh command id.
fn fresh(mut body: Value) -> Value {
    body["command_id"] = cid("a").into();
    body
}

#[tokio::test]
async fn a_user_token_acts_as_itself_and_naming_another_actor_is_403_writing_nothing() {
    let made = tokens();
    for db in backends().await {
        let app = start(&db, &made).await;
        let (alice, bob) = (Some(made.token("alice")), Some(made.token("bob")));
        // alice's token acts as alice: no actor_id needed, and `by` is hers.
        let muted =
            post(&app, "/v1/rooms/r1/mutes", fresh(json!({"user_id": "carol", "duration_s": 60})), alice)
                .await;
        assert_eq!(muted.status, 200, "{db}: {muted:?}");
        assert_eq!(events_of(&app, "r1", "RoomUserMuted").await[0]["payload"]["by"], "alice", "{db}");
        // Her own id as actor_id is fine too.
        let own = json!({"actor_id": "alice", "muted": true});
        assert_eq!(post(&app, "/v1/rooms/r1/mute_all", fresh(own), alice).await.status, 200, "{db}");

        // bob naming alice as the actor: 403 naming actor_id, on every route.
        let before: Written = written(&db, &app, "r1").await;
        for (route, body) in [
            ("admins", json!({"user_id": "bob", "admin": true})),
            ("mutes", json!({"user_id": "carol", "duration_s": 60})),
            ("kicks", json!({"user_id": "carol"})),
            ("unban", json!({"user_id": "carol"})),
            ("mute_all", json!({"muted": false})),
            ("info", json!({"title": "mine"})),
            ("attributes", json!({"set": {"k": "v"}})),
            ("close", json!({})),
        ] {
            let mut body = fresh(body);
            body["actor_id"] = "alice".into();
            let answer = post(&app, &format!("/v1/rooms/r1/{route}"), body, bob).await;
            assert_eq!((answer.status, answer.code()), (403, "forbidden"), "{db}: {route}: {answer:?}");
            assert!(answer.message().starts_with("actor_id:"), "{db}: {route}: {}", answer.message());
        }
        // As himself he is a member: 403 naming the role.
        let as_bob = post(&app, "/v1/rooms/r1/kicks", fresh(json!({"user_id": "carol"})), bob).await;
        assert_eq!((as_bob.status, as_bob.code()), (403, "forbidden"), "{db}: {as_bob:?}");
        assert!(as_bob.message().contains("admin"), "{db}: {}", as_bob.message());
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_service_token_acts_as_itself_or_for_the_user_it_names_and_its_close_is_reason_admin() {
    let made = tokens();
    for db in backends().await {
        let app = start(&db, &made).await;
        let gateway = Some(SERVICE_TOKEN);
        // For bob (a member): his rights, not the service's.
        let before = written(&db, &app, "r1").await;
        let for_bob = json!({"actor_id": "bob", "user_id": "carol", "duration_s": 60});
        let answer = post(&app, "/v1/rooms/r1/mutes", fresh(for_bob), gateway).await;
        assert_eq!((answer.status, answer.code()), (403, "forbidden"), "{db}: {answer:?}");
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: nothing written");
        // For alice (the owner): hers.
        let for_alice = json!({"actor_id": "alice", "user_id": "carol", "duration_s": 60});
        assert_eq!(post(&app, "/v1/rooms/r1/mutes", fresh(for_alice), gateway).await.status, 200, "{db}");
        // As itself: anything, the owner included.
        let owner = json!({"user_id": "alice", "duration_s": 60});
        assert_eq!(post(&app, "/v1/rooms/r1/mutes", fresh(owner), gateway).await.status, 200, "{db}");
        let muted = events_of(&app, "r1", "RoomUserMuted").await;
        let by: Vec<&Value> = muted.iter().map(|e| &e["payload"]["by"]).collect();
        assert_eq!(by, [&json!("alice"), &json!("svc:gateway")], "{db}");

        let closed = post(&app, "/v1/rooms/r1/close", fresh(json!({})), gateway).await;
        assert_eq!(closed.status, 200, "{db}: {closed:?}");
        let event = &events_of(&app, "r1", "RoomClosed").await[0]["payload"];
        assert_eq!(
            (&event["reason"], &event["by"]),
            (&json!("admin"), &json!("svc:gateway")),
            "{db}: {event}"
        );
        app.stop().await;
    }
}

#[tokio::test]
async fn the_moderation_list_needs_a_token_even_with_public_reads_and_a_members_is_refused() {
    let made = tokens();
    for db in backends().await {
        let app = start(&db, &made).await;
        let kick = json!({"user_id": "carol", "ban_s": 600, "reason": "spam"});
        assert_eq!(
            post(&app, "/v1/rooms/r1/kicks", fresh(kick), Some(made.token("alice"))).await.status,
            200
        );
        // Reads are public, the moderation list is not.
        assert_eq!(call(&app, "GET", "/v1/rooms/r1", None, None).await.status, 200, "{db}");
        let anonymous = call(&app, "GET", "/v1/rooms/r1/moderation", None, None).await;
        assert_eq!((anonymous.status, anonymous.code()), (401, "unauthenticated"), "{db}: {anonymous:?}");
        let member = call(&app, "GET", "/v1/rooms/r1/moderation", None, Some(made.token("bob"))).await;
        assert_eq!((member.status, member.code()), (403, "forbidden"), "{db}: {member:?}");
        let owner = call(&app, "GET", "/v1/rooms/r1/moderation", None, Some(made.token("alice"))).await;
        assert_eq!(owner.status, 200, "{db}: {owner:?}");
        assert_eq!(
            owner.body["entries"],
            json!([{"user_id": "carol", "kind": "ban", "until_ms": owner.body["entries"][0]["until_ms"],
                    "reason": "spam", "by": "alice"}]),
            "{db}"
        );
        app.stop().await;
    }
}
