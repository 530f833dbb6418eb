//! Offered load above the limits: nothing refused or dropped, everything delivered, in room
//! order; a worker slower than its lease keeps its lease.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::join_all;

use super::{create, eventually, fake_with_limits, join, start, undelivered, version};
use crate::support::TestDb;

#[tokio::test]
async fn three_times_the_limits_nothing_refused_everything_delivered_in_room_order() {
    let db = TestDb::mysql().await;
    // Tencent's limits scaled by 0.3: 60 calls/s per app, 12 messages/s per group; ours keep
    // Tencent's margins (57 and 10.5 → 10).
    let im = fake_with_limits(Some(60), Some(12)).await;
    let app = start(
        &db,
        &im,
        &[
            ("im_rate_limit.global_per_sec", "57"),
            ("im_rate_limit.per_group_per_sec", "10"),
            ("outbox_worker.max_in_flight", "16"),
        ],
    )
    .await;
    let rooms: Vec<String> = (0..20).map(|i| format!("r{i:02}")).collect();
    for room in rooms.iter().chain(std::iter::once(&"hot".to_owned())) {
        create(&app, room).await;
    }
    // Three seconds at three times the limits: 144 events/s over 20 rooms, and one room at
    // 36/s (three times its group limit).
    let offered = |room: String, per_sec: u64, n: usize| {
        let app = &app;
        async move {
            let mut ids = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_millis(1000 / per_sec));
            for i in 0..n {
                tick.tick().await;
                ids.push(join(app, &room, &format!("u{i}")).await);
            }
            ids
        }
    };
    let mut loads: Vec<_> = rooms.iter().map(|r| offered(r.clone(), 7, 21)).collect();
    loads.push(offered("hot".to_owned(), 36, 108));
    let sent_ids: Vec<String> = join_all(loads).await.into_iter().flatten().collect();
    assert_eq!(sent_ids.len(), 20 * 21 + 108);

    eventually("every event delivered", Duration::from_secs(120), || async { undelivered(&db).await == 0 })
        .await;
    let stats = im.stats();
    assert_eq!((stats.rate_limited, stats.dropped), (0, 0), "refused or dropped for rate limits: {stats:?}");
    let messages = im.all_messages();
    let at_im: HashMap<&str, &str> =
        messages.iter().map(|m| (m.event_id.as_deref().unwrap(), m.group.as_str())).collect();
    for id in &sent_ids {
        assert!(at_im.contains_key(id.as_str()), "{id} never reached IM");
    }
    let mut by_room: HashMap<&str, Vec<u64>> = HashMap::new();
    for m in &messages {
        by_room.entry(m.group.as_str()).or_default().push(version(&m.data));
    }
    for (room, versions) in by_room {
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{room} out of room order: {versions:?}");
    }
    app.stop().await;
}
