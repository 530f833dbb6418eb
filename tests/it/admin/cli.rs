//! `room-service outbox ...` as a process, with `--config config/config.yaml` and the test
//! database in `ROOM_SERVICE__DATABASE__URL`, on SQLite and MariaDB.

use std::process::Output;
use std::time::Duration;

use room_service::store::Claim;
use serde_json::Value;

use super::{DAY_MS, HOUR_MS, Seed, event_ids, seed, statuses};
use crate::support::{TestDb, backends};

/// Runs the binary; returns its output.
async fn run(db: &TestDb, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_room-service"))
        .args(["--config", "config/config.yaml", "outbox"])
        .args(args)
        .env("ROOM_SERVICE__DATABASE__URL", db.url())
        .env("ROOM_SERVICE__LOG__LEVEL", "warn")
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("run room-service outbox")
}

/// Runs with `--json`, asserts success, parses stdout.
async fn json(db: &TestDb, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run(db, &all).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{db}: outbox {args:?} failed: {stderr}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{db}: outbox {args:?}: not JSON ({e}): {stdout}"))
}

/// Runs without `--json`, asserts success, returns stdout.
async fn text(db: &TestDb, args: &[&str]) -> String {
    let out = run(db, args).await;
    assert!(out.status.success(), "{db}: outbox {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ids_of(list: &Value) -> Vec<&str> {
    list.as_array().expect("array").iter().map(|r| r["event_id"].as_str().expect("event_id")).collect()
}

#[tokio::test]
async fn stats_list_and_show_report_the_rows() {
    for db in backends().await {
        seed(
            &db,
            &[
                Seed::new("e-pending", "pending", HOUR_MS),
                Seed::new("e-retry", "retryable", 2 * HOUR_MS).retries(4),
                Seed::new("e-failed", "failed", HOUR_MS).retries(7),
                Seed::new("e-delivered", "delivered", DAY_MS),
                Seed::new("e-delivering", "delivering", HOUR_MS),
            ],
        )
        .await;

        let stats = json(&db, &["stats"]).await;
        for (status, n) in [("pending", 1), ("delivering", 1), ("retryable", 1), ("failed", 1)] {
            assert_eq!(stats[status], n, "{db}: {status} in {stats}");
        }
        assert_eq!(stats["max_retry_count"], 7, "{db}: {stats}");
        let oldest = stats["oldest_pending_age_ms"].as_i64().expect("oldest age");
        assert!((2 * HOUR_MS..3 * HOUR_MS).contains(&oldest), "{db}: {stats}");
        // A failed row parked before reasons were recorded counts as "unknown".
        assert_eq!(stats["parked_by_reason"], serde_json::json!({"unknown": 1}), "{db}: {stats}");
        let table = text(&db, &["stats"]).await;
        assert!(table.contains("retryable   1") && table.contains("max retry count:    7"), "{db}: {table}");
        assert!(table.contains("  unknown   1"), "{db}: parked rows by reason: {table}");

        let page = json(&db, &["list", "--status", "retryable"]).await;
        assert_eq!(ids_of(&page["rows"]), ["e-retry"], "{db}: {page}");
        assert_eq!(page["rows"][0]["retry_count"], 4, "{db}");
        assert_eq!(page["next_after_id"], Value::Null, "{db}: a short page is the last");

        let first = json(&db, &["list", "--limit", "2"]).await;
        assert_eq!(ids_of(&first["rows"]), ["e-pending", "e-retry"], "{db}: {first}");
        let next = first["next_after_id"].as_i64().expect("a full page has a next cursor").to_string();
        let rest = json(&db, &["list", "--limit", "10", "--after-id", &next]).await;
        assert_eq!(ids_of(&rest["rows"]), ["e-failed", "e-delivered", "e-delivering"], "{db}: {rest}");
        let table = text(&db, &["list", "--status", "failed"]).await;
        assert!(table.starts_with("ID ") && table.contains("EVENT_ID"), "{db}: {table}");
        assert!(table.contains("e-failed") && table.contains("parked"), "{db}: {table}");
        assert!(!table.contains("e-retry"), "{db}: filtered by status: {table}");

        let row = json(&db, &["show", "e-retry"]).await;
        assert_eq!(row["event_id"], "e-retry", "{db}");
        assert_eq!(row["status"], "retryable", "{db}");
        assert_eq!(row["retry_count"], 4, "{db}");
        assert_eq!(row["last_error"], "IM said no", "{db}");
        let envelope: Value =
            serde_json::from_str(row["envelope"].as_str().expect("envelope")).expect("JSON");
        assert_eq!(envelope["event_id"], "e-retry", "{db}");
        let shown = text(&db, &["show", "e-delivering"]).await;
        assert!(shown.contains("status        delivering") && shown.contains("w-other"), "{db}: {shown}");
        assert!(shown.contains("\"event_id\": \"e-delivering\""), "{db}: envelope pretty-printed: {shown}");
    }
}

#[tokio::test]
async fn an_unknown_event_id_fails_with_a_message_and_changes_nothing() {
    for db in backends().await {
        seed(&db, &[Seed::new("e-retry", "retryable", HOUR_MS).retries(1)]).await;

        let out = run(&db, &["show", "no-such-event"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{db}: show of an unknown id must fail");
        assert!(stderr.contains("no outbox row has event id no-such-event"), "{db}: {stderr}");
        assert!(out.stdout.is_empty(), "{db}: nothing on stdout");

        let out = run(&db, &["requeue", "e-retry", "no-such-event", "--json"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{db}: requeue with an unknown id must fail");
        assert!(stderr.contains("no-such-event"), "{db}: {stderr}");
        assert!(!stderr.contains("e-retry"), "{db}: only the unknown id is named: {stderr}");
        assert_eq!(statuses(&db).await, [("e-retry".into(), "retryable".into())], "{db}: nothing requeued");

        let out = run(&db, &["list", "--status", "lost"]).await;
        assert!(!out.status.success(), "{db}: an unknown status is refused");
    }
}

#[tokio::test]
async fn requeue_by_event_ids_moves_retryable_and_failed_rows_to_pending_claimable_now() {
    for db in backends().await {
        let ids = seed(
            &db,
            &[
                Seed::new("e-retry", "retryable", HOUR_MS).retries(3),
                Seed::new("e-failed", "failed", HOUR_MS).retries(5),
                Seed::new("e-delivered", "delivered", HOUR_MS),
                Seed::new("e-delivering", "delivering", HOUR_MS),
            ],
        )
        .await;
        let before_delivered = db.outbox_row("e-delivered").await;
        let before_delivering = db.outbox_row("e-delivering").await;
        let claim = Claim::new("w-test", 10, Duration::from_secs(60));
        assert!(
            db.repo.claim_outbox(&claim).await.unwrap().rows.is_empty(),
            "{db}: nothing claimable before"
        );

        let args = ["requeue", "e-retry", "e-failed", "e-delivered", "e-delivering", "e-retry"];
        let report = json(&db, &args).await;
        assert_eq!(ids_of(&report["requeued"]), ["e-retry", "e-failed"], "{db}: {report}");
        assert_eq!(report["requeued"][0]["id"], ids[0], "{db}");
        let skipped: Vec<(&str, &str)> = report["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["event_id"].as_str().unwrap(), s["status"].as_str().unwrap()))
            .collect();
        assert_eq!(skipped, [("e-delivered", "delivered"), ("e-delivering", "delivering")], "{db}");

        // A retryable row keeps its count; a parked one gets a fresh attempt budget.
        for (event_id, retries) in [("e-retry", 3), ("e-failed", 0)] {
            let row = db.outbox_row(event_id).await;
            assert_eq!(row.status, "pending", "{db}: {event_id}");
            assert_eq!(row.retry_count, retries, "{db}: {event_id} retry count");
            assert_eq!(row.worker_id, None, "{db}: {event_id}");
        }
        assert_eq!(db.outbox_row("e-delivered").await, before_delivered, "{db}: delivered untouched");
        assert_eq!(db.outbox_row("e-delivering").await, before_delivering, "{db}: delivering untouched");

        let claimed: Vec<String> =
            db.repo.claim_outbox(&claim).await.unwrap().rows.into_iter().map(|r| r.event_id).collect();
        assert_eq!(claimed, ["e-retry", "e-failed"], "{db}: requeued rows are claimable at once");

        let table = text(&db, &["requeue", "e-delivered"]).await;
        assert!(
            table.contains("requeued 0 row(s)") && table.contains("e-delivered (delivered)"),
            "{db}: {table}"
        );
    }
}

#[tokio::test]
async fn requeue_by_status_moves_only_rows_in_that_status() {
    for db in backends().await {
        seed(
            &db,
            &[
                Seed::new("e-failed-1", "failed", HOUR_MS).retries(2),
                Seed::new("e-retry", "retryable", HOUR_MS).retries(1),
                Seed::new("e-delivered", "delivered", HOUR_MS),
                Seed::new("e-failed-2", "failed", HOUR_MS),
                Seed::new("e-delivering", "delivering", HOUR_MS),
            ],
        )
        .await;

        let report = json(&db, &["requeue", "--status", "failed"]).await;
        assert_eq!(ids_of(&report["requeued"]), ["e-failed-1", "e-failed-2"], "{db}: {report}");
        let expected = |retry: &str| {
            vec![
                ("e-failed-1".to_owned(), "pending".to_owned()),
                ("e-retry".into(), retry.to_owned()),
                ("e-delivered".into(), "delivered".into()),
                ("e-failed-2".into(), "pending".into()),
                ("e-delivering".into(), "delivering".into()),
            ]
        };
        assert_eq!(statuses(&db).await, expected("retryable"), "{db}");
        assert_eq!(db.outbox_row("e-failed-1").await.retry_count, 0, "{db}: a fresh attempt budget");

        let report = json(&db, &["requeue", "--status", "retryable"]).await;
        assert_eq!(ids_of(&report["requeued"]), ["e-retry"], "{db}: {report}");
        assert_eq!(statuses(&db).await, expected("pending"), "{db}");

        let out = run(&db, &["requeue", "--status", "delivered"]).await;
        assert!(!out.status.success(), "{db}: delivered rows are never requeued");
        assert_eq!(db.outbox_row("e-delivered").await.status, "delivered", "{db}");
    }
}

#[tokio::test]
async fn purge_delivered_deletes_only_old_delivered_rows_and_a_dry_run_deletes_nothing() {
    for db in backends().await {
        let old = 8 * DAY_MS;
        seed(
            &db,
            &[
                Seed::new("old-delivered-1", "delivered", old),
                Seed::new("old-pending", "pending", old),
                Seed::new("old-delivered-2", "delivered", old),
                Seed::new("old-retryable", "retryable", old),
                Seed::new("old-failed", "failed", old),
                Seed::new("old-delivering", "delivering", old),
                Seed::new("new-delivered", "delivered", 6 * DAY_MS),
                Seed::new("old-delivered-3", "delivered", old),
            ],
        )
        .await;
        let all = event_ids(&db).await;

        let dry = json(&db, &["purge-delivered", "--older-than", "7d", "--dry-run"]).await;
        assert_eq!((dry["dry_run"].clone(), dry["rows"].clone()), (true.into(), 3.into()), "{db}: {dry}");
        assert_eq!(event_ids(&db).await, all, "{db}: a dry run deletes nothing");
        let said = text(&db, &["purge-delivered", "--older-than", "7d", "--dry-run"]).await;
        assert!(said.contains("dry run: 3 delivered row(s)"), "{db}: {said}");

        let done = json(&db, &["purge-delivered", "--older-than", "7d"]).await;
        assert_eq!((done["dry_run"].clone(), done["rows"].clone()), (false.into(), 3.into()), "{db}: {done}");
        let left = ["old-pending", "old-retryable", "old-failed", "old-delivering", "new-delivered"];
        assert_eq!(event_ids(&db).await, left, "{db}");

        let again = json(&db, &["purge-delivered", "--older-than", "5d"]).await;
        assert_eq!(again["rows"], 1, "{db}: the cutoff moves with --older-than: {again}");
        assert_eq!(event_ids(&db).await, left[..4], "{db}");

        let out = run(&db, &["purge-delivered", "--older-than", "0s"]).await;
        assert!(!out.status.success(), "{db}: a zero age is refused");
    }
}
