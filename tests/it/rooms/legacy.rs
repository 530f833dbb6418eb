//! Large rooms after a restart, and databases written by the previous schema (members inside
//! the snapshot JSON) migrated and loaded with every room intact.

use room_service::store::connect;

use super::{create, fill, gift, join, leave, room, run, service, service_over};
use crate::support::{TestDb, backends};

const LARGE: usize = 5_000;

#[tokio::test]
async fn a_large_room_loads_whole_after_a_restart() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        fill(&rooms, LARGE).await;
        run(&rooms, "g1", gift("m00042", 100)).await.unwrap();
        rooms.shutdown().await;

        // A new process: the room loads from the snapshot row and the member rows.
        let restarted = service(&db);
        let snapshot = restarted.snapshot(&room()).await.unwrap();
        assert_eq!(
            (snapshot.member_count, snapshot.version, snapshot.heat),
            (LARGE as u64, LARGE as u64 + 2, 100),
            "{db}"
        );
        let mut listed = Vec::new();
        let mut after = None;
        loop {
            let page = restarted.members(&room(), after.as_ref(), 1000).await.unwrap();
            let Some(last) = page.last() else { break };
            after = Some(last.user_id.clone());
            listed.extend(page.into_iter().map(|m| m.user_id.to_string()));
        }
        let expected: Vec<String> = (0..LARGE).map(|i| format!("m{i:05}")).collect();
        assert_eq!(listed, expected, "{db}: every member, in order");

        // The restored room takes commands: the rank keeps the sender loaded from its row.
        run(&restarted, "g2", gift("m00007", 50)).await.unwrap();
        let left = run(&restarted, "l1", leave("m00042")).await.unwrap();
        assert_eq!(left.room.as_ref().unwrap().member_count, LARGE as u64 - 1, "{db}");
        let snapshot = restarted.snapshot(&room()).await.unwrap();
        let rank: Vec<(String, u64)> =
            snapshot.gift_rank.iter().map(|e| (e.user_id.to_string(), e.total_value)).collect();
        assert_eq!(rank, [("m00042".to_owned(), 100), ("m00007".to_owned(), 50)], "{db}");
        assert_eq!(db.count("room_member").await, LARGE as i64 - 1, "{db}");
    }
}

#[tokio::test]
async fn a_closed_room_deletes_its_member_rows() {
    for db in backends().await {
        let rooms = service(&db);
        create(&rooms).await;
        fill(&rooms, 300).await;
        let closed = run(&rooms, "close", room_service::domain::Command::CloseRoom { by: None, idle: false })
            .await
            .unwrap();
        assert_eq!(closed.room.as_ref().unwrap().member_count, 0, "{db}");
        assert_eq!(db.count("room_member").await, 0, "{db}");
        let restarted = service(&db).snapshot(&room()).await.unwrap();
        assert_eq!((restarted.member_count, restarted.status.as_str()), (0, "closed"), "{db}");
    }
}

/// A room as the previous schema stored it: the whole state, members and senders included.
const LEGACY_STATE: &str = r#"{"room_id":"old","owner_id":"owner","title":"Before","status":"open",
"members":{"alice":{"joined_at_ms":1000,"last_heartbeat_ms":1500},"bob.b":{"joined_at_ms":2000,"last_heartbeat_ms":2500},
"c-3":{"joined_at_ms":3000,"last_heartbeat_ms":3000}},"heat":700,
"senders":{"alice":{"total_value":500,"first_version":4},"bob.b":{"total_value":200,"first_version":5}},
"gift_rank":[{"user_id":"alice","total_value":500},{"user_id":"bob.b","total_value":200}],"version":5}"#;

#[tokio::test]
async fn a_database_written_by_the_previous_schema_loads_every_room_intact() {
    for db in [TestDb::sqlite_with(false).await, TestDb::mysql_with(false).await] {
        let init = match db.name() {
            "sqlite" => include_str!("../../../migrations/sqlite/0001_init.sql"),
            _ => include_str!("../../../migrations/mysql/0001_init.sql"),
        };
        db.execute(init).await;
        let state = LEGACY_STATE.replace('\n', "");
        db.execute(format!(
            "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES ('old', 5, 'open', '{state}', 1)"
        ))
        .await;
        let empty = r#"{"room_id":"empty","owner_id":"o","title":"E","status":"closed","members":{},"heat":0,"senders":{},"gift_rank":[],"version":3}"#;
        db.execute(format!(
            "INSERT INTO room_snapshot (room_id, version, status, state, updated_at_ms) VALUES ('empty', 3, 'closed', '{empty}', 1)"
        ))
        .await;

        // The service's own startup path migrates.
        let repo = connect(db.url(), 2, true).await.unwrap_or_else(|e| panic!("{db}: {e}"));
        let rooms = service_over(&db, repo);
        let old = room_service::domain::RoomId::parse("old").unwrap();
        let snapshot = rooms.snapshot(&old).await.unwrap();
        assert_eq!((snapshot.version, snapshot.heat, snapshot.member_count), (5, 700, 3), "{db}");
        assert_eq!((snapshot.title.as_str(), snapshot.owner_id.as_str()), ("Before", "owner"), "{db}");
        let members: Vec<(String, i64)> = rooms
            .members(&old, None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.user_id.to_string(), m.joined_at_ms))
            .collect();
        let expected = [("alice", 1000), ("bob.b", 2000), ("c-3", 3000)].map(|(u, t)| (u.to_owned(), t));
        assert_eq!(members, expected, "{db}");
        let empty = rooms.snapshot(&room_service::domain::RoomId::parse("empty").unwrap()).await.unwrap();
        assert_eq!((empty.version, empty.member_count, empty.status.as_str()), (3, 0, "closed"), "{db}");

        // The senders' totals moved too: bob overtakes alice with 301 more.
        let overtakes = rooms
            .execute(
                old.clone(),
                room_service::domain::CommandId::parse("g").unwrap(),
                "t".into(),
                gift("bob.b", 301),
            )
            .await
            .unwrap();
        let rank: Vec<(String, u64)> = overtakes
            .room
            .unwrap()
            .gift_rank
            .iter()
            .map(|e| (e.user_id.to_string(), e.total_value))
            .collect();
        assert_eq!(rank, [("bob.b".to_owned(), 501), ("alice".to_owned(), 500)], "{db}");
        let joined = rooms
            .execute(old, room_service::domain::CommandId::parse("j").unwrap(), "t".into(), join("alice"))
            .await
            .unwrap();
        assert!(!joined.applied, "{db}: alice is still a member");
    }
}
