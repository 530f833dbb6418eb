//! Leases and fencing: who may claim a row, when, and what a stale mark does.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use room_service::delivery::permits::RateLimitOptions;
use room_service::domain::EventType;
use room_service::outbox::{BatchReport, OutboxWorker};
use room_service::store::{Claim, Mark, PublishResult};
use room_service::telemetry::names::{OUTBOX_CLAIMED_TOTAL, OUTBOX_LEASE_LOST_TOTAL};
use room_service_fakes::fake_im::Fault;

use super::harness::*;

const FAST: Duration = Duration::from_millis(100);
const TIMEOUT: Duration = Duration::from_secs(2);

fn claim(worker_id: &str, lease: Duration) -> Claim {
    Claim::new(worker_id, 10, lease)
}

async fn a_row_under_an_unexpired_lease_is_not_claimed_by_another_worker(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined]).await;
    let held = db.repo.claim_outbox(&claim("worker-a-1", Duration::from_secs(60))).await.unwrap().rows;
    assert_eq!(held.len(), 1);

    let report =
        worker(db, &fake, "node-b", options(10, FAST, TIMEOUT)).process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport::default());
    let row = db.row(&ids[0]).await;
    assert_eq!((row.status.as_str(), row.worker_id.as_deref()), ("delivering", Some("worker-a-1")));
    assert_eq!(fake.stats().calls, 0);
}

async fn an_expired_lease_is_reclaimed_and_the_stale_mark_changes_nothing(db: &Db) {
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomUserJoined]).await;
    // Worker A claims, then stalls past its lease.
    let held = db.repo.claim_outbox(&claim("worker-a-1", Duration::from_millis(1))).await.unwrap().rows;
    assert_eq!(held.len(), 1);
    tokio::time::sleep(Duration::from_millis(20)).await;

    let report =
        worker(db, &fake, "node-b", options(10, FAST, TIMEOUT)).process_pending_outbox().await.unwrap();
    assert_eq!(report, BatchReport { claimed: 1, delivered: 1, ..BatchReport::default() });
    let row = db.row(&ids[0]).await;
    assert_eq!(row.status, "delivered");
    assert!(row.worker_id.as_deref().is_some_and(|w| w.starts_with("node-b-")), "{:?}", row.worker_id);

    // A wakes up and marks its (stale) failure: fenced out.
    let stale =
        PublishResult { id: held[0].id, mark: Mark::Retry { error: "late failure".into(), after: FAST } };
    let marks = db.repo.finish_claimed("worker-a-1", &[stale]).await.unwrap();
    assert_eq!((marks.delivered, marks.retried, marks.lease_lost), (0, 0, 1));
    let after = db.row(&ids[0]).await;
    assert_eq!((after.status.as_str(), after.retry_count, after.last_error), ("delivered", 0, None));
    assert_eq!(fake.messages(&group("room-1")).len(), 1);
}

async fn a_lease_lost_during_the_publish_leaves_the_row_alone_and_is_counted(db: &Db) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let fake = fake().await;
    let ids = db.insert_events("room-1", &[EventType::RoomGiftSent, EventType::RoomUserJoined]).await;
    fake.inject(Fault::Delay(Duration::from_millis(400)), 1);
    let worker = worker(db, &fake, "node-a", options(10, FAST, TIMEOUT));

    let batch = worker.process_pending_outbox();
    let intrude = async {
        eventually("the first publish is in flight", || async { fake.stats().calls >= 1 }).await;
        // Meanwhile the first row's lease is taken over by another claim.
        let sql = format!("UPDATE room_outbox SET worker_id = 'intruder-1' WHERE event_id = '{}'", ids[0]);
        db.exec(&sql).await;
    };
    let (report, ()) = tokio::join!(batch, intrude);
    assert_eq!(
        report.unwrap(),
        BatchReport { claimed: 2, delivered: 1, lease_lost: 1, ..BatchReport::default() }
    );
    let taken = db.row(&ids[0]).await;
    assert_eq!((taken.status.as_str(), taken.worker_id.as_deref()), ("delivering", Some("intruder-1")));
    assert_eq!(db.row(&ids[1]).await.status, "delivered");

    let counters: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => Some((key.key().name().to_owned(), n)),
            _ => None,
        })
        .collect();
    assert!(counters.contains(&(OUTBOX_CLAIMED_TOTAL.to_owned(), 2)), "{counters:?}");
    assert!(counters.contains(&(OUTBOX_LEASE_LOST_TOTAL.to_owned(), 1)), "{counters:?}");
}

async fn a_fresh_pending_row_is_not_claimable_before_the_publish_timeout(db: &Db) {
    let fake = fake().await;
    let id = new_event_id();
    let row = (id.clone(), "RoomUserJoined", envelope(&id, EventType::RoomUserJoined, "room-1"));
    db.insert_rows("room-1", vec![row], Duration::from_millis(1500)).await;
    let worker = worker(db, &fake, "node-a", options(10, FAST, TIMEOUT));
    assert_eq!(
        worker.process_pending_outbox().await.unwrap().claimed,
        0,
        "the sync path may still be publishing"
    );
    assert_eq!(db.row(&id).await.status, "pending");

    tokio::time::sleep(Duration::from_millis(1600)).await;
    assert_eq!(worker.process_pending_outbox().await.unwrap().delivered, 1);
    assert_eq!(fake.stats().calls, 1);
}

async fn two_workers_at_once_deliver_every_row_exactly_once(db: &Db) {
    let fake = fake().await;
    let rooms: Vec<String> = (0..6).map(|i| format!("room-{i}")).collect();
    let mut ids = Vec::new();
    for room in &rooms {
        ids.extend(db.insert_events(room, &[EventType::RoomUserJoined; 5]).await);
    }
    let a = worker(db, &fake, "node-a", options(4, FAST, TIMEOUT));
    let b = worker(db, &fake, "node-b", options(4, FAST, TIMEOUT));
    let (mut delivered_a, mut delivered_b) = (0, 0);
    // A worker gets nothing of a room whose head the other holds (room order), so rounds are
    // repeated until everything went out.
    for _ in 0..100 {
        let (ra, rb) = tokio::join!(a.process_pending_outbox(), b.process_pending_outbox());
        delivered_a += ra.unwrap().delivered;
        delivered_b += rb.unwrap().delivered;
        if delivered_a + delivered_b >= 30 {
            break;
        }
        tokio::time::sleep(FAST).await;
    }
    assert_eq!(delivered_a + delivered_b, 30);
    assert!(db.rows().await.iter().all(|r| r.status == "delivered"));
    // Packs carry several rows of a room in one call: count the calls that carried each event.
    let sends = fake.sends_by_event();
    assert_eq!(sends.len(), 30);
    assert!(sends.values().all(|s| s.calls == 1), "a row was published by both workers: {sends:?}");
    let sent: HashSet<_> = fake.all_messages().into_iter().filter_map(|m| m.event_id).collect();
    assert_eq!(sent, ids.into_iter().collect());
}

both_backends!(
    a_row_under_an_unexpired_lease_is_not_claimed_by_another_worker,
    an_expired_lease_is_reclaimed_and_the_stale_mark_changes_nothing,
    a_lease_lost_during_the_publish_leaves_the_row_alone_and_is_counted,
    a_fresh_pending_row_is_not_claimable_before_the_publish_timeout,
    two_workers_at_once_deliver_every_row_exactly_once,
    a_worker_slower_than_its_lease_renews_it_and_sends_nothing_twice,
);

/// MariaDB: sessions claiming at the same moment get disjoint rows (SKIP LOCKED on each room's
/// head and the rows behind it), at most one of them takes a room, and, marking what they
/// claimed between rounds, together they take every row once, each room's rows in id order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_on_mariadb_are_disjoint() {
    let db = Db::mariadb().await;
    for i in 0..8 {
        db.insert_events(&format!("room-{i}"), &[EventType::RoomUserJoined; 10]).await;
    }
    let mut claimed: Vec<i64> = Vec::new();
    let mut by_room: HashMap<String, Vec<i64>> = HashMap::new();
    for round in 0..50 {
        let claimers: Vec<_> = (0..4)
            .map(|w| {
                let repo = db.repo.clone();
                tokio::spawn(async move {
                    let c = Claim::new(format!("w-{round}-{w}"), 5, Duration::from_secs(60));
                    (c.worker_id.clone(), repo.claim_outbox(&c).await.expect("claim").rows)
                })
            })
            .collect();
        let mut seen = HashSet::new();
        let mut rooms_taken = HashSet::new();
        // Every claim of the round ends before any of its rows is marked: a mark in between
        // would let a later claim of the round take the same room legitimately.
        let mut results = Vec::new();
        for claimer in claimers {
            results.push(claimer.await.expect("no panic"));
        }
        for (worker_id, rows) in results {
            let rooms: HashSet<&str> = rows.iter().map(|r| r.room_id.as_str()).collect();
            for room in rooms {
                assert!(rooms_taken.insert(room.to_owned()), "two claims took {room} in round {round}");
            }
            for row in &rows {
                assert!(seen.insert(row.id), "row {} claimed twice in round {round}", row.id);
                by_room.entry(row.room_id.clone()).or_default().push(row.id);
                claimed.push(row.id);
            }
            let done: Vec<PublishResult> =
                rows.iter().map(|r| PublishResult { id: r.id, mark: Mark::Delivered }).collect();
            db.repo.finish_claimed(&worker_id, &done).await.expect("mark");
        }
        assert!(!seen.is_empty() || claimed.len() == 80, "round {round} claimed nothing");
        if claimed.len() == 80 {
            break;
        }
    }
    assert_eq!(claimed.iter().collect::<HashSet<_>>().len(), 80, "every row claimed once");
    for (room, ids) in by_room {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{room} claimed out of order: {ids:?}");
    }
}

async fn a_worker_slower_than_its_lease_renews_it_and_sends_nothing_twice(db: &Db) {
    let fake = fake().await;
    // 60 rows in two rooms at 5 publishes per second: 12 s, beyond the 10 s lease.
    for room in ["room-a", "room-b"] {
        db.insert_events(room, &[EventType::RoomUserJoined; 30]).await;
    }
    let limits = RateLimitOptions {
        global_per_sec: 5,
        per_group_per_sec: 5,
        worker_share: 1.0,
        pause: Duration::from_secs(1),
    };
    let options = options(100, FAST, Duration::from_secs(1));
    assert_eq!(options.lease(), Duration::from_secs(10));
    let publisher = super::harness::stack(&fake, options.publish_timeout);
    let worker = OutboxWorker::new(db.repo.clone(), publisher, "slow", options)
        .with_permits(super::harness::permits(limits));
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!((report.claimed, report.delivered, report.lease_lost), (60, 60, 0), "{report:?}");
    assert!(db.rows().await.iter().all(|r| r.status == "delivered"));
    assert_eq!((fake.stats().accepted, fake.stats().duplicates), (60, 0), "nothing sent twice");
}
