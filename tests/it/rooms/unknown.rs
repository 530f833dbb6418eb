//! Commands sent to rooms that do not exist leave nothing behind in memory: each is refused
//! (`room_not_found`), and the drain task that refused it takes the room's cell away with it,
//! as a read does (the reads' side is `adversarial::unknown_rooms`).

use std::time::Duration;

use futures::future::join_all;
use room_service::domain::{CommandId, DomainError, RoomId};
use room_service::room::RoomError;

use super::{join, service};
use crate::support::TestDb;

#[tokio::test]
async fn commands_on_unknown_rooms_are_refused_and_leave_no_cell() {
    let db = TestDb::sqlite().await;
    let rooms = service(&db);
    let answers = join_all((0..500).map(|i| {
        let rooms = rooms.clone();
        async move {
            let room = RoomId::parse(format!("nowhere-{i}")).unwrap();
            rooms
                .execute(room, CommandId::parse(format!("j-{i}")).unwrap(), "test".into(), join("mallory"))
                .await
        }
    }))
    .await;
    for answer in &answers {
        assert!(matches!(answer, Err(RoomError::Domain(DomainError::RoomNotFound))), "{answer:?}");
    }
    // The drain tasks end right after answering.
    let mut cells = rooms.cell_count();
    for _ in 0..100 {
        if cells == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        cells = rooms.cell_count();
    }
    assert_eq!(cells, 0, "500 refused commands on unknown rooms left {cells} cells in memory");
    assert_eq!(db.count("room_command_log").await, 0, "nothing was written");
}
