//! A caller's own ids never reach IM's content check (SPEC §13.1, issue #45 item 4): envelopes
//! carry digests of the `command_id` and the `x-request-id`, so a `command_id` or an
//! `x-request-id` carrying a word IM's moderation refuses (80001 for the whole message) is
//! delivered, and the command log keeps the ids as sent.

use serde_json::{Value, json};

use crate::support::TestDb;
use crate::support::app::{TestApp, fake_im, settings};

const WORD: &str = "forbidden-word";

fn gift(command_id: &str, sender: &str, gift_id: &str) -> Value {
    json!({"command_id": command_id, "sender_id": sender, "receiver_id": "alice", "gift_id": gift_id,
           "count": 1, "unit_value": 1})
}

#[tokio::test]
async fn a_command_id_or_request_id_carrying_a_refused_word_is_delivered() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    im.set_sensitive_words(vec![WORD.to_owned()]);
    let app = TestApp::start(settings(db.url(), Some(&im), &[])).await;
    let create =
        json!({"command_id": format!("create {WORD}"), "room_id": "r1", "owner_id": "alice", "title": "t"});
    assert_eq!(app.post("/v1/rooms", create).await.0, 200);
    let join = json!({"command_id": format!("join {WORD}"), "user_id": "bob"});
    let (status, joined) = app.post("/v1/rooms/r1/join", join).await;
    assert_eq!(status, 200, "{joined}");
    let response = app
        .http
        .post(format!("{}/v1/rooms/r1/gifts", app.base))
        .header("x-request-id", format!("req-{WORD}"))
        .json(&gift(&format!("gift {WORD}"), "bob", "rose"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], format!("req-{WORD}").as_str(), "echoed as sent");
    let gifted: Value = response.json().await.unwrap();
    for answer in [&joined, &gifted] {
        let events = answer["events"].as_array().unwrap();
        let to_im = events.iter().filter(|e| e["delivery"] != "skipped");
        assert!(
            to_im.clone().count() == 1 && to_im.clone().all(|e| e["delivery"] == "delivered"),
            "{answer}"
        );
    }
    app.settle().await;
    let stats = im.stats();
    assert_eq!((stats.rejected, stats.accepted), (0, 2), "{stats:?}");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM room_outbox WHERE status = 'failed'").await, Some(0));
    // The command log keeps the caller's own id: a retry replays.
    let (status, replay) = app.post("/v1/rooms/r1/gifts", gift(&format!("gift {WORD}"), "bob", "rose")).await;
    assert_eq!((status, &replay["replayed"]), (200, &json!(true)), "{replay}");
    app.stop().await;
}
