//! The command transaction: command log + outbox rows + snapshot, all or nothing; the
//! idempotency key and the snapshot fence; migrations that can run again.

use std::time::Duration;

use room_service::store::{CommitError, StoredCommand, StoredRoom, connect};

use super::{commit, event_ids, noop};
use crate::support::backends;

#[tokio::test]
async fn migrations_run_twice_without_harm() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        // Through the service's own entry point, twice: sqlx sees them applied.
        for _ in 0..2 {
            let again = connect(db.url(), 1, true).await.unwrap_or_else(|e| panic!("{db}: {e}"));
            again.close().await;
        }
        // And the SQL itself is idempotent (IF NOT EXISTS everywhere).
        let sql = match db.name() {
            "sqlite" => include_str!("../../../migrations/sqlite/0001_init.sql"),
            _ => include_str!("../../../migrations/mysql/0001_init.sql"),
        };
        db.execute(sql).await;
        let files = std::fs::read_dir(format!(
            "migrations/{}",
            if db.name() == "sqlite" { "sqlite" } else { "mysql" }
        ))
        .unwrap()
        .count();
        assert_eq!(db.count("_sqlx_migrations").await, files as i64, "{db}: every migration recorded once");
        assert_eq!(db.count("room_command_log").await, 1, "{db}: data survives");
        assert_eq!(db.count("room_outbox").await, 1, "{db}: data survives");
        assert_eq!(db.repo.load_room("r1").await.unwrap().map(|r| r.version), Some(1), "{db}");
    }
}

#[tokio::test]
async fn commit_writes_command_log_outbox_rows_and_snapshot() {
    for db in backends().await {
        let mut c = commit("r1", "c1", 0, 3);
        c.claim_after = Duration::from_secs(5);
        let before = db.now_ms().await;
        db.repo.commit_room(&c).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        let after = db.now_ms().await;

        let logged = db.logged("c1").await;
        let expected = StoredCommand {
            command_id: "c1".into(),
            caller: String::new(),
            room_id: "r1".into(),
            fingerprint: c.commands[0].fingerprint.clone(),
            applied: true,
            room_version: 1,
            outcome: c.commands[0].outcome.clone(),
        };
        assert_eq!(logged, Some(expected), "{db}: command log");
        let state = c.snapshot.clone().unwrap().state;
        let room = StoredRoom {
            version: 1,
            state,
            members: Vec::new(),
            gift_totals: Vec::new(),
            restrictions: Vec::new(),
            attributes: Vec::new(),
            seat_requests: Vec::new(),
        };
        assert_eq!(db.repo.load_room("r1").await.unwrap(), Some(room), "{db}");

        let rows = db.outbox().await;
        let ids: Vec<_> = rows.iter().map(|r| r.event_id.clone()).collect();
        assert_eq!(ids, event_ids(&c), "{db}: one row per event, in event order");
        for (row, event) in rows.iter().zip(&c.outbox) {
            assert_eq!(row.status, "pending", "{db}");
            assert_eq!(row.retry_count, 0, "{db}");
            assert_eq!((row.room_id.as_str(), row.event_type.as_str()), ("r1", "RoomTestEvent"), "{db}");
            assert_eq!(row.envelope, event.envelope, "{db}");
            assert_eq!((&row.last_error, &row.worker_id, row.delivered_at_ms), (&None, &None, None), "{db}");
            let lock = row.lock_until_ms.unwrap_or_else(|| panic!("{db}: lock_until_ms NULL"));
            assert!(
                (before + 5000 - 1..=after + 5000 + 1).contains(&lock),
                "{db}: lock_until_ms {lock} not db now + publish_timeout ({before}..{after} + 5000)"
            );
            assert!((before - 1..=after + 1).contains(&row.created_at_ms), "{db}: created_at_ms");
        }
    }
}

#[tokio::test]
async fn a_failing_outbox_insert_rolls_back_the_command_and_snapshot() {
    for db in backends().await {
        let first = commit("r1", "c1", 0, 1);
        db.repo.commit_room(&first).await.unwrap();
        // The last statement of the transaction fails (event_id is unique).
        let mut second = commit("r1", "c2", 1, 2);
        second.outbox[1].event_id = first.outbox[0].event_id.clone();
        let err = db.repo.commit_room(&second).await.expect_err("duplicate event id");
        assert!(matches!(err, CommitError::Store(_)), "{db}: {err:?}");
        assert_eq!(db.logged("c2").await, None, "{db}: command log rolled back");
        assert_eq!(db.repo.load_room("r1").await.unwrap().unwrap().version, 1, "{db}: snapshot rolled back");
        assert_eq!(db.count("room_outbox").await, 1, "{db}: outbox rolled back");
    }
}

#[tokio::test]
async fn duplicate_command_id_is_rejected_and_writes_nothing() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 2)).await.unwrap();
        let room_before = db.repo.load_room("r1").await.unwrap();

        // Same id, next version of the same room: the fence passes, the log refuses.
        let err = db.repo.commit_room(&commit("r1", "c1", 1, 2)).await.expect_err("duplicate");
        assert!(matches!(err, CommitError::DuplicateCommand), "{db}: {err:?}");
        // Same id, an unapplied command (no snapshot written; the room stays at version 1).
        let unapplied = noop("r1", "c1", 1);
        let err = db.repo.commit_room(&unapplied).await.expect_err("duplicate");
        assert!(matches!(err, CommitError::DuplicateCommand), "{db}: {err:?}");

        assert_eq!(db.count("room_outbox").await, 2, "{db}: no outbox rows added");
        assert_eq!(db.count("room_command_log").await, 1, "{db}");
        assert_eq!(db.repo.load_room("r1").await.unwrap(), room_before, "{db}: snapshot unchanged");
    }
}

#[tokio::test]
async fn snapshot_fence_rejects_a_stale_expected_version_and_writes_nothing() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        let room_before = db.repo.load_room("r1").await.unwrap();
        for (command_id, expected) in [("behind", 0), ("ahead", 2), ("far", 7)] {
            let err = db.repo.commit_room(&commit("r1", command_id, expected, 2)).await.expect_err("fence");
            assert!(matches!(err, CommitError::VersionConflict), "{db} expected {expected}: {err:?}");
            assert_eq!(db.logged(command_id).await, None, "{db}: no command log row");
        }
        // A room that has no snapshot cannot be updated from a version > 0 either.
        let err = db.repo.commit_room(&commit("r2", "ghost", 3, 1)).await.expect_err("fence");
        assert!(matches!(err, CommitError::VersionConflict), "{db}: {err:?}");
        assert_eq!(db.repo.load_room("r2").await.unwrap(), None, "{db}");

        assert_eq!(db.count("room_outbox").await, 1, "{db}: no outbox rows added");
        assert_eq!(db.count("room_command_log").await, 1, "{db}");
        assert_eq!(db.repo.load_room("r1").await.unwrap(), room_before, "{db}: snapshot unchanged");
        // The right expected version still commits.
        db.repo.commit_room(&commit("r1", "c2", 1, 1)).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        assert_eq!(db.repo.load_room("r1").await.unwrap().unwrap().version, 2, "{db}");
    }
}

#[tokio::test]
async fn two_creations_of_the_same_room_second_is_a_version_conflict() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "a", 0, 1)).await.unwrap();
        let err = db.repo.commit_room(&commit("r1", "b", 0, 1)).await.expect_err("second creation");
        assert!(matches!(err, CommitError::VersionConflict), "{db}: {err:?}");
        assert_eq!(db.logged("b").await, None, "{db}");
        assert_eq!(db.count("room_outbox").await, 1, "{db}");
        assert_eq!(db.count("room_snapshot").await, 1, "{db}");
    }
}

#[tokio::test]
async fn find_command_and_load_room_round_trip() {
    for db in backends().await {
        assert_eq!(db.logged("c1").await, None, "{db}");
        assert_eq!(db.repo.load_room("r1").await.unwrap(), None, "{db}");
        let (c1, c2) = (commit("r1", "c1", 0, 1), commit("r1", "c2", 1, 0));
        db.repo.commit_room(&c1).await.unwrap();
        db.repo.commit_room(&c2).await.unwrap();

        let found = db.logged("c1").await.unwrap();
        assert_eq!((found.room_version, found.outcome), (1, c1.commands[0].outcome.clone()), "{db}");
        let found = db.logged("c2").await.unwrap();
        assert_eq!(
            (found.room_id.as_str(), found.fingerprint.as_str()),
            ("r1", c2.commands[0].fingerprint.as_str())
        );
        assert_eq!((found.applied, found.room_version), (true, 2), "{db}");
        let room = db.repo.load_room("r1").await.unwrap().unwrap();
        let state = c2.snapshot.unwrap().state;
        assert_eq!(
            room,
            StoredRoom {
                version: 2,
                state,
                members: Vec::new(),
                gift_totals: Vec::new(),
                restrictions: Vec::new(),
                attributes: Vec::new(),
                seat_requests: Vec::new(),
            },
            "{db}"
        );
    }
}

#[tokio::test]
async fn unapplied_commit_logs_the_command_only() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        let room_before = db.repo.load_room("r1").await.unwrap();
        db.repo.commit_room(&noop("r1", "noop", 1)).await.unwrap_or_else(|e| panic!("{db}: {e}"));

        let logged = db.logged("noop").await.unwrap_or_else(|| panic!("{db}: not logged"));
        assert_eq!((logged.applied, logged.room_version), (false, 1), "{db}");
        assert_eq!(db.count("room_outbox").await, 1, "{db}: no outbox row");
        assert_eq!(db.repo.load_room("r1").await.unwrap(), room_before, "{db}: snapshot untouched");
    }
}

#[tokio::test]
async fn an_unapplied_commit_on_a_stale_version_is_a_conflict_and_logs_nothing() {
    for db in backends().await {
        db.repo.commit_room(&commit("r1", "c1", 0, 1)).await.unwrap();
        db.repo.commit_room(&commit("r1", "c2", 1, 1)).await.unwrap();
        // Decided on version 1, but the room is at 2.
        let err = db.repo.commit_room(&noop("r1", "noop", 1)).await.expect_err("stale");
        assert!(matches!(err, CommitError::VersionConflict), "{db}: {err:?}");
        assert!(db.logged("noop").await.is_none(), "{db}: nothing logged");
    }
}
