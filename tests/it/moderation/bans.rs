//! Kicks and bans (SPEC §14.2): a kick removes the member and refuses their rejoin with 409
//! `banned` and its `until_ms` until the ban ends on its own or is lifted; a flood of refused
//! joins writes nothing; the active mutes and bans page for the owner and admins only; a ban
//! outlives a restart of the service.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::*;
use crate::auth::{SERVICE_TOKEN, call, jwt_overrides, make, pairs, post, rs256, serve_jwks};
use crate::support::app::{TestApp, settings};
use crate::support::backends;

/// The `until_ms` of a refused join's error, asserting it is a 409 `banned`.
fn banned_until(status: u16, answer: &Value) -> i64 {
    assert_eq!((status, error(answer).0), (409, "banned"), "{answer}");
    answer["error"]["until_ms"].as_i64().expect("error.until_ms")
}

#[tokio::test]
async fn a_kick_removes_the_member_and_their_rejoin_is_banned_until_unbanned() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob", "carol"]).await;
        let kicked =
            ok(&app, "r1", "kicks", "alice", json!({"user_id": "bob", "ban_s": 600, "reason": "spam"})).await;
        assert_eq!(members(&app, "r1").await, ["carol"], "{db}: bob is off the members page");
        assert_eq!(room(&app, "r1").await["member_count"], 1, "{db}");

        let now = db.now_ms().await;
        let (status, answer) = join(&app, "r1", "bob").await;
        let until_ms = banned_until(status, &answer);
        assert!((now + 590_000..=now + 600_000).contains(&until_ms), "{db}: {until_ms} vs now {now}");
        let event = &events_of(&app, "r1", "RoomUserKicked").await[0];
        assert_eq!(event["room_version"], kicked["room_version"], "{db}");
        assert_eq!(
            (&event["payload"]["user_id"], &event["payload"]["until_ms"], &event["payload"]["reason"]),
            (&json!("bob"), &json!(until_ms), &json!("spam")),
            "{db}: {event}"
        );
        assert_eq!(members(&app, "r1").await, ["carol"], "{db}: the refused join changed nothing");

        ok(&app, "r1", "unban", "alice", json!({"user_id": "bob"})).await;
        let (status, answer) = join(&app, "r1", "bob").await;
        assert_eq!((status, &answer["applied"]), (200, &json!(true)), "{db}: unbanned: {answer}");
        assert_eq!(members(&app, "r1").await, ["bob", "carol"], "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_short_ban_ends_on_its_own_without_a_command() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob"]).await;
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "bob", "ban_s": 1})).await;
        let (status, answer) = join(&app, "r1", "bob").await;
        let until_ms = banned_until(status, &answer);
        let before = written(&db, &app, "r1").await;
        // Wait out the ban on the database clock (the room's clock), then a little more.
        while db.now_ms().await < until_ms + 50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: the ban ends without a command");
        let (status, answer) = join(&app, "r1", "bob").await;
        assert_eq!((status, &answer["applied"]), (200, &json!(true)), "{db}: the ban ended: {answer}");
        app.stop().await;
    }
}

#[tokio::test]
async fn five_hundred_concurrent_joins_of_a_banned_user_are_all_409_and_write_nothing() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob"]).await;
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "bob", "ban_s": 600})).await;
        let before = written(&db, &app, "r1").await;
        let statuses: Vec<(u16, String)> = futures::stream::iter(0..500)
            .map(|_| async {
                let (status, answer) = join(&app, "r1", "bob").await;
                (status, error(&answer).0.to_owned())
            })
            .buffer_unordered(100)
            .collect()
            .await;
        let banned = statuses.iter().filter(|(s, c)| *s == 409 && c == "banned").count();
        assert_eq!(banned, 500, "{db}: every join refused as banned: {:?}", &statuses[..5]);
        app.settle().await;
        assert_eq!(written(&db, &app, "r1").await, before, "{db}: a refused join costs no write");
        app.stop().await;
    }
}

#[tokio::test]
async fn a_ban_outlives_a_restart_of_the_service() {
    for db in backends().await {
        let app = TestApp::start(settings(db.url(), None, &[])).await;
        create(&app, "r1", "alice").await;
        join_all(&app, "r1", &["bob"]).await;
        ok(&app, "r1", "kicks", "alice", json!({"user_id": "bob", "ban_s": 600})).await;
        let (status, answer) = join(&app, "r1", "bob").await;
        let until_ms = banned_until(status, &answer);
        app.stop().await;

        let app = TestApp::start(settings(db.url(), None, &[])).await;
        let (status, answer) = join(&app, "r1", "bob").await;
        assert_eq!(banned_until(status, &answer), until_ms, "{db}: the same ban after a restart");
        assert!(members(&app, "r1").await.is_empty(), "{db}");
        app.stop().await;
    }
}

#[tokio::test]
async fn the_moderation_list_pages_mutes_and_bans_for_the_owner_and_admins_only() {
    let made = make(json!({"jwts": {"alice": rs256("alice"), "adm": rs256("adm"), "mem": rs256("mem")}}));
    for db in backends().await {
        let overrides = jwt_overrides(&serve_jwks(made.jwks.clone()).await);
        let app = TestApp::start(settings(db.url(), None, &pairs(&overrides, &[]))).await;
        let (alice, adm, mem) = (made.token("alice"), made.token("adm"), made.token("mem"));
        let body = json!({"command_id": "c1", "room_id": "r1", "owner_id": "alice", "title": "t"});
        assert_eq!(post(&app, "/v1/rooms", body, Some(alice)).await.status, 200, "{db}");
        for (user, token) in [("adm", adm), ("mem", mem)] {
            let body = json!({"command_id": cid("j"), "user_id": user});
            assert_eq!(post(&app, "/v1/rooms/r1/join", body, Some(token)).await.status, 200, "{db}");
        }
        let appoint = json!({"command_id": "a1", "user_id": "adm", "admin": true});
        assert_eq!(post(&app, "/v1/rooms/r1/admins", appoint, Some(alice)).await.status, 200, "{db}");
        // Mutes of u1–u5 (alice's), bans of u4–u7 (the admin's); u4 and u5 hold both.
        let mut expected = Vec::new();
        for n in 1..=7 {
            let user = format!("u{n}");
            if n >= 4 {
                let body = json!({"command_id": cid("k"), "user_id": user, "ban_s": 600, "reason": "r"});
                let answer = post(&app, "/v1/rooms/r1/kicks", body, Some(adm)).await;
                assert_eq!(answer.status, 200, "{db}: {answer:?}");
                expected.push((user.clone(), "ban".to_owned(), "adm".to_owned()));
            }
            if n <= 5 {
                let body = json!({"command_id": cid("m"), "user_id": user, "duration_s": 600});
                assert_eq!(post(&app, "/v1/rooms/r1/mutes", body, Some(alice)).await.status, 200, "{db}");
                expected.push((user, "mute".to_owned(), "alice".to_owned()));
            }
        }
        expected.sort();
        // A lifted mute is no longer listed.
        let lift = json!({"command_id": "m0", "user_id": "u1", "duration_s": 0});
        assert_eq!(post(&app, "/v1/rooms/r1/mutes", lift, Some(alice)).await.status, 200, "{db}");
        expected.retain(|(user, kind, _)| !(user == "u1" && kind == "mute"));

        for token in [alice, adm] {
            let (mut all, pages) = walk(&app, "", 2, token).await;
            assert!(all.windows(2).all(|w| w[0].0 <= w[1].0), "{db}: in user order: {all:?}");
            all.sort();
            assert_eq!(all, expected, "{db}: every active entry once");
            assert!(pages >= 4, "{db}: limit 2 pages them ({pages} pages)");
            let (bans, _) = walk(&app, "&kind=ban", 3, token).await;
            assert_eq!(bans, expected.iter().filter(|e| e.1 == "ban").cloned().collect::<Vec<_>>(), "{db}");
        }
        let member = call(&app, "GET", "/v1/rooms/r1/moderation", None, Some(mem)).await;
        assert_eq!((member.status, member.code()), (403, "forbidden"), "{db}: {member:?}");
        assert!(member.message().contains("admin"), "{db}: names the role: {}", member.message());
        let service = call(&app, "GET", "/v1/rooms/r1/moderation", None, Some(SERVICE_TOKEN)).await;
        assert_eq!(service.body["entries"].as_array().map(Vec::len), Some(expected.len().min(100)), "{db}");
        app.stop().await;
    }
}

/// Every page of the moderation list (`filter` is more of the query, `&kind=...`) with
/// `limit`, as `token`: the entries as (user, kind, by) in page order, and how many pages.
async fn walk(
    app: &TestApp,
    filter: &str,
    limit: usize,
    token: &str,
) -> (Vec<(String, String, String)>, usize) {
    let (mut all, mut pages, mut after) = (Vec::new(), 0, String::new());
    loop {
        let path = format!("/v1/rooms/r1/moderation?limit={limit}&after={after}{filter}");
        let page = call(app, "GET", &path, None, Some(token)).await;
        assert_eq!(page.status, 200, "{path}: {page:?}");
        let entries = page.body["entries"].as_array().expect("entries");
        // A user's entries are never split across pages, so a page holds at most one more.
        assert!(entries.len() <= limit + 1, "{path}: {entries:?}");
        for e in entries {
            assert!(e["until_ms"].as_i64().is_some_and(|u| u > 0), "{e}");
            let text = |k: &str| e[k].as_str().expect(k).to_owned();
            all.push((text("user_id"), text("kind"), text("by")));
        }
        pages += 1;
        match page.body["next_after"].as_str() {
            Some(next) => after = next.to_owned(),
            None => return (all, pages),
        }
    }
}
