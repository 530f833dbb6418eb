//! The outbox status machine: sync `mark_delivered`, worker claims under a lease, and the
//! fenced `finish_claimed`.

use std::time::Duration;

use room_service::store::{Claim, ClaimScope, Mark, MarkReport, OutboxRow, PublishResult};

use super::{commit, event_ids};
use crate::support::{TestDb, backends};

fn claim(worker_id: &str, limit: usize, lease: Duration) -> Claim {
    Claim::new(worker_id, limit, lease)
}

const LONG: Duration = Duration::from_secs(60);

async fn claim_ids(db: &TestDb, c: &Claim) -> Vec<i64> {
    let rows = db.repo.claim_outbox(c).await.unwrap_or_else(|e| panic!("{db}: claim: {e}")).rows;
    rows.iter().map(|r| r.id).collect()
}

fn ok(id: i64) -> PublishResult {
    PublishResult { id, mark: Mark::Delivered }
}

fn failed(id: i64, error: &str, retry_after: Duration) -> PublishResult {
    PublishResult { id, mark: Mark::Retry { error: error.to_owned(), after: retry_after } }
}

#[tokio::test]
async fn mark_delivered_moves_pending_rows_only() {
    for db in backends().await {
        let c = commit("r1", "c1", 0, 3);
        db.repo.commit_room(&c).await.unwrap();
        let events = event_ids(&c);
        let claimed = claim_ids(&db, &claim("w1", 1, LONG)).await;
        let delivering_before = db.outbox_row(&events[0]).await;
        assert_eq!(delivering_before.status, "delivering", "{db}");

        let mut ids = events.clone();
        ids.push("no-such-event".into());
        let before = db.now_ms().await;
        assert_eq!(db.repo.mark_delivered(&ids).await.unwrap(), 2, "{db}: the two pending rows");
        let after = db.now_ms().await;
        for event in &events[1..] {
            let row = db.outbox_row(event).await;
            assert_eq!(row.status, "delivered", "{db}");
            assert_eq!(row.lock_until_ms, None, "{db}");
            let at = row.delivered_at_ms.unwrap_or_else(|| panic!("{db}: delivered_at_ms NULL"));
            assert!((before - 1..=after + 1).contains(&at), "{db}: delivered_at_ms {at}");
        }
        assert_eq!(claimed, vec![delivering_before.id], "{db}");
        assert_eq!(db.outbox_row(&events[0]).await, delivering_before, "{db}: delivering row untouched");
        assert_eq!(db.repo.mark_delivered(&events).await.unwrap(), 0, "{db}: nothing left to mark");
        assert_eq!(db.repo.mark_delivered(&[]).await.unwrap(), 0, "{db}");
    }
}

#[tokio::test]
async fn fresh_pending_row_is_claimable_only_after_publish_timeout() {
    for db in backends().await {
        let mut slow = commit("r1", "c1", 0, 1);
        slow.claim_after = Duration::from_secs(5);
        db.repo.commit_room(&slow).await.unwrap();
        assert_eq!(claim_ids(&db, &claim("w1", 10, LONG)).await, Vec::<i64>::new(), "{db}: too fresh");
        let row = db.outbox_row(&slow.outbox[0].event_id).await;
        assert_eq!((row.status.as_str(), row.worker_id), ("pending", None), "{db}");

        let now = commit("r2", "c2", 0, 1);
        db.repo.commit_room(&now).await.unwrap();
        let id = db.outbox_row(&now.outbox[0].event_id).await.id;
        assert_eq!(claim_ids(&db, &claim("w1", 10, LONG)).await, vec![id], "{db}: publish_timeout 0");
    }
}

#[tokio::test]
async fn claim_marks_rows_delivering_under_a_lease() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 2)).await.unwrap();
        let before = db.now_ms().await;
        let claimed = db.repo.claim_outbox(&claim("node-a/1", 10, LONG)).await.unwrap().rows;
        let after = db.now_ms().await;
        assert_eq!(claimed.len(), 2, "{db}");
        assert_eq!(claimed, db.outbox().await, "{db}: returned rows are the stored rows");
        for row in &claimed {
            assert_eq!(row.status, "delivering", "{db}");
            assert_eq!(row.worker_id.as_deref(), Some("node-a/1"), "{db}");
            assert_eq!(row.retry_count, 0, "{db}");
            let lock = row.lock_until_ms.unwrap_or_else(|| panic!("{db}: no lease"));
            assert!((before + 60_000 - 1..=after + 60_000 + 1).contains(&lock), "{db}: lease {lock}");
        }
    }
}

#[tokio::test]
async fn unexpired_lease_is_not_claimed_by_another_worker() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 2)).await.unwrap();
        assert_eq!(claim_ids(&db, &claim("w1", 10, LONG)).await.len(), 2, "{db}");
        assert_eq!(claim_ids(&db, &claim("w2", 10, LONG)).await, Vec::<i64>::new(), "{db}");
        for row in db.outbox().await {
            assert_eq!(row.worker_id.as_deref(), Some("w1"), "{db}: lease kept");
        }
    }
}

#[tokio::test]
async fn expired_lease_is_reclaimed_and_the_old_holder_is_fenced_out() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        let first = claim_ids(&db, &claim("w1", 10, Duration::ZERO)).await;
        assert_eq!(first.len(), 1, "{db}");
        assert_eq!(claim_ids(&db, &claim("w2", 10, LONG)).await, first, "{db}: expired lease reclaimed");
        let held = db.outbox().await;
        assert_eq!(held[0].worker_id.as_deref(), Some("w2"), "{db}");

        let report = db.repo.finish_claimed("w1", &[failed(first[0], "late", Duration::ZERO)]).await.unwrap();
        assert_eq!(
            report,
            MarkReport { delivered: 0, retried: 0, lease_lost: 1, ..MarkReport::default() },
            "{db}"
        );
        assert_eq!(db.outbox().await, held, "{db}: the stale mark changed nothing");
    }
}

#[tokio::test]
async fn claim_takes_a_rooms_rows_from_its_head_in_id_order_and_rooms_in_due_order() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 5)).await.unwrap();
        let ids: Vec<i64> = db.outbox().await.iter().map(|r| r.id).collect();
        // All due, in another order than their ids: the room's rows still go from its head.
        let now = db.now_ms().await;
        for (id, ago) in [(ids[0], 1_000), (ids[1], 5_000), (ids[2], 500), (ids[3], 5_000), (ids[4], 2_000)] {
            db.execute(format!("UPDATE room_outbox SET lock_until_ms = {} WHERE id = {id}", now - ago)).await;
        }
        assert_eq!(claim_ids(&db, &claim("w1", 1, LONG)).await, vec![ids[0]], "{db}: the head, limit 1");
        assert_eq!(claim_ids(&db, &claim("w2", 10, LONG)).await, Vec::<i64>::new(), "{db}: head held by w1");
        db.repo.finish_claimed("w1", &[ok(ids[0])]).await.unwrap();
        assert_eq!(claim_ids(&db, &claim("w3", 2, LONG)).await, vec![ids[1], ids[2]], "{db}: the next two");
        // Behind rows its own earlier claim holds, a worker takes the room's next rows.
        let behind = Claim { own: vec!["w3".into()], ..claim("w4", 10, LONG) };
        assert_eq!(claim_ids(&db, &behind).await, vec![ids[3], ids[4]], "{db}: behind w3's rows");

        // Rooms come in the order their first claimed row fell due: a released row first.
        db.repo.commit_room(&commit("r2", "c2", 0, 2)).await.unwrap();
        let mut live = commit("r3", "c3", 0, 1);
        live.claim_after = LONG;
        db.repo.commit_room(&live).await.unwrap();
        assert_eq!(db.repo.release_pending(&event_ids(&live)).await.unwrap(), 1, "{db}");
        let rows = db.repo.claim_outbox(&claim("w5", 10, LONG)).await.unwrap().rows;
        let rooms: Vec<&str> = rows.iter().map(|r| r.room_id.as_str()).collect();
        assert_eq!(rooms, ["r3", "r2", "r2"], "{db}");
    }
}

#[tokio::test]
async fn a_claim_takes_at_most_per_room_rows_of_a_room_with_the_rows_its_worker_holds() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 10)).await.unwrap();
        let ids: Vec<i64> = db.outbox().await.iter().map(|r| r.id).collect();
        let capped = |worker: &str, own: &[&str]| Claim {
            own: own.iter().map(|w| (*w).to_owned()).collect(),
            per_room: 4,
            ..claim(worker, 10, LONG)
        };
        let first = db.repo.claim_outbox(&capped("w1", &[])).await.unwrap();
        assert_eq!(first.rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids[..4], "{db}");
        assert!(first.more, "{db}: the room has more");
        let full = db.repo.claim_outbox(&capped("w2", &["w1"])).await.unwrap();
        assert!(full.rows.is_empty(), "{db}: w1 holds four of the room already");
        db.repo.finish_claimed("w1", &[ok(ids[0]), ok(ids[1])]).await.unwrap();
        let more = db.repo.claim_outbox(&capped("w3", &["w1"])).await.unwrap();
        assert_eq!(more.rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids[4..6], "{db}: two freed");
    }
}

#[tokio::test]
async fn a_cluster_claim_takes_its_shards_rooms_and_others_only_once_orphaned() {
    for db in backends().await {
        let (mine, theirs) = ("room-mine", "room-theirs");
        db.repo.commit_room(&commit(mine, "c1", 0, 2)).await.unwrap();
        db.repo.commit_room(&commit(theirs, "c2", 0, 2)).await.unwrap();
        let shard = |room: &str| room_service::cluster::shard_of(room);
        assert_ne!(shard(mine), shard(theirs), "two shards");
        let scoped = |worker: &str| Claim {
            scope: Some(ClaimScope { shards: vec![shard(mine)], orphaned_after: Duration::from_secs(20) }),
            ..claim(worker, 10, LONG)
        };
        let rows = db.repo.claim_outbox(&scoped("w1")).await.unwrap().rows;
        assert!(rows.len() == 2 && rows.iter().all(|r| r.room_id == mine), "{db}: {rows:?}");
        // The other shard's rows, claimable for longer than the grace: the safety net.
        let long_ago = db.now_ms().await - 30_000;
        db.execute(format!(
            "UPDATE room_outbox SET lock_until_ms = {long_ago}, updated_at_ms = {long_ago} WHERE room_id = '{theirs}'"
        ))
        .await;
        let rows = db.repo.claim_outbox(&scoped("w2")).await.unwrap().rows;
        assert!(rows.len() == 2 && rows.iter().all(|r| r.room_id == theirs), "{db}: {rows:?}");
    }
}

#[tokio::test]
async fn finish_claimed_records_successes_and_failures() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 4)).await.unwrap();
        let ids = claim_ids(&db, &claim("w1", 10, LONG)).await;
        assert_eq!(ids.len(), 4, "{db}");
        let results = [
            ok(ids[0]),
            failed(ids[1], "im timeout", Duration::from_secs(30)),
            ok(ids[2]),
            failed(ids[3], "im 90001", Duration::from_secs(90)),
        ];
        let before = db.now_ms().await;
        let report = db.repo.finish_claimed("w1", &results).await.unwrap();
        let after = db.now_ms().await;
        assert_eq!(
            report,
            MarkReport { delivered: 2, retried: 2, lease_lost: 0, ..MarkReport::default() },
            "{db}"
        );

        let rows = db.outbox().await;
        for row in [&rows[0], &rows[2]] {
            assert_eq!((row.status.as_str(), row.last_error.as_deref()), ("delivered", None), "{db}");
            assert_eq!(row.lock_until_ms, None, "{db}");
            assert!(row.delivered_at_ms.is_some_and(|at| (before - 1..=after + 1).contains(&at)), "{db}");
        }
        for (row, error, delay) in [(&rows[1], "im timeout", 30_000), (&rows[3], "im 90001", 90_000)] {
            assert_eq!(row.status, "retryable", "{db}");
            assert_eq!((row.retry_count, row.last_error.as_deref()), (1, Some(error)), "{db}");
            let lock = row.lock_until_ms.unwrap_or_else(|| panic!("{db}: no retry time"));
            assert!((before + delay - 1..=after + delay + 1).contains(&lock), "{db}: retry at {lock}");
            assert_eq!(row.delivered_at_ms, None, "{db}");
        }
        assert_eq!(claim_ids(&db, &claim("w2", 10, LONG)).await, Vec::<i64>::new(), "{db}: not yet due");
    }
}

#[tokio::test]
async fn retryable_row_is_claimed_again_when_due_and_counts_attempts() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        let id = claim_ids(&db, &claim("w1", 10, LONG)).await[0];
        db.repo.finish_claimed("w1", &[failed(id, "first", Duration::ZERO)]).await.unwrap();
        assert_eq!(claim_ids(&db, &claim("w2", 10, LONG)).await, vec![id], "{db}: due at once");
        let report = db.repo.finish_claimed("w2", &[failed(id, "second", Duration::ZERO)]).await.unwrap();
        assert_eq!(report.retried, 1, "{db}");
        let row: OutboxRow = db.outbox().await.remove(0);
        assert_eq!((row.retry_count, row.last_error.as_deref()), (2, Some("second")), "{db}");
    }
}

#[tokio::test]
async fn finish_claimed_by_a_worker_that_does_not_hold_the_rows_changes_nothing() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 3)).await.unwrap();
        let ids = claim_ids(&db, &claim("w1", 10, LONG)).await;
        let held = db.outbox().await;
        let results = [ok(ids[0]), failed(ids[1], "boom", Duration::ZERO), ok(ids[2])];
        let report = db.repo.finish_claimed("w1-previous-claim", &results).await.unwrap();
        assert_eq!(
            report,
            MarkReport { delivered: 0, retried: 0, lease_lost: 3, ..MarkReport::default() },
            "{db}"
        );
        assert_eq!(db.outbox().await, held, "{db}: rows unchanged");

        // Once delivered by its holder, a repeated mark by the same worker is a lost lease too.
        db.repo.finish_claimed("w1", &[ok(ids[0])]).await.unwrap();
        let report = db.repo.finish_claimed("w1", &[ok(ids[0]), ok(ids[1])]).await.unwrap();
        assert_eq!(
            report,
            MarkReport { delivered: 1, retried: 0, lease_lost: 1, ..MarkReport::default() },
            "{db}"
        );
    }
}

#[tokio::test]
async fn finish_claimed_stores_a_long_error_shortened_to_fit_last_error() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        let id = claim_ids(&db, &claim("w1", 10, LONG)).await[0];
        let long = format!("{}{}", "é".repeat(300), "x".repeat(300)); // 600 chars
        let report = db.repo.finish_claimed("w1", &[failed(id, &long, Duration::ZERO)]).await;
        let report = report.unwrap_or_else(|e| panic!("{db}: a long error must not fail the mark: {e}"));
        assert_eq!(report.retried, 1, "{db}");
        let stored = db.outbox().await.remove(0).last_error.unwrap_or_else(|| panic!("{db}: no last_error"));
        let chars = stored.chars().count();
        assert!(chars <= 512, "{db}: {chars} chars stored; last_error holds 512");
        assert!(stored.starts_with("éé"), "{db}: keeps the start of the message");
    }
}

#[tokio::test]
async fn rows_a_lane_releases_are_its_own_nodes_at_once_and_another_nodes_only_once_orphaned() {
    for db in backends().await {
        let (mine, theirs) = ("room-mine", "room-theirs");
        let shard = |room: &str| room_service::cluster::shard_of(room);
        assert_ne!(shard(mine), shard(theirs), "two shards");
        // Fresh rows under their young-pending guard, as a command commits them for its lane.
        for (room, command) in [(mine, "c1"), (theirs, "c2")] {
            let mut fresh = commit(room, command, 0, 2);
            fresh.claim_after = LONG;
            db.repo.commit_room(&fresh).await.unwrap();
        }
        let scoped = |worker: &str, room: &str| Claim {
            scope: Some(ClaimScope { shards: vec![shard(room)], orphaned_after: Duration::from_secs(20) }),
            ..claim(worker, 10, LONG)
        };
        assert!(db.repo.claim_outbox(&scoped("w0", mine)).await.unwrap().rows.is_empty(), "{db}: guarded");
        // The lane of `theirs`' owner gives its rows up.
        let theirs_ids: Vec<String> =
            db.outbox().await.into_iter().filter(|r| r.room_id == theirs).map(|r| r.event_id).collect();
        assert_eq!(db.repo.release_pending(&theirs_ids).await.unwrap(), 2, "{db}");
        // Not an orphan to the node owning the other shard...
        let rows = db.repo.claim_outbox(&scoped("w1", mine)).await.unwrap().rows;
        assert!(rows.is_empty(), "{db}: another node took released rows at once: {rows:?}");
        // ... but at once its own node's worker's.
        let rows = db.repo.claim_outbox(&scoped("w2", theirs)).await.unwrap().rows;
        assert!(rows.len() == 2 && rows.iter().all(|r| r.room_id == theirs), "{db}: {rows:?}");
    }
}

#[tokio::test]
async fn a_lane_parks_and_guards_again_only_rows_still_under_its_guard() {
    for db in backends().await {
        let mut fresh = commit("r1", "c1", 0, 3);
        fresh.claim_after = LONG;
        db.repo.commit_room(&fresh).await.unwrap();
        let events = event_ids(&fresh);
        // A refused event parked, as the worker parks one.
        let parked =
            db.repo.park_pending(&events[0], "permanent", "permanent: IM error 80001").await.unwrap();
        assert!(parked, "{db}");
        let row = db.outbox_row(&events[0]).await;
        assert_eq!((row.status.as_str(), row.park_reason.as_deref()), ("failed", Some("permanent")), "{db}");
        assert_eq!((row.retry_count, row.lock_until_ms), (1, None), "{db}");
        assert_eq!(row.last_error.as_deref(), Some("permanent: IM error 80001"), "{db}");
        assert!(!db.repo.park_pending(&events[0], "permanent", "again").await.unwrap(), "{db}: parked once");
        // A longer guard for the others, not for the parked one.
        let before = db.now_ms().await;
        assert_eq!(db.repo.extend_guard(&events[1..], LONG * 2).await.unwrap(), 2, "{db}");
        let guarded = db.outbox_row(&events[1]).await.lock_until_ms.unwrap_or(0);
        assert!(guarded >= before + 2 * 60_000 - 1, "{db}: guarded until {guarded}, now {before}");
        assert_eq!(db.repo.extend_guard(&events[..1], LONG).await.unwrap(), 0, "{db}");
        // A row the worker may claim (its guard released) or holds is left to the worker.
        assert_eq!(db.repo.release_pending(&events[1..2]).await.unwrap(), 1, "{db}");
        assert!(!db.repo.park_pending(&events[1], "permanent", "late").await.unwrap(), "{db}: guard passed");
        assert_eq!(db.repo.extend_guard(&events[1..], LONG).await.unwrap(), 1, "{db}: only the guarded one");
        let claimed = claim_ids(&db, &claim("w1", 10, LONG)).await;
        assert_eq!(claimed, vec![db.outbox_row(&events[1]).await.id], "{db}");
        assert!(!db.repo.park_pending(&events[1], "permanent", "held").await.unwrap(), "{db}: the worker's");
        assert_eq!(db.outbox_row(&events[1]).await.status, "delivering", "{db}");
    }
}
