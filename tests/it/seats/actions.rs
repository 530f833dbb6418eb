//! Each seat action over HTTP (SPEC §14.3) in an apply-mode room: request, cancel, reject,
//! accept, invite, decline, withdraw, accept an invitation, leave — each one event, its payload
//! as the SPEC names it, read back from the events API; a self action may name its actor by
//! `user_id` alone under `auth.mode: none`.

use serde_json::{Value, json};

use super::{create, holders, refused, seat, seated};
use crate::moderation::{error, events, join_all, ok, room};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// The one event of the command answered with `answer`, from the events API.
async fn event_of(app: &TestApp, answer: &Value) -> Value {
    assert_eq!(answer["events"].as_array().map(Vec::len), Some(1), "one event: {answer}");
    let version = &answer["room_version"];
    let all = events(app, "r1").await;
    let mut at = all.into_iter().map(|(e, _)| e).filter(|e| &e["room_version"] == version);
    let event = at.next().unwrap_or_else(|| panic!("no event at {version}"));
    assert_eq!(event["event_type"], answer["events"][0]["event_type"], "{event}");
    event
}

/// `user`'s own action with `body`, naming the user by `user_id` and no `actor_id`.
async fn own(app: &TestApp, action: &str, user: &str, body: Value) -> Value {
    let mut body = body;
    body["user_id"] = user.into();
    seated(app, "r1", action, "", body).await
}

#[tokio::test]
async fn every_action_makes_its_one_event() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "host", 3, "apply").await;
        join_all(&app, "r1", &["adm", "bob", "carol", "dan", "erin"]).await;
        ok(&app, "r1", "admins", "host", json!({"user_id": "adm", "admin": true})).await;
        let view = room(&app, "r1").await;
        assert_eq!(
            (view["seat_mode"].as_str(), holders(&view["seats"])),
            (Some("apply"), vec![None; 3]),
            "{db}"
        );

        // In apply mode a member requests; an admin takes.
        refused(&app, "r1", "take", "bob", json!({}), (403, "forbidden")).await;
        let took = seated(&app, "r1", "take", "adm", json!({})).await;
        let cause = &event_of(&app, &took).await["payload"]["cause"];
        assert_eq!(
            (cause["action"].as_str(), cause["index"].as_u64()),
            (Some("take"), Some(0)),
            "{db}: {cause}"
        );

        let requested = own(&app, "request", "bob", json!({"index": 2})).await;
        let payload = event_of(&app, &requested).await["payload"].clone();
        assert_eq!((payload["user_id"].as_str(), payload["index"].as_u64()), (Some("bob"), Some(2)), "{db}");
        assert!(payload["expires_at_ms"].is_i64(), "{db}: {payload}");
        let cancelled = own(&app, "cancel_request", "bob", json!({})).await;
        let closed = &event_of(&app, &cancelled).await["payload"];
        assert_eq!(
            closed,
            &json!({"user_id": "bob", "kind": "request", "reason": "cancelled", "by": "bob"}),
            "{db}"
        );

        own(&app, "request", "bob", json!({})).await;
        let rejected =
            seated(&app, "r1", "answer_request", "host", json!({"user_id": "bob", "accept": false})).await;
        let closed = &event_of(&app, &rejected).await["payload"];
        assert_eq!(
            closed,
            &json!({"user_id": "bob", "kind": "request", "reason": "rejected", "by": "host"}),
            "{db}"
        );

        own(&app, "request", "bob", json!({"index": 2})).await;
        let accepted =
            seated(&app, "r1", "answer_request", "adm", json!({"user_id": "bob", "accept": true})).await;
        let changed = event_of(&app, &accepted).await;
        let cause = &changed["payload"]["cause"];
        assert_eq!(
            (
                cause["action"].as_str(),
                cause["user_id"].as_str(),
                cause["index"].as_u64(),
                cause["by"].as_str()
            ),
            (Some("answer_request"), Some("bob"), Some(2), Some("adm")),
            "{db}: {changed}"
        );
        assert_eq!(holders(&changed["payload"]["seats"]), [Some("adm".into()), None, Some("bob".into())]);

        let invited = seated(&app, "r1", "invite", "host", json!({"user_id": "carol", "index": 1})).await;
        let payload = &event_of(&app, &invited).await["payload"];
        assert_eq!(
            (payload["user_id"].as_str(), payload["index"].as_u64(), payload["by"].as_str()),
            (Some("carol"), Some(1), Some("host")),
            "{db}: {payload}"
        );
        assert!(payload["expires_at_ms"].is_i64(), "{db}: {payload}");
        let declined = own(&app, "answer_invite", "carol", json!({"accept": false})).await;
        let closed = &event_of(&app, &declined).await["payload"];
        assert_eq!(
            closed,
            &json!({"user_id": "carol", "kind": "invite", "reason": "declined", "by": "carol"})
        );

        seated(&app, "r1", "invite", "host", json!({"user_id": "dan"})).await;
        let withdrawn = seated(&app, "r1", "cancel_request", "host", json!({"user_id": "dan"})).await;
        let closed = &event_of(&app, &withdrawn).await["payload"];
        assert_eq!(closed, &json!({"user_id": "dan", "kind": "invite", "reason": "cancelled", "by": "host"}));
        refused(&app, "r1", "answer_invite", "dan", json!({"accept": true}), (409, "no_such_request")).await;

        seated(&app, "r1", "invite", "adm", json!({"user_id": "dan"})).await;
        refused(&app, "r1", "request", "dan", json!({}), (409, "request_pending")).await;
        let joined = own(&app, "answer_invite", "dan", json!({"accept": true})).await;
        let cause = &event_of(&app, &joined).await["payload"]["cause"];
        assert_eq!(
            (cause["action"].as_str(), cause["user_id"].as_str(), cause["index"].as_u64()),
            (Some("answer_invite"), Some("dan"), Some(1)),
            "{db}: the lowest free seat: {cause}"
        );
        assert_eq!(
            holders(&joined["room"]["seats"]),
            [Some("adm".into()), Some("dan".into()), Some("bob".into())]
        );

        // Full: an accepted request is 409 seats_full, the request still pending.
        own(&app, "request", "erin", json!({})).await;
        let accept = json!({"user_id": "erin", "accept": true});
        refused(&app, "r1", "answer_request", "host", accept, (409, "seats_full")).await;
        refused(&app, "r1", "invite", "host", json!({"user_id": "bob"}), (409, "already_seated")).await;
        let (status, answer) = seat(&app, "r1", "request", "erin", json!({})).await;
        assert_eq!((status, error(&answer).0), (409, "request_pending"), "{db}: {answer}");

        let left = own(&app, "leave", "bob", json!({})).await;
        let changed = event_of(&app, &left).await;
        assert_eq!(changed["payload"]["cause"]["action"], "leave", "{db}: {changed}");
        assert_eq!(holders(&left["room"]["seats"]), [Some("adm".into()), Some("dan".into()), None], "{db}");
        app.stop().await;
    }
}
