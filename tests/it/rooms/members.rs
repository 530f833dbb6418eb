//! `GET /v1/rooms/{room_id}/members`: pages in user id order; bad input is a 400 naming it.

use serde_json::json;

use crate::api::{create_room, join};
use crate::support::TestDb;
use crate::support::app::{TestApp, settings};

#[tokio::test]
async fn members_page_in_user_id_order_with_next_after() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    for (n, user) in ["dave", "alice", "carol", "bob", "erin"].iter().enumerate() {
        assert_eq!(join(&app, "r1", user, &format!("j{n}")).await.0, 200);
    }
    let (status, page) = app.get("/v1/rooms/r1/members?limit=2").await;
    assert_eq!(status, 200, "{page}");
    let names = |page: &serde_json::Value| -> Vec<String> {
        page["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["user_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&page), ["alice", "bob"]);
    assert!(page["members"][0]["joined_at_ms"].as_i64().unwrap() > 0);
    assert_eq!(page["next_after"], "bob");
    let (_, page) = app.get("/v1/rooms/r1/members?limit=2&after=bob").await;
    assert_eq!(
        (names(&page), page["next_after"].clone()),
        (vec!["carol".to_owned(), "dave".to_owned()], json!("dave"))
    );
    let (_, page) = app.get("/v1/rooms/r1/members?limit=2&after=dave").await;
    assert_eq!((names(&page), page["next_after"].clone()), (vec!["erin".to_owned()], json!(null)));
    // Exactly a full last page: no next page is announced.
    let (_, page) = app.get("/v1/rooms/r1/members?limit=5").await;
    assert_eq!((names(&page).len(), page["next_after"].clone()), (5, json!(null)));
    // The default page holds up to 100.
    let (_, page) = app.get("/v1/rooms/r1/members").await;
    assert_eq!(names(&page).len(), 5);
    app.stop().await;
}

#[tokio::test]
async fn bad_members_queries_are_400_naming_the_parameter() {
    let db = TestDb::sqlite().await;
    let app = TestApp::start(settings(db.url(), None, &[])).await;
    create_room(&app, "r1").await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("after=bad%20id", "after"),
        ("cursor=x", "cursor"),
    ] {
        let (status, body) = app.get(&format!("/v1/rooms/r1/members?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], "invalid_argument", "{query}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{query}: {message}");
    }
    let (status, body) = app.get("/v1/rooms/nope/members").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("room_not_found")));
    app.stop().await;
}
