//! The claim by room: a claim takes each room's oldest undelivered rows, from its head, never
//! later rows of a room whose head it cannot send; no room waits while its head is claimable,
//! and a hot room never takes a whole batch from the others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use room_service::domain::EventType;
use room_service::outbox::OutboxWorker;
use room_service::store::{
    Claim, ClaimedBatch, MarkReport, OutboxQuery, OutboxQueue, OutboxRow, PublishResult, SharedRepository,
    StoreError,
};

use super::harness::*;

const FAST: Duration = Duration::from_millis(50);
const TIMEOUT: Duration = Duration::from_secs(2);

/// The store under a worker, checking every claim against the table right after it: each
/// room's claimed rows must be its oldest undelivered rows (behind, at most, rows the worker's
/// earlier claims, `claim.own`, hold and publish first in memory), contiguous in id order.
#[derive(Debug)]
struct HeadFirst {
    repo: SharedRepository,
    claims: Mutex<Vec<Vec<i64>>>,
    violations: Mutex<Vec<String>>,
}

impl HeadFirst {
    fn over(db: &Db) -> Arc<Self> {
        Arc::new(Self { repo: db.repo.clone(), claims: Mutex::default(), violations: Mutex::default() })
    }

    fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    async fn check(&self, claim: &Claim, rows: &[OutboxRow]) {
        let all = self.repo.list_outbox(&OutboxQuery { status: None, after_id: 0, limit: u32::MAX }).await;
        let all = all.expect("list outbox");
        let claimed: BTreeSet<i64> = rows.iter().map(|r| r.id).collect();
        let rooms: BTreeSet<&str> = rows.iter().map(|r| r.room_id.as_str()).collect();
        for room in rooms {
            let ids = || rows.iter().filter(|r| r.room_id == room).map(|r| r.id);
            let (first, last) = (ids().min().unwrap_or(0), ids().max().unwrap_or(0));
            for row in all.iter().filter(|r| r.room_id == room && r.id < last && r.lock_until_ms.is_some()) {
                let held_here = row.status == "delivering"
                    && row.worker_id.as_ref().is_some_and(|w| claim.own.contains(w));
                let ahead_and_held_here = held_here && row.id < first;
                if !(claimed.contains(&row.id) || ahead_and_held_here) {
                    self.violations.lock().unwrap().push(format!(
                        "claim {} took rows of {room} up to {last} behind row {} ({}, worker {:?}, lock {:?})",
                        claim.worker_id, row.id, row.status, row.worker_id, row.lock_until_ms
                    ));
                }
            }
        }
        self.claims.lock().unwrap().push(rows.iter().map(|r| r.id).collect());
    }
}

#[async_trait::async_trait]
impl OutboxQueue for HeadFirst {
    async fn claim_outbox(&self, claim: &Claim) -> Result<ClaimedBatch, StoreError> {
        let batch = self.repo.claim_outbox(claim).await?;
        self.check(claim, &batch.rows).await;
        Ok(batch)
    }

    async fn finish_claimed(
        &self,
        worker_id: &str,
        results: &[PublishResult],
    ) -> Result<MarkReport, StoreError> {
        self.repo.finish_claimed(worker_id, results).await
    }

    async fn release_claimed(&self, worker_id: &str, ids: &[i64]) -> Result<u64, StoreError> {
        self.repo.release_claimed(worker_id, ids).await
    }

    async fn renew_lease(&self, worker_id: &str, lease: Duration) -> Result<u64, StoreError> {
        self.repo.renew_lease(worker_id, lease).await
    }

    async fn next_claimable_in(&self) -> Result<Option<Duration>, StoreError> {
        self.repo.next_claimable_in().await
    }
}

/// Commits `n` RoomUserJoined rows for `room` in commits of at most 500, claimable after
/// `claim_after`; returns their event ids in order.
async fn insert_many(db: &Db, room: &str, n: usize, claim_after: Duration) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let rows: Vec<_> = (0..(n - ids.len()).min(500))
            .map(|_| {
                let id = new_event_id();
                (id.clone(), "RoomUserJoined", envelope(&id, EventType::RoomUserJoined, room))
            })
            .collect();
        ids.extend(rows.iter().map(|r| r.0.clone()));
        db.insert_rows(room, rows, claim_after).await;
    }
    ids
}

/// The event ids the fake IM accepted for `room`, in order.
fn sent(fake: &room_service_fakes::fake_im::FakeIm, room: &str) -> Vec<String> {
    fake.messages(&group(room)).into_iter().filter_map(|m| m.event_id).collect()
}

async fn a_hot_room_backlog_behind_its_claimable_head_is_claimed_from_the_head(db: &Db) {
    let fake = fake().await;
    // The head failed once; its retry time passed ten seconds ago, so it is claimable.
    let head = db.insert_events("hot", &[EventType::RoomUserJoined]).await;
    let behind = insert_many(db, "hot", 2000, Duration::from_secs(60)).await;
    let now = db.now_ms().await;
    db.exec(&format!(
        "UPDATE room_outbox SET status = 'retryable', retry_count = 1, lock_until_ms = {} WHERE event_id = '{}'",
        now - 10_000,
        head[0]
    ))
    .await;
    // The sync path gave up on the rest: lock_until_ms 0, ahead of the head in due order.
    assert_eq!(db.repo.release_pending(&behind).await.unwrap(), 2000);

    let store = HeadFirst::over(db);
    let options = options(500, FAST, TIMEOUT);
    let worker =
        OutboxWorker::new(store.clone(), stack(&fake, TIMEOUT), "node-a", options).with_per_room_rate(1000);
    let first = worker.process_pending_outbox().await.unwrap();
    assert!(first.claimed > 0, "the first claim takes the room's rows: {first:?}");
    assert_eq!((first.delivered, first.deferred), (first.claimed as u64, 0), "{first:?}");
    assert_eq!(sent(&fake, "hot").first(), Some(&head[0]), "the head goes out first");
    for round in 0..20 {
        if db.rows().await.iter().all(|r| r.status == "delivered") {
            break;
        }
        let report = worker.process_pending_outbox().await.unwrap();
        assert_eq!(report.deferred, 0, "round {round}: claimed rows handed back: {report:?}");
        assert!(report.claimed > 0, "round {round}: nothing claimed while the room waits: {report:?}");
    }
    let expected: Vec<String> = head.iter().chain(&behind).cloned().collect();
    assert_eq!(sent(&fake, "hot"), expected, "every row once, in id order");
    assert_eq!(store.violations(), Vec::<String>::new());
}

async fn a_running_worker_drains_a_hot_room_from_its_head_beside_the_other_rooms(db: &Db) {
    let fake = fake().await;
    let head = db.insert_events("hot", &[EventType::RoomUserJoined]).await;
    let behind = insert_many(db, "hot", 1000, Duration::from_secs(60)).await;
    let now = db.now_ms().await;
    db.exec(&format!(
        "UPDATE room_outbox SET status = 'retryable', retry_count = 1, lock_until_ms = {} WHERE event_id = '{}'",
        now - 10_000,
        head[0]
    ))
    .await;
    assert_eq!(db.repo.release_pending(&behind).await.unwrap(), 1000);
    let quiet: Vec<String> = (0..20).map(|i| format!("quiet-{i:02}")).collect();
    for room in &quiet {
        db.insert_events(room, &[EventType::RoomUserJoined]).await;
    }

    let store = HeadFirst::over(db);
    let options = options(200, FAST, TIMEOUT);
    let worker =
        OutboxWorker::new(store.clone(), stack(&fake, TIMEOUT), "node-a", options).with_per_room_rate(100);
    let cancel = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { worker.run_outbox_worker(cancel).await }
    });
    eventually("every row delivered", || async { db.rows().await.iter().all(|r| r.status == "delivered") })
        .await;
    // Idle now: the worker claims on its ticks, it does not spin.
    let before = store.claims.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = store.claims.lock().unwrap().len() - before;
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("worker exits").expect("no panic");

    let expected: Vec<String> = head.iter().chain(&behind).cloned().collect();
    assert_eq!(sent(&fake, "hot"), expected, "the hot room from its head, every row once, in id order");
    let order: Vec<String> = fake.all_messages().into_iter().map(|m| m.group).collect();
    for room in &quiet {
        let at = order.iter().position(|g| *g == group(room)).expect("sent");
        assert!(at < 100, "{room} waited behind {at} events");
    }
    assert!(idle <= 15, "{idle} claims in 500 ms of idling at a 50 ms poll");
    assert_eq!(store.violations(), Vec::<String>::new());
}

async fn a_room_whose_head_another_claim_holds_gets_nothing_while_other_rooms_are_claimed(db: &Db) {
    let fake = fake().await;
    let held = db.insert_events("held", &[EventType::RoomUserJoined; 3]).await;
    let free = db.insert_events("free", &[EventType::RoomUserJoined; 2]).await;
    // Another node's claim holds the held room's head under a live lease.
    let now = db.now_ms().await;
    db.exec(&format!(
        "UPDATE room_outbox SET status = 'delivering', worker_id = 'node-b-1', lock_until_ms = {} \
         WHERE event_id = '{}'",
        now + 60_000,
        held[0]
    ))
    .await;

    let store = HeadFirst::over(db);
    let worker =
        OutboxWorker::new(store.clone(), stack(&fake, TIMEOUT), "node-a", options(10, FAST, TIMEOUT));
    let report = worker.process_pending_outbox().await.unwrap();
    assert_eq!((report.claimed, report.delivered, report.deferred), (2, 2, 0), "{report:?}");
    assert_eq!(sent(&fake, "free"), free);
    assert!(sent(&fake, "held").is_empty());
    for id in &held[1..] {
        let row = db.row(id).await;
        assert_eq!((row.status.as_str(), row.worker_id.as_deref()), ("pending", None), "never claimed");
    }
    assert_eq!(db.row(&held[0]).await.worker_id.as_deref(), Some("node-b-1"));
    assert_eq!(store.violations(), Vec::<String>::new());
}

async fn a_big_room_shares_the_batch_with_the_small_rooms(db: &Db) {
    insert_many(db, "big", 5000, Duration::ZERO).await;
    let small: Vec<String> = (0..50).map(|i| format!("small-{i:02}")).collect();
    for room in &small {
        db.insert_events(room, &[EventType::RoomUserJoined; 2]).await;
    }
    let first = db.repo.claim_outbox(&Claim::new("node-a-1", 100, Duration::from_secs(60))).await.unwrap();
    let next =
        Claim { after_room: first.cursor.clone(), ..Claim::new("node-a-2", 100, Duration::from_secs(60)) };
    let (first, second) = (first.rows, db.repo.claim_outbox(&next).await.unwrap().rows);
    let per_room = |rows: &[OutboxRow]| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for row in rows {
            *counts.entry(row.room_id.clone()).or_default() += 1;
        }
        counts
    };
    let (one, two) = (per_room(&first), per_room(&second));
    assert!(first.len() <= 100 && second.len() <= 100);
    let small_in_first = small.iter().filter(|r| one.contains_key(*r)).count();
    assert!(small_in_first >= 45, "{small_in_first} small rooms in the first claim: {one:?}");
    assert!(one.get("big").copied().unwrap_or(0) <= 10, "the big room took {one:?}");
    let served: BTreeSet<&String> = one.keys().chain(two.keys()).collect();
    for room in &small {
        assert!(served.contains(room), "{room} waited beyond two claims: {one:?} / {two:?}");
    }
    // Each room's claimed rows are its oldest, in id order.
    let rows = db.rows().await;
    for (room, n) in &one {
        let oldest: Vec<i64> = rows.iter().filter(|r| &r.room_id == room).map(|r| r.id).take(*n).collect();
        let got: Vec<i64> = first.iter().filter(|r| &r.room_id == room).map(|r| r.id).collect();
        assert_eq!(got, oldest, "{room}");
    }
}

both_backends!(
    a_hot_room_backlog_behind_its_claimable_head_is_claimed_from_the_head,
    a_running_worker_drains_a_hot_room_from_its_head_beside_the_other_rooms,
    a_room_whose_head_another_claim_holds_gets_nothing_while_other_rooms_are_claimed,
    a_big_room_shares_the_batch_with_the_small_rooms,
);
