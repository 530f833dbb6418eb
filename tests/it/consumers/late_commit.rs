//! The commit-order trap on MariaDB: a transaction holding outbox id N commits after N+1.. were
//! committed and read. The consumer must neither pass N while its transaction may still commit,
//! nor wait out the grace window for an id whose transaction rolled back.

use std::time::Duration;

use room_service::domain::EventType;
use sqlx::Acquire;

use super::receiver::Receiver;
use super::{outbox_event_ids, position, start_webhook, traffic, wait_received};
use crate::delivery::eventually;
use crate::outbox::harness::{envelope, new_event_id};
use crate::support::TestDb;

/// Inserts one well-formed outbox row in an open transaction on its own connection, as a
/// command transaction would; returns the transaction, the row's event id and its id.
async fn hold_row(
    conn: &mut sqlx::pool::PoolConnection<sqlx::MySql>,
) -> (sqlx::Transaction<'_, sqlx::MySql>, String, i64) {
    let event_id = new_event_id();
    let body = envelope(&event_id, EventType::RoomUserJoined, "late-room");
    let mut tx = conn.begin().await.expect("begin");
    let result = sqlx::query(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, lock_until_ms, \
         created_at_ms, updated_at_ms) VALUES (?, 'late-room', 'RoomUserJoined', ?, 'pending', 0, \
         CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))",
    )
    .bind(&event_id)
    .bind(&body)
    .execute(&mut *tx)
    .await
    .expect("insert the late row");
    let id = result.last_insert_id() as i64;
    (tx, event_id, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_committed_late_is_never_skipped_and_arrives_in_id_order() {
    let db = TestDb::mysql().await;
    let receiver = Receiver::start().await;
    // A grace window no test reaches: only the database's proof may pass a gap.
    let app = start_webhook(&db, &receiver, &[("consumers.gap_grace", "10m")]).await;
    traffic(&app, "late-before", 1).await;
    let before = outbox_event_ids(&db).await.len();
    wait_received(&receiver, before, Duration::from_secs(20)).await;

    let mut conn = db.mysql_pool().acquire().await.expect("connection");
    let (tx, late_event, late_id) = hold_row(&mut conn).await;
    traffic(&app, "late-after", 3).await;
    let after: Vec<i64> = db.outbox().await.into_iter().map(|r| r.id).filter(|id| *id > late_id).collect();
    assert!(after.len() >= 5, "later commands committed ids above {late_id}: {after:?}");
    // The consumer polls every 50 ms: give it many rounds to (wrongly) move past the gap.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.event_ids().len(), before, "nothing after the open transaction's id was sent");
    assert_eq!(position(&db, "webhook").await, late_id - 1, "the position waits below the open id");

    tx.commit().await.expect("the late transaction commits");
    let all = outbox_event_ids(&db).await;
    wait_received(&receiver, all.len(), Duration::from_secs(20)).await;
    assert_eq!(receiver.event_ids(), all, "the late event arrives, in id order, once");
    assert!(receiver.event_ids().contains(&late_event));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_whose_transaction_rolled_back_is_passed_without_waiting_out_the_grace() {
    let db = TestDb::mysql().await;
    let receiver = Receiver::start().await;
    let app = start_webhook(&db, &receiver, &[("consumers.gap_grace", "10m")]).await;
    let mut conn = db.mysql_pool().acquire().await.expect("connection");
    let (tx, rolled_back, _) = hold_row(&mut conn).await;
    traffic(&app, "rollback-after", 2).await;
    tx.rollback().await.expect("rollback");
    let all = outbox_event_ids(&db).await;
    // Far below the 10 minute grace: the database proved the id gone.
    wait_received(&receiver, all.len(), Duration::from_secs(20)).await;
    assert_eq!(receiver.event_ids(), all);
    assert!(!receiver.event_ids().contains(&rolled_back));
    let last = db.outbox().await.last().map(|r| r.id).unwrap();
    eventually("the position passes the gap", Duration::from_secs(5), || async {
        position(&db, "webhook").await == last
    })
    .await;
    app.stop().await;
}
