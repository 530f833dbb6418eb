//! SIGKILL of the real binary in the middle of a webhook backlog: the restarted consumer
//! resumes from its position, every event arrives, and at most one batch arrives twice.

use std::collections::HashMap;
use std::time::Duration;

use room_service::domain::EventType;
use room_service_fakes::fake_im::FakeImOptions;

use super::receiver::{Receiver, SECRET};
use crate::delivery::{Node, eventually};
use crate::outbox::harness::{ADMIN, APP, Db, KEY};
use crate::support::TestDb;

const BATCH: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_resumes_from_the_position_with_at_most_one_batch_sent_twice() {
    let test_db = TestDb::mysql().await;
    let db_url = test_db.url().to_owned();
    let outbox = Db::over(test_db);
    for room in 0..20 {
        outbox.insert_events(&format!("crash-{room}"), &[EventType::RoomUserJoined; 50]).await;
    }
    let expected: Vec<String> = outbox.rows().await.into_iter().map(|r| r.event_id).collect();
    let receiver = Receiver::start().await;
    receiver.set_latency(Duration::from_millis(5));
    let mut options = FakeImOptions::new(APP, KEY, ADMIN);
    (options.per_group_limit_per_sec, options.global_limit_per_sec) = (None, None);
    let im = room_service_fakes::fake_im::FakeIm::start(options).await;
    let mut node = Node::new(&db_url, &im);
    node.env = vec![
        ("ROOM_SERVICE__CONSUMERS__WEBHOOK__ENABLED".into(), "true".into()),
        ("ROOM_SERVICE__CONSUMERS__WEBHOOK__URL".into(), receiver.url.clone()),
        ("ROOM_SERVICE__CONSUMERS__WEBHOOK__SECRET".into(), SECRET.into()),
        ("ROOM_SERVICE__CONSUMERS__WEBHOOK__BATCH_SIZE".into(), BATCH.to_string()),
        ("ROOM_SERVICE__CONSUMERS__WEBHOOK__RATE_LIMIT_PER_SEC".into(), "0".into()),
        ("ROOM_SERVICE__CONSUMERS__POLL_INTERVAL".into(), "50ms".into()),
    ];

    let mut first = node.spawn();
    eventually("the backlog is under way", Duration::from_secs(30), || async {
        receiver.event_ids().len() >= 300
    })
    .await;
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let mut second = node.spawn();
    eventually("the restarted consumer delivers the rest", Duration::from_secs(60), || async {
        receiver.event_ids().iter().collect::<std::collections::HashSet<_>>().len() == expected.len()
    })
    .await;
    second.kill().unwrap();
    second.wait().unwrap();

    let received = receiver.event_ids();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut first_order = Vec::new();
    for id in &received {
        let n = seen.entry(id).or_default();
        *n += 1;
        if *n == 1 {
            first_order.push(id.clone());
        }
    }
    let twice = received.len() - expected.len();
    eprintln!("{} events, {twice} sent twice (batch {BATCH})", expected.len());
    assert_eq!(first_order, expected, "every event, first seen in commit order");
    assert!(twice <= BATCH, "{twice} events sent twice: more than one batch of {BATCH}");
    assert_eq!(receiver.bad_signatures(), 0);
}
