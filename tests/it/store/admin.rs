//! The admin reads: backlog stats, the paged listing and per-event statuses.

use std::time::Duration;

use room_service::store::{Claim, Mark, OutboxQuery, OutboxStats, OutboxStatus, PublishResult};

use super::{commit, event_ids};
use crate::support::backends;

fn claim(worker_id: &str, limit: usize) -> Claim {
    Claim::new(worker_id, limit, Duration::from_secs(60))
}

#[tokio::test]
async fn outbox_stats_counts_per_status_and_oldest_ages() {
    for db in backends().await {
        assert_eq!(db.repo.outbox_stats().await.unwrap(), OutboxStats::default(), "{db}: empty");
        // Six rows: ids[0] delivered, ids[1] retryable, ids[2] delivering, ids[3..5] pending,
        // ids[5] failed.
        db.repo.commit_room(&commit("r1", "c1", 0, 6)).await.unwrap();
        let ids: Vec<i64> = db.outbox().await.iter().map(|r| r.id).collect();
        let now = db.now_ms().await;
        for (id, age) in
            [(ids[0], 900_000), (ids[1], 3_000), (ids[2], 1_000), (ids[3], 10_000), (ids[5], 500_000)]
        {
            db.execute(format!("UPDATE room_outbox SET created_at_ms = {} WHERE id = {id}", now - age)).await;
        }
        let claimed: Vec<i64> =
            db.repo.claim_outbox(&claim("w1", 3)).await.unwrap().rows.iter().map(|r| r.id).collect();
        assert_eq!(claimed, ids[..3], "{db}");
        let results = [
            PublishResult { id: ids[0], mark: Mark::Delivered },
            PublishResult {
                id: ids[1],
                mark: Mark::Retry { error: "e".into(), after: Duration::from_secs(60) },
            },
        ];
        db.repo.finish_claimed("w1", &results).await.unwrap();
        db.execute(format!(
            "UPDATE room_outbox SET status = 'failed', retry_count = 7, lock_until_ms = NULL WHERE id = {}",
            ids[5]
        ))
        .await;

        let stats = db.repo.outbox_stats().await.unwrap();
        let elapsed = db.now_ms().await - now;
        assert_eq!(
            (stats.pending, stats.delivering, stats.retryable, stats.failed),
            (2, 1, 1, 1),
            "{db}: {stats:?}"
        );
        let pending_age = stats.oldest_pending_age_ms.unwrap_or_else(|| panic!("{db}: no pending age"));
        assert!((10_000..=10_000 + elapsed + 1).contains(&pending_age), "{db}: {stats:?}");
        let retry_age = stats.oldest_retryable_age_ms.unwrap_or_else(|| panic!("{db}: no retry age"));
        assert!((3_000..=3_000 + elapsed + 1).contains(&retry_age), "{db}: {stats:?}");
        assert_eq!(stats.max_retry_count, 7, "{db}: {stats:?}");
    }
}

#[tokio::test]
async fn list_outbox_pages_by_after_id_and_filters_by_status() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 5)).await.unwrap();
        let all = db.outbox().await;
        let ids: Vec<i64> = all.iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), 5, "{db}");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{db}: ascending ids");

        let page = |after_id, status, limit| OutboxQuery { status, after_id, limit };
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let rows = db.repo.list_outbox(&page(after, None, 2)).await.unwrap();
            assert!(rows.len() <= 2, "{db}: limit");
            let Some(last) = rows.last() else { break };
            after = last.id;
            seen.extend(rows.iter().map(|r| r.id));
        }
        assert_eq!(seen, ids, "{db}: pages cover every row once, in order");

        db.repo.claim_outbox(&claim("w1", 2)).await.unwrap();
        let ids_of =
            |rows: Vec<room_service::store::OutboxRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
        let delivering = db.repo.list_outbox(&page(0, Some(OutboxStatus::Delivering), 10)).await.unwrap();
        assert_eq!(ids_of(delivering), ids[..2], "{db}");
        let pending = db.repo.list_outbox(&page(ids[2], Some(OutboxStatus::Pending), 10)).await.unwrap();
        assert_eq!(ids_of(pending), ids[3..], "{db}: status filter and paging together");
        let delivered = db.repo.list_outbox(&page(0, Some(OutboxStatus::Delivered), 10)).await.unwrap();
        assert!(delivered.is_empty(), "{db}");
    }
}

#[tokio::test]
async fn outbox_statuses_reports_each_known_event() {
    for db in backends().await {
        let c = commit("r1", "c1", 0, 3);
        db.repo.commit_room(&c).await.unwrap();
        let events = event_ids(&c);
        db.repo.claim_outbox(&claim("w1", 1)).await.unwrap();
        db.repo.mark_delivered(&events[1..2]).await.unwrap();

        let mut asked = events.clone();
        asked.push("unknown".into());
        let mut statuses = db.repo.outbox_statuses(&asked).await.unwrap();
        statuses.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected = vec![
            (events[0].clone(), OutboxStatus::Delivering),
            (events[1].clone(), OutboxStatus::Delivered),
            (events[2].clone(), OutboxStatus::Pending),
        ];
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(statuses, expected, "{db}: unknown events are left out");
        assert!(db.repo.outbox_statuses(&[]).await.unwrap().is_empty(), "{db}");
    }
}
