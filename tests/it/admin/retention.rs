//! The retention purge: one round on both backends (only old delivered rows go, in batches),
//! the batch bound of the store, the task loop and its wiring in the app, and on MariaDB the
//! purge lock that keeps a second instance out.

use std::time::Duration;

use room_service::admin::{PurgeReport, RetentionOptions, RetentionRound, run_retention, run_retention_once};
use room_service::store::{MySqlRepository, OutboxAdmin, Repository, ResetTo};
use sqlx::{AssertSqlSafe, Connection};
use tokio_util::sync::CancellationToken;

use super::{DAY_MS, Seed, event_ids, seed};
use crate::support::app::{TestApp, settings};
use crate::support::{TestDb, backends};

const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);

fn options(batch_size: u32) -> RetentionOptions {
    RetentionOptions { batch_size, ..RetentionOptions::new(WEEK, "test-node") }
}

/// Five old delivered rows among old rows of every other status and a recent delivered one.
async fn seed_mix(db: &TestDb) -> Vec<&'static str> {
    let old = 8 * DAY_MS;
    seed(
        db,
        &[
            Seed::new("d1", "delivered", old),
            Seed::new("p", "pending", old),
            Seed::new("d2", "delivered", old),
            Seed::new("r", "retryable", old),
            Seed::new("d3", "delivered", old),
            Seed::new("f", "failed", old),
            Seed::new("d4", "delivered", old),
            Seed::new("dl", "delivering", old),
            Seed::new("d5", "delivered", old),
            Seed::new("recent", "delivered", DAY_MS),
        ],
    )
    .await;
    vec!["p", "r", "f", "dl", "recent"]
}

async fn wait_until_gone(db: &TestDb, event_id: &str) {
    for _ in 0..100 {
        if !event_ids(db).await.iter().any(|e| e == event_id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{db}: {event_id} was never purged");
}

#[tokio::test]
async fn a_round_deletes_only_old_delivered_rows_in_batches() {
    for db in backends().await {
        let left = seed_mix(&db).await;
        let round = run_retention_once(db.repo.as_ref(), &options(2), &CancellationToken::new()).await;
        assert_eq!(
            round.expect("round"),
            RetentionRound::Purged(PurgeReport { rows: 5, batches: 3 }),
            "{db}: 5 rows in batches of 2 (2 + 2 + 1)"
        );
        assert_eq!(event_ids(&db).await, left, "{db}: every other status and the recent row stay");
        let round = run_retention_once(db.repo.as_ref(), &options(2), &CancellationToken::new()).await;
        assert_eq!(
            round.expect("round"),
            RetentionRound::Purged(PurgeReport { rows: 0, batches: 1 }),
            "{db}"
        );
    }
}

#[tokio::test]
async fn a_cancelled_round_stops_after_the_batch_in_flight() {
    for db in backends().await {
        seed_mix(&db).await;
        let cancel = CancellationToken::new();
        cancel.cancel();
        let round = run_retention_once(db.repo.as_ref(), &options(2), &cancel).await.expect("round");
        assert_eq!(round, RetentionRound::Purged(PurgeReport { rows: 2, batches: 1 }), "{db}");
        assert_eq!(event_ids(&db).await.len(), 8, "{db}");
    }
}

#[tokio::test]
async fn one_purge_batch_deletes_the_lowest_ids_first_and_at_most_1000_rows() {
    for db in backends().await {
        seed_mix(&db).await;
        assert_eq!(db.repo.purge_delivered_batch(WEEK, None, 2).await.expect("purge"), 2, "{db}");
        let left = event_ids(&db).await;
        assert!(!left.contains(&"d1".into()) && !left.contains(&"d2".into()), "{db}: {left:?}");
        assert!(left.contains(&"d3".into()), "{db}: {left:?}");

        let now = db.now_ms().await;
        let old = now - 8 * DAY_MS;
        let values: Vec<String> = (0..1001)
            .map(|i| format!("('bulk-{i}', 'r2', 'UserJoined', '{{}}', 'delivered', 0, {old}, {old}, {old})"))
            .collect();
        db.execute(format!(
            "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, retry_count, \
             created_at_ms, updated_at_ms, delivered_at_ms) VALUES {}",
            values.join(", ")
        ))
        .await;
        assert_eq!(db.repo.count_purgeable(WEEK, None).await.expect("count"), 1004, "{db}");
        assert_eq!(
            db.repo.purge_delivered_batch(WEEK, None, 5000).await.expect("purge"),
            1000,
            "{db}: capped"
        );
        assert_eq!(db.repo.count_purgeable(WEEK, None).await.expect("count"), 4, "{db}");
    }
}

#[tokio::test]
async fn the_task_purges_every_interval_and_stops_when_cancelled() {
    for db in backends().await {
        seed_mix(&db).await;
        let cancel = CancellationToken::new();
        let options = RetentionOptions { interval: Duration::from_millis(50), ..options(1000) };
        let task = tokio::spawn(run_retention(db.repo.clone(), options, cancel.clone()));
        wait_until_gone(&db, "d5").await;
        // A row that becomes old later goes on a later round. (Seeded recent, then aged, so the
        // running task cannot purge it before `seed` has read its id back.)
        seed(&db, &[Seed::new("later", "delivered", 0)]).await;
        db.execute(format!(
            "UPDATE room_outbox SET delivered_at_ms = delivered_at_ms - {} WHERE event_id = 'later'",
            8 * DAY_MS
        ))
        .await;
        wait_until_gone(&db, "later").await;
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("stops when cancelled")
            .expect("no panic");
        assert_eq!(event_ids(&db).await, ["p", "r", "f", "dl", "recent"], "{db}");
    }
}

#[tokio::test]
async fn the_app_runs_retention_beside_the_outbox_worker_only_when_configured() {
    let db = TestDb::sqlite().await;
    seed_mix(&db).await;
    let off = [("outbox_worker.enabled", "true"), ("outbox_worker.retention", "")];
    let app = TestApp::start(settings(db.url(), None, &off)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(event_ids(&db).await.len(), 10, "retention disabled: nothing purged");
    app.stop().await;

    let on = [("outbox_worker.enabled", "true"), ("outbox_worker.retention", "7d")];
    let app = TestApp::start(settings(db.url(), None, &on)).await;
    wait_until_gone(&db, "d5").await;
    assert_eq!(event_ids(&db).await, ["p", "r", "f", "dl", "recent"]);
    let (status, metrics) = app.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    let purged: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("room_outbox_purged_rows_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no room_outbox_purged_rows_total in /metrics:\n{metrics}"));
    assert!(purged >= 5.0, "counted: {purged}");
    app.stop().await;
}

#[tokio::test]
async fn on_mariadb_a_second_instance_skips_while_the_first_holds_the_purge_lock() {
    let db = TestDb::mysql().await;
    seed_mix(&db).await;
    let second = MySqlRepository::connect(db.url(), 2).await.expect("second instance");
    let cancel = CancellationToken::new();

    let lock = db.repo.try_purge_lock().await.expect("lock").expect("free at first");
    let held: Option<i64> =
        sqlx::query_scalar("SELECT IS_USED_LOCK(LEFT(CONCAT('room_outbox_retention.', DATABASE()), 64))")
            .fetch_one(db.mysql_pool())
            .await
            .expect("IS_USED_LOCK");
    assert!(held.is_some(), "the lock is named room_outbox_retention.<database>");
    assert!(second.try_purge_lock().await.expect("try").is_none(), "taken");
    let round = run_retention_once(&second, &options(1000), &cancel).await.expect("round");
    assert_eq!(round, RetentionRound::Skipped);
    assert_eq!(event_ids(&db).await.len(), 10, "the skipped instance deleted nothing");

    lock.release().await.expect("release");
    let round = run_retention_once(&second, &options(1000), &cancel).await.expect("round");
    assert_eq!(round, RetentionRound::Purged(PurgeReport { rows: 5, batches: 1 }));
    let taken = second.try_purge_lock().await.expect("try").expect("free after the release");
    taken.release().await.expect("release");

    // A lock that is dropped (its instance died) is freed with its session.
    let lock = db.repo.try_purge_lock().await.expect("lock").expect("free again");
    drop(lock);
    let mut freed = false;
    for _ in 0..50 {
        if let Some(lock) = second.try_purge_lock().await.expect("try") {
            lock.release().await.expect("release");
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(freed, "dropping the lock closes its session, which frees it");

    // A lock on another database does not block this one.
    let mut other = sqlx::MySqlConnection::connect(db.url()).await.expect("session");
    sqlx::query(AssertSqlSafe("SELECT GET_LOCK('room_outbox_retention.some_other_db', 0)".to_owned()))
        .execute(&mut other)
        .await
        .expect("GET_LOCK");
    let lock = second.try_purge_lock().await.expect("try");
    assert!(lock.is_some(), "locks are per database");
    if let Some(lock) = lock {
        lock.release().await.expect("release");
    }
    other.close().await.expect("close");
    second.close().await;
}

#[tokio::test]
async fn a_round_keeps_the_rows_a_consumer_has_not_passed() {
    for db in backends().await {
        seed_mix(&db).await;
        let d3 = db.outbox_row("d3").await.id;
        db.repo.reset_consumer("webhook", ResetTo::Id(d3)).await.expect("position");
        let waiting = RetentionOptions { consumers: vec!["webhook", "audit"], ..options(1000) };
        let round = run_retention_once(db.repo.as_ref(), &waiting, &CancellationToken::new()).await;
        assert_eq!(
            round.expect("round"),
            RetentionRound::Purged(PurgeReport { rows: 0, batches: 1 }),
            "{db}: audit has no row yet (position 0): nothing is purged"
        );
        assert_eq!(db.repo.count_purgeable(WEEK, Some(d3)).await.expect("count"), 3, "{db}");
        let webhook = RetentionOptions { consumers: vec!["webhook"], ..options(1000) };
        let round = run_retention_once(db.repo.as_ref(), &webhook, &CancellationToken::new()).await;
        assert_eq!(
            round.expect("round"),
            RetentionRound::Purged(PurgeReport { rows: 3, batches: 1 }),
            "{db}"
        );
        assert_eq!(
            event_ids(&db).await,
            ["p", "r", "f", "d4", "dl", "d5", "recent"],
            "{db}: d1..d3 (up to webhook's position) went; d4 and d5 wait for it"
        );
    }
}
