//! Hostile moderation input (SPEC §14.2): one admin's 10,000 attribute writes cost only that
//! admin (the per-user command limit answers 429 beyond it, writing nothing) while another
//! room's users are all served; and values at their limits, of what JSON must escape and of
//! multi-byte characters, never break an event: the events API serves them within budget.

use std::time::Duration;

use futures::StreamExt;
use room_service::domain::LARGEST_IM_EVENT_BYTES;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{cid, events, room};
use crate::auth::{Made, jwt_overrides, make, pairs, post, rs256, serve_jwks};
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

const PER_SEC: u64 = 50;
const WRITES: usize = 10_000;
const FLOOD_FOR: Duration = Duration::from_secs(10);
const VIEWERS: usize = 30;

fn viewer(n: usize) -> String {
    format!("v{n:02}")
}

fn tokens() -> Made {
    let mut jwts = serde_json::Map::new();
    for user in ["alice", "adm", "bella"].into_iter().map(str::to_owned).chain((0..VIEWERS).map(viewer)) {
        jwts.insert(user.clone(), rs256(&user));
    }
    make(json!({"jwts": jwts}))
}

/// Asserts `path` with `body` (a fresh command id) as `token` answers 200.
async fn must(app: &TestApp, path: &str, mut body: Value, token: &str) -> Value {
    body["command_id"] = cid("h").into();
    let answer = post(app, path, body.clone(), Some(token)).await;
    assert_eq!(answer.status, 200, "{path} {body}: {answer:?}");
    answer.body
}

async fn start(db: &TestDb, made: &Made) -> TestApp {
    let overrides = jwt_overrides(&serve_jwks(made.jwks.clone()).await);
    let per_sec = PER_SEC.to_string();
    let app = TestApp::start(settings(
        db.url(),
        None,
        &pairs(&overrides, &[("auth.per_user_commands_per_sec", &per_sec)]),
    ))
    .await;
    let (alice, bella) = (made.token("alice"), made.token("bella"));
    must(&app, "/v1/rooms", json!({"room_id": "ra", "owner_id": "alice", "title": "A"}), alice).await;
    must(&app, "/v1/rooms/ra/admins", json!({"user_id": "adm", "admin": true}), alice).await;
    must(&app, "/v1/rooms", json!({"room_id": "rb", "owner_id": "bella", "title": "B"}), bella).await;
    app
}

/// Each viewer joins room B and sends three gifts: every status.
async fn room_b(app: &TestApp, made: &Made) -> Vec<u16> {
    futures::stream::iter(0..VIEWERS)
        .map(|n| async move {
            let (user, token) = (viewer(n), made.token(&viewer(n)));
            let mut statuses = Vec::new();
            let join = json!({"command_id": cid("bj"), "user_id": user});
            statuses.push(post(app, "/v1/rooms/rb/join", join, Some(token)).await.status);
            for _ in 0..3 {
                let gift = json!({"command_id": cid("bg"), "sender_id": user, "receiver_id": "bella",
                    "gift_id": "rose", "count": 1, "unit_value": 10});
                statuses.push(post(app, "/v1/rooms/rb/gifts", gift, Some(token)).await.status);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            statuses
        })
        .buffer_unordered(VIEWERS)
        .flat_map(futures::stream::iter)
        .collect()
        .await
}

/// The admin's writes to room A, as fast as 200 at once allow, none sent after `FLOOD_FOR`:
/// every status, and how long it took.
async fn flood(app: &TestApp, token: &str) -> (Vec<u16>, Duration) {
    let started = Instant::now();
    let statuses: Vec<u16> = futures::stream::iter(0..WRITES)
        .map(|n| async move {
            if started.elapsed() > FLOOD_FOR {
                return None;
            }
            let body = json!({"command_id": cid("a"), "set": {"k": n.to_string()}});
            Some(post(app, "/v1/rooms/ra/attributes", body, Some(token)).await.status)
        })
        .buffer_unordered(200)
        .filter_map(|status| async move { status })
        .collect()
        .await;
    (statuses, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_ten_thousand_attribute_writes_cost_only_that_admin() {
    let made = tokens();
    let db = TestDb::mysql().await;
    let app = start(&db, &made).await;
    let ((a, elapsed), b) = tokio::join!(flood(&app, made.token("adm")), room_b(&app, &made));

    assert_eq!(b.len(), VIEWERS * 4);
    assert!(b.iter().all(|s| *s == 200), "every command of room B is served: {b:?}");
    let accepted = a.iter().filter(|s| **s == 200).count() as u64;
    let limited = a.iter().filter(|s| **s == 429).count();
    assert_eq!(
        accepted as usize + limited,
        a.len(),
        "200 or 429 only: {:?}",
        a.iter().find(|s| ![200, 429].contains(*s))
    );
    assert!(limited > 0 && accepted > 0, "{accepted} accepted, {limited} limited of {}", a.len());
    // The limit's rate over the time it ran, and one second's burst.
    let bound = PER_SEC * elapsed.as_secs_f64().ceil() as u64 + PER_SEC;
    assert!(accepted <= bound, "{accepted} accepted in {elapsed:?}: over {bound}");
    eprintln!("{} writes in {elapsed:?}: {accepted} accepted, {limited} limited", a.len());

    // A limited write wrote nothing: room A moved once per accepted write.
    let a_version = room(&app, "ra").await["version"].as_u64().unwrap();
    assert_eq!(a_version, 2 + accepted, "room A: its creation, the admin, each accepted write");
    let b_view = room(&app, "rb").await;
    assert_eq!((b_view["member_count"].as_u64(), b_view["heat"].as_i64()), (Some(VIEWERS as u64), Some(900)));
    app.settle().await;
    assert_eq!(db.count("room_command_log").await as u64, 3 + accepted + (VIEWERS * 4) as u64);
    app.stop().await;
}

#[tokio::test]
async fn values_at_their_limits_never_break_an_event() {
    let made = tokens();
    for db in crate::support::backends().await {
        let app = start(&db, &made).await;
        let (alice, adm) = (made.token("alice"), made.token("adm"));
        let v00 = made.token(&viewer(0));
        must(&app, "/v1/rooms/ra/join", json!({"user_id": viewer(0)}), v00).await;
        // 1,000 bytes of what JSON escapes and of 4-byte characters; a 200-byte reason of
        // 2-byte characters; a value of 1,024 quotes (2 KB escaped, the most a value may take)
        // and a 500-byte one of backslashes (1 KB escaped).
        let announcement = format!("{}{}", "\"\\\n<>&\u{2028}".repeat(100), "😀".repeat(25));
        assert_eq!(announcement.len(), 1000);
        let reason = "é\"".repeat(66) + "é";
        assert_eq!(reason.len(), 200);
        let (quotes, backslashes) = ("\"".repeat(1024), "\\".repeat(500));
        must(&app, "/v1/rooms/ra/info", json!({"announcement": announcement, "title": "😀".repeat(64)}), adm)
            .await;
        let kick = json!({"user_id": viewer(0), "ban_s": 2_592_000, "reason": reason});
        must(&app, "/v1/rooms/ra/kicks", kick, adm).await;
        must(&app, "/v1/rooms/ra/attributes", json!({"set": {"q": quotes}}), adm).await;
        let written = must(&app, "/v1/rooms/ra/attributes", json!({"set": {"b": backslashes}}), alice).await;

        let events = events(&app, "ra").await;
        let of = |t: &str| events.iter().filter(|(e, _)| e["event_type"] == t).collect::<Vec<_>>();
        assert_eq!(of("RoomInfoChanged")[0].0["payload"]["announcement"], json!(announcement), "{db}");
        assert_eq!(of("RoomUserKicked")[0].0["payload"]["reason"], json!(reason), "{db}");
        let attributes = of("RoomAttributesChanged");
        // Too long for an event: the key and its version, the value read from the room.
        assert_eq!(attributes[0].0["payload"]["values_omitted"], true, "{db}");
        assert!(attributes[0].0["payload"]["versions"]["q"].is_u64(), "{db}");
        assert_eq!(attributes[1].0["payload"]["set"]["b"], json!(backslashes), "{db}");
        for (event, bytes) in &events {
            assert!(*bytes <= LARGEST_IM_EVENT_BYTES, "{db}: {} of {bytes} bytes", event["event_type"]);
        }
        let view = room(&app, "ra").await;
        assert_eq!(view["attributes"]["q"]["value"], json!(quotes), "{db}");
        assert_eq!(view["attributes"]["b"]["version"], written["room_version"], "{db}");
        assert_eq!(view["announcement"], json!(announcement), "{db}");
        app.stop().await;
    }
}
