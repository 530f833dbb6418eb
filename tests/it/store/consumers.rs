//! Event consumers' positions, leases and reads (SPEC §11.6), on both backends: one instance at
//! a time holds a consumer, every write of a running consumer is fenced on its lease, reads walk
//! `room_outbox` by id, a reset moves a consumer and breaks its fence, and the audit log takes
//! each event once. On MariaDB, `open_writers_since` sees a transaction held open.

use std::time::Duration;

use room_service::store::{
    AuditEntry, ConsumerLease, ConsumerRepository, MySqlRepository, Repository, ResetReport, ResetTo,
    StoreError,
};
use sqlx::Connection;

use super::commit;
use crate::support::{TestDb, backends};

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(300);

/// Consumer `name`'s lease for `owner`, `ttl` at a time.
fn lease<'a>(name: &'a str, owner: &'a str, ttl: Duration) -> ConsumerLease<'a> {
    ConsumerLease::new(name, owner, ttl)
}

/// Commits `n` events (one command each) in room `room`; returns their outbox ids in order.
async fn events(db: &TestDb, room: &str, n: usize) -> Vec<i64> {
    let mut version = db.repo.room_version(room).await.unwrap().unwrap_or(0);
    for _ in 0..n {
        let c = commit(room, &uuid::Uuid::now_v7().to_string(), version, 1);
        db.repo.commit_room(&c).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        version += 1;
    }
    db.outbox().await.into_iter().filter(|r| r.room_id == room).map(|r| r.id).collect()
}

#[tokio::test]
async fn one_owner_holds_a_consumer_until_its_lease_expires_or_it_releases() {
    for db in backends().await {
        let repo = &db.repo;
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "a", SHORT)).await.unwrap(),
            Some(0),
            "{db}: created at 0"
        );
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "b", LONG)).await.unwrap(),
            None,
            "{db}: a holds it"
        );
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "a", SHORT)).await.unwrap(),
            Some(0),
            "{db}: renewed"
        );
        assert!(repo.advance_consumer(lease("webhook", "a", SHORT), 0, 7).await.unwrap(), "{db}");
        let row = &repo.list_consumers().await.unwrap()[0];
        assert_eq!((row.name.as_str(), row.owner.as_deref()), ("webhook", Some("a")), "{db}");
        assert!(row.lease_remaining.is_some_and(|d| d <= SHORT), "{db}: {row:?}");
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "b", LONG)).await.unwrap(),
            Some(7),
            "{db}: taken over"
        );
        assert_eq!(repo.acquire_consumer(lease("webhook", "a", LONG)).await.unwrap(), None, "{db}: b's now");
        repo.release_consumer(lease("webhook", "a", LONG)).await.unwrap();
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "c", LONG)).await.unwrap(),
            None,
            "{db}: not a's to free"
        );
        repo.release_consumer(lease("webhook", "b", LONG)).await.unwrap();
        let row = &repo.list_consumers().await.unwrap()[0];
        assert_eq!((row.owner.as_deref(), row.lease_remaining), (None, None), "{db}: freed");
        assert_eq!(
            repo.acquire_consumer(lease("webhook", "c", LONG)).await.unwrap(),
            Some(7),
            "{db}: free at once"
        );
    }
}

#[tokio::test]
async fn a_lost_lease_fences_advance_and_error_after_a_takeover_or_a_reset() {
    for db in backends().await {
        let repo = &db.repo;
        repo.acquire_consumer(lease("audit", "a", SHORT)).await.unwrap().expect("free");
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        repo.acquire_consumer(lease("audit", "b", LONG)).await.unwrap().expect("expired: b takes it");
        assert!(
            !repo.advance_consumer(lease("audit", "a", LONG), 0, 50).await.unwrap(),
            "{db}: a was taken over"
        );
        assert!(!repo.record_consumer_error(lease("audit", "a", LONG), "late").await.unwrap(), "{db}");
        assert!(
            !repo.advance_consumer(lease("audit", "b", LONG), 2, 3).await.unwrap(),
            "{db}: not from where it is"
        );
        assert!(repo.advance_consumer(lease("audit", "b", LONG), 0, 3).await.unwrap(), "{db}");
        let report = repo.reset_consumer("audit", ResetTo::Id(1)).await.unwrap();
        assert_eq!(report, ResetReport { before: Some(3), after: 1 }, "{db}");
        assert!(
            !repo.advance_consumer(lease("audit", "b", LONG), 3, 9).await.unwrap(),
            "{db}: a reset frees the lease"
        );
        let row = &repo.list_consumers().await.unwrap()[0];
        assert_eq!((row.position, row.owner.as_deref(), row.last_error.as_deref()), (1, None, None), "{db}");
        assert_eq!(
            repo.acquire_consumer(lease("audit", "b", LONG)).await.unwrap(),
            Some(1),
            "{db}: resumes there"
        );
    }
}

#[tokio::test]
async fn an_error_is_recorded_truncated_and_cleared_by_the_next_advance() {
    for db in backends().await {
        let repo = &db.repo;
        repo.acquire_consumer(lease("webhook", "a", LONG)).await.unwrap().expect("free");
        let long = "x".repeat(2000);
        assert!(repo.record_consumer_error(lease("webhook", "a", LONG), &long).await.unwrap(), "{db}");
        let row = repo.list_consumers().await.unwrap().remove(0);
        let error = row.last_error.expect("recorded");
        assert!(error.len() <= 512 && error.ends_with("..."), "{db}: {} chars", error.len());
        assert_eq!(row.position, 0, "{db}: an error does not move the consumer");
        assert!(repo.advance_consumer(lease("webhook", "a", LONG), 0, 4).await.unwrap(), "{db}");
        let row = repo.list_consumers().await.unwrap().remove(0);
        assert_eq!((row.position, row.last_error), (4, None), "{db}");
    }
}

#[tokio::test]
async fn events_after_walks_ids_in_order_up_to_the_limit() {
    for db in backends().await {
        let ids = events(&db, "room-e", 5).await;
        let page = db.repo.events_after(ids[1], 2).await.unwrap();
        assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), ids[2..4], "{db}");
        let row = db.outbox_row(&page[0].event_id).await;
        assert_eq!(
            (page[0].room_id.as_str(), page[0].envelope.as_str()),
            ("room-e", row.envelope.as_str()),
            "{db}"
        );
        assert_eq!(page[0].created_at_ms, row.created_at_ms, "{db}");
        assert_eq!(db.repo.events_after(ids[4], 10).await.unwrap(), [], "{db}: nothing after the last");
        assert_eq!(db.repo.events_after(0, 100).await.unwrap().len(), 5, "{db}");
    }
}

#[tokio::test]
async fn lag_is_the_age_of_the_first_event_not_passed_and_none_when_caught_up() {
    for db in backends().await {
        let ids = events(&db, "room-l", 3).await;
        let now = db.repo.database_now_ms().await.unwrap();
        assert!((now - db.now_ms().await).abs() < 1000, "{db}: the database clock");
        db.execute(format!("UPDATE room_outbox SET created_at_ms = {} WHERE id = {}", now - 60_000, ids[1]))
            .await;
        let lag = db.repo.consumer_lag(ids[0]).await.unwrap().expect("behind");
        assert!(lag >= Duration::from_secs(60) && lag < Duration::from_secs(70), "{db}: {lag:?}");
        let lag = db.repo.consumer_lag(ids[1]).await.unwrap().expect("behind");
        assert!(lag < Duration::from_secs(10), "{db}: {lag:?}");
        assert_eq!(db.repo.consumer_lag(ids[2]).await.unwrap(), None, "{db}: caught up");
    }
}

#[tokio::test]
async fn a_reset_moves_to_an_id_or_to_the_first_event_at_a_time() {
    for db in backends().await {
        let repo = &db.repo;
        let report = repo.reset_consumer("webhook", ResetTo::Id(0)).await.unwrap();
        assert_eq!(report, ResetReport { before: None, after: 0 }, "{db}: created by the reset");
        assert_eq!(repo.reset_consumer("webhook", ResetTo::TimeMs(0)).await.unwrap().after, 0, "{db}: empty");
        let negative = repo.reset_consumer("webhook", ResetTo::Id(-1)).await;
        assert!(
            matches!(&negative, Err(StoreError::Config(m)) if m.contains("negative")),
            "{db}: {negative:?}"
        );
        let ids = events(&db, "room-r", 4).await;
        let now = db.now_ms().await;
        for (i, id) in ids.iter().enumerate() {
            let at = now - 10_000 * (4 - i as i64);
            db.execute(format!("UPDATE room_outbox SET created_at_ms = {at} WHERE id = {id}")).await;
        }
        // ids[2] committed at now - 20s: resume with it.
        let report = repo.reset_consumer("webhook", ResetTo::TimeMs(now - 20_000)).await.unwrap();
        assert_eq!(report, ResetReport { before: Some(0), after: ids[2] - 1 }, "{db}");
        let future = repo.reset_consumer("webhook", ResetTo::TimeMs(now + 60_000)).await.unwrap();
        assert_eq!(future.after, ids[3], "{db}: nothing that recent: after the newest");
        let report = repo.reset_consumer("webhook", ResetTo::Id(ids[1])).await.unwrap();
        assert_eq!(report, ResetReport { before: Some(ids[3]), after: ids[1] }, "{db}");
        assert_eq!(repo.list_consumers().await.unwrap()[0].position, ids[1], "{db}");
    }
}

#[tokio::test]
async fn the_floor_is_the_lowest_stored_position_and_an_enabled_consumer_without_a_row_counts_zero() {
    for db in backends().await {
        let repo = &db.repo;
        assert_eq!(repo.consumers_floor(&[]).await.unwrap(), None, "{db}: no consumer at all");
        repo.reset_consumer("webhook", ResetTo::Id(10)).await.unwrap();
        assert_eq!(
            repo.consumers_floor(&[]).await.unwrap(),
            Some(10),
            "{db}: a stored one counts, enabled or not"
        );
        repo.reset_consumer("audit", ResetTo::Id(4)).await.unwrap();
        assert_eq!(repo.consumers_floor(&["webhook"]).await.unwrap(), Some(4), "{db}: audit's row holds too");
        assert_eq!(repo.consumers_floor(&["webhook", "audit", "webhook"]).await.unwrap(), Some(4), "{db}");
        assert_eq!(repo.consumers_floor(&["webhook", "new"]).await.unwrap(), Some(0), "{db}: never started");
        assert!(repo.retire_consumer("audit").await.unwrap(), "{db}");
        assert!(!repo.retire_consumer("audit").await.unwrap(), "{db}: gone already");
        assert_eq!(repo.consumers_floor(&[]).await.unwrap(), Some(10), "{db}: a retired one holds nothing");
    }
}

#[tokio::test]
async fn the_audit_log_takes_each_event_once_in_batch_order_and_keeps_the_first_record() {
    for db in backends().await {
        let repo = &db.repo;
        let entry = |n: i64, room: &str| AuditEntry {
            event_id: format!("ev-{n}"),
            event_type: "GiftSent".into(),
            room_id: room.into(),
            envelope: format!(r#"{{"n":{n}}}"#),
            occurred_at_ms: 1_700_000_000_000 + n,
        };
        repo.append_audit(&[entry(1, "r1"), entry(2, "r2")]).await.unwrap();
        // A redelivered batch: its first entry is there already, its second is new.
        let mut again = entry(1, "r1");
        again.envelope = "changed".into();
        repo.append_audit(&[again, entry(3, "r1")]).await.unwrap();
        repo.append_audit(&[]).await.unwrap();
        assert_eq!(db.count("room_audit_log").await, 3, "{db}");
        assert_eq!(
            repo.audit_entries(None, 10).await.unwrap(),
            [entry(1, "r1"), entry(2, "r2"), entry(3, "r1")]
        );
        assert_eq!(
            repo.audit_entries(Some("r1"), 10).await.unwrap(),
            [entry(1, "r1"), entry(3, "r1")],
            "{db}"
        );
        assert_eq!(repo.audit_entries(None, 1).await.unwrap(), [entry(1, "r1")], "{db}");
        let recorded = db.scalar("SELECT MIN(recorded_at_ms) FROM room_audit_log").await.unwrap();
        assert!((db.now_ms().await - recorded).abs() < 10_000, "{db}: stamped with the database clock");
    }
}

#[tokio::test]
async fn sqlite_never_has_a_writer_open_behind_a_reader() {
    let db = TestDb::sqlite().await;
    let now = db.repo.database_now_ms().await.unwrap();
    assert_eq!(db.repo.open_writers_since(now).await.unwrap(), Some(0));
}

#[tokio::test]
async fn on_mariadb_an_open_writer_is_counted_until_it_ends() {
    let db = TestDb::mysql().await;
    let mut writer = sqlx::MySqlConnection::connect(db.url()).await.expect("writer connection");
    let mut tx = writer.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, created_at_ms, updated_at_ms) \
         VALUES ('held', 'r', 'T', '{}', 'pending', 0, 0)",
    )
    .execute(&mut *tx)
    .await
    .expect("insert");
    let mark = db.repo.database_now_ms().await.unwrap();
    assert!(db.repo.open_writers_since(mark).await.unwrap().is_some_and(|n| n >= 1), "the held transaction");
    tx.rollback().await.expect("rollback");
    let after = db.repo.database_now_ms().await.unwrap();
    assert_eq!(db.repo.open_writers_since(after).await.unwrap(), Some(0), "rolled back: nothing open");
    // trx_started has whole seconds, so a writer beginning within the mark's second is counted
    // (the safe side); one beginning a second later is not.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut tx = writer.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO room_outbox (event_id, room_id, event_type, envelope, status, created_at_ms, updated_at_ms) \
         VALUES ('held2', 'r', 'T', '{}', 'pending', 0, 0)",
    )
    .execute(&mut *tx)
    .await
    .expect("insert");
    assert_eq!(
        db.repo.open_writers_since(after).await.unwrap(),
        Some(0),
        "began after the mark: not counted"
    );
    let later = db.repo.database_now_ms().await.unwrap();
    assert!(
        db.repo.open_writers_since(later).await.unwrap().is_some_and(|n| n >= 1),
        "open at the later mark"
    );
    tx.commit().await.expect("commit");
    let last = db.repo.database_now_ms().await.unwrap();
    assert_eq!(db.repo.open_writers_since(last).await.unwrap(), Some(0), "committed: nothing open");
}

#[tokio::test]
async fn on_mariadb_a_session_without_the_process_privilege_cannot_tell() {
    let db = TestDb::mysql().await;
    let user = format!("rs_np_{:08x}", rand::random::<u32>());
    let database: String = sqlx::query_scalar("SELECT DATABASE()").fetch_one(db.mysql_pool()).await.unwrap();
    db.execute(format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")).await;
    db.execute(format!("GRANT ALL PRIVILEGES ON `{database}`.* TO '{user}'@'%'")).await;
    let options = db.url().parse::<sqlx::mysql::MySqlConnectOptions>().unwrap();
    let url = format!("mysql://{user}:pw@{}:{}/{database}", options.get_host(), options.get_port());
    let limited = MySqlRepository::connect(&url, 2).await.expect("limited user");
    let answer = limited.open_writers_since(limited.database_now_ms().await.unwrap()).await;
    limited.close().await;
    db.execute(format!("DROP USER '{user}'@'%'")).await;
    assert_eq!(answer.expect("not an error"), None, "no PROCESS privilege: the consumer waits out its grace");
}
