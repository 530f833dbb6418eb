//! `create_group` is admitted fairly between owners (docs/DESIGN.md, "Fair group creation"):
//! against the fake IM over loopback, with the API's limit at 20 calls a second, one owner's
//! burst of 40 creations does not hold another owner's room behind it — its group is created
//! after at most a call or two of the burst's, where first come first served would have put it
//! behind the whole burst.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::TestDb;
use crate::support::app::{TestApp, fake_im, settings};

/// How many rooms the flooding owner creates at once.
const BURST: usize = 40;

/// The `create_group` calls the fake IM has seen, by group id, in arrival order.
fn creations(im: &room_service_fakes::fake_im::FakeIm) -> Vec<String> {
    im.journal().into_iter().filter(|e| e.api == "create_group").filter_map(|e| e.group).collect()
}

#[tokio::test]
async fn one_owners_burst_of_creations_does_not_hold_another_owners_group_behind_it() {
    let db = TestDb::sqlite().await;
    let im = fake_im().await;
    let overrides = [
        ("im_rate_limit.global_per_sec", "20"),
        ("im_rate_limit.per_group_per_sec", "20"),
        // The burst's lanes keep waiting for their turn (no outbox worker here).
        ("outbox_worker.publish_timeout", "10s"),
    ];
    let app = std::sync::Arc::new(TestApp::start(settings(db.url(), Some(&im), &overrides)).await);
    let create = |room: String, owner: &'static str| {
        let app = std::sync::Arc::clone(&app);
        tokio::spawn(async move {
            let body =
                json!({"command_id": format!("c-{room}"), "room_id": room, "owner_id": owner, "title": "t"});
            let (status, answer) = app.post("/v1/rooms", body).await;
            assert_eq!(status, 200, "{answer}");
        })
    };
    let burst: Vec<_> = (0..BURST).map(|n| create(format!("flood-{n}"), "flooder")).collect();
    // The burst is queued and being served: a few of its groups are created already.
    let until = Instant::now() + Duration::from_secs(10);
    while creations(&im).len() < 3 {
        assert!(Instant::now() < until, "the burst's groups are not being created");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = creations(&im).len();
    create("honest".into(), "honest").await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let at = loop {
        if let Some(at) = creations(&im).iter().position(|g| g.ends_with("honest")) {
            break at;
        }
        assert!(Instant::now() < until, "the honest room's group was never created");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ahead = at.saturating_sub(before);
    assert!(ahead <= 3, "{ahead} of the burst's groups were created before the honest room's (of {BURST})");
    // And the burst is not starved for it: every one of its groups is created.
    for call in burst {
        call.await.unwrap();
    }
    let until = Instant::now() + Duration::from_secs(15);
    while creations(&im).len() < BURST + 1 {
        assert!(Instant::now() < until, "only {} of {} groups created", creations(&im).len(), BURST + 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::sync::Arc::try_unwrap(app).ok().expect("the only handle").stop().await;
}
