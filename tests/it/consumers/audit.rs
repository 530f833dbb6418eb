//! The audit consumer on both backends: `room_audit_log` holds every event once, in commit
//! order, even when the consumer goes over events again.

use std::time::Duration;

use room_service::store::ResetTo;

use super::{outbox_event_ids, position, traffic};
use crate::delivery::eventually;
use crate::support::app::{TestApp, settings};
use crate::support::backends;

async fn audit_ids(db: &crate::support::TestDb) -> Vec<String> {
    let rows = db.repo.audit_entries(None, 10_000).await.expect("read the audit log");
    rows.into_iter().map(|e| e.event_id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_every_event_exactly_once_in_commit_order() {
    for db in backends().await {
        let overrides = [
            ("consumers.audit.enabled", "true"),
            ("consumers.audit.batch_size", "5"),
            ("consumers.poll_interval", "50ms"),
        ];
        let app = TestApp::start(settings(db.url(), None, &overrides)).await;
        traffic(&app, "audit-a", 3).await;
        traffic(&app, "audit-b", 2).await;
        let expected = outbox_event_ids(&db).await;
        eventually("the audit log has every event", Duration::from_secs(20), || async {
            audit_ids(&db).await.len() == expected.len()
        })
        .await;
        assert_eq!(audit_ids(&db).await, expected, "{db}: commit order");

        // Going over the same events again (a crash, or an operator's reset) adds nothing.
        let last = db.outbox().await.last().map(|r| r.id).unwrap();
        db.repo.reset_consumer("audit", ResetTo::Id(0)).await.expect("reset");
        eventually("the consumer went over everything again", Duration::from_secs(20), || async {
            position(&db, "audit").await == last
        })
        .await;
        assert_eq!(audit_ids(&db).await, expected, "{db}: still once each");
        app.stop().await;
    }
}
