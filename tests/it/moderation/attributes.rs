//! Room attributes and info (SPEC §14.2): writes and versions visible in the room's view, a
//! conditional write refused with 409 naming the key and nothing written, every limit 400
//! naming its field; and an announcement and a kick reason at their limits, of characters JSON
//! must escape, reach the events API intact within the envelope's budget.

use room_service::domain::LARGEST_IM_EVENT_BYTES;
use serde_json::{Value, json};

use super::*;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// Asserts `body` on `route` is refused with `status`/`code`, its message starting with `field`
/// (400) or naming it, and writes nothing.
async fn refused(db: &TestDb, app: &TestApp, route: &str, body: Value, status: u16, code: &str, field: &str) {
    let before = written(db, app, "r1").await;
    let (got, answer) = act(app, "r1", route, "alice", body.clone()).await;
    let (got_code, message) = error(&answer);
    assert_eq!((got, got_code), (status, code), "{db}: {route} {body}: {answer}");
    assert!(message.contains(field), "{db}: {route}: the error names {field}: {message}");
    if status == 400 {
        assert!(message.starts_with(&format!("{field}:")), "{db}: {route}: {message}");
    }
    assert_eq!(written(db, app, "r1").await, before, "{db}: {route}: a refusal writes nothing");
}

#[tokio::test]
async fn attributes_carry_the_version_that_wrote_them_and_expect_makes_a_write_conditional() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        let first = ok(&app, "r1", "attributes", "alice", json!({"set": {"a": "1", "b": "2"}})).await;
        let v1 = first["room_version"].as_u64().unwrap();
        let view = room(&app, "r1").await;
        assert_eq!(
            view["attributes"],
            json!({"a": {"value": "1", "version": v1}, "b": {"value": "2", "version": v1}}),
            "{db}"
        );
        let second = ok(&app, "r1", "attributes", "alice", json!({"set": {"a": "3"}, "delete": ["b"]})).await;
        let v2 = second["room_version"].as_u64().unwrap();
        assert_eq!(room(&app, "r1").await["attributes"], json!({"a": {"value": "3", "version": v2}}), "{db}");
        let changed = events_of(&app, "r1", "RoomAttributesChanged").await;
        assert_eq!(changed.len(), 2, "{db}");
        assert_eq!(
            changed[1]["payload"],
            json!({"set": {"a": "3"}, "deleted": ["b"], "versions": {"a": v2}, "by": "alice"}),
            "{db}"
        );

        // A stale expectation (a was read at v1) and an absent key expected present: 409 naming
        // the key, nothing written.
        let stale = json!({"set": {"a": "4", "c": "x"}, "expect": {"a": v1}});
        refused(&db, &app, "attributes", stale, 409, "attribute_conflict", "\"a\"").await;
        let absent = json!({"set": {"a": "4"}, "expect": {"b": v2}});
        refused(&db, &app, "attributes", absent, 409, "attribute_conflict", "\"b\"").await;
        // At the versions read, it applies; 0 expects a key absent.
        let fresh = json!({"set": {"a": "4", "c": "x"}, "expect": {"a": v2, "c": 0}});
        let third = ok(&app, "r1", "attributes", "alice", fresh).await;
        let v3 = third["room_version"].as_u64().unwrap();
        assert_eq!(
            room(&app, "r1").await["attributes"],
            json!({"a": {"value": "4", "version": v3}, "c": {"value": "x", "version": v3}}),
            "{db}"
        );
        app.stop().await;
    }
}

#[tokio::test]
async fn each_attribute_limit_answers_400_naming_the_field_and_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        // 32 keys, 8 of them of 2 KB: the room is full on both counts.
        let big = "v".repeat(2048);
        let set: serde_json::Map<String, Value> = (0..32)
            .map(|n| (format!("k{n:02}"), json!(if n < 8 { big.clone() } else { String::new() })))
            .collect();
        ok(&app, "r1", "attributes", "alice", json!({"set": set})).await;
        refused(&db, &app, "attributes", json!({"set": {"k33": "x"}}), 400, "invalid_argument", "set").await;
        let over_total = json!({"set": {"k08": "x"}});
        refused(&db, &app, "attributes", over_total, 400, "invalid_argument", "set").await;
        let value_over = json!({"set": {"k00": "v".repeat(2049)}});
        refused(&db, &app, "attributes", value_over, 400, "invalid_argument", "set").await;
        for key in ["", "a key", "é", "a/b", &"k".repeat(65)] {
            let bad = json!({"set": {key: "x"}});
            refused(&db, &app, "attributes", bad, 400, "invalid_argument", "set").await;
        }
        // Room for more once one is deleted, and a 64-byte key of every allowed character.
        let key = format!("{}_.:-Z9", "k".repeat(58));
        ok(&app, "r1", "attributes", "alice", json!({"set": {&key: "x"}, "delete": ["k00"]})).await;
        let attributes = room(&app, "r1").await["attributes"].clone();
        assert_eq!(attributes.as_object().map(|a| a.len()), Some(32), "{db}");
        assert_eq!(attributes[&key]["value"], "x", "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn each_info_limit_answers_400_naming_the_field_and_writes_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        let bad = [
            (json!({"title": ""}), "title"),
            (json!({"title": "t".repeat(65)}), "title"),
            (json!({"title": "a\u{0}b"}), "title"),
            (json!({"announcement": "a".repeat(1001)}), "announcement"),
            (json!({"announcement": "a\u{7}b"}), "announcement"),
            (json!({"cover_url": "http://cdn.test/c.png"}), "cover_url"),
            (json!({"cover_url": format!("https://cdn.test/{}", "c".repeat(496))}), "cover_url"),
            (json!({"cover_url": "https://cdn.test/a b.png"}), "cover_url"),
        ];
        for (body, field) in bad {
            refused(&db, &app, "info", body, 400, "invalid_argument", field).await;
        }
        // At the limits it applies: 64 characters (of 3 bytes), 1,000 bytes, 512 bytes.
        let title = "語".repeat(64);
        let announcement = format!("{}\n", "a".repeat(999));
        let cover_url = format!("https://cdn.test/{}", "c".repeat(495));
        let info = json!({"title": title, "announcement": announcement, "cover_url": cover_url});
        ok(&app, "r1", "info", "alice", info).await;
        let view = room(&app, "r1").await;
        assert_eq!((&view["title"], &view["announcement"]), (&json!(title), &json!(announcement)), "{db}");
        assert_eq!(view["cover_url"], json!(cover_url), "{db}");
        let changed = &events_of(&app, "r1", "RoomInfoChanged").await[0]["payload"];
        assert_eq!(changed["cover_url"], json!(cover_url), "{db}: {changed}");
        app.stop().await;
    }
}

#[tokio::test]
async fn an_announcement_and_a_kick_reason_of_quotes_reach_the_events_api_intact() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob"]).await;
        let announcement = "\"".repeat(1000);
        let reason = "\"".repeat(200);
        ok(&app, "r1", "info", "alice", json!({"announcement": announcement})).await;
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "bob", "reason": reason})).await;
        let events = events(&app, "r1").await;
        let info =
            events.iter().find(|(e, _)| e["event_type"] == "RoomInfoChanged").expect("RoomInfoChanged");
        let kick = events.iter().find(|(e, _)| e["event_type"] == "RoomUserKicked").expect("RoomUserKicked");
        assert_eq!(info.0["payload"]["announcement"], json!(announcement), "{db}: intact");
        assert_eq!(kick.0["payload"]["reason"], json!(reason), "{db}: intact");
        for (event, bytes) in [info, kick] {
            assert!(*bytes <= LARGEST_IM_EVENT_BYTES, "{db}: {bytes} bytes: {}", event["event_type"]);
        }
        assert_eq!(room(&app, "r1").await["announcement"], json!(announcement), "{db}");
        app.stop().await;
    }
}

/// Attributes are rows of their own (like members): a command writes only the keys it changed,
/// the snapshot row every command rewrites stays small however much a room holds, and the
/// attributes come back whole after a restart.
#[tokio::test]
async fn a_rooms_16_kb_of_attributes_stay_out_of_the_snapshot_row_and_survive_a_restart() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "big", "alice").await;
        for i in 0..8 {
            let value = format!("{i}").repeat(2048);
            ok(&app, "big", "attributes", "alice", json!({"set": {format!("k{i}"): value}})).await;
        }
        let (status, _) = join(&app, "big", "bob").await;
        assert_eq!(status, 200, "{db}");
        let snapshot = db.scalar("SELECT LENGTH(state) FROM room_snapshot WHERE room_id = 'big'").await;
        assert!(snapshot.is_some_and(|bytes| bytes < 2_048), "{db}: a snapshot row of {snapshot:?} bytes");
        assert_eq!(db.count("room_attribute").await, 8, "{db}");
        let before = room(&app, "big").await["attributes"].clone();
        app.stop().await;
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let after = room(&app, "big").await["attributes"].clone();
        assert_eq!(after, before, "{db}: reloaded from their rows");
        assert_eq!(after["k7"]["value"].as_str().map(str::len), Some(2048), "{db}");
        app.stop().await;
    }
}
