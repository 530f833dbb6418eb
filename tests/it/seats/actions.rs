//! Each seat action over HTTP (SPEC §14.3) in an apply-mode room: request, cancel, reject,
//! accept, invite, decline, withdraw, accept an invitation, leave — each one event, its payload
//! as the SPEC names it, read back from the events API; a self action may name its actor by
//! `user_id` alone under `auth.mode: none`.

use serde_json::{Value, json};

use super::{create, holders, refused, seat, seated};
use crate::moderation::{error, events, join_all, ok, room};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// What the events API shows of each command checked: its answer, and the fields its one
/// event's payload must hold. Read once at the end (the events API limits each reader's rate).
#[derive(Default)]
struct Expected(Vec<(Value, Value)>);

impl Expected {
    /// Expects the one event of the command answered with `answer` to hold `fields`.
    fn push(&mut self, answer: &Value, fields: Value) {
        assert_eq!(answer["events"].as_array().map(Vec::len), Some(1), "one event: {answer}");
        self.0.push((answer.clone(), fields));
    }

    /// Asserts each command's event holds its fields.
    async fn check(self, app: &TestApp) {
        let all: Vec<Value> = events(app, "r1").await.into_iter().map(|(e, _)| e).collect();
        for (answer, fields) in self.0 {
            let version = &answer["room_version"];
            let at: Vec<&Value> = all.iter().filter(|e| &e["room_version"] == version).collect();
            assert_eq!(at.len(), 1, "one event at {version}: {at:?}");
            assert_eq!(at[0]["event_type"], answer["events"][0]["event_type"], "{}", at[0]);
            assert!(holds(&at[0]["payload"], &fields), "{fields} in {}", at[0]);
        }
    }
}

/// Whether `actual` holds every field of `fields`, objects compared field by field.
fn holds(actual: &Value, fields: &Value) -> bool {
    match fields {
        Value::Object(fields) => fields.iter().all(|(key, value)| holds(&actual[key], value)),
        value => actual == value,
    }
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
        let mut expected = Expected::default();
        let closed = |user: &str, kind: &str, reason: &str, by: &str| json!({"user_id": user, "kind": kind, "reason": reason, "by": by});

        // In apply mode a member requests; an admin takes.
        refused(&app, "r1", "take", "bob", json!({}), (403, "forbidden")).await;
        let took = seated(&app, "r1", "take", "adm", json!({})).await;
        expected.push(&took, json!({"cause": {"action": "take", "user_id": "adm", "index": 0, "by": "adm"}}));

        let requested = own(&app, "request", "bob", json!({"index": 2})).await;
        expected.push(&requested, json!({"user_id": "bob", "index": 2}));
        let cancelled = own(&app, "cancel_request", "bob", json!({})).await;
        expected.push(&cancelled, closed("bob", "request", "cancelled", "bob"));

        own(&app, "request", "bob", json!({})).await;
        let rejected =
            seated(&app, "r1", "answer_request", "host", json!({"user_id": "bob", "accept": false})).await;
        expected.push(&rejected, closed("bob", "request", "rejected", "host"));

        own(&app, "request", "bob", json!({"index": 2})).await;
        let accepted =
            seated(&app, "r1", "answer_request", "adm", json!({"user_id": "bob", "accept": true})).await;
        let seats = json!([
            {"index": 0, "user_id": "adm", "locked": false, "muted": false},
            {"index": 1, "user_id": null, "locked": false, "muted": false},
            {"index": 2, "user_id": "bob", "locked": false, "muted": false},
        ]);
        let cause = json!({"action": "answer_request", "user_id": "bob", "index": 2, "by": "adm"});
        expected.push(&accepted, json!({"seats": seats, "cause": cause}));

        let invited = seated(&app, "r1", "invite", "host", json!({"user_id": "carol", "index": 1})).await;
        expected.push(&invited, json!({"user_id": "carol", "index": 1, "by": "host"}));
        let declined = own(&app, "answer_invite", "carol", json!({"accept": false})).await;
        expected.push(&declined, closed("carol", "invite", "declined", "carol"));

        seated(&app, "r1", "invite", "host", json!({"user_id": "dan"})).await;
        let withdrawn = seated(&app, "r1", "cancel_request", "host", json!({"user_id": "dan"})).await;
        expected.push(&withdrawn, closed("dan", "invite", "cancelled", "host"));
        refused(&app, "r1", "answer_invite", "dan", json!({"accept": true}), (409, "no_such_request")).await;

        seated(&app, "r1", "invite", "adm", json!({"user_id": "dan"})).await;
        refused(&app, "r1", "request", "dan", json!({}), (409, "request_pending")).await;
        let joined = own(&app, "answer_invite", "dan", json!({"accept": true})).await;
        // No seat named: the lowest free one.
        let cause = json!({"action": "answer_invite", "user_id": "dan", "index": 1});
        expected.push(&joined, json!({"cause": cause}));
        let full = [Some("adm".into()), Some("dan".into()), Some("bob".into())];
        assert_eq!(holders(&joined["room"]["seats"]), full, "{db}");

        // Full: an accepted request is 409 seats_full, the request still pending.
        own(&app, "request", "erin", json!({})).await;
        let accept = json!({"user_id": "erin", "accept": true});
        refused(&app, "r1", "answer_request", "host", accept, (409, "seats_full")).await;
        refused(&app, "r1", "invite", "host", json!({"user_id": "bob"}), (409, "already_seated")).await;
        let (status, answer) = seat(&app, "r1", "request", "erin", json!({})).await;
        assert_eq!((status, error(&answer).0), (409, "request_pending"), "{db}: {answer}");

        let left = own(&app, "leave", "bob", json!({})).await;
        expected
            .push(&left, json!({"cause": {"action": "leave", "user_id": "bob", "index": 2, "by": "bob"}}));
        assert_eq!(holders(&left["room"]["seats"]), [Some("adm".into()), Some("dan".into()), None], "{db}");
        expected.check(&app).await;
        app.stop().await;
    }
}
