//! Group commit: queued commands of a room are applied in order and committed in one
//! transaction, each keeping its own outcome.

use room_service::domain::{Command, DomainError};
use room_service::room::RoomError;

use super::{create, gift, join, leave, run, run_all, service, service_over};
use crate::support::{TestDb, backends};

#[tokio::test]
async fn queued_commands_commit_together_in_order_each_with_its_own_outcome() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        let before = rooms.commit_stats();
        let joins = (0..20).map(|i| (format!("j{i}"), join(&format!("u{i:02}")))).collect();
        let answers = run_all(&rooms, joins).await;
        let versions: Vec<u64> = answers.iter().map(|a| a.as_ref().unwrap().room_version).collect();
        assert_eq!(versions, (2..22).collect::<Vec<u64>>(), "{db}: versions follow submission order");
        let stats = rooms.commit_stats();
        assert_eq!(stats.transactions - before.transactions, 1, "{db}: one transaction for the batch");
        assert_eq!(stats.commands - before.commands, 20, "{db}");

        // Each command's events carry its own version; the outbox holds them in room order.
        let rows = db.outbox().await;
        let row_versions: Vec<u64> = rows
            .iter()
            .map(|r| {
                serde_json::from_str::<serde_json::Value>(&r.envelope).unwrap()["room_version"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert!(row_versions.windows(2).all(|w| w[0] < w[1]), "{db}: {row_versions:?}");
        for (answer, version) in answers.iter().zip(2u64..) {
            let answer = answer.as_ref().unwrap();
            assert_eq!(
                answer.room.as_ref().unwrap().member_count,
                version - 1,
                "{db}: room as of the command"
            );
            assert_eq!(answer.events.len(), 1, "{db}");
        }
        let snapshot = rooms.snapshot(&super::room()).await.unwrap();
        assert_eq!((snapshot.version, snapshot.member_count), (21, 20), "{db}");
        assert_eq!(db.count("room_member").await, 20, "{db}: one row per member");
    }
}

#[tokio::test]
async fn a_refusal_inside_a_batch_is_refused_as_if_alone_and_the_others_proceed() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        let batch = vec![
            ("a".to_owned(), join("alice")),
            ("g-stranger".to_owned(), gift("stranger", 5)),
            ("b".to_owned(), join("bob")),
            ("g-alice".to_owned(), gift("alice", 7)),
            ("l-ghost".to_owned(), leave("ghost")),
            ("c".to_owned(), join("carol")),
        ];
        let answers = run_all(&rooms, batch).await;
        assert!(
            matches!(&answers[1], Err(RoomError::Domain(DomainError::NotMember { user_id })) if user_id == "stranger"),
            "{db}: {:?}",
            answers[1]
        );
        let ok: Vec<(bool, u64)> = [0, 2, 3, 4, 5]
            .iter()
            .map(|&i| answers[i].as_ref().map(|a| (a.applied, a.room_version)).unwrap())
            .collect();
        // The leave of a non-member is a logged no-op at the version it saw.
        assert_eq!(ok, [(true, 2), (true, 3), (true, 4), (false, 4), (true, 5)], "{db}");
        assert!(db.logged("g-stranger").await.is_none(), "{db}: a refusal is not logged");
        assert!(db.logged("l-ghost").await.is_some(), "{db}: a no-op is");
        let snapshot = rooms.snapshot(&super::room()).await.unwrap();
        assert_eq!((snapshot.version, snapshot.heat, snapshot.member_count), (5, 7, 3), "{db}");
    }
}

#[tokio::test]
async fn a_replayed_command_id_from_a_batch_answers_its_original_outcome() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        let first =
            run_all(&rooms, (0..5).map(|i| (format!("j{i}"), join(&format!("u{i}")))).collect()).await;
        let original = first[2].as_ref().unwrap().clone();

        // Alone: the logged outcome, nothing applied again.
        let again = run(&rooms, "j2", join("u2")).await.unwrap();
        assert!(again.replayed, "{db}");
        assert_eq!((again.applied, again.room_version), (original.applied, original.room_version), "{db}");
        let ids = |r: &room_service::room::CommandResponse| -> Vec<String> {
            r.events.iter().map(|e| e.event_id.clone()).collect()
        };
        assert_eq!(ids(&again), ids(&original), "{db}");

        // Inside a new batch, beside new commands, and twice in the same batch.
        let mixed = vec![
            ("x".to_owned(), join("x")),
            ("j3".to_owned(), join("u3")),
            ("y".to_owned(), join("y")),
            ("y".to_owned(), join("y")),
        ];
        let answers = run_all(&rooms, mixed).await;
        let replayed = answers[1].as_ref().unwrap();
        assert!(replayed.replayed, "{db}");
        assert_eq!(replayed.room_version, first[3].as_ref().unwrap().room_version, "{db}");
        let (x, y, y_again) =
            (answers[0].as_ref().unwrap(), answers[2].as_ref().unwrap(), answers[3].as_ref().unwrap());
        assert_eq!((x.replayed, x.room_version), (false, 7), "{db}");
        assert_eq!((y.replayed, y.room_version), (false, 8), "{db}");
        assert_eq!((y_again.replayed, y_again.room_version), (true, 8), "{db}");
        assert_eq!(ids(y_again), ids(y), "{db}");

        // The same caller's id with another body is a conflict, even inside a batch (u1 leaving
        // under its join's id); another caller's use of the id is another command (mode none:
        // the caller is the user the command names).
        let answers = run_all(
            &rooms,
            vec![
                ("j1".to_owned(), leave("u1")),
                ("z".to_owned(), join("z")),
                ("j1".to_owned(), join("someone-else")),
            ],
        )
        .await;
        assert!(matches!(answers[0], Err(RoomError::CommandConflict(_))), "{db}: {:?}", answers[0]);
        assert_eq!(answers[1].as_ref().unwrap().room_version, 9, "{db}");
        let other = answers[2].as_ref().unwrap();
        assert_eq!((other.replayed, other.applied, other.room_version), (false, true, 10), "{db}");
        assert_eq!(db.count("room_member").await, 9, "{db}");
    }
}

#[tokio::test]
async fn a_failed_batch_answers_every_command_unavailable_and_changes_nothing() {
    let db = TestDb::mysql().await;
    let im = crate::support::app::fake_im().await;
    let settings = crate::support::app::settings(db.url(), Some(&im), &[]);
    let mut options = room_service::room::RoomOptions::new(std::time::Duration::from_secs(1));
    // The app's wiring: with IM on, the room's group is created before its first message.
    options.groups = room_service::delivery::groups::Groups { manage: true, ban: false };
    let rooms = room_service::room::RoomService::new(
        db.repo.clone(),
        crate::support::app::publisher(&settings),
        options,
        room_service::room::system_clock(),
    );
    create(&rooms).await;
    // RoomCreated's `delivered` mark is written before the outage: left pending, it would hold
    // the room's later events back for the worker (not running here), by per-room order.
    rooms.flush_delivery_marks().await;
    let logged = db.count("room_command_log").await;
    db.execute("RENAME TABLE room_outbox TO room_outbox_away").await;
    let answers = run_all(&rooms, (0..5).map(|i| (format!("j{i}"), join(&format!("u{i}")))).collect()).await;
    for answer in &answers {
        // The outbox insert failed before the COMMIT: rolled back, known to have written nothing.
        assert!(matches!(answer, Err(RoomError::NotCommitted(_))), "{answer:?}");
    }
    db.execute("RENAME TABLE room_outbox_away TO room_outbox").await;
    let snapshot = rooms.snapshot(&super::room()).await.unwrap();
    assert_eq!((snapshot.version, snapshot.member_count), (1, 0), "memory unchanged");
    assert_eq!(db.count("room_command_log").await, logged, "nothing logged");
    assert_eq!(db.count("room_member").await, 0, "no member rows");
    assert!(im.messages("r1").is_empty(), "nothing published");

    // The same commands go through once the database is back.
    let answers = run_all(&rooms, (0..5).map(|i| (format!("j{i}"), join(&format!("u{i}")))).collect()).await;
    assert!(answers.iter().all(|a| a.as_ref().is_ok_and(|a| a.applied && !a.replayed)), "{answers:?}");
    rooms.flush_delivery_marks().await;
    assert_eq!(im.messages("r1").len(), 5, "published once committed");
}

#[tokio::test]
async fn a_batch_decided_on_a_stale_cell_is_reloaded_and_decided_again() {
    let db = TestDb::mysql().await;
    let (a, b) = (service(&db), service(&db));
    create(&a).await;
    assert_eq!(b.snapshot(&super::room()).await.unwrap().version, 1, "B loads the room");
    run(&a, "a1", join("alice")).await.unwrap();
    run(&a, "a2", gift("alice", 10)).await.unwrap();
    // B's cell is at version 1; its batch is decided there, fenced, reloaded, decided again.
    let batch = vec![
        ("b1".to_owned(), join("bob")),
        ("b2".to_owned(), gift("alice", 5)), // alice is no member to B's stale cell
        ("b3".to_owned(), Command::JoinRoom { user_id: super::user("alice") }), // a no-op now
    ];
    let before = b.commit_stats();
    let answers = run_all(&b, batch).await;
    let got: Vec<(bool, u64)> =
        answers.iter().map(|a| a.as_ref().map(|a| (a.applied, a.room_version)).unwrap()).collect();
    assert_eq!(got, [(true, 4), (true, 5), (false, 5)], "decided on the reloaded room");
    assert_eq!(b.commit_stats().transactions - before.transactions, 1, "one commit after the conflict");
    let snapshot = a.snapshot(&super::room()).await.unwrap();
    assert_eq!(snapshot.version, 3, "A's own cell is stale now, but the database is not");
    let reloaded = service_over(&db, db.repo.clone()).snapshot(&super::room()).await.unwrap();
    assert_eq!((reloaded.version, reloaded.heat, reloaded.member_count), (5, 15, 2));
}

#[tokio::test]
async fn a_batch_the_database_refuses_over_one_commands_data_fails_that_command_alone() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        // The database refuses one command's log row as data too long (what an unchecked field
        // would do): a trigger stands in for it, on each backend.
        match db.name() {
            "sqlite" => {
                db.execute(
                    "CREATE TRIGGER poison BEFORE INSERT ON room_command_log WHEN NEW.command_id = 'poison' \
                     BEGIN SELECT RAISE(ABORT, 'string or blob too big'); END",
                )
                .await
            }
            _ => {
                db.execute(
                    "CREATE TRIGGER poison BEFORE INSERT ON room_command_log FOR EACH ROW \
                     IF NEW.command_id = 'poison' THEN \
                     SIGNAL SQLSTATE '22001' SET MESSAGE_TEXT = 'Data too long for column request_id'; END IF",
                )
                .await
            }
        };
        let mut batch: Vec<(String, Command)> =
            (0..6).map(|i| (format!("h{i}"), join(&format!("h{i}")))).collect();
        batch.insert(3, ("poison".to_owned(), join("mallory")));
        let answers = run_all(&rooms, batch).await;
        for (i, answer) in answers.iter().enumerate() {
            if i == 3 {
                let refused = answer.as_ref().expect_err("the poisoned command fails");
                if db.name() != "sqlite" {
                    // Its data is at fault: 400, not a 503 to retry forever.
                    assert!(
                        matches!(refused, RoomError::Domain(DomainError::InvalidArgument { .. })),
                        "{db}: {refused:?}"
                    );
                }
            } else {
                assert!(answer.as_ref().is_ok_and(|a| a.applied), "{db}: honest command {i}: {answer:?}");
            }
        }
        let snapshot = rooms.snapshot(&super::room()).await.unwrap();
        assert_eq!((snapshot.version, snapshot.member_count), (7, 6), "{db}: every honest join, no other");
    }
}

/// SPEC §13.1, a batch shares no fate over duplicates: the same caller's command sent twice at
/// once is collapsed inside its batch (one runs, the copy gets its answer as a replay), and a
/// copy arriving in a later batch is answered from the log before that batch is decided, so
/// the others' batch is written once, never refused over the command log's unique key.
#[tokio::test]
async fn duplicate_commands_cost_their_batch_no_extra_transaction() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        let gifts: Vec<(String, Command)> =
            (0..8).map(|i| (format!("j{i}"), join(&format!("u{i}")))).collect();
        run_all(&rooms, gifts).await;

        // Inside one batch: three pairs of copies among honest commands.
        let before = rooms.commit_stats();
        let mut batch: Vec<(String, Command)> = Vec::new();
        for i in 0..8 {
            batch.push((format!("g{i}"), gift(&format!("u{i}"), 1)));
            if i % 3 == 0 {
                batch.push((format!("g{i}"), gift(&format!("u{i}"), 1)));
            }
        }
        let answers = run_all(&rooms, batch.clone()).await;
        let stats = rooms.commit_stats();
        assert_eq!(stats.transactions - before.transactions, 1, "{db}: one transaction for the batch");
        assert_eq!(stats.commands - before.commands, 8, "{db}: each command logged once");
        let mut seen = std::collections::BTreeMap::new();
        for ((id, _), answer) in batch.iter().zip(&answers) {
            let answer = answer.as_ref().unwrap_or_else(|e| panic!("{db}: {id}: {e:?}"));
            assert!(answer.applied, "{db}: {id}");
            let ids: Vec<String> = answer.events.iter().map(|e| e.event_id.clone()).collect();
            match seen.get(id) {
                None => {
                    assert!(!answer.replayed, "{db}: {id}: the first runs");
                    seen.insert(id.clone(), (answer.room_version, ids));
                }
                Some((version, first)) => {
                    assert!(answer.replayed, "{db}: {id}: the copy is a replay");
                    assert_eq!(
                        (answer.room_version, &ids),
                        (*version, first),
                        "{db}: {id}: the same outcome"
                    );
                }
            }
        }

        // A copy of a committed command arriving in a later batch, beside new commands.
        let before = rooms.commit_stats();
        let later = vec![
            ("g0".to_owned(), gift("u0", 1)),
            ("n1".to_owned(), gift("u1", 2)),
            ("g3".to_owned(), gift("u3", 1)),
            ("n2".to_owned(), gift("u2", 2)),
        ];
        let answers = run_all(&rooms, later).await;
        let stats = rooms.commit_stats();
        assert_eq!(stats.transactions - before.transactions, 1, "{db}: the new commands in one transaction");
        assert_eq!(stats.commands - before.commands, 2, "{db}");
        assert!(answers[0].as_ref().unwrap().replayed && answers[2].as_ref().unwrap().replayed, "{db}");
        assert!(!answers[1].as_ref().unwrap().replayed && !answers[3].as_ref().unwrap().replayed, "{db}");
        let snapshot = rooms.snapshot(&super::room()).await.unwrap();
        assert_eq!(snapshot.heat, 8 + 4, "{db}: every gift counted once");
    }
}

/// SPEC §13.1 with a bound: a batch the database refuses over one command is bisected, so the
/// culprit costs about 2·log2(n) transactions, not one per command of its batch.
#[tokio::test]
async fn a_batch_refused_over_one_command_is_bisected_not_run_one_by_one() {
    let db = TestDb::mysql().await;
    let rooms = service(&db);
    create(&rooms).await;
    db.execute(
        "CREATE TRIGGER poison BEFORE INSERT ON room_command_log FOR EACH ROW \
         IF NEW.command_id = 'poison' THEN \
         SIGNAL SQLSTATE '22001' SET MESSAGE_TEXT = 'Data too long for column request_id'; END IF",
    )
    .await;
    let max = rooms.max_commit_batch();
    let mut batch: Vec<(String, Command)> =
        (0..max - 1).map(|i| (format!("h{i}"), join(&format!("h{i}")))).collect();
    batch.insert(max / 3, ("poison".to_owned(), join("mallory")));
    let before = rooms.commit_stats();
    let answers = run_all(&rooms, batch).await;
    let stats = rooms.commit_stats();
    assert_eq!(answers.iter().filter(|a| a.is_err()).count(), 1, "only the culprit fails");
    assert_eq!(stats.commands - before.commands, max as u64 - 1, "every honest command committed");
    let committed = stats.transactions - before.transactions;
    let bound = 2 * u64::from(usize::BITS - max.leading_zeros());
    assert!(committed <= bound, "{committed} transactions for a batch of {max} (bound {bound})");
}
